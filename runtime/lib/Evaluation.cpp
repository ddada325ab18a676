// Evaluation.cpp - the eval loss of an evaluation plan (megatrain-compile --forward-only) over fixed token windows.
#include "megatrain/runtime/Evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/Microbatch.h"

namespace megatrain::runtime {
namespace {

std::string describe(const plan::Tensor& tensor) {
  return formatShape(tensor.shape()) + " " + dtypeName(tensor.dtype());
}

// The INPUT the header names as the token input (by graph input or tensor name).
const plan::Tensor* tokenInputOf(const plan::Plan& plan) {
  const std::string& name = plan.header().token_input();
  if (name.empty()) return nullptr;
  for (const plan::Tensor& tensor : plan.tensors())
    if (tensor.role() == plan::INPUT && (tensor.source() == name || tensor.name() == name)) return &tensor;
  return nullptr;
}

}  // namespace

void checkEvaluationPlan(const plan::Plan& eval, const std::string& evalLabel, const plan::Plan& training,
                         const std::string& trainingLabel) {
  if (!eval.header().evaluation())
    throw Error("--eval-plan " + evalLabel +
                " is a training plan, not an evaluation plan (compile it with megatrain-compile --forward-only)");

  std::unordered_map<std::string, const plan::Tensor*> parameters;
  for (const plan::Tensor& tensor : training.tensors())
    if (tensor.role() == plan::PARAMETER) parameters.emplace(tensor.name(), &tensor);
  for (const plan::Tensor& tensor : eval.tensors()) {
    if (tensor.role() != plan::PARAMETER) continue;
    auto it = parameters.find(tensor.name());
    if (it == parameters.end())
      throw Error("--eval-plan " + evalLabel + ": parameter '" + tensor.name() + "' is not a parameter of " +
                  trainingLabel + " (compile both plans from the same model)");
    const plan::Tensor& theirs = *it->second;
    if (theirs.dtype() != tensor.dtype() ||
        !std::equal(theirs.shape().begin(), theirs.shape().end(), tensor.shape().begin(), tensor.shape().end()))
      throw Error("--eval-plan " + evalLabel + ": parameter '" + tensor.name() + "' is " + describe(tensor) +
                  " there but " + describe(theirs) + " in " + trainingLabel + " (compile both plans from the same model)");
  }

  const plan::Tensor* tokens = tokenInputOf(eval);
  if (!tokens)
    throw Error("--eval-plan " + evalLabel +
                ": the plan has no token input for --eval-data to feed (compile it with --loss next-token-ce)");
  const std::string& targets = eval.header().target_input();
  for (const plan::Tensor& tensor : eval.tensors())
    if (tensor.role() == plan::INPUT && &tensor != tokens && (targets.empty() || inputName(tensor) != targets))
      throw Error("--eval-plan " + evalLabel + ": graph input '" + inputName(tensor) +
                  "' is not the token input '" + eval.header().token_input() +
                  "'; --eval-data feeds only the token input (and a targets input)");
}

EvalBatches::EvalBatches(const std::vector<std::string>& files, TokenDType fallback, int64_t batch, int64_t seqLen,
                         int64_t maxBatches, bool targets, int64_t ignoreIndex)
    : batch_(batch), seqLen_(seqLen) {
  if (files.empty()) throw Error("--eval-data: no token files");
  if (batch <= 0 || seqLen <= 0) throw Error("--eval-data: the eval plan's token input has an empty shape");
  // Windows, file by file: (file index, first token).
  std::vector<std::pair<size_t, uint64_t>> windows;
  std::vector<TokenData> data;
  data.reserve(files.size());
  int64_t available = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    data.emplace_back(files[f], fallback);
    if (!targets && !data.back().maskPath().empty())
      throw Error("--eval-data " + files[f] + " has a loss mask (" + data.back().maskPath() +
                  ") but the eval plan's loss reads the tokens themselves; compile it with --targets NAME "
                  "(megatrain-compile) so that masked positions contribute no loss");
    const uint64_t count = data.back().tokenCount() / static_cast<uint64_t>(seqLen);
    available += static_cast<int64_t>(count);
    for (uint64_t w = 0; w < count; ++w) windows.emplace_back(f, w * static_cast<uint64_t>(seqLen));
  }
  const int64_t whole = available / batch;
  std::string what = std::to_string(available) + " windows of " + std::to_string(seqLen) + " tokens";
  if (whole == 0)
    throw Error("--eval-data holds " + what + ", not one batch of " + std::to_string(batch) +
                " (the eval plan's token input shape); give more eval text");
  if (maxBatches > whole)
    throw Error("--eval-batches " + std::to_string(maxBatches) + ": --eval-data holds " + what + ", " +
                std::to_string(whole) + " batches of " + std::to_string(batch) + " (pass --eval-batches " +
                std::to_string(whole) + " or less)");
  count_ = maxBatches > 0 ? maxBatches : whole;
  tokens_.resize(static_cast<size_t>(count_ * batch_ * seqLen_));
  if (targets) targets_.resize(tokens_.size());
  std::vector<uint8_t> mask(static_cast<size_t>(seqLen_));
  for (int64_t w = 0; w < count_ * batch_; ++w) {
    auto [file, start] = windows[static_cast<size_t>(w)];
    int64_t* window = tokens_.data() + w * seqLen_;
    data[file].read(start, seqLen_, window, targets ? mask.data() : nullptr);
    if (targets)
      for (int64_t t = 0; t < seqLen_; ++t) targets_[static_cast<size_t>(w * seqLen_ + t)] = mask[t] ? window[t] : ignoreIndex;
  }
}

void EvalBatches::fill(int64_t k, HostArray& out, HostArray* targets) const {
  const size_t size = static_cast<size_t>(batch_ * seqLen_);
  std::memcpy(out.data<int64_t>(), tokens_.data() + static_cast<size_t>(k) * size, size * sizeof(int64_t));
  if (targets)
    std::memcpy(targets->data<int64_t>(), targets_.data() + static_cast<size_t>(k) * size, size * sizeof(int64_t));
}

Evaluator::Evaluator(std::unique_ptr<Executor> executor, EvalBatches batches)
    : executor_(std::move(executor)), batches_(std::move(batches)) {
  bindTokenInput();
}

void Evaluator::bindTokenInput() {
  const plan::Tensor* tokens = tokenInputOf(executor_->plan());
  if (!tokens || tokens->shape_size() != 2) throw Error("the evaluation plan has no [batch, seq] token input");
  tokenInput_ = inputName(*tokens);
  tokens_ = HostArray::zeros(ElementType::I64, {tokens->shape(0), tokens->shape(1)});
  targetInput_ = executor_->plan().header().target_input();
  if (!targetInput_.empty()) targets_ = tokens_;
}

namespace {

EvalBatches batchesFor(const plan::Plan& plan, const std::vector<std::string>& files, TokenDType fallback,
                       int64_t maxBatches) {
  const plan::Tensor* tokens = tokenInputOf(plan);
  if (!tokens || tokens->shape_size() != 2) throw Error("the evaluation plan has no [batch, seq] token input");
  return EvalBatches(files, fallback, tokens->shape(0), tokens->shape(1), maxBatches,
                     !plan.header().target_input().empty(), plan.header().ignore_index());
}

}  // namespace

Evaluator::Evaluator(plan::Plan plan, std::unique_ptr<Backend> backend, const std::vector<std::string>& files,
                     TokenDType fallback, int64_t maxBatches)
    : batches_(batchesFor(plan, files, fallback, maxBatches)) {
  executor_ = std::make_unique<Executor>(std::move(plan), std::move(backend));
  bindTokenInput();
}

Evaluator::~Evaluator() = default;

EvalResult Evaluator::run(const Executor& training) {
  const auto start = std::chrono::steady_clock::now();
  executor_->loadParametersFrom(training);
  double sum = 0;
  for (int64_t k = 0; k < batches_.count(); ++k) {
    batches_.fill(k, tokens_, targetInput_.empty() ? nullptr : &targets_);
    executor_->setInput(tokenInput_, tokens_);
    if (!targetInput_.empty()) executor_->setInput(targetInput_, targets_);
    sum += executor_->runStep();
  }
  EvalResult result;
  result.batches = batches_.count();
  result.loss = sum / static_cast<double>(result.batches);
  result.perplexity = std::exp(result.loss);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace megatrain::runtime
