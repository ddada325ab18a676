//===- UpdateVisitEmitter.cpp - update visits in the plan -----------------===//
//
// PlanBuilder's update-visit half (PlanBuilder.h; docs/tiering.md, "Update
// visits"). A host home marked mt.update = "visit" (mt-homes, from
// `--state-home visit[:REGEX]`) keeps its master, moments and compute copy
// in the host pool, as any host home, and its update runs on the device:
//
//   fetch     `copy` h2d of the master, adam_m and adam_v into STATE_STAGE
//             `visit_master:`, `visit_m:`, `visit_v:` at the next bytes of
//             the ring pool `update_visit` (mt.update_ring_size bytes,
//             DEVICE), beside `visit_compute:` (bf16, where the parameter
//             has a compute copy); issued half the ring's slots of visits
//             ahead: before the update of that earlier visit, or for the
//             first ones before the loss (the start of the backward)
//   update    ADAMW on the `optimizer` stream over the visit tensors and
//             the gradient on the device: the arena's, the device
//             accumulator, the accumulator's last visit (acc_visit), or,
//             for a sum kept on the host, `copy` h2d of it into `visit_grad:`
//   return    `copy` d2h of each visit tensor the update wrote back into the
//             master, adam_m, adam_v and the compute copy
//
// With mt.moments = "device" (`--state-home visit-master`) adam_m and adam_v
// live in device_state: only the master is fetched, the update reads the
// moments in place, and the master and compute copy go back.
//
// The device ADAMW runs the host AdamW's f32 operations in the same order
// (runtime/cuda/adamw.cu against runtime/host/AdamW.cpp), so the plan trains
// bitwise as one whose update runs on the host. insertEvents orders the
// ring by its bytes: a fetch into bytes waits for the return of the visit
// there before it; the next step's fetch of the compute copy comes after
// the return, as every stream but the host's is done at a step's end.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"

#include "megatrain/plan/FormatVersion.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

namespace megatrain::emission {

bool PlanBuilder::visitsForUpdate(const std::string &param) const {
  return updateVisitors.contains(param);
}

void PlanBuilder::findUpdateVisits(llvm::ArrayRef<mlir::Operation *> ops) {
  if (updateVisitors.empty())
    return;
  mlir::Operation *lossOp = nullptr;
  for (mlir::Operation *op : ops) {
    if (mlir::isa<mt::LossOp>(op) && !lossOp)
      lossOp = op;
    auto update = mlir::dyn_cast<mt::AdamWOp>(op);
    if (!update || !visitsForUpdate(update.getParam().str()))
      continue;
    updateVisitOf[update.getParam().str()] = updateVisitList.size();
    updateVisitList.push_back({update.getParam().str(), op, update.getGrad().getType()});
  }
  // The ring's slots of the largest visit (mt-homes sized it so: at least
  // 3), and each visit fetched `lead` visits ahead.
  uint64_t largest = RingPool::padded(0);
  for (const UpdateVisit &visit : updateVisitList) {
    const uint64_t f32 = RingPool::padded(tensorTypeBytes(visit.type));
    const uint64_t bf16 = computeCopies.count(visit.param)
                              ? RingPool::padded(tensorTypeBytes(visit.type) / 2)
                              : 0;
    // The master, the moments unless they stay on the device, and a sum kept
    // on the host takes a slot part of its own (visit_grad:).
    const uint64_t f32s = (deviceMoments.contains(visit.param) ? 1 : 3) +
                          (func->hasAttr(kMicrobatchesAttr) ? 1 : 0);
    largest = std::max(largest, f32s * f32 + bf16);
  }
  const uint64_t slots = std::max<uint64_t>(3, updateRing.size / largest);
  const size_t lead = static_cast<size_t>(slots / 2);
  for (size_t n = 0; n < updateVisitList.size(); ++n) {
    mlir::Operation *anchor =
        n >= lead ? updateVisitList[n - lead].op : (lossOp ? lossOp : updateVisitList[0].op);
    updateFetchesBefore[anchor].push_back(n);
  }
}

mlir::FailureOr<uint32_t> PlanBuilder::addUpdateStage(mlir::Operation *op, llvm::StringRef prefix,
                                                       const std::string &param, mlir::Type type) {
  return addRingStage(updateRing, op, prefix, param, type, "update visit",
                      "ring of update visits (mt.update_ring_size)", kPlanMinorUpdateVisits);
}

mlir::LogicalResult PlanBuilder::emitUpdateVisitFetches(mlir::Operation *op, int64_t opStep) {
  auto fetches = updateFetchesBefore.find(op);
  if (fetches == updateFetchesBefore.end())
    return mlir::success();
  for (size_t n : fetches->second) {
    UpdateVisit &visit = updateVisitList[n];
    auto master = parameterMasters.find(visit.param);
    if (master == parameterMasters.end())
      return visit.op->emitError("mt.adamw updates '") << visit.param << "' but no mt.param reads it";
    // The moments live on the host (the parameter's home); made here, where
    // the first step reading them is.
    mlir::FailureOr<uint32_t> m =
        addTensor(visit.op, "adam_m:" + visit.param, visit.type, pb::OPTIMIZER_STATE);
    mlir::FailureOr<uint32_t> v =
        addTensor(visit.op, "adam_v:" + visit.param, visit.type, pb::OPTIMIZER_STATE);
    if (mlir::failed(m) || mlir::failed(v))
      return mlir::failure();
    visit.hostM = *m;
    visit.hostV = *v;
    mlir::FailureOr<uint32_t> stageMaster = addUpdateStage(op, "visit_master:", visit.param, visit.type);
    if (mlir::failed(stageMaster))
      return mlir::failure();
    visit.master = *stageMaster;
    const bool momentsHere = deviceMoments.contains(visit.param);
    if (momentsHere) {
      // visit-master: the moments stay in device_state; the update reads them there.
      placeOnDeviceState(*m);
      placeOnDeviceState(*v);
      visit.m = *m;
      visit.v = *v;
    } else {
      placeState(visit.param, *m);
      placeState(visit.param, *v);
      mlir::FailureOr<uint32_t> stageM = addUpdateStage(op, "visit_m:", visit.param, visit.type);
      mlir::FailureOr<uint32_t> stageV = addUpdateStage(op, "visit_v:", visit.param, visit.type);
      if (mlir::failed(stageM) || mlir::failed(stageV))
        return mlir::failure();
      visit.m = *stageM;
      visit.v = *stageV;
    }
    if (computeCopies.count(visit.param)) {
      auto shape = mlir::cast<mlir::RankedTensorType>(visit.type).getShape();
      mlir::Type bf16 = mlir::RankedTensorType::get(shape, mlir::BFloat16Type::get(op->getContext()));
      mlir::FailureOr<uint32_t> compute = addUpdateStage(op, "visit_compute:", visit.param, bf16);
      if (mlir::failed(compute))
        return mlir::failure();
      visit.compute = *compute;
    }
    std::vector<std::pair<uint32_t, uint32_t>> fetches = {{master->second, visit.master}};
    if (!momentsHere)
      fetches.insert(fetches.end(), {{visit.hostM, visit.m}, {visit.hostV, visit.v}});
    for (auto [from, to] : fetches) {
      pb::Step &copy = addStep(kHostToDevice, op, opStep);
      copy.mutable_copy()->set_src(from);
      copy.mutable_copy()->set_dst(to);
    }
  }
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::emitVisitingUpdate(mt::AdamWOp op, const std::string &param,
                                                     uint32_t master, uint32_t gradient,
                                                     mlir::Type type, bool accumulated,
                                                     int64_t opStep) {
  auto n = updateVisitOf.find(param);
  if (n == updateVisitOf.end() || updateVisitList[n->second].master == UINT32_MAX)
    return op.emitError("the update visit of '") << param << "' was never fetched";
  const UpdateVisit &visit = updateVisitList[n->second];
  // The gradient on the device.
  uint32_t deviceGrad = gradient;
  if (accumulated) {
    const bool fused = fusedSinks.contains(op);
    if (!fused && mlir::failed(emitAccumulate(op, param, gradient, type, opStep,
                                              /*returnVisit=*/false)))
      return mlir::failure();
    if (visits(param)) {
      // The last part's visit holds the sum: read in place, not returned
      // (emitAccumulate above, or the product that added the part).
      auto last = lastProductParts.find(param);
      mlir::FailureOr<uint32_t> sum =
          fused && last != lastProductParts.end() ? visitTensorOf(last->second) : visitTensorOf(op);
      if (mlir::failed(sum))
        return mlir::failure();
      deviceGrad = *sum;
    } else if (accumulatesOnDevice(param)) {
      deviceGrad = hostGradients.at(param);
    } else {
      // Summed on the host: its way to the update.
      mlir::FailureOr<uint32_t> stage = addUpdateStage(op, "visit_grad:", param, type);
      if (mlir::failed(stage))
        return mlir::failure();
      pb::Step &copy = addStep(kHostToDevice, op, opStep);
      copy.mutable_copy()->set_src(hostGradients.at(param));
      copy.mutable_copy()->set_dst(*stage);
      deviceGrad = *stage;
    }
  }
  pb::HostTask *task = addStep(kOptimizerStream, op, opStep).mutable_host_task();
  noteRead(deviceGrad);
  task->set_kind(pb::HostTask::ADAMW);
  for (uint32_t id : {visit.master, deviceGrad, visit.m, visit.v})
    task->add_tensors(id);
  if (visit.compute != UINT32_MAX)
    task->add_tensors(visit.compute);
  std::vector<std::pair<uint32_t, uint32_t>> returns = {{visit.master, master}};
  if (!deviceMoments.contains(param))
    returns.insert(returns.end(), {{visit.m, visit.hostM}, {visit.v, visit.hostV}});
  if (visit.compute != UINT32_MAX)
    returns.push_back({visit.compute, computeCopies.at(param)});
  for (auto [from, to] : returns) {
    pb::Step &copy = addStep(kDeviceToHost, op, opStep);
    copy.mutable_copy()->set_src(from);
    copy.mutable_copy()->set_dst(to);
  }
  requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorUpdateVisits);
  return mlir::success();
}

} // namespace megatrain::emission
