// ModelExportTest.cpp - trained parameters into ONNX (inline, external, type conversions) and safetensors, and output readouts.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/ModelExport.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/OutputReadout.h"
#include "megatrain/runtime/PlanLoader.h"
#include "megatrain/runtime/Safetensors.h"
#include "onnx/onnx.pb.h"

namespace megatrain::runtime::testing {
namespace {

namespace fs = std::filesystem;

onnx::ModelProto loadModel(const std::string& path) {
  onnx::ModelProto model;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(model.ParseFromIstream(&in)) << path;
  return model;
}

const onnx::TensorProto& initializer(const onnx::ModelProto& model, const std::string& name) {
  for (const onnx::TensorProto& tensor : model.graph().initializer())
    if (tensor.name() == name) return tensor;
  throw Error("no initializer " + name);
}

std::string externalValue(const onnx::TensorProto& tensor, const std::string& key) {
  for (const auto& entry : tensor.external_data())
    if (entry.key() == key) return entry.value();
  return "";
}

std::vector<float> readFloats(const std::string& model, const std::string& name, size_t count) {
  std::vector<float> values(count);
  const OnnxWeights weights(model);
  weights.read(name, plan::F32, weights.shape(name), values.data(), count * 4);
  return values;
}

ParameterValues f32Parameter(const std::string& name, std::vector<int64_t> shape,
                             const std::vector<float>& values, bool trainable = true) {
  ParameterValues p;
  p.name = name;
  p.shape = std::move(shape);
  p.dtype = plan::F32;
  p.trainable = trainable;
  p.bytes.resize(values.size() * 4);
  std::memcpy(p.bytes.data(), values.data(), p.bytes.size());
  return p;
}

bool anyTemporaryLeft(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

// A source model with a trainable W [3, 2] (float_data), a frozen "bias" [2]
// kept inline, and a frozen "table" [4] in an external file of its own.
class ModelExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    fs::create_directory(dir_ + "/src");
    fs::create_directory(dir_ + "/out");
    source_ = dir_ + "/src/model.onnx";
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.set_producer_name("test");
    model.add_opset_import()->set_version(17);
    onnx::GraphProto* graph = model.mutable_graph();
    graph->set_name("g");
    onnx::TensorProto* w = graph->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    w->add_dims(2);
    for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}) w->add_float_data(v);
    onnx::TensorProto* bias = graph->add_initializer();
    bias->set_name("bias");
    bias->set_data_type(onnx::TensorProto::FLOAT);
    bias->add_dims(2);
    bias->add_float_data(0.5f);
    bias->add_float_data(-0.5f);
    const float table[4] = {10, 20, 30, 40};
    std::ofstream(dir_ + "/src/table.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(table), sizeof table);
    onnx::TensorProto* ext = graph->add_initializer();
    ext->set_name("table");
    ext->set_data_type(onnx::TensorProto::FLOAT);
    ext->add_dims(4);
    ext->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] : {std::pair{"location", "table.bin"}, {"offset", "0"}, {"length", "16"}}) {
      auto* entry = ext->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    }
    std::ofstream out(source_, std::ios::binary);
    model.SerializeToOstream(&out);
    trained_ = {f32Parameter("W", {3, 2}, {-1, -2, -3, -4, -5, -6}),
                f32Parameter("bias", {2}, {99, 99}, /*trainable=*/false)};
  }

  std::string dir_, source_;
  std::vector<ParameterValues> trained_;
};

TEST_F(ModelExportTest, InlineReplacesOnlyTrainedInitializers) {
  const std::string out = dir_ + "/out/trained.onnx";
  const OnnxExportResult result = exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Never);
  EXPECT_EQ(result.replaced, 1u);
  EXPECT_EQ(result.initializerBytes, 24u + 8u + 16u);
  EXPECT_TRUE(result.dataPath.empty());
  EXPECT_FALSE(anyTemporaryLeft(dir_ + "/out"));

  const onnx::ModelProto model = loadModel(out);
  const onnx::ModelProto original = loadModel(source_);
  EXPECT_EQ(model.producer_name(), "test");
  EXPECT_EQ(model.graph().initializer_size(), 3);
  EXPECT_EQ(readFloats(out, "W", 6), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(initializer(model, "W").data_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(initializer(model, "W").dims_size(), 2);
  // Frozen values are not replaced (even if given), and inline ones stay as they were.
  EXPECT_EQ(initializer(model, "bias").SerializeAsString(),
            initializer(original, "bias").SerializeAsString());
  // The external table moves inline: its old location is relative to the source.
  EXPECT_NE(initializer(model, "table").data_location(), onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(readFloats(out, "table", 4), (std::vector<float>{10, 20, 30, 40}));
}

TEST_F(ModelExportTest, ExternalDataIsAlignedAndReadable) {
  const std::string out = dir_ + "/out/trained.onnx";
  const OnnxExportResult result = exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Always);
  EXPECT_EQ(result.dataPath, out + ".data");
  ASSERT_TRUE(fs::exists(out + ".data"));
  EXPECT_FALSE(anyTemporaryLeft(dir_ + "/out"));

  const onnx::ModelProto model = loadModel(out);
  for (const char* name : {"W", "table"}) {
    const onnx::TensorProto& tensor = initializer(model, name);
    EXPECT_EQ(tensor.data_location(), onnx::TensorProto::EXTERNAL) << name;
    EXPECT_EQ(externalValue(tensor, "location"), "trained.onnx.data");
    EXPECT_EQ(std::stoull(externalValue(tensor, "offset")) % kExternalDataAlignment, 0u) << name;
  }
  EXPECT_EQ(externalValue(initializer(model, "W"), "offset"), "0");
  EXPECT_EQ(externalValue(initializer(model, "W"), "length"), "24");
  EXPECT_EQ(externalValue(initializer(model, "table"), "offset"), "64");
  EXPECT_EQ(fs::file_size(out + ".data"), 64u + 16u);
  EXPECT_FALSE(initializer(model, "bias").has_data_location());  // small and untouched: inline
  EXPECT_EQ(readFloats(out, "W", 6), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(readFloats(out, "table", 4), (std::vector<float>{10, 20, 30, 40}));
}

// The frozen external "table" is carried into the export: a location that
// leaves the source's folder is refused, and nothing is written.
TEST_F(ModelExportTest, ExternalDataOutsideTheSourceFolderIsNotCarriedOver) {
  onnx::ModelProto model = loadModel(source_);
  for (onnx::TensorProto& tensor : *model.mutable_graph()->mutable_initializer())
    if (tensor.name() == "table") tensor.mutable_external_data(0)->set_value("../../../../etc/passwd");
  std::ofstream(source_, std::ios::binary | std::ios::trunc) << model.SerializeAsString();
  const std::string out = dir_ + "/out/trained.onnx";
  try {
    exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Always);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), source_ + ": initializer 'table': external data location '../../../../etc/passwd' "
                                               "has a '..' component; it must stay inside the model's directory");
  }
  EXPECT_TRUE(fs::is_empty(dir_ + "/out"));
  // A length that is not a number, named rather than a bare `stoull`.
  for (onnx::TensorProto& tensor : *model.mutable_graph()->mutable_initializer())
    if (tensor.name() == "table") {
      tensor.mutable_external_data(0)->set_value("table.bin");
      tensor.mutable_external_data(2)->set_value("lots");
    }
  std::ofstream(source_, std::ios::binary | std::ios::trunc) << model.SerializeAsString();
  try {
    exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Always);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              source_ + ": initializer 'table': external data length 'lots' is not a non-negative integer");
  }
  EXPECT_TRUE(fs::is_empty(dir_ + "/out"));
}

TEST_F(ModelExportTest, AutoGoesExternalAboveTheThreshold) {
  const std::string out = dir_ + "/out/trained.onnx";
  EXPECT_TRUE(exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Auto).dataPath.empty());
  EXPECT_EQ(exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Auto, /*threshold=*/47).dataPath,
            out + ".data");
  EXPECT_TRUE(exportOnnx(OnnxWeights(source_), trained_, out, ExternalData::Auto, 48).dataPath.empty());
}

TEST_F(ModelExportTest, OverwritesItsSourceInPlace) {
  // The source's external table is read before the new files replace anything.
  exportOnnx(OnnxWeights(source_), trained_, source_, ExternalData::Always);
  EXPECT_EQ(readFloats(source_, "W", 6), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(readFloats(source_, "table", 4), (std::vector<float>{10, 20, 30, 40}));
}

TEST_F(ModelExportTest, RefusesParametersTheModelCannotHold) {
  const std::string out = dir_ + "/out/trained.onnx";
  auto error = [&](std::vector<ParameterValues> parameters) {
    try {
      exportOnnx(OnnxWeights(source_), parameters, out, ExternalData::Never);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({f32Parameter("V", {2}, {1, 2})}),
            source_ + ": no initializer named 'V' to receive the trained parameter (is --weights "
                      "the model the plan was compiled from?)");
  EXPECT_EQ(error({f32Parameter("W", {6}, {1, 2, 3, 4, 5, 6})}),
            source_ + ": initializer 'W' has shape [3, 2], the trained parameter [6]");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_THROW(exportOnnx(OnnxWeights(source_), trained_, dir_ + "/missing/x.onnx", ExternalData::Never),
               Error);
  EXPECT_THROW(parseExternalData("sometimes"), Error);
}

// Trained f32 values are written in the initializer's own type, rounded to nearest even.
TEST(ModelExportConversion, KeepsTheInitializerDataType) {
  const std::string dir = makeTempDir();
  onnx::ModelProto model;
  model.set_ir_version(8);
  for (auto [name, type] : {std::pair{"h", onnx::TensorProto::FLOAT16},
                            {"b", onnx::TensorProto::BFLOAT16},
                            {"d", onnx::TensorProto::DOUBLE}}) {
    onnx::TensorProto* t = model.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(8);
    t->set_raw_data(std::string(8 * onnxElementSize(type), '\0'));
  }
  std::ofstream(dir + "/m.onnx", std::ios::binary) << model.SerializeAsString();

  const float halfUlp = std::ldexp(1.0f, -11), sub = std::ldexp(1.0f, -24);
  const std::vector<float> halfIn = {1.5f, 1 + halfUlp, 1 + 3 * halfUlp, 65504.f, 70000.f,
                                     sub, sub / 2, 3 * sub / 4};
  const std::vector<float> halfWant = {1.5f, 1, 1 + 4 * halfUlp, 65504.f, INFINITY, sub, 0, sub};
  const float bfUlp = std::ldexp(1.0f, -8);
  const std::vector<float> bfIn = {1.5f, 1 + bfUlp, 1 + 3 * bfUlp, -2.f, -(1 + 5 * bfUlp), 0.f, -0.f, NAN};
  const std::vector<float> bfWant = {1.5f, 1, 1 + 4 * bfUlp, -2.f, -(1 + 4 * bfUlp), 0.f, -0.f, NAN};
  const std::vector<float> dIn = {0.1f, -0.2f, 1e-30f, 5, 6, 7, 8, 9};
  exportOnnx(OnnxWeights(dir + "/m.onnx"),
             {f32Parameter("h", {8}, halfIn), f32Parameter("b", {8}, bfIn), f32Parameter("d", {8}, dIn)},
             dir + "/out.onnx", ExternalData::Never);

  const onnx::ModelProto out = loadModel(dir + "/out.onnx");
  EXPECT_EQ(initializer(out, "h").data_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(initializer(out, "h").raw_data().size(), 16u);
  EXPECT_EQ(readFloats(dir + "/out.onnx", "h", 8), halfWant);
  const std::vector<float> bf = readFloats(dir + "/out.onnx", "b", 8);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(bf[i], bfWant[i]) << i;
  EXPECT_TRUE(std::signbit(bf[6]));
  EXPECT_TRUE(std::isnan(bf[7]));
  std::vector<double> d(8);
  OnnxWeights(dir + "/out.onnx").read("d", plan::F64, {8}, d.data(), 64);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(d[i], static_cast<double>(dIn[i])) << i;
}

TEST(Safetensors, HeaderIsSortedAlignedJson) {
  ParameterValues b = f32Parameter("b", {2}, {1, 2});
  ParameterValues a;
  a.name = "a\"x";
  a.shape = {1, 2};
  a.dtype = plan::F64;
  a.bytes.resize(16);
  const std::string header = safetensorsHeader({b, a}, {{"source_model", "m.onnx"}});
  const std::string json =
      R"({"__metadata__":{"source_model":"m.onnx"},"a\"x":{"dtype":"F64","shape":[1,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.size() % 8, 0u);
  EXPECT_EQ(header.find_first_not_of(' ', json.size()), std::string::npos);
}

TEST(Safetensors, FileHoldsLengthHeaderAndDataInNameOrder) {
  const std::string dir = makeTempDir();
  const std::vector<ParameterValues> tensors = {f32Parameter("z", {1}, {7}), f32Parameter("y", {2}, {5, 6})};
  writeSafetensors(dir + "/p.safetensors", tensors, {});
  std::ifstream in(dir + "/p.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(length, safetensorsHeader(tensors, {}).size());
  ASSERT_EQ(bytes.size(), 8 + length + 12);
  float data[3];
  std::memcpy(data, bytes.data() + 8 + length, 12);
  EXPECT_EQ(std::vector<float>(data, data + 3), (std::vector<float>{5, 6, 7}));  // y, then z
  EXPECT_FALSE(anyTemporaryLeft(dir));
  EXPECT_THROW(writeSafetensors(dir + "/dup.safetensors", {tensors[0], tensors[0]}, {}), Error);
  EXPECT_FALSE(fs::exists(dir + "/dup.safetensors"));
}

// The readout holds the step's forward value: y = x W with W before the update.
TEST(OutputReadout, HoldsTheLastForwardValue) {
  const std::string dir = makeTempDir();
  std::mt19937 rng(5);
  const HostTensor w = randomTensor({3, 2}, plan::F64, rng), x = randomTensor({4, 3}, plan::F64, rng);
  writeModel(dir + "/linear.onnx", {{"W", w}});
  Executor executor(linearPlan(plan::F64, /*keepOutput=*/true), std::make_unique<CpuBackend>());
  EXPECT_EQ(keptOutputs(executor.plan()), std::vector<std::string>{"y"});
  executor.loadWeights(OnnxWeights(dir + "/linear.onnx"));
  HostArray input = HostArray::zeros(ElementType::F64, {4, 3});
  std::memcpy(input.bytes.data(), x.values.data(), 12 * sizeof(double));
  executor.setInput("x", input);

  std::vector<double> before = w.values;
  for (int step = 0; step < 2; ++step) {
    executor.runStep();
    const HostArray y = readOutput(executor, "y");
    EXPECT_EQ(y.type, ElementType::F64);
    EXPECT_EQ(y.shape, (std::vector<int64_t>{4, 2}));
    std::vector<double> expected(8, 0.0);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k) expected[i * 2 + j] += x.values[i * 3 + k] * before[k * 2 + j];
    expectAllNear(std::vector<double>(y.data<double>(), y.data<double>() + 8), expected, 1e-12);
    const std::vector<double> after = executor.readTensor("W");
    EXPECT_NE(after, before);
    before = after;
  }

  try {
    readOutput(executor, "logits");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the plan keeps no output named 'logits' (it keeps: y; compile with "
                           "--keep-output logits)");
  }
}

TEST(OutputReadout, MustLiveInHostMemory) {
  plan::Plan plan = linearPlan(plan::F32, /*keepOutput=*/true);
  for (plan::Tensor& tensor : *plan.mutable_tensors())
    if (tensor.name() == "output:y") tensor.mutable_buffer()->set_pool(0);
  CpuBackend backend;
  try {
    validatePlan(plan, backend, "t.plan");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "t.plan: tensor 16 'output:y': OUTPUT_READOUT is in a DEVICE pool, "
                           "readouts need host memory");
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
