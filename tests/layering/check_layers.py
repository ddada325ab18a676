#!/usr/bin/env python3
"""check_layers.py - each layer of megatrain includes only what docs/architecture.md allows.

Usage: check_layers.py SOURCE_DIR       check the tree; exit 1 and one line per violation
       check_layers.py --self-test SOURCE_DIR  plant a violation of each rule in a copy and expect it caught
"""
import os
import re
import shutil
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCES = ('.h', '.hpp', '.cpp', '.cc', '.cu', '.cuh')

# (layer, folders it covers, include patterns it must not use, why)
MLIR = r'^(mlir|llvm)/'
COMPILER = r'^megatrain/(Dialect|Passes|Frontend|Cost|Plan)/'
PROTOBUF = r'(^google/protobuf/|\.pb\.h$)'
CUDA = r'^(cuda|cublas|cudnn|nccl|cub/|thrust/|cuda/)|_runtime\.h$|^nvtx'
RULES = [
    ('runtime', ['runtime'], [MLIR, COMPILER],
     'the runtime never links MLIR or the compiler: the plan schema is the only contract'),
    ('kernel layer', ['runtime/kernels'],
     [MLIR, COMPILER, PROTOBUF, CUDA, r'^megatrain/runtime/', r'^megatrain/plan/(?!(Error|Bf16|PointwiseProgram)\.h$)'],
     'the kernel layer is backend-neutral: no protobuf, CUDA, MLIR or runtime header; of the plan library '
     'only the plain Error.h, Bf16.h and PointwiseProgram.h'),
    ('CPU kernels', ['runtime/cpu'], [PROTOBUF, r'^megatrain/plan/(?!(Error|Bf16|PointwiseProgram)\.h$)', r'^megatrain/runtime/'],
     'the CPU kernels read a KernelArgs (the kernel layer), never the plan'),
    ('CUDA kernels', ['runtime/cuda'], [PROTOBUF],
     'a .cu file never includes protobuf (seconds of nvcc time each); only the backend\'s .cpp files see the plan'),
    ('plan library', ['plan'], [MLIR, COMPILER, CUDA, r'^megatrain/(runtime|kernels)/'],
     'the plan library is the bottom layer that the compiler and the runtime share'),
    ('frontends', ['frontends'], [r'^megatrain/(Passes|Plan)/', r'^megatrain/(runtime|kernels)/'],
     'frontends import into the dialect; they do not reach into passes, plan emission or the runtime'),
    ('passes', ['passes'], [r'^megatrain/Frontend/', r'^megatrain/(runtime|kernels)/'],
     'passes rewrite the dialect; they know neither the ONNX frontend nor the runtime'),
    ('compiler libraries', ['compiler/lib'], [r'^megatrain/Frontend/', r'^megatrain/(runtime|kernels)/'],
     'the dialect, cost model and plan emission share only the plan library with the runtime; '
     'only the driver (compiler/tools) knows the frontend'),
    ('dialect', ['compiler/lib/Dialect'], [r'^megatrain/(Passes|Plan)/'],
     'the dialect sits below the passes and plan emission'),
    ('entry point', ['driver'], [MLIR, COMPILER, CUDA, r'^megatrain/(runtime|kernels)/'],
     'megatrain runs the tools as child processes; of the project it links only the plan library'),
]


def sources(root, folder):
    base = os.path.join(root, folder)
    for directory, _, files in os.walk(base):
        for name in files:
            # The CUDA backend's host-side .cpp files (CudaBackend*.cpp) may see the plan.
            if folder == 'runtime/cuda' and not name.endswith(('.cu', '.cuh', 'CudaKernel.h')):
                continue
            if name.endswith(SOURCES):
                yield os.path.join(directory, name)


def violations(root):
    found = []
    for layer, folders, banned, why in RULES:
        patterns = [re.compile(p) for p in banned]
        for folder in folders:
            for path in sources(root, folder):
                with open(path, encoding='utf-8', errors='replace') as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and any(p.search(m.group(1)) for p in patterns):
                            found.append(f'{os.path.relpath(path, root)}:{number}: {layer} includes '
                                         f'"{m.group(1)}" ({why})')
    return found


def self_test(root):
    plants = [('runtime/lib/Planted.cpp', '#include "mlir/IR/Builders.h"\n'),
              ('runtime/kernels/Planted.cpp', '#include "megatrain/plan/plan.pb.h"\n'),
              ('runtime/kernels/Planted.cpp', '#include <cuda_runtime.h>\n'),
              ('runtime/kernels/Planted.cpp', '#include "megatrain/runtime/Backend.h"\n'),
              ('runtime/kernels/Planted.cpp', '#include "megatrain/plan/DType.h"\n'),
              ('runtime/cpu/Planted.cpp', '#include "megatrain/plan/plan.pb.h"\n'),
              ('runtime/cuda/planted.cu', '#include "megatrain/plan/plan.pb.h"\n'),
              ('plan/lib/Planted.cpp', '#include "megatrain/runtime/Executor.h"\n'),
              ('frontends/onnx/Planted.cpp', '#include "megatrain/Passes/Passes.h"\n'),
              ('passes/Planted.cpp', '#include "megatrain/Frontend/OnnxImporter.h"\n'),
              ('compiler/lib/Plan/Planted.cpp', '#include "megatrain/runtime/Executor.h"\n'),
              ('compiler/lib/Dialect/Planted.cpp', '#include "megatrain/Passes/Passes.h"\n'),
              ('driver/Planted.cpp', '#include "megatrain/runtime/Executor.h"\n')]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for folder in ('runtime', 'frontends', 'plan', 'passes', 'compiler', 'driver'):
            shutil.copytree(os.path.join(root, folder), os.path.join(tmp, folder))
        if violations(tmp):
            print('self-test: the clean copy already has violations', file=sys.stderr)
            return False
        for relative, line in plants:
            path = os.path.join(tmp, relative)
            with open(path, 'w') as f:
                f.write(line)
            caught = [v for v in violations(tmp) if v.startswith(relative + ':')]
            os.remove(path)
            if not caught:
                print(f'self-test: {line.strip()} in {relative} was not caught', file=sys.stderr)
                ok = False
    return ok


def main(argv):
    if len(argv) == 3 and argv[1] == '--self-test':
        ok = self_test(argv[2])
        print('self-test: every planted violation was caught' if ok else 'self-test: FAILED')
        return 0 if ok else 1
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = violations(argv[1])
    for v in found:
        print(v)
    print(f'{len(found)} layering violation(s)' if found else 'layers: every include is allowed')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
