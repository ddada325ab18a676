// Executor.cpp - runs a plan's steps, one training step per call, over a backend.
#include "megatrain/runtime/Executor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/PlanTimeline.h"
#include "megatrain/plan/Streams.h"
#include "megatrain/runtime/Accumulate.h"
#include "megatrain/runtime/Finite.h"
#include "megatrain/runtime/HostThreads.h"
#include "megatrain/runtime/WeightSource.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime {
namespace {

std::vector<int64_t> shapeOf(const plan::Tensor& tensor) {
  return std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end());
}

std::string describeStep(const plan::Step& step) {
  std::string what;
  switch (step.op_case()) {
    case plan::Step::kKernel: what = step.kernel().kernel(); break;
    case plan::Step::kCopy: what = "copy"; break;
    case plan::Step::kRecord: what = "record " + step.record().event(); break;
    case plan::Step::kWait: what = "wait " + step.wait().event(); break;
    case plan::Step::kHostTask: what = plan::HostTask::Kind_Name(step.host_task().kind()); break;
    default: what = "empty"; break;
  }
  if (!step.source_op().empty()) what += " from " + step.source_op();
  return "step " + std::to_string(step.index()) + " (" + what + ")";
}

// Element i of a tensor's bytes as a double.
double loadElement(const std::byte* bytes, plan::DType dtype, size_t i) {
  switch (dtype) {
    case plan::F32: { float v; std::memcpy(&v, bytes + 4 * i, 4); return v; }
    case plan::F64: { double v; std::memcpy(&v, bytes + 8 * i, 8); return v; }
    case plan::I64: { int64_t v; std::memcpy(&v, bytes + 8 * i, 8); return static_cast<double>(v); }
    case plan::BF16: { uint16_t v; std::memcpy(&v, bytes + 2 * i, 2); return bf16ToFloat(v); }
    case plan::I32: { int32_t v; std::memcpy(&v, bytes + 4 * i, 4); return v; }
    case plan::U8:
    case plan::BOOL: return static_cast<double>(static_cast<uint8_t>(bytes[i]));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void storeElement(std::byte* bytes, plan::DType dtype, size_t i, double value) {
  switch (dtype) {
    case plan::F32: { float v = static_cast<float>(value); std::memcpy(bytes + 4 * i, &v, 4); break; }
    case plan::F64: std::memcpy(bytes + 8 * i, &value, 8); break;
    case plan::BF16: { uint16_t v = floatToBf16(static_cast<float>(value)); std::memcpy(bytes + 2 * i, &v, 2); break; }
    case plan::I64: { int64_t v = static_cast<int64_t>(value); std::memcpy(bytes + 8 * i, &v, 8); break; }
    case plan::I32: { int32_t v = static_cast<int32_t>(value); std::memcpy(bytes + 4 * i, &v, 4); break; }
    case plan::U8:
    case plan::BOOL: bytes[i] = static_cast<std::byte>(static_cast<uint8_t>(value)); break;
    default: break;
  }
}

void requireConvertible(const plan::Tensor& tensor) {
  if (tensor.dtype() == plan::F16)
    throw Error("tensor '" + tensor.name() + "' is " + dtypeName(tensor.dtype()) +
                ", which has no host conversion yet");
}

// Calls `visit` with every tensor a step reads or writes (stepReadsWrites;
// a tensor both read and written is visited twice).
template <typename Visit>
void forEachTensorOf(const plan::Step& step, Visit&& visit) {
  std::vector<uint32_t> reads, writes;
  stepReadsWrites(step, reads, writes);
  for (uint32_t t : reads) visit(t);
  for (uint32_t t : writes) visit(t);
}

}  // namespace

Executor::Executor(plan::Plan plan, std::unique_ptr<Backend> backend)
    : plan_(std::move(plan)), backend_(std::move(backend)) {
  if (!backend_) throw Error("executor: no backend");
  validatePlan(plan_, *backend_);
  backend_->prepare(plan_);

  for (const plan::Tensor& tensor : plan_.tensors()) {
    byName_.emplace(tensor.name(), tensor.id());
    if (tensor.role() == plan::INPUT) {
      StagedInput input;
      input.tensor = tensor.id();
      input.bytes.resize(tensor.buffer().size_bytes());
      inputs_.push_back(std::move(input));
    }
    if (tensor.role() == plan::CONSTANT)
      backend_->write(tensor, tensor.constant_data().data(), tensor.constant_data().size());
  }

  // Bucket the dying DEVICE tensors by step. CONSTANTs never die: they are
  // written once, here. A view (alias_of) dies with its base, whose
  // last_use_step covers it: poisoning the view would poison the base.
  const size_t steps = static_cast<size_t>(plan_.steps_size());
  poisonStart_.assign(steps + 1, 0);
  auto dies = [&](const plan::Tensor& tensor) {
    return tensor.last_use_step() >= 0 && tensor.role() != plan::CONSTANT && !tensor.has_alias_of() &&
           plan_.pools(static_cast<int>(tensor.buffer().pool())).tier() == plan::DEVICE;
  };
  for (const plan::Tensor& tensor : plan_.tensors())
    if (dies(tensor)) ++poisonStart_[static_cast<size_t>(tensor.last_use_step()) + 1];
  for (size_t s = 1; s <= steps; ++s) poisonStart_[s] += poisonStart_[s - 1];
  poisonAfter_.resize(poisonStart_[steps]);
  std::vector<size_t> fill(poisonStart_.begin(), poisonStart_.end() - 1);
  for (const plan::Tensor& tensor : plan_.tensors())
    if (dies(tensor)) poisonAfter_[fill[static_cast<size_t>(tensor.last_use_step())]++] = tensor.id();

  for (const plan::Step& step : plan_.steps())
    if (step.op_case() == plan::Step::kHostTask && step.host_task().kind() == plan::HostTask::ADAMW)
      adamwSteps_.push_back(step.index());
  hyper_ = plan_.header().optimizer();
  checkClippingIsSafe();

  if (const char* kill = std::getenv("MEGATRAIN_TEST_KILL_IN_STEP")) {
    killInStep_ = std::atoll(kill);
    killAfter_ = static_cast<uint32_t>(steps / 2);
    for (const plan::Step& step : plan_.steps())
      if (step.op_case() == plan::Step::kCopy &&
          plan_.pools(static_cast<int>(plan_.tensors(static_cast<int>(step.copy().dst())).buffer().pool())).tier() ==
              plan::DISK) {
        killAfter_ = step.index();
        break;
      }
  }

  // Compute copies name their master by source (validated).
  std::unordered_map<std::string, uint32_t> masters;
  for (const plan::Tensor& tensor : plan_.tensors())
    if (tensor.role() == plan::PARAMETER) masters.emplace(tensor.source(), tensor.id());
  for (const plan::Tensor& tensor : plan_.tensors())
    if (tensor.role() == plan::PARAMETER_COMPUTE) computeCopies_.emplace_back(masters.at(tensor.source()), tensor.id());
  planHostOverlap();
}

void Executor::planHostOverlap() {
  if (!backend_->overlapsHostTasks()) return;
  for (const plan::Pool& pool : plan_.pools())
    if (pool.tier() == plan::DISK) return;  // the disk stream's copies wait on host updates
  struct Range {
    uint32_t pool;
    uint64_t begin, end;
  };
  auto rangeOf = [&](uint32_t id) {
    const plan::Buffer& buffer = plan_.tensors(static_cast<int>(id)).buffer();
    return Range{buffer.pool(), buffer.offset(), buffer.offset() + buffer.size_bytes()};
  };
  // The host stream's tasks, in plan order, with the bytes they touch.
  std::vector<std::pair<uint32_t, std::vector<Range>>> hostTasks;
  int64_t loss = -1;
  for (const plan::Step& step : plan_.steps()) {
    if (step.op_case() != plan::Step::kHostTask || step.stream() != plan::kHostStream) continue;
    if (step.host_task().kind() == plan::HostTask::READ_LOSS) {
      if (loss >= 0) return;  // one loss a step
      loss = step.index();
    }
    std::vector<Range> ranges;
    for (uint32_t t : step.host_task().tensors()) ranges.push_back(rangeOf(t));
    hostTasks.emplace_back(step.index(), std::move(ranges));
  }
  if (loss < 0) return;
  const size_t steps = static_cast<size_t>(plan_.steps_size());
  crossWait_.assign(steps, -1);
  hostMark_.assign(steps, 0);
  // A step of another stream that touches bytes of a host task later in plan
  // order may run, in the next training step, while that task of this one
  // still runs: it waits for the last such task (the host stream runs its
  // tasks in order, so the earlier ones are done by then).
  std::vector<Range> touched;
  for (const plan::Step& step : plan_.steps()) {
    if (step.stream() == plan::kHostStream) continue;
    touched.clear();
    forEachTensorOf(step, [&](uint32_t t) { touched.push_back(rangeOf(t)); });
    for (auto task = hostTasks.rbegin(); task != hostTasks.rend() && task->first > step.index(); ++task) {
      const bool overlaps = std::any_of(touched.begin(), touched.end(), [&](const Range& a) {
        return std::any_of(task->second.begin(), task->second.end(), [&](const Range& b) {
          return a.pool == b.pool && a.begin < b.end && b.begin < a.end;
        });
      });
      if (!overlaps) continue;
      crossWait_[step.index()] = task->first;
      hostMark_[task->first] = 1;
      break;
    }
  }
  hostMark_[static_cast<size_t>(loss)] = 1;
  lossStep_ = static_cast<uint32_t>(loss);
  overlapHost_ = true;
}

namespace {

// The compute copy of a master: every element rounded to bf16, over the host threads.
void convertToBf16(const float* from, uint16_t* to, size_t count) {
  const unsigned chunks = count >= (size_t{1} << 20) ? hostThreadCount() : 1;
  hostParallelRanges(count, chunks, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) to[i] = floatToBf16(from[i]);
  });
}

}  // namespace

void Executor::refreshComputeCopies() {
  backend_->synchronize();
  for (auto [masterId, copyId] : computeCopies_) {
    const plan::Tensor& master = plan_.tensors(static_cast<int>(masterId));
    const plan::Tensor& copy = plan_.tensors(static_cast<int>(copyId));
    const size_t count = static_cast<size_t>(elementCount(master.shape()));
    if (plan_.pools(static_cast<int>(master.buffer().pool())).tier() == plan::DEVICE) {
      // Device-resident state (docs/tiering.md "State homes"): through the host.
      std::vector<float> from(count);
      std::vector<uint16_t> to(count);
      backend_->read(master, from.data(), count * sizeof(float));
      convertToBf16(from.data(), to.data(), count);
      backend_->write(copy, to.data(), count * sizeof(uint16_t));
      continue;
    }
    const float* from = reinterpret_cast<const float*>(backend_->hostData(master));
    uint16_t* to = reinterpret_cast<uint16_t*>(backend_->hostData(copy));
    convertToBf16(from, to, count);
  }
}

void Executor::checkClippingIsSafe() {
  // Clipping moves every ADAMW to the position of the last one. That is only
  // the same computation if no step in between touches a tensor an earlier
  // ADAMW updates or reads (its parameter, gradient or moments).
  // A device update reads a gradient that lives in the arena only until the
  // update (or a device accumulator): clipping cannot hold them all.
  for (uint32_t index : adamwSteps_) {
    const plan::Tensor& grad = plan_.tensors(static_cast<int>(plan_.steps(static_cast<int>(index)).host_task().tensors(1)));
    // A gradient in the staging ring shares its bytes with later ones.
    if (grad.role() == plan::STATE_STAGE) {
      clippingConflict_ = "gradient clipping needs every gradient on the host before any AdamW update, but '" +
                          grad.name() + "' is in the gradient staging ring, which later gradients reuse "
                          "(compile with --keep-gradients --state-home host to clip)";
      return;
    }
    if (plan_.pools(static_cast<int>(grad.buffer().pool())).tier() == plan::DEVICE) {
      clippingConflict_ = "gradient clipping needs every gradient on the host before any AdamW update, but '" +
                          plan_.tensors(static_cast<int>(plan_.steps(static_cast<int>(index)).host_task().tensors(0))).name() +
                          "' is updated on the device from '" + grad.name() +
                          "' (compile with --state-home host --keep-gradients to clip)";
      return;
    }
  }
  if (adamwSteps_.size() < 2) return;
  const uint32_t last = adamwSteps_.back();
  std::vector<int64_t> updatedAt(static_cast<size_t>(plan_.tensors_size()), -1);
  for (uint32_t index : adamwSteps_)
    for (uint32_t tensor : plan_.steps(static_cast<int>(index)).host_task().tensors()) updatedAt[tensor] = index;
  auto check = [&](const plan::Step& step, uint32_t tensor) {
    const int64_t at = updatedAt[tensor];
    if (at >= 0 && at < step.index() && step.index() < last && clippingConflict_.empty())
      clippingConflict_ = "gradient clipping needs every gradient before any AdamW update, but " +
                          describeStep(step) + " uses '" + plan_.tensors(static_cast<int>(tensor)).name() +
                          "' after its update at step " + std::to_string(at);
  };
  for (const plan::Step& step : plan_.steps()) forEachTensorOf(step, [&](uint32_t t) { check(step, t); });
}

Executor::~Executor() {
  // Host tasks of the last step may still run on the backend's memory.
  if (hostPending_) try {
      backend_->synchronize();
    } catch (...) {
    }
}

const plan::Tensor& Executor::tensor(const std::string& name) const {
  auto it = byName_.find(name);
  if (it == byName_.end()) throw Error("the plan has no tensor named '" + name + "'");
  return plan_.tensors(static_cast<int>(it->second));
}

void Executor::loadWeights(const WeightSource& weights, const LoadProgress& progress) {
  uint64_t total = 0, done = 0;
  for (const plan::Tensor& tensor : plan_.tensors())
    if (tensor.role() == plan::PARAMETER) total += tensor.buffer().size_bytes();
  std::vector<std::byte> bytes;
  for (const plan::Tensor& tensor : plan_.tensors()) {
    if (tensor.role() == plan::PARAMETER) {
      bytes.resize(tensor.buffer().size_bytes());
      weights.read(tensor.source(), tensor.dtype(), shapeOf(tensor), bytes.data(), bytes.size());
      // A NaN or infinity here would train to NaN (or, through a select that
      // drops it, to a finite loss that means nothing): refuse it at the door.
      const int64_t bad = firstNonFinite(bytes.data(), static_cast<size_t>(elementCount(tensor.shape())), tensor.dtype());
      if (bad >= 0)
        throw Error(weights.path() + ": weight '" + tensor.source() + "' is " +
                    nonFiniteValueName(bytes.data(), bad, tensor.dtype()) + " at flat index " + std::to_string(bad) +
                    " (of " + std::to_string(elementCount(tensor.shape())) + " elements)");
      backend_->write(tensor, bytes.data(), bytes.size());
      done += bytes.size();
      if (progress) progress(done, total);
    } else if (tensor.role() == plan::OPTIMIZER_STATE) {
      backend_->zero(tensor);
    }
  }
  refreshComputeCopies();
  step_ = 0;
  weightsLoaded_ = true;
}

void Executor::loadParametersFrom(const Executor& source) {
  std::vector<std::byte> bytes;
  for (const plan::Tensor& tensor : plan_.tensors()) {
    if (tensor.role() != plan::PARAMETER) continue;
    auto it = source.byName_.find(tensor.name());
    const plan::Tensor* from = it == source.byName_.end() ? nullptr : &source.plan_.tensors(static_cast<int>(it->second));
    if (!from || from->role() != plan::PARAMETER)
      throw Error("parameter '" + tensor.name() + "' is not a parameter of the plan the weights come from");
    if (from->dtype() != tensor.dtype() ||
        !std::equal(from->shape().begin(), from->shape().end(), tensor.shape().begin(), tensor.shape().end()))
      throw Error("parameter '" + tensor.name() + "' is " + formatShape(tensor.shape()) + " " +
                  dtypeName(tensor.dtype()) + " here but " + formatShape(from->shape()) + " " +
                  dtypeName(from->dtype()) + " in the plan the weights come from");
    bytes.resize(tensor.buffer().size_bytes());
    source.backend_->read(*from, bytes.data(), bytes.size());
    backend_->write(tensor, bytes.data(), bytes.size());
  }
  refreshComputeCopies();
  step_ = 0;
  weightsLoaded_ = true;
}

Executor::StagedInput& Executor::findInput(const std::string& name) {
  // The graph input name first: that is what users know.
  for (StagedInput& input : inputs_)
    if (plan_.tensors(static_cast<int>(input.tensor)).source() == name) return input;
  for (StagedInput& input : inputs_)
    if (plan_.tensors(static_cast<int>(input.tensor)).name() == name) return input;
  std::string known;
  for (const StagedInput& input : inputs_) {
    const plan::Tensor& tensor = plan_.tensors(static_cast<int>(input.tensor));
    known += (known.empty() ? "" : ", ") + (tensor.source().empty() ? tensor.name() : tensor.source());
  }
  throw Error("the plan has no input named '" + name + "' (inputs: " +
              (known.empty() ? "none" : known) + ")");
}

void Executor::setInput(const std::string& name, const HostArray& array) {
  StagedInput& input = findInput(name);
  const plan::Tensor& tensor = plan_.tensors(static_cast<int>(input.tensor));
  const std::string what = "input '" + name + "'";
  if (array.shape != shapeOf(tensor)) {
    std::string given = "[";
    for (size_t i = 0; i < array.shape.size(); ++i) given += (i ? ", " : "") + std::to_string(array.shape[i]);
    throw Error(what + ": array shape " + given + "] differs from the plan's " +
                formatShape(tensor.shape()));
  }
  const size_t count = static_cast<size_t>(array.elements());
  const plan::DType dtype = tensor.dtype();
  const bool sameType = (dtype == plan::F32 && array.type == ElementType::F32) ||
                        (dtype == plan::F64 && array.type == ElementType::F64) ||
                        (dtype == plan::I64 && array.type == ElementType::I64) ||
                        (dtype == plan::I32 && array.type == ElementType::I32);
  const bool floating = dtype == plan::F32 || dtype == plan::F64;
  const bool integer = dtype == plan::I64 || dtype == plan::I32;
  const bool arrayFloating = array.type == ElementType::F32 || array.type == ElementType::F64;
  if (sameType) {
    std::memcpy(input.bytes.data(), array.bytes.data(), input.bytes.size());
  } else if ((floating && arrayFloating) || (integer && !arrayFloating)) {
    for (size_t i = 0; i < count; ++i) {
      double value = 0;
      switch (array.type) {
        case ElementType::F32: value = array.data<float>()[i]; break;
        case ElementType::F64: value = array.data<double>()[i]; break;
        case ElementType::I32: value = array.data<int32_t>()[i]; break;
        case ElementType::I64: {
          const int64_t v = array.data<int64_t>()[i];
          if (dtype == plan::I32 && (v < INT32_MIN || v > INT32_MAX))
            throw Error(what + ": value " + std::to_string(v) + " does not fit in i32");
          value = static_cast<double>(v);
          break;
        }
      }
      storeElement(input.bytes.data(), dtype, i, value);
    }
  } else {
    throw Error(what + " is " + dtypeName(dtype) + ", it cannot take a " +
                elementTypeName(array.type) + " array");
  }
  input.set = true;
}

void Executor::runOneStep(const plan::Step& step, double& loss) {
  switch (step.op_case()) {
    case plan::Step::kKernel:
      backend_->launchKernel(step.index());
      break;
    case plan::Step::kCopy:
      backend_->copy(plan_.tensors(static_cast<int>(step.copy().src())),
                     plan_.tensors(static_cast<int>(step.copy().dst())));
      break;
    case plan::Step::kRecord:
      backend_->recordEvent(step.record().event(), step.stream());
      break;
    case plan::Step::kWait:
      backend_->waitEvent(step.wait().event(), step.stream());
      break;
    case plan::Step::kHostTask: {
      const plan::HostTask& task = step.host_task();
      auto operand = [&](int i) -> const plan::Tensor& {
        return plan_.tensors(static_cast<int>(task.tensors(i)));
      };
      if (task.kind() == plan::HostTask::ADAMW) {
        backend_->runAdamW(operand(0), operand(1), operand(2), operand(3), hyper_, step_,
                           task.tensors_size() > 4 ? &operand(4) : nullptr);
      } else if (task.kind() == plan::HostTask::ACCUMULATE) {
        // Micro-batches: on the host on every backend, in the host queue's
        // order, so cpu and cuda give the same bits.
        backend_->runAccumulate(operand(0), operand(1));
      } else {
        // READ_LOSS: the readout is host memory, read once the copy that fills it is done.
        backend_->readLoss(operand(0), &loss);
      }
      break;
    }
    default:
      break;  // validation rejects empty steps
  }
}

double Executor::runStep() { return runStep(StepOptions{}).loss; }

void Executor::restoreOptimizerStep(int64_t t) {
  if (t < 0) throw Error("optimizer step count must be >= 0, got " + std::to_string(t));
  refreshComputeCopies();
  step_ = t;
  weightsLoaded_ = true;
}

StepResult Executor::runStep(const StepOptions& options) {
  if (!weightsLoaded_) throw Error("weights are not loaded (call loadWeights before runStep)");
  const bool clipping = options.clipGradNorm.has_value();
  if (clipping && !(*options.clipGradNorm > 0))
    throw Error("the gradient clipping norm must be positive");
  if (clipping && !clippingConflict_.empty()) throw Error(clippingConflict_);
  for (const StagedInput& input : inputs_) {
    if (input.set) continue;
    const plan::Tensor& tensor = plan_.tensors(static_cast<int>(input.tensor));
    throw Error("input '" + (tensor.source().empty() ? tensor.name() : tensor.source()) +
                "' was not set");
  }
  // A traced window (StepOptions::traceSteps): its steps in order, none untraced among them.
  if (options.trace) {
    if (options.traceSteps == 0 || options.traceIndex >= options.traceSteps)
      throw Error("traced step " + std::to_string(options.traceIndex) + " of a window of " +
                  std::to_string(options.traceSteps) + " steps");
    if (options.traceIndex != traceNext_)
      throw Error("traced step " + std::to_string(options.traceIndex) + " of a window of " +
                  std::to_string(options.traceSteps) + " comes where step " + std::to_string(traceNext_) +
                  " was due");
    if (!backend_->canTraceSteps())
      throw Error("the " + backend_->name() + " backend cannot time a step (tracing needs cuda)");
  } else if (traceNext_ != 0) {
    throw Error("an untraced step inside a traced window (step " + std::to_string(traceNext_) + " was due)");
  }
  const bool traceFirst = options.trace && options.traceIndex == 0;
  const bool traceLast = options.trace && options.traceIndex + 1 == options.traceSteps;
  ++step_;
  // Host tasks across steps (docs/runtime.md): not with clipping (the norm
  // reads every gradient on the host) or the kill hook. A traced window starts
  // on an idle device (its clock's origin) and waits for its last step's host
  // tasks (they are timed too); its other steps carry them as untraced steps do.
  const bool overlap = overlapHost_ && !clipping && killInStep_ == 0;
  const bool carryIn = overlap && !traceFirst, carryOut = overlap && !traceLast;
  if (hostPending_ && !carryIn) {
    backend_->synchronize();
    hostPending_ = false;
  }
  for (const StagedInput& input : inputs_) {
    const plan::Tensor& tensor = plan_.tensors(static_cast<int>(input.tensor));
    if (hostPending_) backend_->writeBesideHostTasks(tensor, input.bytes.data(), input.bytes.size());
    else backend_->write(tensor, input.bytes.data(), input.bytes.size());
  }

  if (traceFirst) backend_->beginStepTrace(options.traceSteps);
  else if (options.trace) backend_->nextTracedStep();
  traceNext_ = options.trace && !traceLast ? options.traceIndex + 1 : 0;
  hyper_.set_lr(options.lr ? *options.lr : plan_.header().optimizer().lr());
  StepResult result;
  result.loss = std::numeric_limits<double>::quiet_NaN();
  result.lr = hyper_.lr();
  result.gradNorm = std::numeric_limits<double>::quiet_NaN();
  // A step graph (docs/runtime.md, "Step graphs"): the first step runs as
  // issued (first-use work of libraries stays out of any graph), the second
  // is recorded and replayed, later ones replay the recording. A traced or
  // clipped step, or one with the kill hook, is issued as always.
  const bool replayable = !options.trace && !clipping && killInStep_ == 0 && backend_->canRecordSteps();
  if (replayable && backend_->hasRecordedStep()) {
    backend_->replayStep(hyper_, step_, &result.loss);
    backend_->synchronize();
    return result;
  }
  if (replayable && issuedSteps_ > 0) {
    backend_->beginStepRecording();
    bool recorded = false;
    try {
      issueSteps(options, result);
      recorded = backend_->endStepRecording("");
    } catch (const Error& e) {
      // Not recorded; issued below, where an error of the step itself is met again.
      backend_->endStepRecording(e.what());
    }
    if (recorded) {
      backend_->replayStep(hyper_, step_, &result.loss);
      backend_->synchronize();
      return result;
    }
  }
  issueSteps(options, result);
  ++issuedSteps_;
  if (carryOut) {
    backend_->finishStepBeforeHost(lossStep_);
    hostPending_ = true;
  } else {
    backend_->synchronize();
    hostPending_ = false;
  }
  if (traceLast) result.trace = backend_->endStepTrace();
  return result;
}

void Executor::issueSteps(const StepOptions& options, StepResult& result) {
  const bool clipping = options.clipGradNorm.has_value();
  const bool poison = backend_->poisonsDeadTensors();
  const int64_t lastAdamw = adamwSteps_.empty() ? -1 : adamwSteps_.back();
  for (const plan::Step& step : plan_.steps()) {
    const bool deferred = clipping && step.op_case() == plan::Step::kHostTask &&
                          step.host_task().kind() == plan::HostTask::ADAMW;
    try {
      backend_->setCurrentStep(step.index());
      if (overlapHost_ && crossWait_[step.index()] >= 0)
        backend_->waitHostTask(static_cast<uint32_t>(crossWait_[step.index()]), step.stream());
      if (!deferred) runOneStep(step, result.loss);
      if (overlapHost_ && hostMark_[step.index()]) backend_->markHostTask(step.index());
      if (deferred && step.index() == lastAdamw) result.gradNorm = clipAndUpdate(*options.clipGradNorm);
    } catch (const Error& e) {
      throw Error(describeStep(step) + ": " + e.what());
    }
    if (poison)
      for (size_t k = poisonStart_[step.index()]; k < poisonStart_[step.index() + 1]; ++k)
        backend_->poisonOnStream(plan_.tensors(static_cast<int>(poisonAfter_[k])), step.stream());
    if (killInStep_ == step_ && step.index() == killAfter_) {
      backend_->synchronize();
      ::kill(::getpid(), SIGKILL);
    }
  }
}

namespace {

template <typename T>
void addSquares(const std::byte* bytes, size_t count, double& sum) {
  const T* g = reinterpret_cast<const T*>(bytes);
  for (size_t i = 0; i < count; ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
}

template <typename T>
void scaleInPlace(std::byte* bytes, size_t count, double coef) {
  T* g = reinterpret_cast<T*>(bytes);
  for (size_t i = 0; i < count; ++i) g[i] = static_cast<T>(static_cast<double>(g[i]) * coef);
}

}  // namespace

double Executor::clipAndUpdate(double maxNorm) {
  auto gradient = [&](uint32_t index) -> const plan::Tensor& {
    return plan_.tensors(static_cast<int>(plan_.steps(static_cast<int>(index)).host_task().tensors(1)));
  };
  // One running sum in plan order and element order: the same gradients give
  // the same norm bit for bit, whatever the backend.
  double sum = 0;
  for (uint32_t index : adamwSteps_) {
    const plan::Tensor& grad = gradient(index);
    const size_t count = static_cast<size_t>(elementCount(grad.shape()));
    if (grad.dtype() == plan::F32) addSquares<float>(backend_->hostData(grad), count, sum);
    else if (grad.dtype() == plan::F64) addSquares<double>(backend_->hostData(grad), count, sum);
    else throw Error("gradient clipping: gradient '" + grad.name() + "' is " + dtypeName(grad.dtype()) +
                     " (f32 or f64 only)");
  }
  const double norm = std::sqrt(sum);
  // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1; scaling
  // by exactly 1 changes nothing, so only a smaller factor touches the gradients.
  const double coef = maxNorm / (norm + 1e-6);
  if (coef < 1.0)
    for (uint32_t index : adamwSteps_) {
      const plan::Tensor& grad = gradient(index);
      const size_t count = static_cast<size_t>(elementCount(grad.shape()));
      if (grad.dtype() == plan::F32) scaleInPlace<float>(backend_->hostData(grad), count, coef);
      else scaleInPlace<double>(backend_->hostData(grad), count, coef);
    }
  double unused = 0;
  for (uint32_t index : adamwSteps_) {
    backend_->setCurrentStep(index);
    runOneStep(plan_.steps(static_cast<int>(index)), unused);
  }
  return norm;
}

std::vector<double> Executor::readTensor(const std::string& name) const {
  const plan::Tensor& t = tensor(name);
  requireConvertible(t);
  std::vector<std::byte> bytes = readBytes(name);
  const size_t count = static_cast<size_t>(elementCount(t.shape()));
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = loadElement(bytes.data(), t.dtype(), i);
  return values;
}

void Executor::writeTensor(const std::string& name, const std::vector<double>& values) {
  const plan::Tensor& t = tensor(name);
  requireConvertible(t);
  const size_t count = static_cast<size_t>(elementCount(t.shape()));
  if (values.size() != count)
    throw Error("tensor '" + name + "': " + std::to_string(values.size()) +
                " values given, it holds " + std::to_string(count));
  std::vector<std::byte> bytes(t.buffer().size_bytes());
  for (size_t i = 0; i < count; ++i) storeElement(bytes.data(), t.dtype(), i, values[i]);
  backend_->write(t, bytes.data(), bytes.size());
  if (t.role() == plan::PARAMETER) refreshComputeCopies();
}

std::vector<std::byte> Executor::readBytes(const std::string& name) const {
  const plan::Tensor& t = tensor(name);
  std::vector<std::byte> bytes(t.buffer().size_bytes());
  backend_->synchronize();
  backend_->read(t, bytes.data(), bytes.size());
  return bytes;
}

void Executor::writeBytes(const std::string& name, const void* bytes, size_t size) {
  const plan::Tensor& t = tensor(name);
  backend_->write(t, bytes, size);
  if (t.role() == plan::PARAMETER) refreshComputeCopies();
}

}  // namespace megatrain::runtime
