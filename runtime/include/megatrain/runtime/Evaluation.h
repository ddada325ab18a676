// Evaluation.h - the eval loss of an evaluation plan (megatrain-compile --forward-only) over fixed token windows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/TokenData.h"

namespace megatrain::runtime {

class Backend;
class Executor;

// Error unless `eval` (read from `evalLabel`) is an evaluation plan that can
// run with the weights of `training` (from `trainingLabel`): every PARAMETER
// of `eval` is a PARAMETER of `training` with the same name, shape and dtype,
// and its only graph input is its token input. The message names the first
// difference and what to do about it.
void checkEvaluationPlan(const plan::Plan& eval, const std::string& evalLabel, const plan::Plan& training,
                         const std::string& trainingLabel);

// The eval set: each file cut into windows of seqLen tokens at offsets 0,
// seqLen, 2 seqLen, ... (the last seqLen - 1 tokens or fewer form no window),
// file after file in the order given; batch k holds windows kB .. kB + B - 1.
// Only whole batches count. Read once, at construction, and held as i64
// (8 bytes per token), so every evaluation sees the same batches in the same
// order and reads no file.
class EvalBatches {
 public:
  // maxBatches 0: every whole batch the files hold. Error if the files hold
  // no whole batch, or fewer than maxBatches (naming how many they hold).
  // With `targets` (an evaluation plan whose loss reads a targets input,
  // megatrain-compile --targets) each batch also has its targets: the token
  // where the file's loss mask is 1 (or the file has none), `ignoreIndex`
  // where it is 0; without, a file with a loss mask is an error.
  EvalBatches(const std::vector<std::string>& files, TokenDType fallback, int64_t batch, int64_t seqLen,
              int64_t maxBatches, bool targets = false, int64_t ignoreIndex = -100);

  int64_t count() const { return count_; }
  // Batch k as a [batch, seqLen] i64 array (k < count()), and with targets its targets.
  void fill(int64_t k, HostArray& out, HostArray* targets = nullptr) const;

 private:
  int64_t batch_ = 0, seqLen_ = 0, count_ = 0;
  std::vector<int64_t> tokens_;   // count_ * batch_ * seqLen_
  std::vector<int64_t> targets_;  // the same, with `targets`; empty without
};

struct EvalResult {
  double loss = 0;        // the mean of the batches' losses
  double perplexity = 0;  // exp(loss)
  int64_t batches = 0;
  double seconds = 0;     // wall time of the evaluation
};

// Runs an evaluation plan over every batch of an EvalBatches with the weights
// of a training executor. The evaluation executor has its own pools and
// backend: the training executor is only read, so its state (weights,
// moments, AdamW's step count, data position) is the same with evaluation as
// without.
class Evaluator {
 public:
  // `executor` runs the evaluation plan; its token input gets the batches.
  Evaluator(std::unique_ptr<Executor> executor, EvalBatches batches);
  // The evaluator of an evaluation plan (checkEvaluationPlan) on `backend`:
  // the eval set is cut from `files` into its token input's [batch, seq]
  // (EvalBatches, read before the executor allocates anything).
  Evaluator(plan::Plan plan, std::unique_ptr<Backend> backend, const std::vector<std::string>& files,
            TokenDType fallback, int64_t maxBatches);
  ~Evaluator();

  // Copies `training`'s parameters in (Executor::loadParametersFrom), then
  // runs one step per batch; the loss is the mean of the batch losses (each
  // batch's loss is the plan's: for next-token-ce the mean over the batch's
  // counted targets), summed in double in batch order.
  EvalResult run(const Executor& training);

  int64_t batches() const { return batches_.count(); }
  const Executor& executor() const { return *executor_; }

 private:
  void bindTokenInput();

  std::unique_ptr<Executor> executor_;
  EvalBatches batches_;
  std::string tokenInput_;
  std::string targetInput_;  // the plan's target_input; empty if its loss reads the tokens
  HostArray tokens_;         // one batch, refilled per step
  HostArray targets_;        // its targets, with targetInput_
};

}  // namespace megatrain::runtime
