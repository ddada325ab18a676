// fuzz_checkpoint.cpp - libFuzzer target: bytes as a checkpoint file through loadCheckpoint (runtime/lib/Checkpoint.cpp).
//
// Checkpoints carry CRC-32s of the header, the table and the whole file, so
// random mutations would almost never pass the first checks. Each input is
// therefore loaded twice: as it is, and with its file size, key (the plan
// file hash for version 1, the executor's state key otherwise) and three
// checksums rewritten to match, which lets the mutations reach the table and
// data checks behind them.
//
// The executor is the runtime tests' linear plan (tests/runtime/TinyPlans.h)
// on the CPU backend. With MEGATRAIN_FUZZ_WRITE_SEED=DIR set, the target
// instead saves one valid checkpoint of that executor to DIR and exits
// (tests/fuzz/make_corpus.sh): the seed comes from the writer it tests.
// megatrain::Error is an expected rejection; anything else crashes the run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "FuzzFile.h"
#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Checkpoint.h"
#include "megatrain/runtime/CheckpointKey.h"
#include "megatrain/runtime/Checksum.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace {

using namespace megatrain;
using namespace megatrain::runtime;

constexpr uint64_t kPlanHash = 0x6d65676166757a7aull;  // "megafuzz"
constexpr size_t kHeaderBytes = 48;

std::unique_ptr<Executor> makeExecutor() {
  std::mt19937 rng(7);
  const std::string model = fuzz::fuzzDir() + "/linear.onnx";
  testing::writeModel(model, {{"W", testing::randomTensor({3, 2}, plan::F32, rng)}});
  auto executor = std::make_unique<Executor>(testing::linearPlan(plan::F32), std::make_unique<CpuBackend>());
  executor->loadWeights(OnnxWeights(model));
  return executor;
}

Executor& executor() {
  static std::unique_ptr<Executor> instance = makeExecutor();
  return *instance;
}

void putU32(std::vector<uint8_t>& bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t getU64(const std::vector<uint8_t>& bytes, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(bytes[at + i]) << (8 * i);
  return v;
}

// Rewrites file size, key and the table, header and trailer CRCs (in that
// order: the header's covers the table's) to match the bytes.
void fixChecksums(std::vector<uint8_t>& bytes) {
  putU64(bytes, 16, bytes.size());
  const bool version1 = bytes[8] == 1 && bytes[9] == 0 && bytes[10] == 0 && bytes[11] == 0;
  putU64(bytes, 24, version1 ? kPlanHash : stateKeyOf(executor().plan()).hash());
  const uint64_t tableBytes = getU64(bytes, 32);
  if (tableBytes <= bytes.size() - kHeaderBytes - 4)
    putU32(bytes, 40, crc32(bytes.data() + kHeaderBytes, tableBytes));
  putU32(bytes, 44, crc32(bytes.data(), 44));
  putU32(bytes, bytes.size() - 4, crc32(bytes.data(), bytes.size() - 4));
}

void load(const uint8_t* data, size_t size) {
  const std::string path = fuzz::writeFuzzFile("step-1.ckpt", data, size);
  try {
    (void)loadCheckpoint(path, executor(), kPlanHash);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* seedDir = std::getenv("MEGATRAIN_FUZZ_WRITE_SEED");
  if (!seedDir) return 0;
  TrainingState state;
  state.step = 3;
  state.optimizerStep = 3;
  CheckpointWriter writer(executor(), seedDir);
  std::printf("%s\n", writer.save(state).c_str());
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load(data, size);
  if (size < kHeaderBytes + 4) return 0;
  std::vector<uint8_t> fixed(data, data + size);
  fixChecksums(fixed);
  if (std::memcmp(fixed.data(), data, size) != 0) load(fixed.data(), fixed.size());
  return 0;
}
