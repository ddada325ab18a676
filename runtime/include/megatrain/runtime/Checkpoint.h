// Checkpoint.h - training state on disk: parameters, AdamW moments, step counts, data position, lr schedule.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/LrSchedule.h"
#include "megatrain/runtime/TokenSampler.h"

namespace megatrain::runtime {

class Executor;

inline constexpr char kCheckpointMagic[8] = {'M', 'E', 'G', 'A', 'C', 'K', 'P', 'T'};
// Version 2: keyed by the training state (CheckpointKey.h). Version 1, keyed
// by the plan file's bytes, is still read (docs/runtime.md "Checkpoints").
inline constexpr uint32_t kCheckpointVersion = 2;

// Everything beyond the tensors that a run needs to continue bit-exactly.
struct TrainingState {
  int64_t step = 0;           // training steps completed
  int64_t optimizerStep = 0;  // AdamW's t after them
  bool hasData = false;       // whether the run sampled --data
  SamplerState data;
  LrSchedule lr;
};

// Why a checkpoint cannot be used: Corrupt ones are skipped when resuming
// (an older one may be good); a StateMismatch (another model, other optimizer
// or batch settings; a version 1 checkpoint of another plan file) stops the run.
class CheckpointError : public Error {
 public:
  enum class Kind { Corrupt, StateMismatch };
  CheckpointError(Kind kind, const std::string& message) : Error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// Bytes of every checkpoint of `plan` (they all have the same layout).
uint64_t checkpointBytes(const plan::Plan& plan);

// Writes checkpoints of one executor's state into `dir` (created if missing).
// The layout (header and table, docs/runtime.md "Checkpoints") is fixed at
// construction; save() streams the tensors straight from host memory and
// allocates nothing but the file names.
class CheckpointWriter {
 public:
  CheckpointWriter(Executor& executor, std::string dir);
  ~CheckpointWriter();

  const std::string& dir() const { return dir_; }
  uint64_t fileBytes() const { return fileBytes_; }

  // Writes `dir/step-<state.step>.ckpt` atomically (a temp file in dir,
  // fsync, rename, fsync of dir), then points `dir/latest` at it the same
  // way. Returns the checkpoint's path.
  std::string save(const TrainingState& state);

  // Removes the checkpoints in dir() beyond the `keep` newest (keep >= 1;
  // newest: the largest N of `step-N.ckpt`, as resumeNewest orders them).
  // Only the checkpoints this writer would write are counted or removed:
  // regular files named `step-N.ckpt` whose 48-byte header is this writer's
  // (the magic, version, layout and state key: any plan of the same training
  // state writes the same header). Any other file, a symlink, a checkpoint of
  // other training state or of version 1, or one whose header cannot be
  // read is left alone, and so is the checkpoint `dir()/latest` names,
  // whatever its step.
  struct Pruned {
    std::vector<std::string> removed;  // the paths removed
    std::vector<std::string> failed;   // "<path>: <reason>" for each that could not be
  };
  Pruned removeOldCheckpoints(int64_t keep) const;

  // Test hook: the process SIGKILLs itself once `bytes` bytes of the next
  // checkpoint's temp file are written (0: never).
  void killAfterBytes(uint64_t bytes) { killAfter_ = bytes; }

 private:
  struct Layout;
  Executor& executor_;
  std::string dir_;
  std::unique_ptr<Layout> layout_;
  uint64_t fileBytes_ = 0;
  uint64_t killAfter_ = 0;
};

// Checks `path` and loads it into the executor's PARAMETER and
// OPTIMIZER_STATE tensors and its optimizer step. CheckpointError, one line
// naming the file: bad magic, another version, a header or table checksum
// mismatch, truncated, a state key that is not its table's, training state
// that differs from the plan's (each difference named, and what to do), a
// table that does not fit the plan, a data checksum mismatch. Tensors may be
// partly overwritten on an error. `planFileHash` (fnv1a64 of the plan file's
// bytes) is only used for version 1 checkpoints, which were keyed by it.
TrainingState loadCheckpoint(const std::string& path, Executor& executor, uint64_t planFileHash);

// The `step-<N>.ckpt` files in `dir`, newest (largest N) first.
std::vector<std::string> listCheckpoints(const std::string& dir);

// Loads the newest checkpoint in `dir` that is valid, calling `skipped` for
// each newer one that is not (corrupt or truncated: `why` names the file and
// the reason) with the path it fell back to ("" when none is valid), so a
// warning can name both. nullopt if dir holds no checkpoint; Error if none
// of them is valid or one holds other training state (StateMismatch).
struct ResumePoint {
  std::string path;
  TrainingState state;
};
std::optional<ResumePoint> resumeNewest(const std::string& dir, Executor& executor, uint64_t planFileHash,
                                        const std::function<void(const std::string& why, const std::string& fallback)>& skipped);

// Removes the temp files of checkpoints that a killed run left unfinished in
// `dir`; returns their paths.
std::vector<std::string> removeUnfinishedCheckpoints(const std::string& dir);

}  // namespace megatrain::runtime
