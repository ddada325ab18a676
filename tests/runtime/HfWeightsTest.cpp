// HfWeightsTest.cpp - --init's rule and determinism, and --export-hf's directory (shards, index, ties, dtype, copies).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Json.h"
#include "megatrain/runtime/HfExport.h"
#include "megatrain/runtime/SafetensorsReader.h"
#include "megatrain/runtime/WeightInit.h"

namespace megatrain::runtime::testing {
namespace {

namespace fs = std::filesystem;

std::vector<float> initValues(const NormalInit& init, const std::string& name, const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  std::vector<float> out(count);
  init.read(name, plan::F32, shape, out.data(), out.size() * 4);
  return out;
}

TEST(WeightInit, RuleByNameAndRank) {
  EXPECT_EQ(initKind("model.layers.0.input_layernorm.weight", 1), InitKind::Ones);
  EXPECT_EQ(initKind("model.norm.weight", 1), InitKind::Ones);
  EXPECT_EQ(initKind("model.layers.3.self_attn.q_norm.weight", 1), InitKind::Ones);
  EXPECT_EQ(initKind("transformer.h.0.ln_1.weight", 1), InitKind::Ones);
  EXPECT_EQ(initKind("transformer.ln_f.weight", 1), InitKind::Ones);
  EXPECT_EQ(initKind("bert.embeddings.LayerNorm.weight", 1), InitKind::Ones);
  EXPECT_EQ(initKind("transformer.h.0.ln_1.bias", 1), InitKind::Zeros);
  EXPECT_EQ(initKind("model.layers.0.self_attn.q_proj.bias", 1), InitKind::Zeros);
  EXPECT_EQ(initKind("model.embed_tokens.weight", 2), InitKind::Normal);
  EXPECT_EQ(initKind("model.layers.0.mlp.up_proj.weight", 2), InitKind::Normal);
  EXPECT_EQ(initKind("model.norm.weight", 2), InitKind::Normal);  // rank 2: not a norm's scale
  EXPECT_EQ(initKind("model.layers.0.scale.weight", 1), InitKind::Normal);
}

TEST(WeightInit, SeededNormalIsDeterministicPerNameAndHasTheStd) {
  const NormalInit a(0.02, 7), b(0.02, 7), other(0.02, 8);
  const std::vector<int64_t> shape = {256, 512};  // big enough to be split over the host threads
  const std::vector<float> first = initValues(a, "w", shape);
  EXPECT_EQ(first, initValues(b, "w", shape));       // same seed, same name: same bits
  EXPECT_NE(first, initValues(other, "w", shape));   // another seed
  EXPECT_NE(first, initValues(a, "w2", shape));      // another parameter
  double sum = 0, squares = 0;
  for (float v : first) {
    sum += v;
    squares += double(v) * v;
  }
  const double n = static_cast<double>(first.size());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(squares / n), 0.02, 0.0005);
  // Element i is the same whatever the tensor's size, so whatever the split.
  const std::vector<float> shorter = initValues(a, "w", {100000}), serial = initValues(a, "w", {1000});
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), first.begin()));
  EXPECT_TRUE(std::equal(serial.begin(), serial.end(), first.begin()));
  // f64 masters get the same draws, unrounded.
  std::vector<double> wide(3);
  a.read("w", plan::F64, {3}, wide.data(), 24);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(static_cast<float>(wide[i]), first[i]);
  EXPECT_EQ(initValues(a, "h.0.ln_1.weight", {4}), std::vector<float>(4, 1.0f));
  EXPECT_EQ(initValues(a, "h.0.ln_1.bias", {4}), std::vector<float>(4, 0.0f));
}

TEST(WeightInit, ParsesTheFlag) {
  EXPECT_EQ(parseNormalInit("normal:0.02"), 0.02);
  for (const char* bad : {"normal", "normal:", "normal:-1", "normal:0", "normal:x", "uniform:0.1", "normal:inf"}) {
    try {
      parseNormalInit(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--init"), std::string::npos) << e.what();
    }
  }
}

ParameterValues parameter(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  ParameterValues p;
  p.name = name;
  p.shape = std::move(shape);
  p.dtype = plan::F32;
  p.trainable = true;
  p.bytes.resize(values.size() * 4);
  std::memcpy(p.bytes.data(), values.data(), p.bytes.size());
  return p;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class HfExportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeTempDir(); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
  const FetchParameter noFetch = [](size_t) -> std::vector<std::byte> { throw Error("fetched"); };
};

TEST_F(HfExportTest, ShardsWithAnIndexAndReadsBack) {
  const std::vector<ParameterValues> params = {parameter("a.weight", {4}, {1, 2, 3, 4}),
                                               parameter("b.weight", {2, 2}, {5, 6, 7, 8}),
                                               parameter("c.weight", {3}, {9, 10, 11})};
  HfExportOptions options;
  options.outDir = dir_ + "/out";
  options.shardBytes = 20;  // a and b do not fit together
  const HfExportResult result = exportHf(params, noFetch, options);
  EXPECT_EQ(result.dtype, "fp32");
  EXPECT_EQ(result.bytes, 44u);
  ASSERT_TRUE(fs::exists(options.outDir + "/model-00001-of-00003.safetensors"));
  ASSERT_TRUE(fs::exists(options.outDir + "/model-00003-of-00003.safetensors"));
  const nlohmann::json index = parseJson(readText(options.outDir + "/model.safetensors.index.json"), "index");
  EXPECT_EQ(index["metadata"]["total_size"], 44);
  EXPECT_EQ(index["weight_map"]["b.weight"], "model-00002-of-00003.safetensors");

  SafetensorsWeights back(options.outDir);
  EXPECT_EQ(back.metadata().at("format"), "pt");
  std::vector<float> b(4);
  back.read("b.weight", plan::F32, {2, 2}, b.data(), 16);
  EXPECT_EQ(b, (std::vector<float>{5, 6, 7, 8}));

  // Exporting again as one file removes the shards and the index.
  options.shardBytes = kDefaultShardBytes;
  const HfExportResult again = exportHf(params, noFetch, options);
  EXPECT_TRUE(fs::exists(options.outDir + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(options.outDir + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(options.outDir + "/model-00001-of-00003.safetensors"));
  EXPECT_EQ(again.notes.size(), 4u);  // three shards and the index removed
}

TEST_F(HfExportTest, SourceGivesNamesDTypeAndFiles) {
  // The source: bf16, the embedding stored once (tied), a config and a tokenizer.
  const std::string source = dir_ + "/src";
  fs::create_directories(source);
  HfExportOptions seed;
  seed.outDir = source;
  seed.dtype = "bf16";
  exportHf({parameter("model.embed_tokens.weight", {2}, {1, 2}), parameter("model.norm.weight", {2}, {1, 1})},
           noFetch, seed);
  std::ofstream(source + "/config.json") << "{\"tie_word_embeddings\": true, \"dtype\": \"bfloat16\", \"vocab_size\": 2}";
  std::ofstream(source + "/tokenizer.json") << "{\"model\": {}}";

  // The plan names the tied weight lm_head.weight; its master comes from fetch.
  std::vector<ParameterValues> params = {parameter("lm_head.weight", {2}, {0.5f, 3.0f}),
                                         parameter("model.norm.weight", {2}, {1.0f, 1.00390625f})};
  params[0].bytes.clear();
  HfExportOptions options;
  options.outDir = dir_ + "/out";
  options.source = source;
  const HfExportResult result = exportHf(
      params,
      [](size_t i) {
        EXPECT_EQ(i, 0u);
        return parameter("x", {2}, {0.5f, 3.0f}).bytes;
      },
      options);
  EXPECT_EQ(result.dtype, "bf16");  // the source's
  ASSERT_FALSE(result.notes.empty());
  EXPECT_NE(result.notes[0].find("lm_head.weight written as model.embed_tokens.weight"), std::string::npos);
  SafetensorsWeights out(options.outDir);
  ASSERT_EQ(out.tensors().size(), 2u);
  EXPECT_EQ(out.tensors().at("model.embed_tokens.weight").dtype, "BF16");
  EXPECT_EQ(out.metadata().at("format"), "pt");
  std::vector<float> values(2);
  out.read("model.norm.weight", plan::F32, {2}, values.data(), 8);
  EXPECT_EQ(values, (std::vector<float>{1.0f, 1.0f}));  // rounded to bf16 (ties to even)
  EXPECT_EQ(readText(options.outDir + "/tokenizer.json"), "{\"model\": {}}");

  // --export-dtype fp32: config.json says float32, key order kept.
  options.dtype = "fp32";
  exportHf(params, [](size_t) { return parameter("x", {2}, {0.5f, 3.0f}).bytes; }, options);
  EXPECT_EQ(readText(options.outDir + "/config.json"),
            "{\n  \"tie_word_embeddings\": true,\n  \"dtype\": \"float32\",\n  \"vocab_size\": 2\n}\n");
  EXPECT_EQ(SafetensorsWeights(options.outDir).tensors().at("model.norm.weight").dtype, "F32");
}

TEST_F(HfExportTest, Errors) {
  HfExportOptions options;
  options.outDir = dir_ + "/out";
  options.source = dir_ + "/absent";
  EXPECT_THROW(exportHf({}, noFetch, options), Error);
  options.source.clear();
  EXPECT_THROW(parseExportDType("int8"), Error);
  try {
    exportHf({parameter("a", {1}, {1}), parameter("a", {1}, {2})}, noFetch, options);
    ADD_FAILURE() << "a duplicate name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two parameters would be written as 'a'"), std::string::npos);
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
