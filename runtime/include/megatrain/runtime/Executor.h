// Executor.h - runs a plan's steps, one training step per call, over a backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/Backend.h"
#include "megatrain/runtime/HostArray.h"

namespace megatrain::runtime {

class WeightSource;

// What one training step may change at run time.
struct StepOptions {
  // AdamW's lr for this step (a schedule's value); the plan's when unset.
  std::optional<double> lr;
  // Clip the gradients to this global L2 norm, as torch.nn.utils.clip_grad_norm_:
  // norm = sqrt(sum of g^2 over every trainable gradient), computed in double;
  // coef = max_norm / (norm + 1e-6); if coef < 1 every gradient is scaled by it
  // (in place, rounded to its dtype) before any AdamW update. Unset: no clipping.
  std::optional<double> clipGradNorm;
  // Time every step of this training step on the device (Backend::beginStepTrace);
  // the spans come back in StepResult::trace.
  bool trace = false;
  // With trace: this training step is number traceIndex (from 0) of a window of
  // traceSteps consecutive traced steps timed on one clock. The window's first
  // step starts on an idle device; the later ones start as untraced steps do,
  // beside the previous step's host updates, so the trace shows them across
  // the steps' boundaries. The spans of the whole window come back in the last
  // step's StepResult::trace. The executor refuses a window's steps out of order.
  uint32_t traceSteps = 1;
  uint32_t traceIndex = 0;
};

struct StepResult {
  double loss = 0;
  double lr = 0;        // the AdamW lr the step used
  double gradNorm = 0;  // the global gradient norm before clipping; NaN without clipping
  // After a traced window's last step: traceSteps x (plan steps) measured
  // spans, the window's step w, plan step s at w * plan steps + s
  // (Backend::endStepTrace); empty for the window's other steps.
  std::vector<StepSpan> trace;
};

// Owns the plan and the backend. Construction validates the plan, allocates
// every pool once and writes the CONSTANT tensors; runStep then executes the
// steps in order and allocates nothing. Not thread-safe.
//
// Tensor names follow the compiler's convention (docs/plan.md): a PARAMETER is
// named after its initializer, its gradient `grad:<name>`, its moments
// `adam_m:<name>` / `adam_v:<name>`, its device copy `dev:<name>`.
class Executor {
 public:
  Executor(plan::Plan plan, std::unique_ptr<Backend> backend);
  ~Executor();

  const plan::Plan& plan() const { return plan_; }
  Backend& backend() { return *backend_; }

  // Fills every PARAMETER from `weights` (by the tensor's `source` name),
  // zeroes every OPTIMIZER_STATE and restarts the optimizer step count.
  // `progress`, when given, is called after each parameter with the bytes
  // of parameters filled so far and in all.
  using LoadProgress = std::function<void(uint64_t doneBytes, uint64_t totalBytes)>;
  void loadWeights(const WeightSource& weights, const LoadProgress& progress = {});

  // Stages the value an INPUT tensor gets at the start of every following
  // runStep, until set again. `name` is the graph input (the tensor's source)
  // or the tensor name. Integer inputs take int32/int64 arrays, floating
  // inputs float32/float64; the shape must match.
  void setInput(const std::string& name, const HostArray& array);

  // Runs one training step: writes the staged inputs, executes every step,
  // poisons each DEVICE tensor after its last_use_step (when the backend
  // poisons, Backend::poisonsDeadTensors), and returns the loss
  // the READ_LOSS task read. Errors name the step.
  double runStep();

  // The same, with a per-step lr and gradient clipping. With clipping, every
  // ADAMW host task of the step waits until the plan's last one is reached
  // (every gradient has arrived by then), then the norm is taken, the
  // gradients scaled and the updates run in plan order: the host optimizer
  // then no longer overlaps the rest of backward (docs/runtime.md).
  StepResult runStep(const StepOptions& options);

  // Optimizer steps taken since loadWeights (AdamW's t after the last step).
  int64_t optimizerStep() const { return step_; }

  // For evaluating with the weights being trained: fills every PARAMETER of
  // this plan (an evaluation plan, megatrain-compile --forward-only) from the
  // PARAMETER of the same name in `source`'s plan, which must have the same
  // shape and dtype (Error naming the first that does not), refreshes the
  // compute copies and counts the weights as loaded. Reads `source` only
  // (Backend::read), after its last step has finished.
  void loadParametersFrom(const Executor& source);

  // For resuming: the PARAMETER and OPTIMIZER_STATE tensors were written
  // from a checkpoint (instead of loadWeights) after `t` optimizer steps.
  // Also refills the compute copies from the restored masters.
  void restoreOptimizerStep(int64_t t);

  // Rewrites every PARAMETER_COMPUTE tensor (the bf16 copy of an f32
  // PARAMETER, --precision bf16) from its master with floatToBf16.
  // loadWeights, restoreOptimizerStep and a write to a PARAMETER call it.
  void refreshComputeCopies();

  const plan::Tensor& tensor(const std::string& name) const;
  bool hasTensor(const std::string& name) const { return byName_.count(name) != 0; }

  // A tensor's elements converted to or from double (floating and integer dtypes).
  std::vector<double> readTensor(const std::string& name) const;
  void writeTensor(const std::string& name, const std::vector<double>& values);

  // A tensor's raw bytes.
  std::vector<std::byte> readBytes(const std::string& name) const;
  void writeBytes(const std::string& name, const void* bytes, size_t size);

 private:
  struct StagedInput {
    uint32_t tensor = 0;
    std::vector<std::byte> bytes;  // the tensor's bytes, written each step
    bool set = false;
  };

  StagedInput& findInput(const std::string& name);
  void runOneStep(const plan::Step& step, double& loss);
  // Issues every plan step of one training step (with its poisoning and clipping).
  void issueSteps(const StepOptions& options, StepResult& result);
  // The deferred half of a clipped step: norm, scale, then every AdamW update.
  double clipAndUpdate(double maxNorm);
  // Sets clippingConflict_ if deferring AdamW to the last one would change what a step reads.
  void checkClippingIsSafe();
  // Host tasks across steps (docs/runtime.md): when the backend overlaps them,
  // which plan step waits for which host task of the previous step.
  void planHostOverlap();

  plan::Plan plan_;
  std::unique_ptr<Backend> backend_;
  std::unordered_map<std::string, uint32_t> byName_;
  std::vector<StagedInput> inputs_;
  // poisonAfter_[poisonStart_[s] .. poisonStart_[s + 1]) are the tensors that die at step s.
  std::vector<uint32_t> poisonAfter_;
  std::vector<size_t> poisonStart_;
  std::vector<uint32_t> adamwSteps_;  // the ADAMW host tasks, in plan order
  // The test hook MEGATRAIN_TEST_KILL_IN_STEP=N: training step N SIGKILLs the
  // process right after its first copy into a DISK tensor (state half
  // written back), or half-way through its steps; 0: off.
  int64_t killInStep_ = 0;
  uint32_t killAfter_ = 0;
  plan::AdamW hyper_;                 // the plan's AdamW with this step's lr
  std::string clippingConflict_;      // why clipping would change the math; empty if it would not
  int64_t step_ = 0;
  int64_t issuedSteps_ = 0;  // training steps issued call by call (not replayed)
  bool weightsLoaded_ = false;
  // (master PARAMETER, its PARAMETER_COMPUTE copy), by tensor id.
  std::vector<std::pair<uint32_t, uint32_t>> computeCopies_;
  // Host tasks across steps: whether steps end before the host stream's
  // tasks after the loss (overlapHost_), whether the last step did
  // (hostPending_), its READ_LOSS step, per plan step the host task of the
  // previous step it waits for (-1: none), and which host tasks are marked.
  bool overlapHost_ = false;
  bool hostPending_ = false;
  uint32_t lossStep_ = 0;
  std::vector<int64_t> crossWait_;
  std::vector<char> hostMark_;
  // A traced window in progress: the index its next step must have (0: none open).
  uint32_t traceNext_ = 0;
};

}  // namespace megatrain::runtime
