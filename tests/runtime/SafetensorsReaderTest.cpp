// SafetensorsReaderTest.cpp - safetensors checkpoints read as parameters: every dtype, shards, ties, and each error.
#include <cmath>
#include <functional>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/F16.h"
#include "megatrain/runtime/SafetensorsReader.h"
#include "megatrain/runtime/WeightSource.h"

namespace megatrain::runtime::testing {
namespace {

// A tensor as the test writes it: header fields and raw little-endian bytes.
struct Stored {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

template <typename T>
std::string rawBytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string shapeJson(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

// The header JSON of `tensors`, data back to back in the order given.
std::string headerOf(const std::vector<Stored>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const Stored& t : tensors) {
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shapeJson(t.shape) +
              ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  return header + "}";
}

void writeRaw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << header << data;
}

void writeFile(const std::string& path, const std::vector<Stored>& tensors) {
  std::string data;
  for (const Stored& t : tensors) data += t.bytes;
  writeRaw(path, headerOf(tensors), data);
}

void writeText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<float> readF32(const WeightSource& source, const std::string& name, const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  std::vector<float> out(count);
  source.read(name, plan::F32, shape, out.data(), out.size() * 4);
  return out;
}

std::string errorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class SafetensorsReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SafetensorsReaderTest, ReadsEveryFloatingDTypeAsF32AndF64) {
  const std::vector<float> f32 = {1.5f, -2.25f, 0.1f, 3e-8f};
  const std::vector<double> f64 = {0.1, -1e-3};
  const std::vector<uint16_t> bf16 = {floatToBf16(1.0f), floatToBf16(-0.5f), floatToBf16(3.140625f)};
  const std::vector<uint16_t> f16 = {floatToF16(1.0f), floatToF16(-65504.0f), 0x0001 /* 2^-24 */};
  writeFile(dir_ + "/m.safetensors", {{"a.f32", "F32", {2, 2}, rawBytes(f32)},
                                      {"b.f64", "F64", {2}, rawBytes(f64)},
                                      {"c.bf16", "BF16", {3}, rawBytes(bf16)},
                                      {"d.f16", "F16", {3, 1}, rawBytes(f16)}});
  SafetensorsWeights weights(dir_ + "/m.safetensors");
  EXPECT_EQ(weights.metadata().at("format"), "pt");
  EXPECT_EQ(readF32(weights, "a.f32", {2, 2}), f32);  // bit-exact copy
  EXPECT_EQ(readF32(weights, "b.f64", {2}), (std::vector<float>{0.1f, -1e-3f}));
  EXPECT_EQ(readF32(weights, "c.bf16", {3}), (std::vector<float>{1.0f, -0.5f, 3.140625f}));
  EXPECT_EQ(readF32(weights, "d.f16", {3, 1}), (std::vector<float>{1.0f, -65504.0f, std::ldexp(1.0f, -24)}));
  std::vector<double> wide(2);
  weights.read("b.f64", plan::F64, {2}, wide.data(), 16);
  EXPECT_EQ(wide, f64);
}

TEST(F16Conversion, EveryHalfRoundTripsAndTiesGoEven) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = f16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(floatToF16(value), bits) << "half 0x" << std::hex << bits;
  }
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(1.0f, -11)), floatToF16(1.0f));  // tie: to even (1.0)
  EXPECT_EQ(floatToF16(65520.0f), 0x7C00);                                 // past the largest half
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -25)), 0);                         // tie between 0 and 2^-24
}

TEST_F(SafetensorsReaderTest, ReadsAShardedDirectoryThroughItsIndex) {
  const std::vector<float> a = {1, 2, 3}, b = {4, 5};
  writeFile(dir_ + "/model-00001-of-00002.safetensors", {{"x.weight", "F32", {3}, rawBytes(a)}});
  writeFile(dir_ + "/model-00002-of-00002.safetensors", {{"y.weight", "F32", {2}, rawBytes(b)}});
  writeText(dir_ + "/model.safetensors.index.json",
            R"({"metadata": {"total_size": 20}, "weight_map": {"x.weight": "model-00001-of-00002.safetensors",
                "y.weight": "model-00002-of-00002.safetensors"}})");
  ASSERT_EQ(weightFormat(dir_), WeightFormat::SafetensorsDirectory);
  const std::unique_ptr<WeightSource> weights = openWeights(dir_);
  EXPECT_EQ(readF32(*weights, "x.weight", {3}), a);
  EXPECT_EQ(readF32(*weights, "y.weight", {2}), b);
}

TEST_F(SafetensorsReaderTest, IndexErrors) {
  const std::vector<float> a = {1, 2, 3};
  writeFile(dir_ + "/s1.safetensors", {{"x.weight", "F32", {3}, rawBytes(a)}});
  writeText(dir_ + "/model.safetensors.index.json",
            R"({"weight_map": {"x.weight": "s1.safetensors", "y.weight": "s2.safetensors"}})");
  EXPECT_NE(errorOf([&] { SafetensorsWeights w(dir_); }).find("names shard s2.safetensors (1 tensors, e.g. 'y.weight'), but "),
            std::string::npos);
  writeText(dir_ + "/model.safetensors.index.json", R"({"weight_map": {"x.weight": "../s1.safetensors"}})");
  EXPECT_NE(errorOf([&] { SafetensorsWeights w(dir_); }).find("is not a file name inside"), std::string::npos);
  writeText(dir_ + "/model.safetensors.index.json", R"({"weight_map": {"z.weight": "s1.safetensors"}})");
  EXPECT_NE(errorOf([&] { SafetensorsWeights w(dir_); }).find("puts 'z.weight' in s1.safetensors, but no shard holds it"),
            std::string::npos);
  writeText(dir_ + "/model.safetensors.index.json", R"({"weights": {}})");
  EXPECT_NE(errorOf([&] { SafetensorsWeights w(dir_); }).find("no weight_map object"), std::string::npos);
  std::filesystem::remove(dir_ + "/model.safetensors.index.json");
  EXPECT_NE(errorOf([&] { SafetensorsWeights w(dir_); })
                .find("holds neither model.safetensors nor model.safetensors.index.json (it has s1.safetensors"),
            std::string::npos);
}

TEST_F(SafetensorsReaderTest, MissingParameterNamesTheNearestStoredNames) {
  const std::vector<float> v = {1, 2};
  writeFile(dir_ + "/model.safetensors", {{"model.layers.0.mlp.up_proj.weight", "F32", {2}, rawBytes(v)},
                                          {"model.layers.0.mlp.down_proj.weight", "F32", {2}, rawBytes(v)},
                                          {"model.norm.weight", "F32", {2}, rawBytes(v)}});
  SafetensorsWeights weights(dir_);
  const std::string message = errorOf([&] { readF32(weights, "model.layers.0.mlp.gate_proj.weight", {2}); });
  EXPECT_NE(message.find("no tensor named 'model.layers.0.mlp.gate_proj.weight', which the plan needs (3 tensors "
                         "stored; nearest: model.layers.0.mlp.down_proj.weight, model.layers.0.mlp.up_proj.weight"),
            std::string::npos)
      << message;
}

TEST_F(SafetensorsReaderTest, TiedEmbeddingResolvesOnlyWhenTheConfigSaysSo) {
  const std::vector<float> embed = {1, 2, 3, 4, 5, 6};
  writeFile(dir_ + "/model.safetensors", {{"model.embed_tokens.weight", "F32", {3, 2}, rawBytes(embed)}});
  // No config.json: the tie is a guess, refused with the reason.
  std::string message = errorOf([&] { readF32(SafetensorsWeights(dir_), "lm_head.weight", {3, 2}); });
  EXPECT_NE(message.find("could stand for it if the weights were tied, but no config.json"), std::string::npos) << message;

  writeText(dir_ + "/config.json", R"({"tie_word_embeddings": false})");
  message = errorOf([&] { readF32(SafetensorsWeights(dir_), "lm_head.weight", {3, 2}); });
  EXPECT_NE(message.find("says tie_word_embeddings false"), std::string::npos) << message;

  writeText(dir_ + "/config.json", R"({"tie_word_embeddings": true, "model_type": "llama"})");
  SafetensorsWeights tied(dir_);
  EXPECT_EQ(readF32(tied, "lm_head.weight", {3, 2}), embed);
  ASSERT_EQ(tied.notes().size(), 1u);
  EXPECT_NE(tied.notes()[0].find("lm_head.weight reads model.embed_tokens.weight"), std::string::npos);
  // The reverse: a plan naming the input embedding, a file storing the output one.
  EXPECT_EQ(tiedEmbeddingPartner("transformer.wte.weight", {"lm_head.weight", "h.0.attn.weight"}), "lm_head.weight");
  EXPECT_EQ(tiedEmbeddingPartner("lm_head.weight", {"a.embed_tokens.weight", "b.embed_tokens.weight"}), "");
}

TEST_F(SafetensorsReaderTest, ShapeAndDTypeMismatches) {
  const std::vector<int64_t> ints = {1, 2};
  const std::vector<float> v = {1, 2, 3, 4};
  writeFile(dir_ + "/m.safetensors", {{"w", "F32", {2, 2}, rawBytes(v)}, {"steps", "I64", {2}, rawBytes(ints)}});
  SafetensorsWeights weights(dir_ + "/m.safetensors");
  EXPECT_NE(errorOf([&] { readF32(weights, "w", {4}); }).find("tensor 'w' has shape [2, 2], the plan expects [4]"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { readF32(weights, "steps", {2}); })
                .find("has dtype I64; parameters load from F32, BF16, F16 or F64"),
            std::string::npos);
}

TEST_F(SafetensorsReaderTest, CorruptFilesAreRefusedWhenOpened) {
  const std::string path = dir_ + "/bad.safetensors";
  auto openError = [&] { return errorOf([&] { SafetensorsWeights w(path); }); };
  const std::string four(16, '\0');

  writeText(path, "abc");
  EXPECT_NE(openError().find("truncated safetensors file: 3 bytes"), std::string::npos);

  writeRaw(path, std::string("{\"w\":{"), "");
  std::ofstream(path, std::ios::binary | std::ios::in | std::ios::out).write("\x40\x00\x00\x00\x00\x00\x00\x00", 8);
  EXPECT_NE(openError().find("the header claims 64 bytes, the file holds"), std::string::npos) << openError();

  writeRaw(path, "{\"w\": [1, 2", "");
  EXPECT_NE(openError().find("safetensors header: not valid JSON"), std::string::npos) << openError();

  writeRaw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0'));
  EXPECT_NE(openError().find("tensor 'w': data_offsets [0, 8] are out of range: the file holds 4 bytes"),
            std::string::npos) << openError();

  writeRaw(path, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  EXPECT_NE(openError().find("F32 shape [3] needs 12 bytes, data_offsets [0, 8] hold 8"), std::string::npos);

  writeRaw(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           std::string(12, '\0'));
  EXPECT_NE(openError().find("tensors 'a' [0, 8) and 'b' [4, 12) overlap"), std::string::npos) << openError();

  writeRaw(path, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "");
  EXPECT_NE(openError().find("has a dimension that is not a non-negative integer"), std::string::npos);

  writeRaw(path, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", four);
  EXPECT_NE(openError().find("end before they begin"), std::string::npos);

  writeRaw(path, R"({"w":{"shape":[1],"data_offsets":[0,4]}})", four);
  EXPECT_NE(openError().find("header entry has no dtype string"), std::string::npos);

  writeRaw(path, R"([1, 2])", "");
  EXPECT_NE(openError().find("not a JSON object"), std::string::npos);

  std::ofstream(path, std::ios::binary | std::ios::trunc).write("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
  EXPECT_NE(openError().find("above the 100 MB limit"), std::string::npos) << openError();

  EXPECT_NE(errorOf([&] { openWeights(dir_ + "/absent"); }).find("no such file or directory"), std::string::npos);
}

TEST(NearestNames, ClosestFirst) {
  EXPECT_EQ(nearestNames("lm_head.weight", {"model.norm.weight", "lm_head.bias", "lm_heads.weight"}, 2),
            (std::vector<std::string>{"lm_heads.weight", "lm_head.bias"}));
}

}  // namespace
}  // namespace megatrain::runtime::testing
