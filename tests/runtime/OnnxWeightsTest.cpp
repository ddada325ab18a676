// OnnxWeightsTest.cpp - initializers from every storage field and from external data, with conversions.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "onnx/onnx.pb.h"

namespace megatrain::runtime::testing {
namespace {

class OnnxWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    onnx::ModelProto model;
    onnx::GraphProto* graph = model.mutable_graph();
    auto add = [&](const std::string& name, std::vector<int64_t> dims, int type) {
      onnx::TensorProto* t = graph->add_initializer();
      t->set_name(name);
      t->set_data_type(type);
      for (int64_t d : dims) t->add_dims(d);
      return t;
    };
    onnx::TensorProto* f = add("float_data", {2, 2}, onnx::TensorProto::FLOAT);
    for (float v : {1.5f, -2.0f, 0.25f, 3.0f}) f->add_float_data(v);

    const float raw[3] = {0.1f, 0.2f, 0.3f};
    add("raw_data", {3}, onnx::TensorProto::FLOAT)->set_raw_data(raw, sizeof raw);

    onnx::TensorProto* d = add("double_data", {2}, onnx::TensorProto::DOUBLE);
    d->add_double_data(0.1);
    d->add_double_data(-1e-300);

    onnx::TensorProto* i = add("int64_data", {2}, onnx::TensorProto::INT64);
    i->add_int64_data(-3);
    i->add_int64_data(1LL << 40);

    // External data: 16 bytes of junk, then two doubles.
    const double external[2] = {6.5, -0.125};
    std::ofstream out(dir_ + "/weights.bin", std::ios::binary);
    out << std::string(16, 'x');
    out.write(reinterpret_cast<const char*>(external), sizeof external);
    out.close();
    onnx::TensorProto* e = add("external", {2, 1}, onnx::TensorProto::DOUBLE);
    e->set_data_location(onnx::TensorProto::EXTERNAL);
    auto entry = [&](const char* key, const std::string& value) {
      onnx::StringStringEntryProto* kv = e->add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    };
    entry("location", "weights.bin");
    entry("offset", "16");
    entry("length", "16");

    std::ofstream model_out(dir_ + "/model.onnx", std::ios::binary);
    model.SerializeToOstream(&model_out);
  }

  template <typename T>
  std::vector<T> read(const OnnxWeights& weights, const std::string& name, plan::DType dtype,
                      std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t dim : shape) n *= static_cast<size_t>(dim);
    std::vector<T> values(n);
    weights.read(name, dtype, shape, values.data(), n * sizeof(T));
    return values;
  }

  std::string dir_;
};

TEST_F(OnnxWeightsTest, ReadsEveryStorageField) {
  const OnnxWeights weights(dir_ + "/model.onnx");
  EXPECT_EQ(read<float>(weights, "float_data", plan::F32, {2, 2}), (std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f}));
  EXPECT_EQ(read<float>(weights, "raw_data", plan::F32, {3}), (std::vector<float>{0.1f, 0.2f, 0.3f}));
  EXPECT_EQ(read<double>(weights, "double_data", plan::F64, {2}), (std::vector<double>{0.1, -1e-300}));
  EXPECT_EQ(read<double>(weights, "int64_data", plan::F64, {2}), (std::vector<double>{-3, 1099511627776.0}));
  EXPECT_EQ(read<double>(weights, "external", plan::F64, {2, 1}), (std::vector<double>{6.5, -0.125}));
}

TEST_F(OnnxWeightsTest, ConvertsBetweenF32AndF64) {
  const OnnxWeights weights(dir_ + "/model.onnx");
  // f32 widens exactly; f64 rounds to the nearest f32.
  EXPECT_EQ(read<double>(weights, "raw_data", plan::F64, {3})[1], static_cast<double>(0.2f));
  EXPECT_EQ(read<float>(weights, "double_data", plan::F32, {2})[0], 0.1f);
}

TEST_F(OnnxWeightsTest, ErrorsNameTheInitializer) {
  const OnnxWeights weights(dir_ + "/model.onnx");
  const std::string model = dir_ + "/model.onnx";
  try {
    read<float>(weights, "missing", plan::F32, {1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), model + ": no initializer named 'missing'");
  }
  try {
    read<float>(weights, "float_data", plan::F32, {4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), model + ": initializer 'float_data' has shape [2, 2], the plan expects [4]");
  }
  std::ofstream(dir_ + "/weights.bin", std::ios::trunc) << "short";
  try {
    read<double>(weights, "external", plan::F64, {2, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), model + ": initializer 'external': external data file " + dir_ +
                                         "/weights.bin is too short for 16 bytes at offset 16 (it holds 5)");
  }
  EXPECT_THROW(OnnxWeights(dir_ + "/nothing.onnx"), Error);
}

// One DOUBLE initializer "w" of 2 elements stored externally, with the
// entries given ("" leaves an entry out), in the model dir/m/model.onnx.
class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::filesystem::create_directories(dir_ + "/m/data");
    std::filesystem::create_directories(dir_ + "/outside");
    const double values[2] = {1.25, -4.0};
    for (const std::string path : {dir_ + "/m/data/w.bin", dir_ + "/outside/secret.bin"})
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(values), sizeof values);
  }

  std::string model(const std::string& location, const std::string& offset = "0", const std::string& length = "16") {
    onnx::ModelProto proto;
    onnx::TensorProto* t = proto.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::DOUBLE);
    t->add_dims(2);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", location}, {"offset", offset},
                                     {"length", length}}) {
      if (value.empty()) continue;
      onnx::StringStringEntryProto* kv = t->add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
    const std::string path = dir_ + "/m/model.onnx";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    proto.SerializeToOstream(&out);
    return path;
  }

  // The error reading "w" from `path`, "" if it loads.
  std::string readError(const std::string& path) {
    double values[2] = {};
    try {
      OnnxWeights(path).read("w", plan::F64, {2}, values, sizeof values);
    } catch (const Error& e) {
      return e.what();
    }
    return values[0] == 1.25 && values[1] == -4.0 ? "" : "wrong values";
  }

  std::string dir_;
};

TEST_F(ExternalDataTest, InsideTheModelsFolderIsRead) {
  EXPECT_EQ(readError(model("data/w.bin")), "");
  EXPECT_EQ(readError(model("./data/w.bin")), "");
  // A symlink whose target stays inside the folder is fine.
  std::filesystem::create_symlink("data/w.bin", dir_ + "/m/link.bin");
  EXPECT_EQ(readError(model("link.bin")), "");
  // No length: the initializer's own size.
  EXPECT_EQ(readError(model("data/w.bin", "", "")), "");
}

TEST_F(ExternalDataTest, LocationsLeavingTheModelsFolderAreRefused) {
  const std::string m = dir_ + "/m/model.onnx";
  EXPECT_EQ(readError(model("../../../../etc/passwd")),
            m + ": initializer 'w': external data location '../../../../etc/passwd' has a '..' component; it must "
                "stay inside the model's directory");
  EXPECT_EQ(readError(model("data/../../outside/secret.bin")),
            m + ": initializer 'w': external data location 'data/../../outside/secret.bin' has a '..' component; it "
                "must stay inside the model's directory");
  EXPECT_EQ(readError(model(dir_ + "/outside/secret.bin")),
            m + ": initializer 'w': external data location '" + dir_ +
                "/outside/secret.bin' is absolute; it must be relative to the model's directory");
  // A symlink out of the folder, to a file and to a directory.
  std::filesystem::create_symlink(dir_ + "/outside/secret.bin", dir_ + "/m/escape.bin");
  const std::string canonical = std::filesystem::canonical(dir_).string();
  EXPECT_EQ(readError(model("escape.bin")),
            m + ": initializer 'w': external data location 'escape.bin' resolves to " + canonical +
                "/outside/secret.bin, outside the model's directory " + canonical + "/m");
  std::filesystem::create_directory_symlink(dir_ + "/outside", dir_ + "/m/elsewhere");
  EXPECT_EQ(readError(model("elsewhere/secret.bin")),
            m + ": initializer 'w': external data location 'elsewhere/secret.bin' resolves to " + canonical +
                "/outside/secret.bin, outside the model's directory " + canonical + "/m");
}

TEST_F(ExternalDataTest, OffsetsAndLengthsAreNumbersWithinTheFile) {
  const std::string w = dir_ + "/m/model.onnx: initializer 'w': ";
  EXPECT_EQ(readError(model("data/w.bin", "sixteen")),
            w + "external data offset 'sixteen' is not a non-negative integer");
  EXPECT_EQ(readError(model("data/w.bin", "0", "-16")), w + "external data length '-16' is not a non-negative integer");
  EXPECT_EQ(readError(model("data/w.bin", "99999999999999999999")),
            w + "external data offset '99999999999999999999' is not a non-negative integer");
  EXPECT_EQ(readError(model("data/w.bin", "0", "16 ")), w + "external data length '16 ' is not a non-negative integer");
  EXPECT_EQ(readError(model("", "0", "16")), w + "external data without a location");
  // A length of 1 TiB is checked against the 16-byte file before anything is allocated.
  const std::string file = std::filesystem::canonical(dir_).string() + "/m/data/w.bin";
  EXPECT_EQ(readError(model("data/w.bin", "0", "1099511627776")),
            w + "external data file " + file + " is too short for 1099511627776 bytes at offset 0 (it holds 16)");
  EXPECT_EQ(readError(model("data/w.bin", "18446744073709551615", "16")),
            w + "external data file " + file + " is too short for 16 bytes at offset 18446744073709551615 (it holds 16)");
}

}  // namespace
}  // namespace megatrain::runtime::testing
