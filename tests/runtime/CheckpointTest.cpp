// CheckpointTest.cpp - checkpoints: checksums, a bit-exact round trip, every rejection by its message, resume's choice.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Checkpoint.h"
#include "megatrain/runtime/CheckpointKey.h"
#include "megatrain/runtime/Checksum.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

constexpr uint64_t kPlanHash = 0x1234abcd5678ef90ull;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Checksum, KnownValues) {
  // The CRC-32 check value of the standard, and FNV-1a 64 reference vectors.
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("", 0), 0u);
  // Continuing over a split gives the whole's CRC, at every split point (the
  // 8-byte loop and the byte loop must agree).
  const std::string text = "a checkpoint is gigabytes, its checksum runs eight bytes at a time";
  for (size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(crc32(text.data() + cut, text.size() - cut, crc32(text.data(), cut)), crc32(text.data(), text.size()));
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

// The CRC-32 one bit at a time, straight from the polynomial: the reference the
// checkpoints written before (by a slicing-by-8 loop) and after (by zlib) agree with.
uint32_t bitwiseCrc32(const unsigned char* p, size_t size) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
  }
  return ~crc;
}

// Bytes from a 64-bit LCG (the top byte of each state): the same in every build.
std::vector<unsigned char> lcgBytes(size_t size) {
  std::vector<unsigned char> bytes(size);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& byte : bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    byte = static_cast<unsigned char>(state >> 56);
  }
  return bytes;
}

TEST(Checksum, MatchesTheBitwiseDefinition) {
  // Every length to 300 and some long ones, at every alignment of the start
  // (zlib's loops work in words and blocks; the ends of each must be right),
  // and continued from a split at several points.
  const std::vector<unsigned char> bytes = lcgBytes((1 << 16) + 64);
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 300; ++n) sizes.push_back(n);
  for (size_t n : {1021u, 4096u, 5003u, 32768u, 65536u + 7u}) sizes.push_back(n);
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t n : sizes) {
      const unsigned char* p = bytes.data() + offset;
      const uint32_t expected = bitwiseCrc32(p, n);
      ASSERT_EQ(crc32(p, n), expected) << "offset " << offset << ", " << n << " bytes";
      for (size_t cut : {n / 3, n / 2, n - n / 7})
        ASSERT_EQ(crc32(p + cut, n - cut, crc32(p, cut)), expected) << "offset " << offset << ", cut " << cut;
    }
  // Nothing to add leaves a running CRC as it is, null pointer or not.
  EXPECT_EQ(crc32(nullptr, 0, 0x12345678u), 0x12345678u);
  EXPECT_EQ(crc32(bytes.data(), 0, 0x12345678u), 0x12345678u);
}

TEST(Checksum, PinnedValueOfAMegabyte) {
  // Python: zlib.crc32 of the same LCG bytes (and the slicing-by-8 loop
  // checkpoints were written with before zlib computed them).
  const std::vector<unsigned char> bytes = lcgBytes(1 << 20);
  EXPECT_EQ(crc32(bytes.data(), bytes.size()), 0xcfa8d20eu);
}

TEST(Checksum, OneCallPastFourGiB) {
  // zlib's crc32 takes a 32-bit length; crc32_z a size_t. A buffer of 4 GiB + 4099
  // bytes (zero pages, nothing resident but the four bytes set) in one call must
  // equal the same bytes fed in 1 GiB pieces and Python's zlib.crc32 of them: a
  // length cut to 32 bits would see 4099 bytes.
  const size_t size = (size_t(1) << 32) + 4099;
  void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) GTEST_SKIP() << "cannot map " << size << " bytes: " << std::strerror(errno);
  auto* bytes = static_cast<unsigned char*>(mapped);
  bytes[0] = 0x5A;
  bytes[(size_t(1) << 32) - 1] = 0x33;
  bytes[size_t(1) << 32] = 0x44;
  bytes[size - 1] = 0xA5;
  const uint32_t whole = crc32(bytes, size);
  uint32_t pieces = 0;
  for (size_t at = 0; at < size; at += size_t(1) << 30)
    pieces = crc32(bytes + at, std::min(size - at, size_t(1) << 30), pieces);
  munmap(mapped, size);
  EXPECT_EQ(whole, pieces);
  EXPECT_EQ(whole, 0xa2a20d46u);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::mt19937 rng(91);
    writeModel(dir_ + "/linear.onnx", {{"W", randomTensor({3, 2}, plan::F32, rng)}});
    x_ = HostArray::zeros(ElementType::F32, {4, 3});
    for (int i = 0; i < 12; ++i) x_.data<float>()[i] = static_cast<float>(i % 5) - 1.5f;
  }

  // `edit` changes the plan first (another header, other optimizer settings).
  std::unique_ptr<Executor> makeExecutor(plan::DType dtype = plan::F32, bool load = true,
                                         const std::function<void(plan::Plan&)>& edit = {}) {
    plan::Plan plan = linearPlan(dtype);
    if (edit) edit(plan);
    auto executor = std::make_unique<Executor>(std::move(plan), std::make_unique<CpuBackend>());
    if (load) executor->loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
    HostArray x = x_;
    if (dtype == plan::F64) {
      x = HostArray::zeros(ElementType::F64, {4, 3});
      for (int i = 0; i < 12; ++i) x.data<double>()[i] = x_.data<float>()[i];
    }
    executor->setInput("x", x);
    return executor;
  }

  static TrainingState state(int64_t step, int64_t t) {
    TrainingState s;
    s.step = step;
    s.optimizerStep = t;
    s.hasData = true;
    s.data = SamplerState{7, 1000, 2, 345, 0xfedcba9876543210ull};
    s.lr = LrSchedule{LrScheduleKind::Cosine, 3e-3, 3e-4, 10, 200};
    return s;
  }

  // A valid checkpoint after two steps, at dir_/good/step-2.ckpt.
  std::string goodCheckpoint() {
    auto executor = makeExecutor();
    executor->runStep();
    executor->runStep();
    CheckpointWriter writer(*executor, dir_ + "/good");
    return writer.save(state(2, 2));
  }

  // loadCheckpoint's message, "" if it loads.
  std::string loadError(const std::string& path, uint64_t planHash = kPlanHash, plan::DType dtype = plan::F32,
                        const std::function<void(plan::Plan&)>& edit = {}) {
    auto executor = makeExecutor(dtype, false, edit);
    try {
      loadCheckpoint(path, *executor, planHash);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "";
  }

  // A copy of `good` with `bytes` written at `offset`.
  std::string corrupted(const std::string& good, const std::string& name, size_t offset, const std::string& bytes) {
    std::string data = readFile(good);
    data.replace(offset, bytes.size(), bytes);
    const std::string path = dir_ + "/" + name;
    writeFile(path, data);
    return path;
  }

  std::string dir_;
  HostArray x_;
};

TEST_F(CheckpointTest, RoundTripIsBitExactAndTrainingContinuesIdentically) {
  auto original = makeExecutor();
  for (int i = 0; i < 3; ++i) original->runStep();
  CheckpointWriter writer(*original, dir_ + "/ckpt");
  const std::string path = writer.save(state(3, 3));
  EXPECT_EQ(path, dir_ + "/ckpt/step-3.ckpt");
  EXPECT_EQ(readFile(dir_ + "/ckpt/latest"), "step-3.ckpt\n");
  EXPECT_EQ(std::filesystem::file_size(path), writer.fileBytes());
  EXPECT_EQ(writer.fileBytes(), checkpointBytes(original->plan()));
  // The trailer is the CRC-32 of everything before it (so zlib.crc32 can check a file).
  const std::string bytes = readFile(path);
  uint32_t trailer = 0;
  std::memcpy(&trailer, bytes.data() + bytes.size() - 4, 4);
  EXPECT_EQ(trailer, crc32(bytes.data(), bytes.size() - 4));

  auto resumed = makeExecutor(plan::F32, false);
  const TrainingState loaded = loadCheckpoint(path, *resumed, kPlanHash);
  const TrainingState expected = state(3, 3);
  EXPECT_EQ(loaded.step, 3);
  EXPECT_EQ(loaded.optimizerStep, 3);
  EXPECT_EQ(resumed->optimizerStep(), 3);
  EXPECT_TRUE(loaded.hasData);
  EXPECT_EQ(loaded.data.seed, expected.data.seed);
  EXPECT_EQ(loaded.data.windows, expected.data.windows);
  EXPECT_EQ(loaded.data.epoch, expected.data.epoch);
  EXPECT_EQ(loaded.data.index, expected.data.index);
  EXPECT_EQ(loaded.data.epochRng, expected.data.epochRng);
  EXPECT_TRUE(loaded.lr == expected.lr);
  for (const char* name : {"W", "adam_m:W", "adam_v:W"})
    EXPECT_EQ(resumed->readBytes(name), original->readBytes(name)) << name;
  for (int i = 0; i < 2; ++i) {
    const double a = original->runStep(), b = resumed->runStep();
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << i;
  }
  EXPECT_EQ(resumed->readBytes("W"), original->readBytes("W"));
}

// A poisoned state is never saved: the save throws naming the parameter and
// index, leaves no file (temp or final) and `latest` names the last good one.
TEST_F(CheckpointTest, NonFiniteWeightsAreNotSaved) {
  auto executor = makeExecutor();
  executor->runStep();
  CheckpointWriter writer(*executor, dir_ + "/ckpt");
  writer.save(state(1, 1));
  executor->runStep();
  std::vector<double> w = executor->readTensor("W");
  w[3] = std::nan("");
  executor->writeTensor("W", w);
  try {
    writer.save(state(2, 2));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir_ + "/ckpt/step-2.ckpt: not written: parameter 'W' is nan at flat index 3");
  }
  EXPECT_EQ(readFile(dir_ + "/ckpt/latest"), "step-1.ckpt\n");
  EXPECT_EQ(listCheckpoints(dir_ + "/ckpt"), std::vector<std::string>{dir_ + "/ckpt/step-1.ckpt"});
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_ + "/ckpt")) ++files;
  EXPECT_EQ(files, 2u);  // step-1.ckpt and latest: no temp file left
}

TEST_F(CheckpointTest, CorruptCheckpointsAreRejectedWithWhatIsWrong) {
  const std::string good = goodCheckpoint();
  EXPECT_EQ(loadError(good), "");
  const std::string size = std::to_string(readFile(good).size());

  EXPECT_EQ(loadError(corrupted(good, "magic.ckpt", 0, "NOTACKPT")),
            dir_ + "/magic.ckpt: bad magic (not a megatrain checkpoint)");
  EXPECT_EQ(loadError(corrupted(good, "version.ckpt", 8, std::string("\x09\0\0\0", 4))),
            dir_ + "/version.ckpt: format version 9, this build reads versions 1 and 2");
  EXPECT_EQ(loadError(corrupted(good, "header.ckpt", 16, "\x7f"))
                .rfind(dir_ + "/header.ckpt: header checksum mismatch (stored 0x", 0),
            0u);
  // Byte 52 is inside the table (the first entry's name).
  EXPECT_EQ(loadError(corrupted(good, "table.ckpt", 52, "Q"))
                .rfind(dir_ + "/table.ckpt: table checksum mismatch (stored 0x", 0),
            0u);
  // The last tensor bytes before the run state: a flipped bit in the data.
  EXPECT_EQ(loadError(corrupted(good, "data.ckpt", readFile(good).size() - 4 - 64 * 13 - 1, "\x55"))
                .rfind(dir_ + "/data.ckpt: checksum mismatch (stored 0x", 0),
            0u);
  EXPECT_EQ(loadError(corrupted(good, "trailer.ckpt", readFile(good).size() - 4, std::string(4, '\0')))
                .rfind(dir_ + "/trailer.ckpt: checksum mismatch", 0),
            0u);

  const std::string whole = readFile(good);
  writeFile(dir_ + "/half.ckpt", whole.substr(0, whole.size() / 2));
  EXPECT_EQ(loadError(dir_ + "/half.ckpt"),
            dir_ + "/half.ckpt: truncated: " + std::to_string(whole.size() / 2) + " of " + size + " bytes");
  writeFile(dir_ + "/stub.ckpt", whole.substr(0, 20));
  EXPECT_EQ(loadError(dir_ + "/stub.ckpt"), dir_ + "/stub.ckpt: truncated: 20 bytes, less than the 48-byte header");
  writeFile(dir_ + "/long.ckpt", whole + "extra");
  EXPECT_EQ(loadError(dir_ + "/long.ckpt"),
            dir_ + "/long.ckpt: " + std::to_string(whole.size() + 5) + " bytes, the header says " + size);

  // The plan file's hash only keys version 1 checkpoints.
  EXPECT_EQ(loadError(good, 0x1111ull), "");
  // A state key in the header that is not its table's and settings': damaged
  // (skipped when resuming), not other training state (which stops the run).
  {
    std::string bytes = readFile(good);
    bytes[24] = static_cast<char>(bytes[24] ^ 1);
    const uint32_t crc = crc32(bytes.data(), 44);
    std::memcpy(bytes.data() + 44, &crc, 4);
    writeFile(dir_ + "/key.ckpt", bytes);
    EXPECT_EQ(loadError(dir_ + "/key.ckpt").rfind(dir_ + "/key.ckpt: state key 0x", 0), 0u);
    EXPECT_NE(loadError(dir_ + "/key.ckpt").find(" is not that of its table and settings (0x"), std::string::npos);
    uint64_t tableBytes = 0;
    std::memcpy(&tableBytes, readFile(good).data() + 32, 8);
    const size_t beta1 = (48 + tableBytes + 63) / 64 * 64;  // the first setting's value
    EXPECT_EQ(loadError(corrupted(good, "setting.ckpt", beta1, "\x01")).rfind(dir_ + "/setting.ckpt: state key 0x", 0), 0u);
  }
  EXPECT_EQ(loadError(dir_ + "/none.ckpt").rfind(dir_ + "/none.ckpt: cannot open", 0), 0u);
}

// A header whose checksum holds but whose sizes lie: refused before the
// table it claims is allocated (a 1 TiB table would otherwise be attempted).
TEST_F(CheckpointTest, HeaderSizesAreCheckedAgainstTheFileBeforeAllocating) {
  auto header = [](uint64_t fileBytes, uint64_t tableBytes) {
    std::string h(kCheckpointMagic, 8);
    auto put = [&h](uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) h.push_back(static_cast<char>(v >> (8 * i)));
    };
    put(kCheckpointVersion, 4);
    put(1, 4);  // entries
    put(fileBytes, 8);
    put(kPlanHash, 8);
    put(tableBytes, 8);
    put(0, 4);  // table CRC: never reached
    put(crc32(h.data(), h.size()), 4);
    return h;
  };
  const uint64_t tib = uint64_t(1) << 40;
  // The file is exactly its header: fileBytes - 52 must not wrap around.
  writeFile(dir_ + "/only-header.ckpt", header(48, tib));
  EXPECT_EQ(loadError(dir_ + "/only-header.ckpt"),
            dir_ + "/only-header.ckpt: table of " + std::to_string(tib) + " bytes does not fit");
  writeFile(dir_ + "/big-table.ckpt", header(200, tib) + std::string(152, '\0'));
  EXPECT_EQ(loadError(dir_ + "/big-table.ckpt"),
            dir_ + "/big-table.ckpt: table of " + std::to_string(tib) + " bytes does not fit");
  // A header claiming a 1 TiB file on a 100-byte one.
  writeFile(dir_ + "/big-file.ckpt", header(tib, 16) + std::string(52, '\0'));
  EXPECT_EQ(loadError(dir_ + "/big-file.ckpt"),
            dir_ + "/big-file.ckpt: truncated: 100 of " + std::to_string(tib) + " bytes");
}

TEST_F(CheckpointTest, StateMismatchIsItsOwnKind) {
  const std::string good = goodCheckpoint();
  auto executor = makeExecutor(plan::F32, false, [](plan::Plan& p) { p.mutable_header()->mutable_optimizer()->set_beta2(0.95); });
  try {
    loadCheckpoint(good, *executor, 42);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::StateMismatch);
  }
  try {
    loadCheckpoint(corrupted(good, "magic.ckpt", 0, "X"), *executor, kPlanHash);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::Corrupt);
  }
}

TEST_F(CheckpointTest, ResumeTakesTheNewestValidAndReportsTheOthers) {
  const std::string good = goodCheckpoint();  // dir_/good/step-2.ckpt
  const std::string dir = dir_ + "/good";
  const std::string whole = readFile(good);
  writeFile(dir + "/step-10.ckpt", whole.substr(0, 100));
  writeFile(dir + "/step-7.ckpt", "MEGACKPX" + whole.substr(8));
  writeFile(dir + "/step-1.ckpt", whole);                         // older and valid: not chosen
  writeFile(dir + "/step-x.ckpt", whole);                         // not a checkpoint name
  writeFile(dir + "/step-11.ckpt.tmp.123", whole.substr(0, 10));  // unfinished: ignored
  EXPECT_EQ(listCheckpoints(dir),
            (std::vector<std::string>{dir + "/step-10.ckpt", dir + "/step-7.ckpt", good, dir + "/step-1.ckpt"}));

  auto executor = makeExecutor(plan::F32, false);
  std::vector<std::string> skipped;
  const auto point = resumeNewest(dir, *executor, kPlanHash, [&](const std::string& why, const std::string& fallback) {
    skipped.push_back(why + " -> " + fallback);
  });
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->path, good);
  EXPECT_EQ(point->state.step, 2);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         dir + "/step-10.ckpt: truncated: 100 of " + std::to_string(whole.size()) + " bytes -> " + good,
                         dir + "/step-7.ckpt: bad magic (not a megatrain checkpoint) -> " + good}));

  // Other training state stops the resume rather than falling back to older files;
  // another plan file of the same state does not matter.
  auto other = makeExecutor(plan::F32, false, [](plan::Plan& p) { p.mutable_header()->mutable_optimizer()->set_eps(1e-6); });
  EXPECT_THROW(resumeNewest(dir, *other, kPlanHash, [](const std::string&, const std::string&) {}), CheckpointError);
  EXPECT_EQ(resumeNewest(dir, *executor, 7, [](const std::string&, const std::string&) {})->path, good);
  // Nothing valid at all.
  const std::string bad = dir_ + "/bad";
  std::filesystem::create_directories(bad);
  writeFile(bad + "/step-3.ckpt", "short");
  std::vector<std::string> fallbacks;
  try {
    resumeNewest(bad, *executor, kPlanHash,
                 [&](const std::string&, const std::string& fallback) { fallbacks.push_back(fallback); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": none of its 1 checkpoints is valid");
  }
  EXPECT_EQ(fallbacks, std::vector<std::string>{""});
  // An empty (or missing) directory: nothing to resume.
  EXPECT_FALSE(
      resumeNewest(dir_ + "/empty", *executor, kPlanHash, [](const std::string&, const std::string&) {}).has_value());
}

// A newer checkpoint whose data is damaged is streamed into the tensors before
// its trailer fails; the fallback must overwrite all of it, so the run
// continues exactly as one resumed from the good checkpoint directly.
TEST_F(CheckpointTest, FallingBackPastACorruptNewestIsBitExact) {
  auto original = makeExecutor();
  original->runStep();
  original->runStep();
  CheckpointWriter writer(*original, dir_ + "/run");
  const std::string good = writer.save(state(2, 2));
  original->runStep();
  const std::string newest = writer.save(state(3, 3));
  std::string bytes = readFile(newest);
  // Every tensor byte (after the table and the settings, to the 13 run-state entries).
  uint64_t tableBytes = 0;
  std::memcpy(&tableBytes, bytes.data() + 32, 8);
  // (The 7 settings come first; a flipped setting would fail the state key instead.)
  for (size_t i = (48 + tableBytes + 63) / 64 * 64 + 7 * 64; i < bytes.size() - 4 - 64 * 13; ++i)
    bytes[i] = static_cast<char>(~bytes[i]);
  writeFile(newest, bytes);

  auto direct = makeExecutor(plan::F32, false);
  loadCheckpoint(good, *direct, kPlanHash);
  auto fallen = makeExecutor(plan::F32, false);
  std::vector<std::string> warnings;
  const auto point = resumeNewest(dir_ + "/run", *fallen, kPlanHash, [&](const std::string& why, const std::string& to) {
    warnings.push_back(why + " -> " + to);
  });
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->path, good);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind(newest + ": checksum mismatch (stored 0x", 0), 0u) << warnings[0];
  EXPECT_EQ(warnings[0].substr(warnings[0].size() - good.size() - 4), " -> " + good);
  EXPECT_EQ(fallen->optimizerStep(), 2);
  for (const char* name : {"W", "adam_m:W", "adam_v:W"})
    EXPECT_EQ(fallen->readBytes(name), direct->readBytes(name)) << name;
  for (int i = 0; i < 2; ++i) {
    const double a = direct->runStep(), b = fallen->runStep();
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << i;
  }
  EXPECT_EQ(fallen->readBytes("W"), direct->readBytes("W"));
}

// --keep-checkpoints: all but the `keep` newest of this writer's checkpoints go; the one
// `latest` names stays whatever its step, and nothing the writer would not have written
// is touched: another plan's checkpoint, a symlink, a file that only has the name.
TEST_F(CheckpointTest, RemoveOldCheckpointsKeepsTheNewestAndLatestAndNothingElse) {
  const std::string dir = dir_ + "/prune";
  auto executor = makeExecutor();
  executor->runStep();
  // Other training state's (another beta2) at step 9: not counted among the newest, not removed.
  auto other = makeExecutor(plan::F32, true, [](plan::Plan& p) { p.mutable_header()->mutable_optimizer()->set_beta2(0.95); });
  CheckpointWriter(*other, dir).save(state(9, 1));
  CheckpointWriter writer(*executor, dir);
  for (int64_t step = 1; step <= 5; ++step) writer.save(state(step, 1));
  writeFile(dir + "/step-8.ckpt", "not a checkpoint");
  std::filesystem::create_symlink("step-5.ckpt", dir + "/step-7.ckpt");
  writeFile(dir + "/notes.txt", "x");
  writeFile(dir + "/latest", "step-2.ckpt\n");  // older than the newest two

  const CheckpointWriter::Pruned pruned = writer.removeOldCheckpoints(2);
  EXPECT_EQ(pruned.removed, (std::vector<std::string>{dir + "/step-3.ckpt", dir + "/step-1.ckpt"}));
  EXPECT_TRUE(pruned.failed.empty());
  EXPECT_EQ(listCheckpoints(dir), (std::vector<std::string>{dir + "/step-9.ckpt", dir + "/step-8.ckpt", dir + "/step-7.ckpt",
                                                            dir + "/step-5.ckpt", dir + "/step-4.ckpt", dir + "/step-2.ckpt"}));
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/step-7.ckpt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.txt"));
  EXPECT_EQ(loadError(dir + "/step-5.ckpt"), "");

  // Keeping one: step-4 goes; latest (step-2) still stays.
  EXPECT_EQ(writer.removeOldCheckpoints(1).removed, std::vector<std::string>{dir + "/step-4.ckpt"});
  EXPECT_TRUE(writer.removeOldCheckpoints(1).removed.empty());
  EXPECT_TRUE(std::filesystem::exists(dir + "/step-2.ckpt"));
  EXPECT_THROW(writer.removeOldCheckpoints(0), Error);
}

// The key is the training state, not the plan's bytes: a plan compiled with
// another budget, precision, path, profile or options writes the same header
// and table, and resumes the checkpoint bit-exactly.
TEST_F(CheckpointTest, AnyPlanOfTheSameStateResumesIt) {
  auto original = makeExecutor();
  for (int i = 0; i < 2; ++i) original->runStep();
  const std::string path = CheckpointWriter(*original, dir_ + "/a").save(state(2, 2));
  const auto recompiled = [](plan::Plan& p) {
    plan::Header& h = *p.mutable_header();
    h.set_device_budget_bytes(12345);
    h.set_precision("bf16");
    h.set_source_model("/elsewhere/model.onnx");
    h.set_device_profile("{\"name\": \"another machine\"}");
    h.set_tiering_policy("greedy");
    h.add_compile_options("--device-memory=12345");
    h.mutable_optimizer()->set_lr(0.5);  // the lr is schedule state, not key
  };
  auto resumed = makeExecutor(plan::F32, false, recompiled);
  EXPECT_EQ(stateKeyOf(resumed->plan()).hash(), stateKeyOf(original->plan()).hash());
  loadCheckpoint(path, *resumed, /*planFileHash=*/1);
  for (const char* name : {"W", "adam_m:W", "adam_v:W"})
    EXPECT_EQ(resumed->readBytes(name), original->readBytes(name)) << name;
  // Its checkpoints start with the same header and table.
  const std::string again = CheckpointWriter(*resumed, dir_ + "/b").save(state(2, 2));
  uint64_t tableBytes = 0;
  std::memcpy(&tableBytes, readFile(path).data() + 32, 8);
  EXPECT_EQ(readFile(again).substr(0, 48 + tableBytes), readFile(path).substr(0, 48 + tableBytes));
  EXPECT_EQ(readFile(again), readFile(path));
}

// Each difference of the training state, named with both values.
TEST(CheckpointKey, DifferencesNameWhatDiffers) {
  StateKey saved;
  saved.tensors = {{"adam_m:up", true, plan::F32, {176, 64}},
                   {"model.layers.0.mlp.up_proj.weight", false, plan::F32, {176, 64}},
                   {"norm", false, plan::F32, {64}},
                   {"old", false, plan::F32, {2}}};
  auto setReal = [](StateKey& key, StateSetting s, double v) { std::memcpy(&key.settings[s], &v, 8); };
  setReal(saved, kBeta1, 0.9);
  setReal(saved, kBeta2, 0.95);
  setReal(saved, kEps, 1e-8);
  setReal(saved, kWeightDecay, 0.01);
  saved.settings[kMicrobatches] = 2;
  saved.settings[kTokenBatch] = 4;
  saved.settings[kTokenSequence] = 64;
  StateKey same = saved;
  EXPECT_TRUE(stateKeyDifferences(saved, same).empty());
  EXPECT_EQ(saved.hash(), same.hash());

  StateKey plan = saved;
  plan.tensors[0].optimizerState = false;
  plan.tensors[1].shape = {192, 64};
  plan.tensors[2].dtype = plan::F64;
  plan.tensors[3].name = "new";
  setReal(plan, kBeta1, 0.8);
  setReal(plan, kBeta2, 0.999);
  setReal(plan, kEps, 1e-6);
  setReal(plan, kWeightDecay, 0.1);
  plan.settings[kMicrobatches] = 1;
  plan.settings[kTokenBatch] = 8;
  plan.settings[kTokenSequence] = 128;
  EXPECT_NE(saved.hash(), plan.hash());
  EXPECT_EQ(stateKeyDifferences(saved, plan),
            (std::vector<std::string>{
                "adam_m:up: an optimizer state in the checkpoint, a parameter in the plan",
                "parameter model.layers.0.mlp.up_proj.weight: checkpoint [176, 64], plan [192, 64]",
                "parameter norm: checkpoint f32 [64], plan f64 [64]",
                "parameter old: in the checkpoint, not in the plan",
                "parameter new: in the plan, not in the checkpoint",
                "beta1: checkpoint 0.9, plan 0.8",
                "beta2: checkpoint 0.95, plan 0.999",
                "eps: checkpoint 1e-08, plan 1e-06",
                "weight decay: checkpoint 0.01, plan 0.1",
                "micro-batches: checkpoint 2, plan 1",
                "token batch: checkpoint 4, plan 8",
                "sequence length: checkpoint 64, plan 128",
            }));
  EXPECT_EQ(stateKeyRemedy(saved, plan),
            "To continue from it, compile the model it was trained from, with --beta1 0.9 --beta2 0.95 --eps 1e-08 "
            "--weight-decay 0.01 --microbatches 2 --shape <token input>=4x64 (the device budget, precision and paths "
            "may differ); to start over instead, train from --weights into another --save directory");
  StateKey settingsOnly = saved;
  setReal(settingsOnly, kBeta2, 0.999);
  EXPECT_EQ(stateKeyRemedy(saved, settingsOnly),
            "To continue from it, recompile with --beta2 0.95 (the device budget, precision and paths may differ); "
            "to start over instead, train from --weights into another --save directory");
  EXPECT_EQ(shortestDecimal(0.95), "0.95");
  EXPECT_EQ(shortestDecimal(1e-8), "1e-08");
}

// The whole message of a mismatch as loadCheckpoint gives it: the file, each
// difference, what to do.
TEST_F(CheckpointTest, MismatchMessagesNameEachDifferenceAndTheFix) {
  const std::string good = goodCheckpoint();
  const std::string remedy =
      " (the device budget, precision and paths may differ); to start over instead, train from --weights into "
      "another --save directory";
  EXPECT_EQ(loadError(good, kPlanHash, plan::F32,
                      [](plan::Plan& p) { p.mutable_header()->mutable_optimizer()->set_beta2(0.95); }),
            good + ": its training state differs from this plan's: beta2: checkpoint 0.999, plan 0.95. To continue "
                   "from it, recompile with --beta2 0.999" + remedy);
  EXPECT_EQ(loadError(good, kPlanHash, plan::F32, [](plan::Plan& p) { p.mutable_header()->set_microbatches(3); }),
            good + ": its training state differs from this plan's: micro-batches: checkpoint 1, plan 3. To continue "
                   "from it, recompile with --microbatches 1" + remedy);
  EXPECT_EQ(loadError(good, kPlanHash, plan::F64),
            good + ": its training state differs from this plan's: parameter W: checkpoint f32 [3, 2], plan f64 "
                   "[3, 2]; optimizer state adam_m:W: checkpoint f32 [3, 2], plan f64 [3, 2]; optimizer state "
                   "adam_v:W: checkpoint f32 [3, 2], plan f64 [3, 2]. To continue from it, compile the model it was "
                   "trained from" +
                   remedy);
}

// A version 1 checkpoint, as the writer before the state key wrote it: the
// plan file's hash in the key's place, the tensors in plan order, no settings.
std::string version1Checkpoint(const Executor& executor, uint64_t planHash, int64_t step) {
  struct Item {
    std::string name;
    uint32_t kind;
    plan::DType dtype;
    std::vector<int64_t> shape;
    std::string data;
  };
  std::vector<Item> items;
  for (const plan::Tensor& t : executor.plan().tensors())
    if (t.role() == plan::PARAMETER || t.role() == plan::OPTIMIZER_STATE) {
      const std::vector<std::byte> bytes = executor.readBytes(t.name());
      items.push_back({t.name(), 0, t.dtype(), {t.shape().begin(), t.shape().end()},
                       std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
    }
  const char* fields[13] = {"step",       "optimizer_step", "data.present", "data.seed",       "data.windows",
                            "data.epoch", "data.index",     "data.epoch_rng", "lr.schedule",   "lr.peak",
                            "lr.min",     "lr.warmup_steps", "lr.decay_steps"};
  for (int i = 0; i < 13; ++i) {
    std::string value(8, '\0');
    if (i < 2) std::memcpy(value.data(), &step, 8);
    items.push_back({fields[i], 1, i == 9 || i == 10 ? plan::F64 : plan::I64, {}, value});
  }
  auto put = [](std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  size_t tableBytes = 0;
  for (const Item& item : items) tableBytes += 4 + item.name.size() + 12 + 8 * item.shape.size() + 16;
  std::string table;
  uint64_t offset = (48 + tableBytes + 63) / 64 * 64;
  std::vector<uint64_t> offsets;
  for (const Item& item : items) {
    put(table, item.name.size(), 4);
    table += item.name;
    put(table, item.kind, 4);
    put(table, item.dtype, 4);
    put(table, item.shape.size(), 4);
    for (int64_t d : item.shape) put(table, static_cast<uint64_t>(d), 8);
    put(table, offset, 8);
    put(table, item.data.size(), 8);
    offsets.push_back(offset);
    offset = (offset + item.data.size() + 63) / 64 * 64;
  }
  const uint64_t fileBytes = offsets.back() + items.back().data.size() + 4;
  std::string file(kCheckpointMagic, 8);
  put(file, 1, 4);
  put(file, items.size(), 4);
  put(file, fileBytes, 8);
  put(file, planHash, 8);
  put(file, table.size(), 8);
  put(file, crc32(table.data(), table.size()), 4);
  put(file, crc32(file.data(), file.size()), 4);
  file += table;
  for (size_t i = 0; i < items.size(); ++i) {
    file.resize(offsets[i], '\0');
    file += items[i].data;
  }
  put(file, crc32(file.data(), file.size()), 4);
  return file;
}

TEST_F(CheckpointTest, Version1LoadsUnderItsPlanFileOnly) {
  auto original = makeExecutor();
  original->runStep();
  writeFile(dir_ + "/v1.ckpt", version1Checkpoint(*original, kPlanHash, 1));
  auto resumed = makeExecutor(plan::F32, false);
  EXPECT_EQ(loadCheckpoint(dir_ + "/v1.ckpt", *resumed, kPlanHash).step, 1);
  for (const char* name : {"W", "adam_m:W", "adam_v:W"})
    EXPECT_EQ(resumed->readBytes(name), original->readBytes(name)) << name;
  const double a = original->runStep(), b = resumed->runStep();
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  auto other = makeExecutor(plan::F32, false);
  try {
    loadCheckpoint(dir_ + "/v1.ckpt", *other, 0x1111);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::StateMismatch);
    EXPECT_EQ(std::string(e.what()),
              dir_ + "/v1.ckpt: format version 1, which is keyed by the plan file's bytes (plan hash "
                     "0x1234abcd5678ef90, this plan's is 0x0000000000001111): resume it with the plan file it was "
                     "written for; its next checkpoint is version 2, keyed by the training state, which any "
                     "recompile resumes");
  }
  // --keep-checkpoints leaves version 1 files alone (their header is not the writer's).
  CheckpointWriter writer(*resumed, dir_ + "/keep");
  writeFile(dir_ + "/keep/step-1.ckpt", readFile(dir_ + "/v1.ckpt"));
  writer.save(state(2, 2));
  writer.save(state(3, 3));
  EXPECT_EQ(writer.removeOldCheckpoints(1).removed, std::vector<std::string>{dir_ + "/keep/step-2.ckpt"});
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/keep/step-1.ckpt"));
}

TEST_F(CheckpointTest, UnfinishedTempFilesOfDeadRunsAreRemoved) {
  const std::string dir = dir_ + "/tmp";
  std::filesystem::create_directories(dir);
  const std::string mine = dir + "/step-4.ckpt.tmp." + std::to_string(::getpid());
  const std::string live = dir + "/step-5.ckpt.tmp.1";  // pid 1 is alive: another run's
  writeFile(mine, "x");
  writeFile(live, "x");
  writeFile(dir + "/notes.tmp.99", "x");  // not a checkpoint's
  EXPECT_EQ(removeUnfinishedCheckpoints(dir), std::vector<std::string>{mine});
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.tmp.99"));
}

}  // namespace
}  // namespace megatrain::runtime::testing
