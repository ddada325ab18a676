//===- HostTaskEmitter.cpp - the host side of a training step in the plan -===//
//
// PlanBuilder's host-task half (PlanBuilder.h): what the ops that end a
// training step become on the host stream.
//
//   mt.loss x     `copy` d2h of x (role LOSS) into the host `loss` readout +
//                 `host_task READ_LOSS` on host
//   mt.adamw g    `copy` d2h of g into the host gradient + `host_task ADAMW`
//                 (param, grad, adam_m:<param>, adam_v:<param> [,
//                 compute:<param>]) on host; one optimizer configuration
//                 (header.optimizer) per plan. The host gradient is a
//                 STATE_STAGE `grad_stage:<param>` in the gradient staging
//                 ring (pool grad_stage, mt.grad_stage_size bytes, set by
//                 mt-homes; format minor 8): each gradient takes the ring's
//                 next bytes, wrapping to its start, and the d2h copy into
//                 bytes an earlier gradient used waits for that one's ADAMW
//                 (insertEvents). Without a ring (mt.grad_stage_size 0 or
//                 absent: --keep-gradients, or mt-homes did not run) it is a
//                 persistent GRADIENT `grad:<param>` in the host pool
//   mt.grad_part  micro-batch k's gradient part (mt-microbatch): k = 0 `copy`
//                 d2h into host `grad:<param>` (the accumulator); k >= 1
//                 `copy` d2h into a ring `grad_stage:<param>` (without a
//                 ring, into the host `grad_part:<param>`, one per
//                 parameter, reused by every k) + `host_task ACCUMULATE`
//                 (grad:<param>, the part) on host, and the plan is format
//                 minor 2. The parameter's mt.adamw is then the last part:
//                 copy into the ring, ACCUMULATE, ADAMW.
//
// A parameter whose state lives on the device (mt.home = "device", mt-homes;
// docs/tiering.md "State homes") has its m, v (and micro-batch accumulator
// grad:<param>) in the device_state pool, and its steps run on the compute
// stream: ADAMW reads the arena gradient itself (no gradient is kept), part 0
// is a device copy into grad:<param>, parts k >= 1 ACCUMULATE the arena
// gradient into it; the plan is then format minor 7.
//
// A parameter whose optimizer state lives on disk (mt.home = "disk") keeps
// its master, gradient and compute copy on the host; its m and v are in the
// disk pool, and its update is: `copy` on disk of m, v into the parameter's
// staging tensors stage_m:<param>, stage_v:<param> (pool disk_stage, two
// slots shared by lifetime), ADAMW on the staging tensors on host, `copy` on
// disk back. The read-back of the next disk parameter is issued before this
// one's update, so the disk reads one update ahead; the first one's is the
// plan's first step, so the disk reads it during the forward pass (its slot
// is free then: the disk stream wrote it back in the previous step, in order)
// rather than when the host has issued every step before its update.
//
// With micro-batches, a host or disk home whose accumulator is on the device
// (mt.accumulate = "device", mt-homes) has grad:<param> in device_state,
// part 0 copied and parts k >= 1 ACCUMULATEd there on compute as a device
// home's, and after the last part one `copy` d2h of the accumulator into the
// gradient staging ring, which its host ADAMW reads.
//
// A device accumulator's part that a matrix product makes (the weight
// gradients) is written by the product itself (PlanEmitter.cpp,
// emitProductPart): part 0 is the product's output, part k >= 1 a
// `matmul_add` with the accumulator as addend and output; its mt.grad_part
// (or the last part's mt.adamw) then adds no copy or ACCUMULATE.
//
// The checks here are those of a consistent update: one mt.adamw per
// trainable parameter, gradients of the master's type, parts in micro-batch
// order with one count.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"

#include "megatrain/plan/FormatVersion.h"

#include <algorithm>

namespace megatrain::emission {

mlir::LogicalResult PlanBuilder::emitLoss(mt::LossOp op, int64_t opStep) {
  if (loss)
    return op.emitError("a plan has one loss; another mt.loss is at ")
           << formatLocation(loss->getLoc());
  loss = op;
  mlir::FailureOr<uint32_t> value = tensorOf(op, op.getValue());
  if (mlir::failed(value))
    return mlir::failure();
  pb::Tensor *valueTensor = plan.mutable_tensors(*value);
  if (valueTensor->role() == pb::ACTIVATION)
    valueTensor->set_role(pb::LOSS);

  mlir::FailureOr<uint32_t> readout =
      addTensor(op, "loss", op.getValue().getType(), pb::LOSS_READOUT);
  if (mlir::failed(readout))
    return mlir::failure();
  placeOnHost(*readout);
  plan.mutable_header()->set_loss_tensor(*readout);

  pb::Step &copy = addStep(kDeviceToHost, op, opStep);
  copy.mutable_copy()->set_src(*value);
  copy.mutable_copy()->set_dst(*readout);
  noteRead(*value);
  pb::Step &read = addStep(kHostStream, op, opStep);
  read.mutable_host_task()->set_kind(pb::HostTask::READ_LOSS);
  read.mutable_host_task()->add_tensors(*readout);
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::addDiskState(llvm::ArrayRef<mlir::Operation *> ops) {
  constexpr uint64_t kDiskAlignment = 4096; // O_DIRECT blocks
  auto aligned = [&](uint64_t bytes) {
    return std::max<uint64_t>((bytes + kDiskAlignment - 1) / kDiskAlignment * kDiskAlignment,
                              kDiskAlignment);
  };
  std::vector<mt::AdamWOp> updates;
  for (mlir::Operation *op : ops)
    if (auto update = mlir::dyn_cast<mt::AdamWOp>(op); update && onDisk(update.getParam().str()))
      updates.push_back(update);
  for (mt::AdamWOp update : updates)
    diskSlotBytes = std::max(diskSlotBytes, aligned(tensorTypeBytes(update.getGrad().getType())));
  for (mt::AdamWOp update : updates) {
    std::string param = update.getParam().str();
    mlir::Type type = update.getGrad().getType();
    DiskState state{param, 0, 0, 0, 0};
    uint32_t *ids[4] = {&state.m, &state.v, &state.stageM, &state.stageV};
    const char *prefixes[4] = {"adam_m:", "adam_v:", "stage_m:", "stage_v:"};
    for (int k = 0; k < 4; ++k) {
      mlir::FailureOr<uint32_t> id = addTensor(
          update, prefixes[k] + param, type, k < 2 ? pb::OPTIMIZER_STATE : pb::STATE_STAGE);
      if (mlir::failed(id))
        return mlir::failure();
      *ids[k] = *id;
      pb::Buffer *buffer = plan.mutable_tensors(*id)->mutable_buffer();
      if (k < 2) {
        buffer->set_pool(diskPool);
        buffer->set_offset(diskTop);
        diskTop += aligned(buffer->size_bytes());
      } else {
        // Slot i % 2 holds [m | v] of every other disk parameter.
        uint64_t slot = diskStates.size() % 2;
        buffer->set_pool(diskStagePool);
        buffer->set_offset((2 * slot + (k - 2)) * diskSlotBytes);
      }
    }
    diskIndex[param] = diskStates.size();
    diskStates.push_back(state);
  }
  return mlir::success();
}

void PlanBuilder::emitDiskReadBack(size_t index, mlir::Operation *op, int64_t opStep) {
  const DiskState &state = diskStates[index];
  for (auto [from, to] : {std::pair{state.m, state.stageM}, std::pair{state.v, state.stageV}}) {
    pb::Step &copy = addStep(kDiskStream, op, opStep);
    copy.mutable_copy()->set_src(from);
    copy.mutable_copy()->set_dst(to);
  }
}

mlir::FailureOr<uint32_t> PlanBuilder::addRingStage(RingPool &ring, mlir::Operation *op,
                                                     llvm::StringRef prefix,
                                                     const std::string &param, mlir::Type type,
                                                     llvm::StringRef holder,
                                                     llvm::StringRef ringName, uint32_t minor) {
  mlir::FailureOr<uint32_t> id = addTensor(op, (prefix + param).str(), type, pb::STATE_STAGE);
  if (mlir::failed(id))
    return mlir::failure();
  pb::Buffer *buffer = plan.mutable_tensors(*id)->mutable_buffer();
  if (!ring.place(*buffer))
    return op->emitError("the ")
           << holder << " of '" << param << "' (" << buffer->size_bytes()
           << " bytes) does not fit the " << ring.size << "-byte " << ringName;
  requirePlanFormatMinor(*plan.mutable_header(), minor);
  return id;
}

mlir::FailureOr<uint32_t> PlanBuilder::addGradientStage(mlir::Operation *op,
                                                         const std::string &param,
                                                         mlir::Type type) {
  return addRingStage(gradStage, op, "grad_stage:", param, type, "gradient",
                      "gradient staging ring (mt.grad_stage_size)", kPlanMinorGradientStage);
}

mlir::LogicalResult PlanBuilder::emitAdamW(mt::AdamWOp op, int64_t opStep) {
  std::string param = op.getParam().str();
  auto master = parameterMasters.find(param);
  if (master == parameterMasters.end())
    return op.emitError("mt.adamw updates '")
           << param << "' but no mt.param reads it";
  const pb::Tensor &masterTensor = plan.tensors(master->second);
  if (!masterTensor.trainable())
    return op.emitError("mt.adamw updates frozen parameter '") << param << "'";
  auto [previous, inserted] = updates.emplace(param, op);
  if (!inserted)
    return op.emitError("parameter '")
           << param << "' has a second mt.adamw; the first is at "
           << formatLocation(previous->second.getLoc());

  // One optimizer configuration per plan (header.optimizer).
  if (!firstUpdate) {
    firstUpdate = op;
    pb::AdamW *adamw = plan.mutable_header()->mutable_optimizer();
    adamw->set_lr(op.getLr().convertToDouble());
    adamw->set_beta1(op.getBeta1().convertToDouble());
    adamw->set_beta2(op.getBeta2().convertToDouble());
    adamw->set_eps(op.getEps().convertToDouble());
    adamw->set_weight_decay(op.getWeightDecay().convertToDouble());
  } else if (op.getLr() != firstUpdate->getLr() ||
             op.getBeta1() != firstUpdate->getBeta1() ||
             op.getBeta2() != firstUpdate->getBeta2() ||
             op.getEps() != firstUpdate->getEps() ||
             op.getWeightDecay() != firstUpdate->getWeightDecay()) {
    return op.emitError("mt.adamw hyper-parameters differ from those at ")
           << formatLocation(firstUpdate->getLoc())
           << "; a plan has one optimizer configuration";
  }

  mlir::FailureOr<uint32_t> gradient = gradientOf(op, param, op.getGrad(), master->second);
  if (mlir::failed(gradient))
    return mlir::failure();
  mlir::Type type = op.getGrad().getType();

  // Micro-batches: the update's gradient is the last part; the earlier ones
  // are already on the host (emitGradPart).
  auto seen = partsSeen.find(param);
  bool accumulated = seen != partsSeen.end();
  int64_t earlier =
      accumulated ? static_cast<int64_t>(lastPart.at(param).getCount()) - 1 : 0;
  if (accumulated && seen->second != earlier)
    return op.emitError("mt.adamw of '")
           << param << "' comes after " << seen->second << " of its " << earlier
           << " earlier mt.grad_part";
  if (!accumulated && func->hasAttr(kMicrobatchesAttr))
    return op.emitError("mt.adamw of '")
           << param << "' in a function of micro-batches has no earlier "
                       "mt.grad_part (run mt-microbatch as a whole)";
  // A host home whose update visits the device (UpdateVisitEmitter.cpp).
  if (visitsForUpdate(param))
    return emitVisitingUpdate(op, param, master->second, *gradient, type, accumulated, opStep);

  // A device update reads the arena gradient; nothing is kept. A host one
  // reads it from the staging ring, or from its kept gradient; one whose
  // micro-batches accumulate on the device reads the accumulator's copy in
  // the ring.
  const bool device = onDevice(param);
  const bool copiedOut = accumulated && !device && accumulatesOnDevice(param);
  const bool staged = (!accumulated && !device && gradStage.size > 0) || copiedOut;
  mlir::FailureOr<uint32_t> hostGrad =
      staged      ? addGradientStage(op, param, type)
      : accumulated ? mlir::FailureOr<uint32_t>(hostGradients.at(param))
      : device    ? gradient
                  : addTensor(op, "grad:" + param, type, pb::GRADIENT);
  // Disk: m and v exist already (addDiskState); the update reads their staging.
  auto disk = diskIndex.find(param);
  const bool onDiskHome = disk != diskIndex.end();
  mlir::FailureOr<uint32_t> m =
      onDiskHome ? mlir::FailureOr<uint32_t>(diskStates[disk->second].stageM)
                 : addTensor(op, "adam_m:" + param, type, pb::OPTIMIZER_STATE);
  mlir::FailureOr<uint32_t> v =
      onDiskHome ? mlir::FailureOr<uint32_t>(diskStates[disk->second].stageV)
                 : addTensor(op, "adam_v:" + param, type, pb::OPTIMIZER_STATE);
  if (mlir::failed(hostGrad) || mlir::failed(m) || mlir::failed(v))
    return mlir::failure();
  if (!accumulated && !device && !staged)
    placeOnHost(*hostGrad);
  if (!onDiskHome) {
    placeState(param, *m);
    placeState(param, *v);
  } else {
    // The first disk update's state was read back at the step's start
    // (emitPlan); every update reads the next one's, a slot ahead.
    if (disk->second + 1 < diskStates.size())
      emitDiskReadBack(disk->second + 1, op, opStep);
  }

  if (accumulated) {
    // Unless its product added the last part already (emitProductPart).
    if (!fusedSinks.contains(op) &&
        mlir::failed(emitAccumulate(op, param, *gradient, type, opStep)))
      return mlir::failure();
    if (copiedOut) {
      // The device accumulator, once, to the host update.
      pb::Step &copy = addStep(kDeviceToHost, op, opStep);
      copy.mutable_copy()->set_src(hostGradients.at(param));
      copy.mutable_copy()->set_dst(*hostGrad);
    }
  } else if (device) {
    // The update below reads it in place (on compute, or on optimizer after
    // the event that orders it behind the gradient kernel).
  } else {
    pb::Step &copy = addStep(kDeviceToHost, op, opStep);
    copy.mutable_copy()->set_src(*gradient);
    copy.mutable_copy()->set_dst(*hostGrad);
    noteRead(*gradient);
  }
  const char *stream = !device ? kHostStream : options.optimizerStream ? kOptimizerStream : kCompute;
  pb::HostTask *task = addStep(stream, op, opStep).mutable_host_task();
  if (device && !accumulated)
    noteRead(*gradient);
  task->set_kind(pb::HostTask::ADAMW);
  for (uint32_t id : {master->second, *hostGrad, *m, *v})
    task->add_tensors(id);
  // The update also rewrites the bf16 copy the device fetches.
  if (auto compute = computeCopies.find(param); compute != computeCopies.end())
    task->add_tensors(compute->second);
  if (onDiskHome) {
    const DiskState &state = diskStates[disk->second];
    for (auto [from, to] : {std::pair{state.stageM, state.m}, std::pair{state.stageV, state.v}}) {
      pb::Step &copy = addStep(kDiskStream, op, opStep);
      copy.mutable_copy()->set_src(from);
      copy.mutable_copy()->set_dst(to);
    }
  }
  return mlir::success();
}

mlir::FailureOr<uint32_t> PlanBuilder::gradientOf(mlir::Operation *op,
                                                   const std::string &param,
                                                   mlir::Value grad, uint32_t master) {
  mlir::FailureOr<uint32_t> gradient = tensorOf(op, grad);
  if (mlir::failed(gradient))
    return mlir::failure();
  const pb::Tensor &masterTensor = plan.tensors(master);
  const pb::Tensor &gradTensor = plan.tensors(*gradient);
  if (gradTensor.dtype() != masterTensor.dtype() ||
      gradTensor.buffer().size_bytes() != masterTensor.buffer().size_bytes() ||
      !std::equal(gradTensor.shape().begin(), gradTensor.shape().end(),
                  masterTensor.shape().begin(), masterTensor.shape().end()))
    return op->emitError("the gradient of '")
           << param << "' has type " << grad.getType() << ", unlike the parameter";
  return gradient;
}

mlir::LogicalResult PlanBuilder::emitAccumulate(mlir::Operation *op,
                                                const std::string &param,
                                                uint32_t gradient, mlir::Type type,
                                                int64_t opStep, bool returnVisit) {
  const bool visit = visits(param);
  if (visit || accumulatesOnDevice(param)) {
    // On the device: the arena gradient is added straight into the
    // accumulator, or into its visit to the device (VisitEmitter.cpp), on
    // the compute stream; a visit then goes back to its host accumulator.
    mlir::FailureOr<uint32_t> sum = deviceSumOf(op, param);
    if (mlir::failed(sum))
      return mlir::failure();
    const uint32_t accumulator = *sum;
    pb::HostTask *task = addStep(kCompute, op, opStep).mutable_host_task();
    noteRead(gradient);
    task->set_kind(pb::HostTask::ACCUMULATE);
    task->add_tensors(accumulator);
    task->add_tensors(gradient);
    requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorHomes);
    if (visit && returnVisit)
      emitVisitReturn(op, param, accumulator, opStep);
    return mlir::success();
  }
  auto stage = partStages.find(param);
  if (gradStage.size > 0) {
    // Each part k >= 1 takes the ring's next bytes.
    mlir::FailureOr<uint32_t> id = addGradientStage(op, param, type);
    if (mlir::failed(id))
      return mlir::failure();
    stage = partStages.insert_or_assign(param, *id).first;
  } else if (stage == partStages.end()) {
    // One staging tensor per parameter, reused by every part k >= 1: the
    // d2h copy of part k+1 waits for the ACCUMULATE of part k (insertEvents).
    mlir::FailureOr<uint32_t> id = addTensor(op, "grad_part:" + param, type, pb::GRADIENT);
    if (mlir::failed(id))
      return mlir::failure();
    placeOnHost(*id);
    stage = partStages.emplace(param, *id).first;
  }
  pb::Step &copy = addStep(kDeviceToHost, op, opStep);
  copy.mutable_copy()->set_src(gradient);
  copy.mutable_copy()->set_dst(stage->second);
  noteRead(gradient);
  pb::HostTask *task = addStep(kHostStream, op, opStep).mutable_host_task();
  task->set_kind(pb::HostTask::ACCUMULATE);
  task->add_tensors(hostGradients.at(param));
  task->add_tensors(stage->second);
  requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorTiering);
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::emitGradPart(mt::GradPartOp op, int64_t opStep) {
  std::string param = op.getParam().str();
  auto master = parameterMasters.find(param);
  if (master == parameterMasters.end())
    return op.emitError("mt.grad_part of '") << param << "' but no mt.param reads it";
  if (!plan.tensors(master->second).trainable())
    return op.emitError("mt.grad_part of frozen parameter '") << param << "'";
  if (updates.count(param))
    return op.emitError("mt.grad_part of '") << param << "' after its mt.adamw";
  int64_t expected = partsSeen[param];
  int64_t index = static_cast<int64_t>(op.getIndex());
  if (index != expected)
    return op.emitError("mt.grad_part of '")
           << param << "' has index " << index << ", expected " << expected
           << " (parts come in micro-batch order)";
  auto previous = lastPart.find(param);
  if (previous != lastPart.end() && previous->second.getCount() != op.getCount())
    return op.emitError("mt.grad_part of '")
           << param << "' has count " << op.getCount() << ", unlike the one at "
           << formatLocation(previous->second.getLoc());
  lastPart.insert_or_assign(param, op);
  ++partsSeen[param];

  mlir::FailureOr<uint32_t> gradient = gradientOf(op, param, op.getGrad(), master->second);
  if (mlir::failed(gradient))
    return mlir::failure();
  mlir::Type type = op.getGrad().getType();
  // Its product wrote it into the accumulator (emitProductPart).
  if (fusedSinks.contains(op))
    return mlir::success();
  if (index > 0)
    return emitAccumulate(op, param, *gradient, type, opStep);

  mlir::FailureOr<uint32_t> hostGrad = addTensor(op, "grad:" + param, type, pb::GRADIENT);
  if (mlir::failed(hostGrad))
    return mlir::failure();
  if (accumulatesOnDevice(param))
    placeOnDeviceState(*hostGrad);
  else
    placeOnHost(*hostGrad);
  hostGradients[param] = *hostGrad;
  pb::Step &copy = addStep(accumulatesOnDevice(param) ? kCompute : kDeviceToHost, op, opStep);
  copy.mutable_copy()->set_src(*gradient);
  copy.mutable_copy()->set_dst(*hostGrad);
  noteRead(*gradient);
  return mlir::success();
}

} // namespace megatrain::emission
