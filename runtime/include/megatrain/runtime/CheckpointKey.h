// CheckpointKey.h - what a checkpoint's training state is (tensor names, shapes, dtypes, optimizer and batch settings), to check a resume against any plan of the same training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// One stored tensor: an fp32 master (PARAMETER) or an AdamW moment (OPTIMIZER_STATE).
struct StateTensorKey {
  std::string name;
  bool optimizerState = false;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
};
inline bool operator==(const StateTensorKey& a, const StateTensorKey& b) {
  return a.name == b.name && a.optimizerState == b.optimizerState && a.dtype == b.dtype && a.shape == b.shape;
}
inline bool operator!=(const StateTensorKey& a, const StateTensorKey& b) { return !(a == b); }

// The settings a checkpoint is only valid under: AdamW's constants (not the lr,
// which is schedule state: a resumed run may change it), and what one step
// consumes (micro-batches, and the token input's [batch, sequence] per micro-batch,
// 0 x 0 without one), on which the data position depends.
enum StateSetting {
  kBeta1,
  kBeta2,
  kEps,
  kWeightDecay,
  kMicrobatches,
  kTokenBatch,
  kTokenSequence,
  kStateSettings
};
struct StateSettingInfo {
  const char* entry;  // its name in a checkpoint's table
  const char* label;  // its name in a message
  const char* flag;   // the megatrain-compile flag that sets it
  bool real;          // f64 (else i64)
};
extern const StateSettingInfo kStateSettingInfo[kStateSettings];

// Everything a checkpoint's tensors and data position mean, independent of
// where the plan keeps them, the compute precision, the device budget, the
// plan's path or machine. Two plans with equal keys resume each other's
// checkpoints bit-exactly.
struct StateKey {
  std::vector<StateTensorKey> tensors;  // sorted by name
  uint64_t settings[kStateSettings] = {};  // f64 values as their bits

  // FNV-1a 64 of a canonical text of the key: stored in a checkpoint's header.
  uint64_t hash() const;
  double real(StateSetting s) const;
};

StateKey stateKeyOf(const plan::Plan& plan);

// What differs, one item each, the checkpoint's value first:
// "parameter W: checkpoint [3, 2], plan [4, 2]", "beta2: checkpoint 0.95, plan 0.999",
// "optimizer state adam_m:W: in the checkpoint, not in the plan".
std::vector<std::string> stateKeyDifferences(const StateKey& checkpoint, const StateKey& plan);

// What to do about those differences: the compile flags that give the
// checkpoint's settings, and whether the model itself differs.
std::string stateKeyRemedy(const StateKey& checkpoint, const StateKey& plan);

// The shortest decimal text that reads back as `value` ("0.95", not "0.94999999999999996").
std::string shortestDecimal(double value);

}  // namespace megatrain::runtime
