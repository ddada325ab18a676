// Checkpoint.cpp - training state on disk: parameters, AdamW moments, step counts, data position, lr schedule.
//
// Layout (little-endian; docs/runtime.md "Checkpoints"):
//   header  48 bytes: magic "MEGACKPT", u32 version, u32 entry count,
//           u64 file bytes, u64 state key, u64 table bytes,
//           u32 CRC-32 of the table, u32 CRC-32 of header bytes [0, 44)
//   table   per entry: u32 name length, name, u32 kind (0 parameter,
//           1 run state, 2 optimizer state, 3 setting), u32 dtype (plan.proto
//           DType), u32 rank, i64 dims[rank], u64 data offset, u64 data bytes
//   data    each entry's bytes at its offset, 64-byte aligned, zero padding
//   trailer u32 CRC-32 of every byte before it
// The header and table have their own checksums so that a damaged header is
// reported as such before its fields are trusted; the trailer covers all.
//
// The state key (CheckpointKey.h) is the hash of what the tensors and settings
// are, not of the plan's bytes, so any plan of the same training (another
// budget, precision, path or machine) resumes it. The entries are in an order
// that depends on the key alone (settings, tensors by name, run state), so
// every checkpoint with one key has the same header and table: that is what
// --keep-checkpoints matches. Version 1 (until the state key) stored the
// FNV-1a 64 of the plan file's bytes in the key's place, its tensors in plan
// order, and no settings: it is read when that hash is this plan file's.
#include "megatrain/runtime/Checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/DType.h"
#include "megatrain/runtime/CheckpointKey.h"
#include "megatrain/runtime/Checksum.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/Finite.h"

namespace megatrain::runtime {
namespace {

constexpr uint64_t kHeaderBytes = 48;
constexpr uint64_t kAlignment = 64;
constexpr uint64_t kMaxCheckpointBytes = uint64_t(1) << 62;
// Entry kinds. Version 1 had only 0 (any plan tensor) and 1.
constexpr uint32_t kParameter = 0;
constexpr uint32_t kRunState = 1;
constexpr uint32_t kOptimizerState = 2;
constexpr uint32_t kSetting = 3;
constexpr uint32_t kVersionPlanHash = 1;  // the version keyed by the plan file's bytes

// The run-state entries: 8-byte scalars. u64 values (seeds, RNG words) are
// stored as i64 with the same bits.
enum StateField {
  kStep,
  kOptimizerStep,
  kDataPresent,
  kDataSeed,
  kDataWindows,
  kDataEpoch,
  kDataIndex,
  kDataEpochRng,
  kLrSchedule,
  kLrPeak,
  kLrMin,
  kLrWarmupSteps,
  kLrDecaySteps,
  kStateFields
};
struct FieldInfo {
  const char* name;
  plan::DType dtype;
};
constexpr FieldInfo kFields[kStateFields] = {
    {"step", plan::I64},          {"optimizer_step", plan::I64}, {"data.present", plan::I64},
    {"data.seed", plan::I64},     {"data.windows", plan::I64},   {"data.epoch", plan::I64},
    {"data.index", plan::I64},    {"data.epoch_rng", plan::I64}, {"lr.schedule", plan::I64},
    {"lr.peak", plan::F64},       {"lr.min", plan::F64},         {"lr.warmup_steps", plan::I64},
    {"lr.decay_steps", plan::I64}};

struct Entry {
  std::string name;
  uint32_t kind = kParameter;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  int index = -1;  // the plan tensor's id, the StateField or the StateSetting
};

uint64_t alignUp(uint64_t value) { return (value + kAlignment - 1) / kAlignment * kAlignment; }

void putU32(std::vector<unsigned char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void putU64(std::vector<unsigned char>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
uint32_t getU32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint64_t getU64(const unsigned char* p) { return uint64_t(getU32(p)) | uint64_t(getU32(p + 4)) << 32; }

std::string hex(uint64_t value, int digits) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return text;
}

bool saved(const plan::Tensor& tensor) {
  return tensor.role() == plan::PARAMETER || tensor.role() == plan::OPTIMIZER_STATE;
}

// The bytes a stored tensor of this dtype and shape holds; 0 if that
// overflows (dims come from a file: the caller refuses the entry).
uint64_t storedBytes(plan::DType dtype, const std::vector<int64_t>& shape) {
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && bytes > kMaxCheckpointBytes / static_cast<uint64_t>(d))) return 0;
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

// Every entry with its offset, in an order fixed by the key: the settings,
// the stored tensors by name, then the run state.
std::vector<Entry> layoutEntries(const plan::Plan& plan, const StateKey& key, uint64_t& tableBytes,
                                 uint64_t& fileBytes) {
  std::vector<Entry> entries;
  for (int setting = 0; setting < kStateSettings; ++setting) {
    Entry entry;
    entry.name = kStateSettingInfo[setting].entry;
    entry.kind = kSetting;
    entry.dtype = kStateSettingInfo[setting].real ? plan::F64 : plan::I64;
    entry.bytes = 8;
    entry.index = setting;
    entries.push_back(std::move(entry));
  }
  std::map<std::string, int> ids;
  for (const plan::Tensor& tensor : plan.tensors())
    if (saved(tensor)) ids[tensor.name()] = static_cast<int>(tensor.id());
  for (const StateTensorKey& tensor : key.tensors) {
    Entry entry;
    entry.name = tensor.name;
    entry.kind = tensor.optimizerState ? kOptimizerState : kParameter;
    entry.dtype = tensor.dtype;
    entry.shape = tensor.shape;
    entry.bytes = storedBytes(tensor.dtype, tensor.shape);
    entry.index = ids.at(tensor.name);
    entries.push_back(std::move(entry));
  }
  for (int field = 0; field < kStateFields; ++field) {
    Entry entry;
    entry.name = kFields[field].name;
    entry.kind = kRunState;
    entry.dtype = kFields[field].dtype;
    entry.bytes = 8;
    entry.index = field;
    entries.push_back(std::move(entry));
  }
  tableBytes = 0;
  for (const Entry& entry : entries) tableBytes += 4 + entry.name.size() + 12 + 8 * entry.shape.size() + 16;
  uint64_t offset = alignUp(kHeaderBytes + tableBytes);
  for (Entry& entry : entries) {
    entry.offset = offset;
    // Each entry is bounded by its pool (PlanValidator: 2^56 bytes), but
    // tensors may share a pool's bytes: bound the running sum so that it cannot wrap.
    if (entry.bytes > kMaxCheckpointBytes - offset)
      throw Error("a checkpoint of this plan would exceed " + std::to_string(kMaxCheckpointBytes) +
                  " bytes (at tensor '" + entry.name + "')");
    offset = alignUp(offset + entry.bytes);
  }
  const Entry& last = entries.back();
  fileBytes = last.offset + last.bytes + 4;
  return entries;
}

std::string stepFileName(int64_t step) { return "step-" + std::to_string(step) + ".ckpt"; }

// The N of "step-N.ckpt", or -1 for any other name.
int64_t stepOfFileName(const std::string& name) {
  if (name.size() <= 10 || name.compare(0, 5, "step-") != 0 || name.compare(name.size() - 5, 5, ".ckpt") != 0)
    return -1;
  const std::string digits = name.substr(5, name.size() - 10);
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

void encodeState(const TrainingState& state, uint64_t (&words)[kStateFields]) {
  auto bits = [](double v) {
    uint64_t w;
    std::memcpy(&w, &v, 8);
    return w;
  };
  words[kStep] = static_cast<uint64_t>(state.step);
  words[kOptimizerStep] = static_cast<uint64_t>(state.optimizerStep);
  words[kDataPresent] = state.hasData ? 1 : 0;
  words[kDataSeed] = state.data.seed;
  words[kDataWindows] = state.data.windows;
  words[kDataEpoch] = state.data.epoch;
  words[kDataIndex] = state.data.index;
  words[kDataEpochRng] = state.data.epochRng;
  words[kLrSchedule] = static_cast<uint64_t>(state.lr.kind);
  words[kLrPeak] = bits(state.lr.peak);
  words[kLrMin] = bits(state.lr.minLr);
  words[kLrWarmupSteps] = static_cast<uint64_t>(state.lr.warmupSteps);
  words[kLrDecaySteps] = static_cast<uint64_t>(state.lr.decaySteps);
}

TrainingState decodeState(const uint64_t (&words)[kStateFields]) {
  auto real = [](uint64_t w) {
    double v;
    std::memcpy(&v, &w, 8);
    return v;
  };
  TrainingState state;
  state.step = static_cast<int64_t>(words[kStep]);
  state.optimizerStep = static_cast<int64_t>(words[kOptimizerStep]);
  state.hasData = words[kDataPresent] != 0;
  state.data.seed = words[kDataSeed];
  state.data.windows = words[kDataWindows];
  state.data.epoch = words[kDataEpoch];
  state.data.index = words[kDataIndex];
  state.data.epochRng = words[kDataEpochRng];
  state.lr.kind = static_cast<LrScheduleKind>(words[kLrSchedule]);
  state.lr.peak = real(words[kLrPeak]);
  state.lr.minLr = real(words[kLrMin]);
  state.lr.warmupSteps = static_cast<int64_t>(words[kLrWarmupSteps]);
  state.lr.decaySteps = static_cast<int64_t>(words[kLrDecaySteps]);
  return state;
}

std::string systemError() { return std::strerror(errno); }

}  // namespace

uint64_t checkpointBytes(const plan::Plan& plan) {
  uint64_t tableBytes = 0, fileBytes = 0;
  layoutEntries(plan, stateKeyOf(plan), tableBytes, fileBytes);
  return fileBytes;
}

struct CheckpointWriter::Layout {
  StateKey key;
  std::vector<Entry> entries;
  std::vector<unsigned char> prefix;  // header and table: the same in every checkpoint of the plan
  uint64_t words[kStateFields] = {};  // the run state being written
};

CheckpointWriter::CheckpointWriter(Executor& executor, std::string dir)
    : executor_(executor), dir_(std::move(dir)), layout_(std::make_unique<Layout>()) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) throw Error(dir_ + ": cannot create the checkpoint directory (" + error.message() + ")");

  uint64_t tableBytes = 0;
  layout_->key = stateKeyOf(executor_.plan());
  layout_->entries = layoutEntries(executor_.plan(), layout_->key, tableBytes, fileBytes_);
  std::vector<unsigned char> table;
  for (const Entry& entry : layout_->entries) {
    putU32(table, static_cast<uint32_t>(entry.name.size()));
    table.insert(table.end(), entry.name.begin(), entry.name.end());
    putU32(table, entry.kind);
    putU32(table, static_cast<uint32_t>(entry.dtype));
    putU32(table, static_cast<uint32_t>(entry.shape.size()));
    for (int64_t d : entry.shape) putU64(table, static_cast<uint64_t>(d));
    putU64(table, entry.offset);
    putU64(table, entry.bytes);
  }
  std::vector<unsigned char>& prefix = layout_->prefix;
  prefix.insert(prefix.end(), kCheckpointMagic, kCheckpointMagic + 8);
  putU32(prefix, kCheckpointVersion);
  putU32(prefix, static_cast<uint32_t>(layout_->entries.size()));
  putU64(prefix, fileBytes_);
  putU64(prefix, layout_->key.hash());
  putU64(prefix, tableBytes);
  putU32(prefix, crc32(table.data(), table.size()));
  putU32(prefix, crc32(prefix.data(), prefix.size()));
  prefix.insert(prefix.end(), table.begin(), table.end());
}

CheckpointWriter::~CheckpointWriter() = default;

std::string CheckpointWriter::save(const TrainingState& state) {
  static const unsigned char kZeros[kAlignment] = {};
  const std::string path = dir_ + "/" + stepFileName(state.step);
  encodeState(state, layout_->words);

  AtomicFile file(path);
  uint32_t crc = 0;
  uint64_t written = 0;
  auto emit = [&](const void* bytes, uint64_t size) {
    crc = crc32(bytes, size, crc);
    const auto* p = static_cast<const unsigned char*>(bytes);
    if (killAfter_ > written && killAfter_ <= written + size) {
      // The test hook: leave a half-written temp file, as a crash would.
      file.write(p, killAfter_ - written);
      ::kill(::getpid(), SIGKILL);
    }
    file.write(p, size);
    written += size;
  };
  auto padTo = [&](uint64_t offset) {
    while (written < offset) emit(kZeros, std::min<uint64_t>(offset - written, kAlignment));
  };

  emit(layout_->prefix.data(), layout_->prefix.size());
  for (const Entry& entry : layout_->entries) {
    padTo(entry.offset);
    if (entry.kind == kRunState) {
      emit(&layout_->words[entry.index], 8);
    } else if (entry.kind == kSetting) {
      emit(&layout_->key.settings[entry.index], 8);
    } else {
      const plan::Tensor& tensor = executor_.plan().tensors(entry.index);
      const std::byte* data = executor_.backend().hostData(tensor);
      // Never save a poisoned state over a good one: the temp file is removed
      // and `latest` keeps naming the last good checkpoint. The weights
      // suffice: an AdamW update that reads a NaN gradient or moment writes a
      // NaN weight in the same step.
      if (tensor.role() == plan::PARAMETER) {
        const int64_t bad = firstNonFinite(data, static_cast<size_t>(elementCount(tensor.shape())), tensor.dtype());
        if (bad >= 0)
          throw Error(path + ": not written: parameter '" + tensor.name() + "' is " +
                      nonFiniteValueName(data, bad, tensor.dtype()) + " at flat index " + std::to_string(bad));
      }
      emit(data, entry.bytes);
    }
  }
  const unsigned char trailer[4] = {static_cast<unsigned char>(crc), static_cast<unsigned char>(crc >> 8),
                                    static_cast<unsigned char>(crc >> 16), static_cast<unsigned char>(crc >> 24)};
  emit(trailer, 4);
  file.commit();
  writeFileAtomically(dir_ + "/latest", stepFileName(state.step) + "\n");
  return path;
}

CheckpointWriter::Pruned CheckpointWriter::removeOldCheckpoints(int64_t keep) const {
  if (keep < 1) throw Error("removeOldCheckpoints: keep must be at least 1, got " + std::to_string(keep));
  // Whether `path` is a regular file that starts with this writer's header.
  auto ours = [&](const std::string& path) {
    struct stat info;
    if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return false;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    unsigned char header[kHeaderBytes];
    uint64_t got = 0;
    while (got < kHeaderBytes) {
      const ssize_t n = ::read(fd, header + got, kHeaderBytes - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<uint64_t>(n);
    }
    ::close(fd);
    return got == kHeaderBytes && std::memcmp(header, layout_->prefix.data(), kHeaderBytes) == 0;
  };
  std::string latest;
  {
    std::ifstream in(dir_ + "/latest");
    std::getline(in, latest);
  }
  Pruned pruned;
  int64_t kept = 0;
  for (const std::string& path : listCheckpoints(dir_)) {  // newest first
    if (!ours(path)) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (path == dir_ + "/" + latest) continue;
    if (::unlink(path.c_str()) == 0)
      pruned.removed.push_back(path);
    else
      pruned.failed.push_back(path + ": " + systemError());
  }
  return pruned;
}

namespace {

// Reads a checkpoint front to back, keeping the running CRC of what it read.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open (" + systemError() + ")");
    struct stat info;
    if (::fstat(fd_, &info) != 0) fail("cannot stat (" + systemError() + ")");
    size_ = static_cast<uint64_t>(info.st_size);
  }
  ~CheckpointReader() {
    if (fd_ >= 0) ::close(fd_);
  }

  uint64_t size() const { return size_; }
  uint64_t position() const { return position_; }
  uint32_t crc() const { return crc_; }

  void read(void* out, uint64_t bytes) {
    auto* p = static_cast<unsigned char*>(out);
    uint64_t left = bytes;
    while (left > 0) {
      const ssize_t got = ::read(fd_, p, std::min<uint64_t>(left, 1u << 30));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail("read failed (" + systemError() + ")");
      if (got == 0) fail("truncated: ends at byte " + std::to_string(position_ + (bytes - left)));
      p += got;
      left -= static_cast<uint64_t>(got);
    }
    crc_ = crc32(out, bytes, crc_);
    position_ += bytes;
  }

  void skipTo(uint64_t offset) {
    unsigned char scratch[4096];
    while (position_ < offset) read(scratch, std::min<uint64_t>(offset - position_, sizeof scratch));
  }

  [[noreturn]] void fail(const std::string& why, CheckpointError::Kind kind = CheckpointError::Kind::Corrupt) const {
    throw CheckpointError(kind, path_ + ": " + why);
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace

TrainingState loadCheckpoint(const std::string& path, Executor& executor, uint64_t planFileHash) {
  CheckpointReader in(path);
  if (in.size() < kHeaderBytes)
    in.fail("truncated: " + std::to_string(in.size()) + " bytes, less than the " + std::to_string(kHeaderBytes) +
            "-byte header");
  unsigned char header[kHeaderBytes];
  in.read(header, kHeaderBytes);
  if (std::memcmp(header, kCheckpointMagic, 8) != 0) in.fail("bad magic (not a megatrain checkpoint)");
  const uint32_t version = getU32(header + 8);
  if (version != kCheckpointVersion && version != kVersionPlanHash)
    in.fail("format version " + std::to_string(version) + ", this build reads versions " +
            std::to_string(kVersionPlanHash) + " and " + std::to_string(kCheckpointVersion));
  const bool keyedByPlan = version == kVersionPlanHash;
  const uint32_t headerCrc = crc32(header, 44);
  if (getU32(header + 44) != headerCrc)
    in.fail("header checksum mismatch (stored " + hex(getU32(header + 44), 8) + ", computed " + hex(headerCrc, 8) +
            ")");
  const uint32_t entryCount = getU32(header + 12);
  const uint64_t fileBytes = getU64(header + 16);
  const uint64_t savedKey = getU64(header + 24);
  const uint64_t tableBytes = getU64(header + 32);
  if (in.size() < fileBytes)
    in.fail("truncated: " + std::to_string(in.size()) + " of " + std::to_string(fileBytes) + " bytes");
  if (in.size() > fileBytes)
    in.fail(std::to_string(in.size()) + " bytes, the header says " + std::to_string(fileBytes));
  // Sizes from the header are checked against the file before anything is
  // allocated for them (a 48-byte file must not make fileBytes - 52 wrap).
  if (fileBytes < kHeaderBytes + 4 || tableBytes > fileBytes - kHeaderBytes - 4)
    in.fail("table of " + std::to_string(tableBytes) + " bytes does not fit");

  std::vector<unsigned char> table(tableBytes);
  in.read(table.data(), tableBytes);
  const uint32_t tableCrc = crc32(table.data(), table.size());
  if (getU32(header + 40) != tableCrc)
    in.fail("table checksum mismatch (stored " + hex(getU32(header + 40), 8) + ", computed " + hex(tableCrc, 8) + ")");
  if (keyedByPlan && savedKey != planFileHash)
    in.fail("format version 1, which is keyed by the plan file's bytes (plan hash " + hex(savedKey, 16) +
                ", this plan's is " + hex(planFileHash, 16) +
                "): resume it with the plan file it was written for; its next checkpoint is version " +
                std::to_string(kCheckpointVersion) + ", keyed by the training state, which any recompile resumes",
            CheckpointError::Kind::StateMismatch);

  // The table's structure: entries within the data area in ascending order,
  // known kinds, each name once; in version 2 the settings first.
  std::vector<Entry> entries;
  std::map<std::string, int> seenNames;
  size_t at = 0;
  auto take = [&](size_t bytes) -> const unsigned char* {
    if (table.size() - at < bytes) in.fail("table entry " + std::to_string(entries.size()) + " runs past the table");
    const unsigned char* p = table.data() + at;
    at += bytes;
    return p;
  };
  uint64_t end = kHeaderBytes + tableBytes;
  bool pastSettings = false;
  for (uint32_t i = 0; i < entryCount; ++i) {
    Entry entry;
    const uint32_t nameBytes = getU32(take(4));
    const unsigned char* name = take(nameBytes);
    entry.name.assign(reinterpret_cast<const char*>(name), nameBytes);
    entry.kind = getU32(take(4));
    entry.dtype = static_cast<plan::DType>(getU32(take(4)));
    const uint32_t rank = getU32(take(4));
    if (rank > 64) in.fail("entry '" + entry.name + "' has rank " + std::to_string(rank));
    for (uint32_t d = 0; d < rank; ++d) entry.shape.push_back(static_cast<int64_t>(getU64(take(8))));
    entry.offset = getU64(take(8));
    entry.bytes = getU64(take(8));
    if (entry.offset < end || entry.offset > fileBytes - 4 || entry.bytes > fileBytes - 4 - entry.offset)
      in.fail("entry '" + entry.name + "' lies outside the data area");
    end = entry.offset + entry.bytes;
    if (!seenNames.emplace(entry.name, static_cast<int>(entries.size())).second)
      in.fail("entry '" + entry.name + "' appears twice");
    if (entry.kind == kRunState) {
      for (int field = 0; field < kStateFields; ++field)
        if (entry.name == kFields[field].name) entry.index = field;
      if (entry.index < 0 || entry.bytes != 8) in.fail("unknown state entry '" + entry.name + "'");
    } else if (entry.kind == kSetting && !keyedByPlan) {
      if (pastSettings) in.fail("setting '" + entry.name + "' after the tensors");
      for (int setting = 0; setting < kStateSettings; ++setting)
        if (entry.name == kStateSettingInfo[setting].entry) entry.index = setting;
      if (entry.index < 0 || entry.bytes != 8) in.fail("unknown setting '" + entry.name + "'");
    } else if (entry.kind == kParameter || (entry.kind == kOptimizerState && !keyedByPlan)) {
      if (!isFloating(entry.dtype) || entry.bytes != storedBytes(entry.dtype, entry.shape))
        in.fail("tensor '" + entry.name + "' holds " + std::to_string(entry.bytes) + " bytes, not a " +
                (isFloating(entry.dtype) ? dtypeName(entry.dtype) : "floating") + " tensor of its shape");
    } else {
      in.fail("entry '" + entry.name + "' has unknown kind " + std::to_string(entry.kind));
    }
    if (entry.kind != kSetting) pastSettings = true;
    entries.push_back(std::move(entry));
  }
  if (at != table.size()) in.fail("table holds " + std::to_string(table.size() - at) + " bytes past its entries");

  // Version 2: the state key, from the table and the settings (which come
  // first in the data), must be the header's (else the file is damaged), then
  // equal this plan's: a difference is named item by item.
  const plan::Plan& plan = executor.plan();
  if (!keyedByPlan) {
    StateKey saved;
    bool seenSetting[kStateSettings] = {};
    for (const Entry& entry : entries) {
      if (entry.kind == kSetting) {
        in.skipTo(entry.offset);
        in.read(&saved.settings[entry.index], 8);
        seenSetting[entry.index] = true;
      } else if (entry.kind != kRunState) {
        saved.tensors.push_back(StateTensorKey{entry.name, entry.kind == kOptimizerState, entry.dtype, entry.shape});
      }
    }
    for (int setting = 0; setting < kStateSettings; ++setting)
      if (!seenSetting[setting])
        in.fail("holds no setting '" + std::string(kStateSettingInfo[setting].entry) + "'");
    std::sort(saved.tensors.begin(), saved.tensors.end(),
              [](const StateTensorKey& a, const StateTensorKey& b) { return a.name < b.name; });
    if (saved.hash() != savedKey)
      in.fail("state key " + hex(savedKey, 16) + " is not that of its table and settings (" + hex(saved.hash(), 16) +
              ")");
    const StateKey wanted = stateKeyOf(plan);
    const std::vector<std::string> differences = stateKeyDifferences(saved, wanted);
    if (!differences.empty()) {
      constexpr size_t kListed = 6;
      std::string list;
      for (size_t i = 0; i < differences.size() && i < kListed; ++i) list += (i ? "; " : "") + differences[i];
      if (differences.size() > kListed) list += "; and " + std::to_string(differences.size() - kListed) + " more";
      in.fail("its training state differs from this plan's: " + list + ". " + stateKeyRemedy(saved, wanted),
              CheckpointError::Kind::StateMismatch);
    }
  }

  // The tensors against the plan (a version 1 table has only names to go
  // by): every saved tensor once, with its dtype, shape and size.
  std::vector<char> seenTensor(static_cast<size_t>(plan.tensors_size()), 0);
  bool seenField[kStateFields] = {};
  for (Entry& entry : entries) {
    if (entry.kind == kRunState) {
      seenField[entry.index] = 1;
      continue;
    }
    if (entry.kind == kSetting) continue;
    if (!executor.hasTensor(entry.name)) in.fail("holds tensor '" + entry.name + "', which the plan lacks");
    const plan::Tensor& tensor = executor.tensor(entry.name);
    const std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    if (!saved(tensor) || entry.dtype != tensor.dtype() || entry.shape != shape ||
        entry.bytes > tensor.buffer().size_bytes())
      in.fail("tensor '" + entry.name + "' does not match the plan's (" + dtypeName(tensor.dtype()) + " " +
              formatShape(tensor.shape()) + ")");
    seenTensor[tensor.id()] = 1;
    entry.index = static_cast<int>(tensor.id());
  }
  for (const plan::Tensor& tensor : plan.tensors())
    if (saved(tensor) && !seenTensor[tensor.id()]) in.fail("holds no tensor '" + tensor.name() + "'");
  for (int field = 0; field < kStateFields; ++field)
    if (!seenField[field]) in.fail("holds no state entry '" + std::string(kFields[field].name) + "'");

  // The data, straight into the host tensors.
  uint64_t words[kStateFields] = {};
  for (const Entry& entry : entries) {
    if (entry.kind == kSetting) continue;  // read above
    in.skipTo(entry.offset);
    if (entry.kind == kRunState)
      in.read(&words[entry.index], 8);
    else
      in.read(executor.backend().hostData(plan.tensors(entry.index)), entry.bytes);
  }
  in.skipTo(fileBytes - 4);
  const uint32_t computed = in.crc();
  unsigned char trailer[4];
  in.read(trailer, 4);
  if (getU32(trailer) != computed)
    in.fail("checksum mismatch (stored " + hex(getU32(trailer), 8) + ", computed " + hex(computed, 8) + ")");

  TrainingState state = decodeState(words);
  if (state.step < 0 || state.optimizerStep < 0) in.fail("negative step counts");
  executor.restoreOptimizerStep(state.optimizerStep);
  return state;
}

std::vector<std::string> listCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = item.path().filename().string();
    const int64_t step = stepOfFileName(name);
    if (step >= 0) found.emplace_back(step, dir + "/" + name);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> paths;
  for (auto& item : found) paths.push_back(std::move(item.second));
  return paths;
}

std::optional<ResumePoint> resumeNewest(const std::string& dir, Executor& executor, uint64_t planFileHash,
                                        const std::function<void(const std::string&, const std::string&)>& skipped) {
  const std::vector<std::string> paths = listCheckpoints(dir);
  if (paths.empty()) return std::nullopt;
  // The reasons are reported once the fallback is known, so each warning names both files.
  std::vector<std::string> unusable;
  for (const std::string& path : paths) {
    try {
      ResumePoint point{path, loadCheckpoint(path, executor, planFileHash)};
      for (const std::string& why : unusable) skipped(why, path);
      return point;
    } catch (const CheckpointError& e) {
      if (e.kind() == CheckpointError::Kind::StateMismatch) throw;
      unusable.push_back(e.what());
    }
  }
  for (const std::string& why : unusable) skipped(why, "");
  throw Error(dir + ": none of its " + std::to_string(paths.size()) + " checkpoints is valid");
}

std::vector<std::string> removeUnfinishedCheckpoints(const std::string& dir) {
  // AtomicFile's temp files are "<name>.tmp.<pid>"; leave those of a live
  // process other than this one (another run writing into the same dir).
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = item.path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    if (tmp == std::string::npos) continue;
    const std::string base = name.substr(0, tmp), pid = name.substr(tmp + 5);
    if ((stepOfFileName(base) < 0 && base != "latest") || pid.empty() ||
        pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
      continue;
    const pid_t owner = static_cast<pid_t>(std::stol(pid));
    // kill(pid, 0) probes: success or EPERM means the process exists.
    if (owner != ::getpid() && (::kill(owner, 0) == 0 || errno == EPERM)) continue;
    if (std::filesystem::remove(item.path(), error)) removed.push_back(item.path().string());
  }
  return removed;
}

}  // namespace megatrain::runtime
