//===- InputShapes.cpp - static shapes of ONNX graph inputs (--shape) ------===//
#include "InputShapes.h"
#include "OnnxShapes.h"
#include "TensorData.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace megatrain::onnx_import {

namespace {
/// One graph input's declared shape: a static size, or a symbol ("" when the
/// dim is unknown), per dim.
struct DeclaredDim {
  int64_t size = -1;
  std::string symbol;
  bool isStatic() const { return size > 0; }
};
} // namespace

static std::string dimText(const DeclaredDim &d) {
  if (d.isStatic())
    return std::to_string(d.size);
  return d.symbol.empty() ? "?" : d.symbol;
}

LogicalResult bindInputShapes(MLIRContext &context, const onnx::GraphProto &graph,
                              const std::map<std::string, std::vector<int64_t>> &shapes,
                              Location fileLoc, std::vector<BoundInput> &bound) {
  llvm::StringSet<> initializerNames;
  for (const onnx::TensorProto &init : graph.initializer())
    initializerNames.insert(init.name());

  struct Input {
    const onnx::ValueInfoProto *info;
    Type element;
    bool hasShape;
    std::vector<DeclaredDim> dims;
  };
  std::vector<Input> inputs;
  for (const onnx::ValueInfoProto &info : graph.input()) {
    if (initializerNames.contains(info.name()))
      continue;
    if (!info.type().has_tensor_type())
      return emitError(fileLoc) << "input '" << info.name() << "' is not a tensor";
    const onnx::TypeProto::Tensor &tensor = info.type().tensor_type();
    int32_t dtype = tensor.elem_type();
    Type element;
    if (dtype == onnx::TensorProto::FLOAT || dtype == onnx::TensorProto::DOUBLE ||
        dtype == onnx::TensorProto::INT64)
      element = elementTypeOf(context, dtype);
    else
      return emitError(fileLoc)
             << "input '" << info.name() << "' has unsupported dtype " << dtypeName(dtype)
             << " (inputs may be FLOAT, DOUBLE or INT64)";
    Input in{&info, element, tensor.has_shape(), {}};
    for (const onnx::TensorShapeProto::Dimension &d : tensor.shape().dim()) {
      DeclaredDim dim;
      if (d.has_dim_value() && d.dim_value() > 0)
        dim.size = d.dim_value();
      else if (d.has_dim_param())
        dim.symbol = d.dim_param();
      in.dims.push_back(dim);
    }
    inputs.push_back(std::move(in));
  }

  // Every binding must name an input and agree with its declared dims; the
  // sizes it gives symbols also bind other inputs that use the same symbols.
  llvm::StringMap<int64_t> symbols;
  llvm::StringMap<std::string> symbolSource;
  for (const auto &[name, shape] : shapes) {
    auto it =
        llvm::find_if(inputs, [&](const Input &in) { return in.info->name() == name; });
    if (it == inputs.end()) {
      std::string names;
      for (const Input &in : inputs)
        names += (names.empty() ? "" : ", ") + in.info->name();
      return emitError(fileLoc)
             << "--shape names '" << name << "', which is not an input of the "
             << "model (inputs: " << (names.empty() ? "none" : names) << ")";
    }
    std::string declared = "[";
    for (size_t i = 0; i < it->dims.size(); ++i)
      declared += (i ? ", " : "") + dimText(it->dims[i]);
    declared += "]";
    bool rankOk = !it->hasShape || it->dims.size() == shape.size();
    bool dimsOk = llvm::all_of(shape, [](int64_t d) { return d > 0; });
    for (size_t i = 0; rankOk && i < it->dims.size(); ++i)
      if (it->dims[i].isStatic() && it->dims[i].size != shape[i])
        dimsOk = false;
    if (!rankOk || !dimsOk)
      return emitError(fileLoc)
             << "--shape " << name << "="
             << llvm::join(
                    llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }),
                    "x")
             << " does not match input '" << name << "' declared " << declared;
    for (size_t i = 0; i < it->dims.size(); ++i) {
      const std::string &symbol = it->dims[i].symbol;
      if (it->dims[i].isStatic() || symbol.empty())
        continue;
      auto [sit, inserted] = symbols.try_emplace(symbol, shape[i]);
      if (!inserted && sit->second != shape[i])
        return emitError(fileLoc) << "dim '" << symbol << "' is bound to " << sit->second
                                  << " by --shape " << symbolSource[symbol] << " and to "
                                  << shape[i] << " by --shape " << name;
      symbolSource.try_emplace(symbol, name);
    }
  }

  for (const Input &in : inputs) {
    const std::string &name = in.info->name();
    std::vector<int64_t> shape;
    auto given = shapes.find(name);
    if (given != shapes.end()) {
      shape = given->second;
    } else {
      bool complete = in.hasShape;
      for (const DeclaredDim &d : in.dims) {
        if (d.isStatic())
          shape.push_back(d.size);
        else if (!d.symbol.empty() && symbols.count(d.symbol))
          shape.push_back(symbols.lookup(d.symbol));
        else
          complete = false;
      }
      if (!complete) {
        if (!in.hasShape)
          return emitError(fileLoc)
                 << "input '" << name << "' has no declared shape; bind it with "
                 << "--shape " << name << "=DxD... (its full static shape)";
        std::string symbolic, pattern;
        for (const DeclaredDim &d : in.dims) {
          if (!d.isStatic())
            symbolic += (symbolic.empty() ? "" : ", ") + dimText(d);
          pattern += (pattern.empty() ? "" : "x") +
                     (d.isStatic() ? std::to_string(d.size) : std::string("D"));
        }
        return emitError(fileLoc)
               << "input '" << name << "' has symbolic dims [" << symbolic
               << "]; bind them with --shape " << name << "=" << pattern;
      }
    }
    std::string problem;
    if (!checkShapeLimits(shape, problem))
      return emitError(fileLoc) << "input '" << name << "' " << problem;
    bound.push_back({name, in.element, std::move(shape)});
  }
  return success();
}

} // namespace megatrain::onnx_import
