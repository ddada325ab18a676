// fuzz_onnx_import.cpp - libFuzzer target: bytes as an ONNX model through importOnnxModel and the verifier.
//
// As megatrain-compile imports a model: the mt and func dialects, the importer
// (function inlining, constant folding, shape inference) into the mt dialect,
// then mlir::verify on what it returns. A rejection is a diagnostic and a null
// module, or a megatrain::Error; anything else crashes the run. The model sits
// alone in its own directory, so external-data paths resolve inside it.
#include "FuzzFile.h"
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Frontend/OnnxImporter.h"
#include "megatrain/plan/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = megatrain::fuzz::writeFuzzFile("model.onnx", data, size);
  mlir::DialectRegistry registry;
  registry.insert<megatrain::mt::MtDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  // Diagnostics are the expected rejections: swallowed, not printed.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic&) { return mlir::success(); });
  try {
    mlir::OwningOpRef<mlir::ModuleOp> module = megatrain::importOnnxModel(context, path, {});
    if (module) (void)mlir::verify(*module);
  } catch (const megatrain::Error&) {
  }
  return 0;
}
