//===- import_test.cpp - the ONNX importer on small models and on errors ----===//
//
// The models come from tests/frontends/make_test_models.py (one per op
// family or error) and frontends/python/make_models.py (the demo models).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Frontend/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>

using namespace mlir;
using namespace megatrain;

namespace {

std::string testModel(const std::string &name) {
  return std::string(MEGATRAIN_TEST_MODELS_DIR) + "/" + name + ".onnx";
}
std::string demoModel(const std::string &name) {
  return std::string(MEGATRAIN_DEMO_MODELS_DIR) + "/" + name + ".onnx";
}

/// One import: the module (null on error) and every diagnostic it emitted.
struct Imported {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<std::string> errors;
  std::vector<std::string> errorFiles;

  func::FuncOp main() { return module->lookupSymbol<func::FuncOp>("main"); }

  template <typename Op> std::vector<Op> ops() {
    std::vector<Op> found;
    module->walk([&](Op op) { found.push_back(op); });
    return found;
  }

  std::map<std::string, int> opCounts() {
    std::map<std::string, int> counts;
    main().walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "mt")
        ++counts[op->getName().getStringRef().str()];
    });
    return counts;
  }

  std::vector<std::vector<int64_t>> resultShapes() {
    std::vector<std::vector<int64_t>> shapes;
    for (Type t : main().getFunctionType().getResults()) {
      auto shape = cast<RankedTensorType>(t).getShape();
      shapes.emplace_back(shape.begin(), shape.end());
    }
    return shapes;
  }

  std::string printed() {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return text;
  }

  /// The single error of a failed import.
  std::string error() {
    EXPECT_FALSE(module);
    EXPECT_EQ(errors.size(), 1u);
    return errors.empty() ? "" : errors.front();
  }
};

std::unique_ptr<Imported> import(const std::string &path,
                                 OnnxImportOptions options = {}) {
  auto result = std::make_unique<Imported>();
  ScopedDiagnosticHandler handler(&result->context, [&](Diagnostic &diag) {
    result->errors.push_back(diag.str());
    auto file = diag.getLocation()->findInstanceOf<FileLineColLoc>();
    result->errorFiles.push_back(file ? file.getFilename().str() : "");
    return success();
  });
  result->module = importOnnxModel(result->context, path, options);
  return result;
}

using Shapes = std::vector<std::vector<int64_t>>;
using Ints = std::vector<int64_t>;

std::vector<std::string> outputNames(func::FuncOp func) {
  std::vector<std::string> names;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto name = func.getResultAttrOfType<StringAttr>(i, onnx_attr::kOutputName);
    names.push_back(name ? name.str() : "<none>");
  }
  return names;
}

//===----------------------------------------------------------------------===//
// Op families
//===----------------------------------------------------------------------===//

TEST(OnnxImport, Gemm) {
  auto m = import(testModel("gemm"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{4, 6}, {4, 3}}));
  EXPECT_EQ(outputNames(m->main()), (std::vector<std::string>{"y1", "y2"}));
  auto mm = m->ops<mt::MatMulOp>();
  ASSERT_EQ(mm.size(), 2u);
  // gemm_bias: a [4,8] x w1^T [6,8]; gemm_nobias: a2^T [8,4] x w2 [8,3].
  EXPECT_TRUE(mm[0].getTransposeB());
  EXPECT_FALSE(mm[0].getTransposeA());
  EXPECT_TRUE(mm[1].getTransposeA());
  EXPECT_FALSE(mm[1].getTransposeB());
  // alpha = 0.5 scales the product, beta = 2 scales C; no C, no add.
  auto scales = m->ops<mt::ScaleOp>();
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_EQ(scales[0].getAlpha().convertToDouble(), 0.5);
  EXPECT_EQ(scales[1].getAlpha().convertToDouble(), 2.0);
  EXPECT_EQ(m->ops<mt::AddOp>().size(), 1u);
}

TEST(OnnxImport, MatMulWithVectors) {
  auto m = import(testModel("matmul"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{2, 3, 4, 6}, {2, 7}, {3, 4}}));
  auto counts = m->opCounts();
  EXPECT_EQ(counts["mt.matmul"], 3);
  // Each 1-D operand is reshaped to a matrix and the product back.
  EXPECT_EQ(counts["mt.reshape"], 4);
}

TEST(OnnxImport, ElementwiseBroadcastAndConstant) {
  auto m = import(testModel("elementwise"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{4, 3, 8}}));
  auto counts = m->opCounts();
  for (const char *op : {"mt.add", "mt.sub", "mt.mul", "mt.div", "mt.relu", "mt.tanh",
                         "mt.sigmoid", "mt.constant", "mt.param"})
    EXPECT_EQ(counts[op], 1) << op;
  EXPECT_EQ(counts["mt.input"], 2);
  auto c = m->ops<mt::ConstantOp>().front();
  EXPECT_EQ(cast<RankedTensorType>(c.getType()).getRank(), 0);
  auto value = cast<DenseElementsAttr>(c.getValue());
  EXPECT_EQ(value.getSplatValue<float>(), 2.0f);
}

TEST(OnnxImport, ReshapeTransposeSoftmax) {
  auto m = import(testModel("shape_ops"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{12, 2}, {3, 4, 2}, {2, 3, 4}, {2, 3, 4}}));
  // Shape arguments are read at import time and leave nothing behind.
  auto counts = m->opCounts();
  EXPECT_EQ(counts["mt.param"], 0);
  EXPECT_EQ(counts["mt.constant"], 0);
  // reshape_noop (same shape) aliases its input.
  EXPECT_EQ(counts["mt.reshape"], 2);
  auto transposes = m->ops<mt::TransposeOp>();
  ASSERT_EQ(transposes.size(), 2u);
  EXPECT_EQ(Ints(transposes[0].getPerm()), (Ints{1, 0}));
  EXPECT_EQ(Ints(transposes[1].getPerm()), (Ints{1, 0, 2}));
  auto softmaxes = m->ops<mt::SoftmaxOp>();
  ASSERT_EQ(softmaxes.size(), 2u);
  EXPECT_EQ(softmaxes[0].getAxis(), 2);
  EXPECT_EQ(softmaxes[1].getAxis(), 1);
  auto ret = cast<func::ReturnOp>(m->main().getBody().front().getTerminator());
  EXPECT_TRUE(isa<mt::InputOp>(ret.getOperand(3).getDefiningOp()));
}

TEST(OnnxImport, ReduceOpset17) {
  auto m = import(testModel("reduce_opset17"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{2, 3, 1}, {3}, {}, {2, 3, 4}}));
  auto means = m->ops<mt::ReduceMeanOp>();
  ASSERT_EQ(means.size(), 1u);
  EXPECT_EQ(Ints(means[0].getAxes()), (Ints{2}));
  EXPECT_TRUE(means[0].getKeepdims());
  auto sums = m->ops<mt::ReduceSumOp>();
  ASSERT_EQ(sums.size(), 2u);                       // sum_noop aliases its input
  EXPECT_EQ(Ints(sums[0].getAxes()), (Ints{0, 2})); // [-1, 0] normalized, sorted
  EXPECT_FALSE(sums[0].getKeepdims());
  EXPECT_EQ(Ints(sums[1].getAxes()), (Ints{0, 1, 2}));
  EXPECT_EQ(m->opCounts()["mt.constant"], 0);
}

TEST(OnnxImport, ReduceMeanOpset18AxesInput) {
  auto m = import(testModel("reduce_opset18"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{2, 4}}));
  auto means = m->ops<mt::ReduceMeanOp>();
  ASSERT_EQ(means.size(), 1u);
  EXPECT_EQ(Ints(means[0].getAxes()), (Ints{1}));
}

TEST(OnnxImport, GatherWidensInt32Indices) {
  auto m = import(testModel("gather"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{2, 3, 4}, {10, 2}}));
  auto gathers = m->ops<mt::GatherOp>();
  ASSERT_EQ(gathers.size(), 2u);
  EXPECT_EQ(gathers[0].getAxis(), 0);
  EXPECT_EQ(gathers[1].getAxis(), 1);
  auto c = dyn_cast_or_null<mt::ConstantOp>(gathers[1].getIndices().getDefiningOp());
  ASSERT_TRUE(c);
  auto value = cast<DenseElementsAttr>(c.getValue());
  EXPECT_TRUE(value.getElementType().isInteger(64));
  EXPECT_EQ(std::vector<int64_t>(value.getValues<int64_t>().begin(),
                                 value.getValues<int64_t>().end()),
            (Ints{3, 0}));
  // One param for both uses of `emb`.
  EXPECT_EQ(m->ops<mt::ParamOp>().size(), 1u);
}

TEST(OnnxImport, LayerNormWithAndWithoutBias) {
  auto m = import(testModel("layernorm"));
  ASSERT_TRUE(m->module) << m->errors.front();
  auto lns = m->ops<mt::LayerNormOp>();
  ASSERT_EQ(lns.size(), 2u);
  EXPECT_EQ(lns[0].getAxis(), 2);
  EXPECT_EQ(lns[0].getEpsilon().convertToDouble(), 1e-5);
  EXPECT_TRUE(isa<mt::ParamOp>(lns[0].getBias().getDefiningOp()));
  EXPECT_EQ(lns[1].getAxis(), 1);
  EXPECT_EQ(lns[1].getEpsilon().convertToDouble(), 1e-3); // not f32 1e-3 widened
  auto fill = dyn_cast_or_null<mt::FillOp>(lns[1].getBias().getDefiningOp());
  ASSERT_TRUE(fill);
  EXPECT_EQ(fill.getValue().convertToDouble(), 0.0);
  EXPECT_EQ(cast<RankedTensorType>(fill.getType()).getShape(), (ArrayRef<int64_t>{3, 8}));
}

TEST(OnnxImport, SoftmaxCrossEntropy) {
  auto m = import(testModel("softmax_ce"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{}, {}}));
  auto ces = m->ops<mt::SoftmaxCrossEntropyOp>();
  ASSERT_EQ(ces.size(), 2u);
  EXPECT_EQ(ces[0].getReduction(), "mean");
  EXPECT_EQ(ces[0].getIgnoreIndex(), -100); // unset: no label is negative
  EXPECT_EQ(ces[1].getReduction(), "sum");
  EXPECT_EQ(ces[1].getIgnoreIndex(), 0);
}

TEST(OnnxImport, Float64) {
  auto m = import(testModel("float64"));
  ASSERT_TRUE(m->module) << m->errors.front();
  auto p = m->ops<mt::ParamOp>();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(cast<RankedTensorType>(p[0].getType()).getElementType().isF64());
  EXPECT_TRUE(p[0].getTrainable());
  auto c = m->ops<mt::ConstantOp>();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(cast<DenseElementsAttr>(c[0].getValue()).getSplatValue<double>(), 0.5);
  auto result = cast<RankedTensorType>(m->main().getFunctionType().getResult(0));
  EXPECT_TRUE(result.getElementType().isF64());
  EXPECT_EQ(result.getShape(), (ArrayRef<int64_t>{2, 4}));
}

//===----------------------------------------------------------------------===//
// Parameters, constants, trainable rule
//===----------------------------------------------------------------------===//

std::map<std::string, bool> trainableFlags(Imported &m) {
  std::map<std::string, bool> flags;
  for (auto p : m.ops<mt::ParamOp>()) {
    EXPECT_FALSE(flags.count(p.getName().str()))
        << "two mt.param for " << p.getName().str();
    flags[p.getName().str()] = p.getTrainable();
  }
  return flags;
}

TEST(OnnxImport, InitializersBecomeParamsOrConstants) {
  auto m = import(testModel("trainable"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{4}}));
  // enc.weight is read directly and through Identity: still one param.
  EXPECT_EQ(trainableFlags(*m),
            (std::map<std::string, bool>{
                {"enc.weight", true}, {"enc.bias", true}, {"head.weight", true}}));
  // The int64 `rows` used as data is a literal; `flat_shape` is folded.
  auto constants = m->ops<mt::ConstantOp>();
  ASSERT_EQ(constants.size(), 1u);
  EXPECT_TRUE(
      cast<RankedTensorType>(constants[0].getType()).getElementType().isInteger(64));
  EXPECT_EQ(m->printed().find("flat_shape"), std::string::npos);
}

TEST(OnnxImport, FrozenRegexWins) {
  OnnxImportOptions options;
  options.frozen = "enc\\..*";
  auto m = import(testModel("trainable"), options);
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(trainableFlags(*m),
            (std::map<std::string, bool>{
                {"enc.weight", false}, {"enc.bias", false}, {"head.weight", true}}));
  options.trainable = "enc\\.weight|head\\.weight";
  options.frozen = "head.*";
  auto both = import(testModel("trainable"), options);
  ASSERT_TRUE(both->module) << both->errors.front();
  EXPECT_EQ(trainableFlags(*both),
            (std::map<std::string, bool>{
                {"enc.weight", true}, {"enc.bias", false}, {"head.weight", false}}));
}

TEST(OnnxImport, BadRegexIsAnError) {
  OnnxImportOptions options;
  options.trainable = "(";
  auto m = import(testModel("trainable"), options);
  EXPECT_EQ(m->error().rfind("invalid trainable regex '('", 0), 0u) << m->error();
}

//===----------------------------------------------------------------------===//
// Symbolic dims
//===----------------------------------------------------------------------===//

TEST(OnnxImport, SymbolicDimsNeedABinding) {
  auto m = import(testModel("symbolic"));
  EXPECT_EQ(m->error(), "input 'input_ids' has symbolic dims [batch, seq]; bind "
                        "them with --shape input_ids=DxD");
  EXPECT_EQ(m->errorFiles.front(), testModel("symbolic"));
}

TEST(OnnxImport, SymbolicDimsBound) {
  OnnxImportOptions options;
  options.shapes["input_ids"] = {2, 5};
  auto m = import(testModel("symbolic"), options);
  ASSERT_TRUE(m->module) << m->errors.front();
  auto inputs = m->ops<mt::InputOp>();
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].getName(), "input_ids");
  EXPECT_EQ(cast<RankedTensorType>(inputs[0].getType()).getShape(),
            (ArrayRef<int64_t>{2, 5}));
  EXPECT_EQ(m->resultShapes(), (Shapes{{2, 5, 4}}));
}

TEST(OnnxImport, ShapeForUnknownInputIsAnError) {
  OnnxImportOptions options;
  options.shapes["input_ids"] = {2, 5};
  options.shapes["ids"] = {2, 5};
  auto m = import(testModel("symbolic"), options);
  EXPECT_EQ(m->error(), "--shape names 'ids', which is not an input of the model "
                        "(inputs: input_ids)");
}

TEST(OnnxImport, ShapeOfWrongRankIsAnError) {
  OnnxImportOptions options;
  options.shapes["input_ids"] = {10};
  auto m = import(testModel("symbolic"), options);
  EXPECT_EQ(m->error(), "--shape input_ids=10 does not match input 'input_ids' "
                        "declared [batch, seq]");
}

TEST(OnnxImport, SymbolicDimMessageShowsStaticDims) {
  auto m = import(demoModel("mlp"));
  EXPECT_EQ(m->error(), "input 'x' has symbolic dims [batch]; bind them with "
                        "--shape x=Dx16");
}

TEST(OnnxImport, OneSymbolTwoSizesIsAnError) {
  OnnxImportOptions options;
  options.shapes["x"] = {8, 16};
  options.shapes["labels"] = {4};
  auto m = import(demoModel("mlp"), options);
  EXPECT_EQ(m->error(), "dim 'batch' is bound to 4 by --shape labels and to 8 by "
                        "--shape x");
}

//===----------------------------------------------------------------------===//
// The demo models
//===----------------------------------------------------------------------===//

TEST(OnnxImport, MlpDemoModel) {
  OnnxImportOptions options;
  options.shapes["x"] = {8, 16}; // binds `batch`, which also shapes `labels`
  std::string path = demoModel("mlp");
  auto m = import(path, options);
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{8, 10}, {}}));
  EXPECT_EQ(outputNames(m->main()), (std::vector<std::string>{"logits", "loss"}));
  auto counts = m->opCounts();
  EXPECT_EQ(counts["mt.matmul"], 3);
  EXPECT_EQ(counts["mt.add"], 3);
  EXPECT_EQ(counts["mt.relu"], 1);
  EXPECT_EQ(counts["mt.tanh"], 1);
  EXPECT_EQ(counts["mt.softmax_ce"], 1);
  EXPECT_EQ(counts["mt.param"], 6);
  for (auto mm : m->ops<mt::MatMulOp>())
    EXPECT_TRUE(mm.getTransposeB());
  for (auto [name, trainable] : trainableFlags(*m))
    EXPECT_TRUE(trainable) << name;
  auto labels = m->ops<mt::InputOp>()[1];
  EXPECT_EQ(labels.getName(), "labels");
  EXPECT_EQ(cast<RankedTensorType>(labels.getType()).getShape(), (ArrayRef<int64_t>{8}));

  auto model = (*m->module)->getAttrOfType<StringAttr>(onnx_attr::kSourceModel);
  auto sha = (*m->module)->getAttrOfType<StringAttr>(onnx_attr::kSourceSha256);
  ASSERT_TRUE(model && sha);
  EXPECT_EQ(model.str(), path);
  auto bytes = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(sha.str(), sha256Hex((*bytes)->getBuffer()));
}

TEST(OnnxImport, Sha256KnownAnswer) {
  EXPECT_EQ(sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(OnnxImport, TinyTransformerDemoModel) {
  OnnxImportOptions options;
  options.shapes["input_ids"] = {8, 64};
  auto m = import(demoModel("tiny_transformer"), options);
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->resultShapes(), (Shapes{{8, 64, 256}}));
  EXPECT_EQ(outputNames(m->main()), (std::vector<std::string>{"logits"}));
  auto counts = m->opCounts();
  EXPECT_EQ(counts["mt.gather"], 1);
  EXPECT_EQ(counts["mt.layer_norm"], 3);
  EXPECT_EQ(counts["mt.matmul"], 9); // q k v scores mix proj fc1 fc2 lm_head
  EXPECT_EQ(counts["mt.softmax"], 1);
  EXPECT_EQ(counts["mt.transpose"], 4);
  EXPECT_EQ(counts["mt.reshape"], 4);
  EXPECT_EQ(counts["mt.param"], 21);
  for (auto [name, trainable] : trainableFlags(*m))
    EXPECT_TRUE(trainable) << name;

  // The causal mask is a literal; the reshape shapes were folded.
  bool sawMask = false;
  for (auto c : m->ops<mt::ConstantOp>()) {
    auto type = cast<RankedTensorType>(c.getType());
    EXPECT_TRUE(type.getElementType().isF32());
    if (type.getShape() == ArrayRef<int64_t>{64, 64}) {
      sawMask = true;
      auto value = cast<DenseElementsAttr>(c.getValue());
      auto at = [&](int i, int j) { return value.getValues<float>()[i * 64 + j]; };
      EXPECT_EQ(at(1, 0), 0.0f);
      EXPECT_EQ(at(1, 1), 0.0f);
      EXPECT_EQ(at(0, 1), -1e9f);
    } else {
      EXPECT_EQ(type.getRank(), 0);
    }
  }
  EXPECT_TRUE(sawMask);

  // Weights stay in the file: the IR holds the 16 KiB mask (as hex) and
  // names, not the ~350 KB of parameters.
  std::string text = m->printed();
  EXPECT_LT(text.size(), 64u * 1024) << "weights leaked into the IR?";
}

//===----------------------------------------------------------------------===//
// Errors: one line each, at the model file
//===----------------------------------------------------------------------===//

TEST(OnnxImportErrors, GarbageFile) {
  auto m = import(testModel("garbage"));
  EXPECT_EQ(m->error(), "not a valid ONNX model (protobuf parse failed)");
  EXPECT_EQ(m->errorFiles.front(), testModel("garbage"));
}

TEST(OnnxImportErrors, TruncatedFile) {
  auto m = import(testModel("truncated"));
  EXPECT_EQ(m->error(), "not a valid ONNX model (protobuf parse failed)");
}

TEST(OnnxImportErrors, MissingFile) {
  auto m = import(testModel("no_such_model"));
  EXPECT_EQ(m->error().rfind("cannot read the model: ", 0), 0u) << m->error();
}

TEST(OnnxImportErrors, UnknownOpNamesNodeOpDomainOpset) {
  auto m = import(testModel("unknown_op"));
  EXPECT_EQ(m->error(),
            "node 'mix' (op Einsum, domain 'ai.onnx', opset 17): unsupported op; "
            "nearest supported: MatMul (with Transpose/Reshape)");
  EXPECT_EQ(m->errorFiles.front(), testModel("unknown_op"));
}

TEST(OnnxImportErrors, UnnamedNodeIsNamedByIndex) {
  auto m = import(testModel("unnamed_unknown_op"));
  EXPECT_EQ(m->error(),
            "node '#1' (op Einsum, domain 'ai.onnx', opset 17): unsupported op; "
            "nearest supported: MatMul (with Transpose/Reshape)");
}

TEST(OnnxImportErrors, CustomDomain) {
  auto m = import(testModel("custom_domain"));
  EXPECT_EQ(m->error(), "node 'fused' (op FusedThing, domain 'com.example', "
                        "opset 1): unsupported op (only domain 'ai.onnx' is imported); "
                        "nearest supported: none by name (docs/frontends.md lists the "
                        "supported ops)");
}

TEST(OnnxImportErrors, OpsetBelow13) {
  auto m = import(testModel("old_opset"));
  EXPECT_EQ(m->error(), "opset 11 of domain 'ai.onnx' is not supported (13 to 23)");
}

TEST(OnnxImportErrors, Int32Input) {
  auto m = import(testModel("int32_input"));
  EXPECT_EQ(m->error(), "input 'ids' has unsupported dtype INT32 (inputs may be "
                        "FLOAT, DOUBLE or INT64)");
}

TEST(OnnxImportErrors, CrossEntropyWeights) {
  auto m = import(testModel("sce_weights"));
  EXPECT_EQ(m->error(), "node 'ce_weighted' (op SoftmaxCrossEntropyLoss, domain "
                        "'ai.onnx', opset 17): the weights input is not supported");
}

TEST(OnnxImportErrors, LayerNormMeanUsed) {
  auto m = import(testModel("layernorm_mean_used"));
  EXPECT_EQ(m->error(), "node 'ln_stats' (op LayerNormalization, domain 'ai.onnx', "
                        "opset 17): output 1 (Mean, 'mu') is used; only output 0 "
                        "is supported");
}

TEST(OnnxImportErrors, ReshapeShapeFromInput) {
  auto m = import(testModel("reshape_dynamic"));
  EXPECT_EQ(m->error(), "node 'reshape_from_input' (op Reshape, domain 'ai.onnx', "
                        "opset 17): input 1 ('shape') is read at import time, so it "
                        "must be computed only from initializers, Constant nodes and "
                        "shapes; it depends on run-time values");
}

TEST(OnnxImportErrors, ConstantOver64KiB) {
  auto m = import(testModel("big_constant"));
  EXPECT_EQ(m->error(), "node 'add_table' (op Add, domain 'ai.onnx', opset 17): "
                        "constant 'table' is 66048 bytes; constants are limited "
                        "to 65536 bytes");
}

//===----------------------------------------------------------------------===//
// Malformed files that once crashed the compiler: each is one error now
//===----------------------------------------------------------------------===//

// The folder reads every input through one checked accessor: a fold that
// needs an input the node leaves "" or lacks reports it (this was SIGSEGV).
TEST(OnnxImportMalformed, FoldedNodeWithEmptyInput) {
  auto m = import(testModel("fold_empty_input"));
  EXPECT_EQ(m->error(), "node 'matmul_missing' (op MatMul, domain 'ai.onnx', opset 17): "
                        "input 1 is required but is empty");
}

TEST(OnnxImportMalformed, FoldedNodeWithTooFewInputs) {
  auto m = import(testModel("fold_few_inputs"));
  EXPECT_EQ(m->error(), "node 'matmul_one_input' (op MatMul, domain 'ai.onnx', "
                        "opset 17): input 1 is required but the node has 1 input");
}

TEST(OnnxImportMalformed, HugeComputedMaskIsRefusedBeforeItIsBuilt) {
  auto m = import(testModel("trilu_huge"));
  EXPECT_EQ(m->error(), "node 'trilu' (op Trilu, domain 'ai.onnx', opset 17): value 'y/mask' is "
                        "10000000000 bytes; values folded at import time are limited to 16777216 bytes");
}

// An importer's message names an input the node lacks without reading past
// its inputs (this was a heap overflow).
TEST(OnnxImportMalformed, PowWithoutExponent) {
  auto m = import(testModel("pow_no_exponent"));
  EXPECT_EQ(m->error(), "node 'pow' (op Pow, domain 'ai.onnx', opset 17): the exponent, "
                        "input 1 (not given), must be a scalar known at import time; a "
                        "run-time exponent is not supported (nearest supported: Exp and Log)");
}

// Recursion through another function is found before anything is inlined
// (this ran out of memory: names doubled per level).
TEST(OnnxImportMalformed, RecursiveFunctionsNameTheCycle) {
  auto m = import(testModel("function_recursion"));
  EXPECT_EQ(m->error(), "model-local function 'Ping' calls itself: Ping -> Pong -> Ping");
  EXPECT_EQ(m->errorFiles.front(), testModel("function_recursion"));
}

TEST(OnnxImportMalformed, FunctionDefinedTwice) {
  auto m = import(testModel("function_duplicate"));
  EXPECT_EQ(m->error(), "model-local function 'Twice' (domain 'local') is defined twice");
}

TEST(OnnxImportMalformed, FunctionsNestedPastTheLimit) {
  auto m = import(testModel("function_deep"));
  EXPECT_EQ(m->error(), "model-local functions call each other more than 32 deep "
                        "(from 'F0' down to 'F32')");
}

// 24 levels of two calls each: within the depth limit, but 2^24 nodes.
TEST(OnnxImportMalformed, FunctionsExpandingPastTheNodeLimit) {
  auto m = import(testModel("function_wide"));
  EXPECT_EQ(m->error(), "inlining the model-local functions would give more than "
                        "65536 nodes and calls");
}

// The same calls with an empty last function: no nodes, but 2^24 calls (a
// fuzzed model took 39 s before calls counted toward the limit).
TEST(OnnxImportMalformed, CallsOfAnEmptyFunctionCountTowardTheLimit) {
  auto m = import(testModel("function_wide_empty"));
  EXPECT_EQ(m->error(), "inlining the model-local functions would give more than "
                        "65536 nodes and calls");
}

// 2^14 calls of a body with a 64 KiB Constant: the copying stops at 256 MiB.
TEST(OnnxImportMalformed, InliningStopsPastAGibibyteOfCopies) {
  auto m = import(testModel("function_wide_constant"));
  EXPECT_EQ(m->error(), "inlining the model-local functions would copy more than "
                        "268435456 bytes of nodes");
}

TEST(OnnxImportMalformed, InputOfRankNine) {
  auto m = import(testModel("rank_nine_input"));
  EXPECT_EQ(m->error(), "input 'x' has rank 9; at most 8 dims are supported");
}

TEST(OnnxImportMalformed, InitializerWhoseSizeOverflows) {
  auto m = import(testModel("huge_initializer"));
  EXPECT_EQ(m->error(), "node 'add' (op Add, domain 'ai.onnx', opset 17): initializer "
                        "'w' has shape [2147483648x2147483648x2147483648], whose size "
                        "overflows 64 bits");
}

TEST(OnnxImportMalformed, ResultWhoseSizeOverflows) {
  auto m = import(testModel("huge_expand"));
  EXPECT_EQ(m->error(), "node 'expand' (op Expand, domain 'ai.onnx', opset 17): output 0 "
                        "('y') has shape [2147483648x2147483648x2147483648], whose size "
                        "overflows 64 bits");
}

// Inlining still works after the call-graph check, with call-numbered names.
TEST(OnnxImport, NestedFunctionsInline) {
  auto m = import(testModel("llm_function"));
  ASSERT_TRUE(m->module) << m->errors.front();
  EXPECT_EQ(m->opCounts()["mt.layer_norm"], 2);
  EXPECT_EQ(m->opCounts()["mt.mul"], 2);
}

} // namespace
