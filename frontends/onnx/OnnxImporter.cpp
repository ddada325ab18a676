//===- OnnxImporter.cpp - reads an ONNX file and hands its graph on ---------===//
//
// The file is read once: its bytes are hashed (mt.source_sha256, so a plan can
// be checked against the model it was made from) and parsed; GraphImporter
// builds the IR.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Frontend/OnnxImporter.h"
#include "GraphImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <climits>

namespace megatrain {

std::string sha256Hex(llvm::StringRef bytes) {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(mlir::MLIRContext &context,
                                                  const std::string &path,
                                                  const OnnxImportOptions &options) {
  mlir::Location loc = mlir::FileLineColLoc::get(&context, path, 0, 0);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    mlir::emitError(loc) << "cannot read the model: " << buffer.getError().message();
    return nullptr;
  }
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty()) {
    mlir::emitError(loc) << "not a valid ONNX model (empty file)";
    return nullptr;
  }
  if (bytes.size() > (size_t)INT_MAX) {
    mlir::emitError(loc) << "not a valid ONNX model (over 2 GiB: protobuf cannot "
                            "hold it; store the weights as external data)";
    return nullptr;
  }

  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), (int)bytes.size());
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    mlir::emitError(loc) << "not a valid ONNX model (protobuf parse failed)";
    return nullptr;
  }
  if (!model.has_graph()) {
    mlir::emitError(loc) << "not a valid ONNX model (no graph)";
    return nullptr;
  }

  onnx_import::GraphImporter importer(context, model, path, options);
  return importer.run(sha256Hex(bytes));
}

} // namespace megatrain
