# lit.cfg.py - the lit suite of the compiler: one .mlir per pass, plus tool tests.
# Paths of the build come from lit.site.cfg.py (configured by CMake), which loads this.
import os
import shutil

import lit.formats

if not hasattr(config, "megatrain_tools_dir"):
    lit_config.fatal("run lit on the build's tests/lit directory (or ctest -R lit), "
                     "where CMake wrote lit.site.cfg.py")

config.name = "megatrain"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = getattr(config, "megatrain_obj_root", config.test_source_root)

# The built tools first, then LLVM's (FileCheck, not).
path = [config.megatrain_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
config.environment["PATH"] = os.pathsep.join(path)

# Models committed by the frontend: %models (bundled), %test_models (per-op tests).
src = config.megatrain_source_dir
config.substitutions.append(("%models", os.path.join(src, "frontends", "models")))
config.substitutions.append(("%test_models", os.path.join(src, "tests", "frontends", "models")))
config.substitutions.append(("%plan_proto_dir", os.path.join(src, "runtime", "plan")))

# Tools built by other parts of the project, for tests that need them.
for tool in ["megatrain-inspect", "megatrain-run"]:
    if shutil.which(tool, path=config.environment["PATH"]):
        config.available_features.add(tool)
if shutil.which("protoc"):
    config.available_features.add("protoc")
