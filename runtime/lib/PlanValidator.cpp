// PlanValidator.cpp - proves a loaded plan self-consistent before anything is allocated.
//
// Checks, in order: pools, streams, tensors (ids, names, buffers inside pools,
// sizes, alignment, lifetimes, constants), steps (ids, streams, operands,
// kernels against the backend, copies, events, host tasks), then the header
// (loss tensor, token input, optimizer), then the schedule (PlanVerifier.h).
// The first failure throws one line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "megatrain/runtime/Backend.h"
#include "megatrain/kernels/Manifest.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/runtime/KernelBinding.h"
#include "megatrain/runtime/Microbatch.h"
#include "megatrain/runtime/PlanLoader.h"
#include "megatrain/plan/PlanVerifier.h"

namespace megatrain::runtime {
namespace {

// Far above any machine (64 PiB), far below where a 4 KiB round-up or a sum of
// pools could wrap a uint64.
constexpr uint64_t kMaxPoolBytes = uint64_t(1) << 56;
// A step predicted to take longer than 31 years is a broken plan, not a slow one.
constexpr double kMaxPredictedSeconds = 1e9;

class PlanValidator {
 public:
  PlanValidator(const plan::Plan& plan, const Backend& backend, const std::string& label)
      : plan_(plan), backend_(backend), label_(label) {}

  void run() {
    checkPools();
    checkTimings();
    checkStreams();
    for (int i = 0; i < plan_.tensors_size(); ++i) checkTensor(i);
    checkComputeCopies();
    collectRecordedEvents();
    for (int i = 0; i < plan_.steps_size(); ++i) checkStep(i);
    checkHeader();
    checkSchedule();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error(label_ + ": " + what); }

  std::string tensorLabel(uint32_t id) const {
    return "tensor " + std::to_string(id) + " '" + plan_.tensors(static_cast<int>(id)).name() +
           "'";
  }

  std::string stepLabel(int index) const {
    const plan::Step& step = plan_.steps(index);
    std::string what;
    switch (step.op_case()) {
      case plan::Step::kKernel: what = "kernel " + step.kernel().kernel(); break;
      case plan::Step::kCopy: what = "copy"; break;
      case plan::Step::kRecord: what = "record " + step.record().event(); break;
      case plan::Step::kWait: what = "wait " + step.wait().event(); break;
      case plan::Step::kHostTask:
        what = std::string("host_task ") +
               plan::HostTask::Kind_Name(step.host_task().kind());
        break;
      default: what = "empty"; break;
    }
    return "step " + std::to_string(index) + " (" + what + ")";
  }

  plan::Tier tierOf(const plan::Tensor& tensor) const {
    return plan_.pools(static_cast<int>(tensor.buffer().pool())).tier();
  }

  void checkPools() {
    if (plan_.pools_size() == 0) fail("the plan has no pools");
    uint64_t total = 0;  // the pools' bytes so far
    for (int i = 0; i < plan_.pools_size(); ++i) {
      const plan::Pool& pool = plan_.pools(i);
      const std::string name = "pool " + std::to_string(i) + " '" + pool.name() + "'";
      if (pool.id() != static_cast<uint32_t>(i))
        fail(name + ": id " + std::to_string(pool.id()) + " differs from its index");
      if (pool.tier() == plan::TIER_UNSPECIFIED) fail(name + ": tier is unspecified");
      // Backends round pools up to their alignment and preflight sums them:
      // sizes from the file are bounded first so that neither can wrap.
      if (pool.size_bytes() > kMaxPoolBytes)
        fail(name + ": size " + std::to_string(pool.size_bytes()) + " bytes is over the limit of " +
             std::to_string(kMaxPoolBytes) + " (2^56)");
      total += pool.size_bytes();
      if (total > kMaxPoolBytes)
        fail(name + ": the pools up to it total " + std::to_string(total) + " bytes, over the limit of " +
             std::to_string(kMaxPoolBytes) + " (2^56)");
    }
  }

  // The compiler's predicted times: the memory plot and trace walk them, so a
  // non-finite (or absurd) one must not reach them. Unset fields are 0.
  void checkTimings() const {
    auto check = [&](double value, const std::string& field) {
      if (!std::isfinite(value) || value < 0 || value > kMaxPredictedSeconds)
        fail(field + " is " + formatReal(value) + " (expected a finite time in [0, 1e9] seconds)");
    };
    const plan::Header& header = plan_.header();
    check(header.predicted_step_s(), "header: predicted_step_s");
    const plan::StepTimeBreakdown& b = header.predicted_breakdown();
    check(b.compute_s(), "header: predicted_breakdown.compute_s");
    check(b.exposed_transfer_s(), "header: predicted_breakdown.exposed_transfer_s");
    check(b.recompute_s(), "header: predicted_breakdown.recompute_s");
    check(b.host_optimizer_s(), "header: predicted_breakdown.host_optimizer_s");
    check(b.idle_s(), "header: predicted_breakdown.idle_s");
    for (int i = 0; i < plan_.steps_size(); ++i) {
      const plan::Step& step = plan_.steps(i);
      check(step.predicted_start_s(), "step " + std::to_string(i) + ": predicted_start_s");
      check(step.predicted_end_s(), "step " + std::to_string(i) + ": predicted_end_s");
    }
  }

  static std::string formatReal(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
  }

  void checkStreams() {
    for (const std::string& stream : plan_.streams()) {
      if (stream.empty()) fail("a stream has an empty name");
      if (!streams_.insert(stream).second) fail("stream '" + stream + "' is listed twice");
    }
  }

  void checkTensor(int index) {
    const plan::Tensor& tensor = plan_.tensors(index);
    const std::string name = "tensor " + std::to_string(index) + " '" + tensor.name() + "'";
    if (tensor.id() != static_cast<uint32_t>(index))
      fail(name + ": id " + std::to_string(tensor.id()) + " differs from its index");
    if (tensor.name().empty()) fail(name + ": empty name");
    if (!names_.insert(tensor.name()).second) fail(name + ": name is used twice");
    if (tensor.role() == plan::ROLE_UNSPECIFIED) fail(name + ": role is unspecified");
    const size_t elementSize = dtypeSize(tensor.dtype());
    if (elementSize == 0) fail(name + ": dtype is unspecified");
    const int64_t elements = elementCount(tensor.shape());
    if (elements < 0) fail(name + ": invalid shape " + formatShape(tensor.shape()));

    const plan::Buffer& buffer = tensor.buffer();
    if (buffer.pool() >= static_cast<uint32_t>(plan_.pools_size()))
      fail(name + ": buffer names pool " + std::to_string(buffer.pool()) + ", the plan has " +
           std::to_string(plan_.pools_size()));
    const plan::Pool& pool = plan_.pools(static_cast<int>(buffer.pool()));
    const uint64_t expected = static_cast<uint64_t>(elements) * elementSize;
    if (buffer.size_bytes() != expected)
      fail(name + ": buffer is " + std::to_string(buffer.size_bytes()) + " bytes, shape " +
           formatShape(tensor.shape()) + " " + dtypeName(tensor.dtype()) + " needs " +
           std::to_string(expected));
    if (buffer.offset() > pool.size_bytes() ||
        buffer.size_bytes() > pool.size_bytes() - buffer.offset()) {
      // offset + size may wrap: then say so rather than print the wrapped end.
      const uint64_t end = buffer.offset() + buffer.size_bytes();
      const std::string extent = end < buffer.offset()
                                     ? std::to_string(buffer.size_bytes()) + " bytes at offset " +
                                           std::to_string(buffer.offset()) + " (the end overflows)"
                                     : "[" + std::to_string(buffer.offset()) + ", " + std::to_string(end) + ")";
      fail(name + ": buffer " + extent + " lies outside pool '" + pool.name() + "' of " +
           std::to_string(pool.size_bytes()) + " bytes");
    }
    if (buffer.offset() % elementSize != 0)
      fail(name + ": offset " + std::to_string(buffer.offset()) +
           " is not a multiple of its element size " + std::to_string(elementSize));

    const int64_t lastUse = tensor.last_use_step();
    if (lastUse < -1 || lastUse >= plan_.steps_size())
      fail(name + ": last_use_step " + std::to_string(lastUse) + " is not a step (the plan has " +
           std::to_string(plan_.steps_size()) + ")");

    if (tensor.has_alias_of() && plan_.header().format_minor() < kPlanMinorAliases)
      fail(name + ": alias_of needs format minor " + std::to_string(kPlanMinorAliases) + ", the plan says " +
           std::to_string(plan_.header().format_minor()));
    if (tensor.role() == plan::CONSTANT && tensor.constant_data().size() != expected)
      fail(name + ": constant_data holds " + std::to_string(tensor.constant_data().size()) +
           " bytes, the tensor needs " + std::to_string(expected));
    // Read by the runtime after the step, so never poisoned device memory.
    if (tensor.role() == plan::OUTPUT_READOUT && pool.tier() == plan::DEVICE)
      fail(name + ": OUTPUT_READOUT is in a DEVICE pool, readouts need host memory");
    // The disk tier (minor 7) holds optimizer state only, staged through host memory.
    if (pool.tier() == plan::DISK && tensor.role() != plan::OPTIMIZER_STATE)
      fail(name + ": " + roleName(tensor.role()) + " is in a DISK pool, which holds OPTIMIZER_STATE only");
    // Staging lives in pinned host memory; since minor 10 an accumulator's
    // visit to the device (pool acc_visit) stages it in a DEVICE pool.
    if (tensor.role() == plan::STATE_STAGE && pool.tier() != plan::HOST_PINNED &&
        !(pool.tier() == plan::DEVICE && plan_.header().format_minor() >= kPlanMinorVisits))
      fail(name + ": STATE_STAGE is in a " + std::string(plan::Tier_Name(pool.tier())) +
           " pool, staging lives in pinned host memory" +
           (pool.tier() == plan::DEVICE ? " (a DEVICE one needs format minor " +
                                              std::to_string(kPlanMinorVisits) + ")"
                                        : std::string()));
    if (tensor.role() == plan::OFFLOADED && pool.tier() == plan::DEVICE)
      fail(name + ": OFFLOADED is in a DEVICE pool, offloaded copies live in host memory");
    if (tensor.role() == plan::PARAMETER_COMPUTE) {
      // Host memory, or a DEVICE pool for a device-resident parameter (minor 7).
      if (tensor.dtype() != plan::BF16)
        fail(name + ": PARAMETER_COMPUTE dtype " + dtypeName(tensor.dtype()) + " (expected bf16)");
    }
    if (tensor.role() == plan::PARAMETER) {
      if (tensor.source().empty()) fail(name + ": PARAMETER without a source initializer");
      if (tensor.dtype() != plan::F32 && tensor.dtype() != plan::F64)
        fail(name + ": PARAMETER dtype " + dtypeName(tensor.dtype()) + " (expected f32 or f64)");
    }
  }

  void collectRecordedEvents() {
    for (const plan::Step& step : plan_.steps())
      if (step.op_case() == plan::Step::kRecord) recorded_.insert(step.record().event());
  }

  void checkTensorId(int stepIndex, uint32_t id, const char* what) const {
    if (id >= static_cast<uint32_t>(plan_.tensors_size()))
      fail(stepLabel(stepIndex) + ": " + what + " names tensor " + std::to_string(id) +
           ", the plan has " + std::to_string(plan_.tensors_size()));
  }

  void checkStep(int index) {
    const plan::Step& step = plan_.steps(index);
    if (step.index() != static_cast<uint32_t>(index))
      fail("step " + std::to_string(index) + ": index " + std::to_string(step.index()) +
           " differs from its position");
    if (!streams_.count(step.stream()))
      fail(stepLabel(index) + ": unknown stream '" + step.stream() + "'");
    switch (step.op_case()) {
      case plan::Step::kKernel: checkKernel(index, step.kernel()); break;
      case plan::Step::kCopy: checkCopy(index, step.copy()); break;
      case plan::Step::kRecord:
        if (step.record().event().empty()) fail(stepLabel(index) + ": empty event name");
        break;
      case plan::Step::kWait:
        if (!recorded_.count(step.wait().event()))
          fail(stepLabel(index) + ": event '" + step.wait().event() + "' is never recorded");
        break;
      case plan::Step::kHostTask: checkHostTask(index, step.host_task()); break;
      default: fail(stepLabel(index) + ": the step has no operation");
    }
  }

  void checkKernel(int index, const plan::Kernel& kernel) {
    const kernels::KernelSpec* spec = backend_.findKernel(kernel.kernel());
    if (!spec)
      fail(stepLabel(index) + ": unknown kernel '" + kernel.kernel() + "' (the " +
           backend_.name() + " backend does not implement it)");
    const bool variadic = spec->inputs == kernels::KernelSpec::kAnyInputs;
    const bool anyOutputs = spec->outputs == kernels::KernelSpec::kAnyOutputs;
    const bool inputsOk = variadic ? kernel.inputs_size() >= 1 : kernel.inputs_size() == spec->inputs;
    const bool outputsOk = anyOutputs ? kernel.outputs_size() >= 1 : kernel.outputs_size() == spec->outputs;
    if (!inputsOk || !outputsOk)
      fail(stepLabel(index) + ": " + std::to_string(kernel.inputs_size()) + " inputs and " +
           std::to_string(kernel.outputs_size()) + " outputs, '" + kernel.kernel() + "' takes " +
           (variadic ? std::string("one or more") : std::to_string(spec->inputs)) + " and " +
           (anyOutputs ? std::string("one or more") : std::to_string(spec->outputs)));
    for (uint32_t id : kernel.inputs()) checkKernelOperand(index, id, "input");
    for (uint32_t id : kernel.outputs()) checkKernelOperand(index, id, "output");
    // The operand shapes and attributes against the kernel's shape rule, before anything is allocated.
    try {
      kernels::KernelCall call;
      bindKernelCall(plan_, index, nullptr, call);
      kernels::checkKernelAttributes(*spec, call);
      spec->rule(call);
    } catch (const Error& e) {
      fail(stepLabel(index) + ": " + e.what());
    }
  }

  void checkKernelOperand(int index, uint32_t id, const char* what) const {
    checkTensorId(index, id, what);
    const plan::Tensor& tensor = plan_.tensors(static_cast<int>(id));
    if (tierOf(tensor) != plan::DEVICE)
      fail(stepLabel(index) + ": " + what + " " + tensorLabel(id) +
           " is not in a DEVICE pool (kernels work on the device arena)");
  }

  void checkCopy(int index, const plan::Copy& copy) const {
    checkTensorId(index, copy.src(), "src");
    checkTensorId(index, copy.dst(), "dst");
    const plan::Tensor& src = plan_.tensors(static_cast<int>(copy.src()));
    const plan::Tensor& dst = plan_.tensors(static_cast<int>(copy.dst()));
    if (copy.src() == copy.dst()) fail(stepLabel(index) + ": copies " + tensorLabel(copy.src()) + " onto itself");
    if (src.buffer().size_bytes() != dst.buffer().size_bytes())
      fail(stepLabel(index) + ": sizes differ: " + tensorLabel(copy.src()) + " is " +
           std::to_string(src.buffer().size_bytes()) + " bytes, " + tensorLabel(copy.dst()) +
           " is " + std::to_string(dst.buffer().size_bytes()));
  }

  // An ADAMW or ACCUMULATE runs where its first tensor lives (minor 7): on
  // the host, or on the device when it is in a DEVICE pool, and then every
  // operand is, and the gradient read may be the arena's (an ACTIVATION).
  bool onDeviceTask(int index, const plan::HostTask& task) const {
    if (task.tensors_size() == 0) return false;
    checkTensorId(index, task.tensors(0), "host task");
    return tierOf(plan_.tensors(static_cast<int>(task.tensors(0)))) == plan::DEVICE;
  }

  void checkTaskOperand(int index, uint32_t id, plan::Role role, bool device, bool gradient) const {
    // A disk-resident moment is updated in its host staging copy.
    // So is a gradient in the staging ring (minor 8), read by a host update or accumulation.
    if (!device && (role == plan::OPTIMIZER_STATE || (role == plan::GRADIENT && gradient)) &&
        id < static_cast<uint32_t>(plan_.tensors_size()) && plan_.tensors(static_cast<int>(id)).role() == plan::STATE_STAGE)
      return checkHostOperand(index, id, plan::STATE_STAGE);
    if (!device) return checkHostOperand(index, id, role);
    checkTensorId(index, id, "device task");
    const plan::Tensor& tensor = plan_.tensors(static_cast<int>(id));
    // The gradient read may be the arena's; an accumulator may be visiting
    // the device (a STATE_STAGE in pool acc_visit, minor 10).
    // Since minor 11 every operand may be visiting (a STATE_STAGE in pool
    // update_visit): a host home's state updated on the device.
    const bool visiting = tensor.role() == plan::STATE_STAGE &&
                          (role == plan::GRADIENT || plan_.header().format_minor() >= kPlanMinorUpdateVisits);
    if (tensor.role() != role && !(gradient && tensor.role() == plan::ACTIVATION) && !visiting)
      fail(stepLabel(index) + ": " + tensorLabel(id) + " has role " + roleName(tensor.role()) +
           ", expected " + roleName(role));
    if (tierOf(tensor) != plan::DEVICE)
      fail(stepLabel(index) + ": " + tensorLabel(id) + " is not in a DEVICE pool, but the task's first "
           "tensor is: a device update needs all of its tensors on the device");
  }

  void checkHostOperand(int index, uint32_t id, plan::Role role) const {
    checkTensorId(index, id, "host task");
    const plan::Tensor& tensor = plan_.tensors(static_cast<int>(id));
    if (tensor.role() != role)
      fail(stepLabel(index) + ": " + tensorLabel(id) + " has role " + roleName(tensor.role()) +
           ", expected " + roleName(role));
    if (tierOf(tensor) == plan::DEVICE)
      fail(stepLabel(index) + ": " + tensorLabel(id) + " is in a DEVICE pool, host tasks need host memory");
  }

  // `compute` is a bf16 copy of the f32 parameter `master`, same shape.
  void checkComputeCopy(int index, uint32_t compute, uint32_t master) const {
    const plan::Tensor& copy = plan_.tensors(static_cast<int>(compute));
    const plan::Tensor& param = plan_.tensors(static_cast<int>(master));
    if (param.dtype() != plan::F32 || copy.dtype() != plan::BF16)
      fail(stepLabel(index) + ": " + tensorLabel(compute) + " is " + dtypeName(copy.dtype()) +
           " for a " + dtypeName(param.dtype()) + " parameter; a compute copy is bf16 of an f32 master");
    if (!std::equal(copy.shape().begin(), copy.shape().end(), param.shape().begin(), param.shape().end()))
      fail(stepLabel(index) + ": " + tensorLabel(compute) + " has shape " + formatShape(copy.shape()) +
           ", its parameter " + formatShape(param.shape()));
    if (copy.source() != param.source())
      fail(stepLabel(index) + ": " + tensorLabel(compute) + " is the compute copy of '" + copy.source() +
           "', not of " + tensorLabel(master));
  }

  // Every PARAMETER_COMPUTE names (source) an f32 PARAMETER of its shape:
  // the master the runtime fills it from.
  void checkComputeCopies() const {
    std::unordered_map<std::string, int> masters;
    for (int i = 0; i < plan_.tensors_size(); ++i)
      if (plan_.tensors(i).role() == plan::PARAMETER) masters.emplace(plan_.tensors(i).source(), i);
    for (int i = 0; i < plan_.tensors_size(); ++i) {
      const plan::Tensor& copy = plan_.tensors(i);
      if (copy.role() != plan::PARAMETER_COMPUTE) continue;
      auto master = masters.find(copy.source());
      if (master == masters.end())
        fail(tensorLabel(static_cast<uint32_t>(i)) + ": PARAMETER_COMPUTE of '" + copy.source() +
             "', which is no PARAMETER's source");
      const plan::Tensor& param = plan_.tensors(master->second);
      if (param.dtype() != plan::F32 ||
          !std::equal(copy.shape().begin(), copy.shape().end(), param.shape().begin(), param.shape().end()))
        fail(tensorLabel(static_cast<uint32_t>(i)) + ": PARAMETER_COMPUTE " + formatShape(copy.shape()) +
             " of the " + formatShape(param.shape()) + " " + dtypeName(param.dtype()) + " parameter " +
             tensorLabel(static_cast<uint32_t>(master->second)) + " (needs an f32 master of its shape)");
    }
  }

  void checkHostTask(int index, const plan::HostTask& task) {
    if (task.kind() == plan::HostTask::ADAMW) {
      if (task.tensors_size() != 4 && task.tensors_size() != 5)
        fail(stepLabel(index) + ": ADAMW takes 4 or 5 tensors (param, grad, m, v [, compute copy]), got " +
             std::to_string(task.tensors_size()));
      const plan::Role roles[4] = {plan::PARAMETER, plan::GRADIENT, plan::OPTIMIZER_STATE,
                                   plan::OPTIMIZER_STATE};
      const bool device = onDeviceTask(index, task);
      for (int i = 0; i < 4; ++i) checkTaskOperand(index, task.tensors(i), roles[i], device, i == 1);
      const plan::Tensor& param = plan_.tensors(static_cast<int>(task.tensors(0)));
      // A visit's master (STATE_STAGE): the plan verifier checks the
      // trainable PARAMETER it is copied from and back into.
      if (!param.trainable() && param.role() != plan::STATE_STAGE)
        fail(stepLabel(index) + ": " + tensorLabel(task.tensors(0)) + " is not trainable");
      for (int i = 1; i < 4; ++i) {
        const plan::Tensor& other = plan_.tensors(static_cast<int>(task.tensors(i)));
        if (other.dtype() != param.dtype() ||
            elementCount(other.shape()) != elementCount(param.shape()))
          fail(stepLabel(index) + ": " + tensorLabel(task.tensors(i)) + " (" +
               formatShape(other.shape()) + " " + dtypeName(other.dtype()) +
               ") does not match the parameter (" + formatShape(param.shape()) + " " +
               dtypeName(param.dtype()) + ")");
      }
      // The bf16 compute copy of an f32 master, rewritten by the update.
      if (task.tensors_size() == 5) {
        checkTaskOperand(index, task.tensors(4), plan::PARAMETER_COMPUTE, device, false);
        checkComputeCopy(index, task.tensors(4), task.tensors(0));
      }
      hasAdamW_ = true;
    } else if (task.kind() == plan::HostTask::READ_LOSS) {
      if (task.tensors_size() != 1)
        fail(stepLabel(index) + ": READ_LOSS takes 1 tensor, got " +
             std::to_string(task.tensors_size()));
      checkHostOperand(index, task.tensors(0), plan::LOSS_READOUT);
      hasReadLoss_ = true;
    } else if (task.kind() == plan::HostTask::ACCUMULATE) {
      // Micro-batches: grad:<param> += grad_part:<param>, both host GRADIENT.
      if (task.tensors_size() != 2)
        fail(stepLabel(index) + ": ACCUMULATE takes 2 tensors (accumulator, addend), got " +
             std::to_string(task.tensors_size()));
      const bool device = onDeviceTask(index, task);
      for (int i = 0; i < 2; ++i) checkTaskOperand(index, task.tensors(i), plan::GRADIENT, device, i == 1);
      const plan::Tensor& acc = plan_.tensors(static_cast<int>(task.tensors(0)));
      const plan::Tensor& addend = plan_.tensors(static_cast<int>(task.tensors(1)));
      if (acc.dtype() != plan::F32 && acc.dtype() != plan::F64)
        fail(stepLabel(index) + ": " + tensorLabel(task.tensors(0)) + " is " + dtypeName(acc.dtype()) +
             ", ACCUMULATE needs f32 or f64");
      if (task.tensors(0) == task.tensors(1))
        fail(stepLabel(index) + ": ACCUMULATE adds " + tensorLabel(task.tensors(0)) + " to itself");
      if (addend.dtype() != acc.dtype() ||
          !std::equal(addend.shape().begin(), addend.shape().end(), acc.shape().begin(), acc.shape().end()))
        fail(stepLabel(index) + ": " + tensorLabel(task.tensors(1)) + " (" + formatShape(addend.shape()) + " " +
             dtypeName(addend.dtype()) + ") does not match the accumulator " + tensorLabel(task.tensors(0)) + " (" +
             formatShape(acc.shape()) + " " + dtypeName(acc.dtype()) + ")");
    } else {
      fail(stepLabel(index) + ": host task kind is unspecified");
    }
  }

  void checkHeader() const {
    const plan::Header& header = plan_.header();
    const uint32_t loss = header.loss_tensor();
    if (loss >= static_cast<uint32_t>(plan_.tensors_size()))
      fail("header: loss_tensor " + std::to_string(loss) + " does not exist (the plan has " +
           std::to_string(plan_.tensors_size()) + " tensors)");
    const plan::Tensor& readout = plan_.tensors(static_cast<int>(loss));
    if (readout.role() != plan::LOSS_READOUT)
      fail("header: loss_tensor " + tensorLabel(loss) + " has role " + roleName(readout.role()) +
           ", expected LOSS_READOUT");
    if (elementCount(readout.shape()) != 1 ||
        (readout.dtype() != plan::F32 && readout.dtype() != plan::F64))
      fail("header: loss_tensor " + tensorLabel(loss) + " must be one f32 or f64 element");
    if (!hasReadLoss_) fail("the plan has no READ_LOSS host task: the loss is never read");
    const std::string& precision = header.precision();
    if (!precision.empty() && precision != "fp32" && precision != "tf32" && precision != "bf16")
      fail("header: precision '" + precision + "' (expected fp32, tf32 or bf16)");

    if (!header.token_input().empty()) {
      const plan::Tensor* input = nullptr;
      for (const plan::Tensor& tensor : plan_.tensors())
        if (tensor.role() == plan::INPUT &&
            (tensor.source() == header.token_input() || tensor.name() == header.token_input()))
          input = &tensor;
      if (!input) fail("header: token_input '" + header.token_input() + "' is not an INPUT tensor");
      if (input->dtype() != plan::I64 || input->shape_size() != 2)
        fail("header: token_input '" + header.token_input() + "' is " +
             formatShape(input->shape()) + " " + dtypeName(input->dtype()) +
             ", expected [batch, sequence] i64");
      // Micro-batch copies of the token input ("<name>@<k>", --data feeds
      // each its own windows): one per micro-batch after the first, each of
      // the token input's shape.
      if (input) {
        const uint32_t microbatches = std::max<uint32_t>(header.microbatches(), 1);
        uint32_t copies = 0;
        for (int id = 0; id < plan_.tensors_size(); ++id) {
          const plan::Tensor& tensor = plan_.tensors(id);
          if (tensor.role() != plan::INPUT || microbatchIndex(inputName(tensor), header.token_input()) <= 0) continue;
          ++copies;
          if (tensor.dtype() != input->dtype() || formatShape(tensor.shape()) != formatShape(input->shape()))
            fail("INPUT " + tensorLabel(static_cast<uint32_t>(id)) + " is " + formatShape(tensor.shape()) + " " +
                 dtypeName(tensor.dtype()) + ", unlike the token input " + formatShape(input->shape()) + " " +
                 dtypeName(input->dtype()));
        }
        if (copies + 1 != microbatches)
          fail("header: microbatches is " + std::to_string(microbatches) + " but the token input '" +
               header.token_input() + "' has " + std::to_string(copies) + " micro-batch copies (expected " +
               std::to_string(microbatches - 1) + ")");
      }
    }

    // The targets input (minor 7): beside a token input, an INPUT of its
    // shape and dtype, with as many micro-batch copies.
    if (!header.target_input().empty()) {
      if (header.token_input().empty()) fail("header: target_input '" + header.target_input() + "' without a token_input");
      const plan::Tensor* tokens = nullptr;
      const plan::Tensor* targets = nullptr;
      uint32_t tokenCopies = 0, targetCopies = 0;
      for (const plan::Tensor& tensor : plan_.tensors()) {
        if (tensor.role() != plan::INPUT) continue;
        const int64_t tokenIndex = microbatchIndex(inputName(tensor), header.token_input());
        const int64_t targetIndex = microbatchIndex(inputName(tensor), header.target_input());
        if (tokenIndex == 0) tokens = &tensor;
        if (targetIndex == 0) targets = &tensor;
        tokenCopies += tokenIndex > 0;
        targetCopies += targetIndex > 0;
      }
      if (!targets) fail("header: target_input '" + header.target_input() + "' is not an INPUT tensor");
      if (tokens && (targets->dtype() != tokens->dtype() || formatShape(targets->shape()) != formatShape(tokens->shape())))
        fail("header: target_input '" + header.target_input() + "' is " + formatShape(targets->shape()) + " " +
             dtypeName(targets->dtype()) + ", unlike the token input " + formatShape(tokens->shape()) + " " +
             dtypeName(tokens->dtype()));
      if (targetCopies != tokenCopies)
        fail("header: target_input '" + header.target_input() + "' has " + std::to_string(targetCopies) +
             " micro-batch copies, the token input " + std::to_string(tokenCopies));
      if (header.format_minor() < kPlanMinorTargets)
        fail("header: target_input needs format minor " + std::to_string(kPlanMinorTargets) + ", the plan says " +
             std::to_string(header.format_minor()));
    }

    // An evaluation plan (--forward-only) computes the loss and nothing else.
    if (header.evaluation()) {
      if (header.format_minor() < kPlanMinorEvaluation)
        fail("header: evaluation is set in a format " + std::to_string(header.format_major()) + "." +
             std::to_string(header.format_minor()) + " plan (it needs 1." + std::to_string(kPlanMinorEvaluation) +
             ")");
      for (int i = 0; i < plan_.tensors_size(); ++i) {
        const plan::Role role = plan_.tensors(i).role();
        if (role == plan::GRADIENT || role == plan::OPTIMIZER_STATE)
          fail("header: an evaluation plan has no gradients or optimizer state, but " +
               tensorLabel(static_cast<uint32_t>(i)) + " is " + roleName(role));
      }
      for (int i = 0; i < plan_.steps_size(); ++i) {
        const plan::Step& step = plan_.steps(i);
        if (step.op_case() == plan::Step::kHostTask && step.host_task().kind() != plan::HostTask::READ_LOSS)
          fail("header: an evaluation plan has no updates, but " + stepLabel(i) + " is one");
      }
    }

    if (hasAdamW_) {
      const plan::AdamW& adamw = header.optimizer();
      if (!(adamw.beta1() >= 0 && adamw.beta1() < 1) || !(adamw.beta2() >= 0 && adamw.beta2() < 1))
        fail("header: optimizer betas (" + std::to_string(adamw.beta1()) + ", " +
             std::to_string(adamw.beta2()) + ") must lie in [0, 1)");
      if (!(adamw.lr() >= 0) || !(adamw.eps() > 0) || !(adamw.weight_decay() >= 0))
        fail("header: optimizer needs lr >= 0, eps > 0 and weight_decay >= 0");
    }
  }

  // Last, on a plan now known to be well formed: the schedule verifier.
  void checkSchedule() const {
    const std::vector<std::string> failures = verifySchedule(plan_);
    if (failures.empty()) return;
    std::string more;
    if (failures.size() > 1) more = " (and " + std::to_string(failures.size() - 1) + " more)";
    fail("plan verifier: " + failures.front() + more);
  }

  const plan::Plan& plan_;
  const Backend& backend_;
  const std::string& label_;
  std::set<std::string> streams_;
  std::unordered_set<std::string> names_;
  std::unordered_set<std::string> recorded_;
  bool hasAdamW_ = false;
  bool hasReadLoss_ = false;
};

}  // namespace

void validatePlan(const plan::Plan& plan, const Backend& backend, const std::string& label) {
  PlanValidator(plan, backend, label).run();
}

}  // namespace megatrain::runtime
