//===- VisitEmitter.cpp - accumulator visits in the plan ------------------===//
//
// PlanBuilder's accumulator-visit half (PlanBuilder.h; docs/tiering.md,
// "Accumulator visits"). A host or disk home marked mt.accumulate = "visit"
// (mt-tier with accumulator-visits, kept by mt-homes) keeps its micro-batch
// accumulator grad:<param> in the host pool, and each part that is added
// to it visits the device in a STATE_STAGE `acc_visit:<param>` at the next
// bytes of the ring pool `acc_visit` (mt.visit_ring_size bytes, DEVICE):
//
//   part 0 of a product   the product writes its output into a new visit
//                         tensor; `copy` d2h of it into grad:<param>
//   part 0 otherwise      `copy` d2h of the arena gradient into
//                         grad:<param> (no visit)
//   part k >= 1           `copy` h2d of grad:<param> into a new visit
//                         tensor, issued half the ring's slots of visits
//                         ahead (at least 3 slots) (before the op that adds that
//                         earlier visit's part, and after the copy back of
//                         this parameter's previous part); the product's
//                         `matmul_add` into it (or ACCUMULATE on compute);
//                         `copy` d2h of it back into grad:<param>
//
// The update then reads grad:<param> on the host as a host accumulator's.
// The adds are those of a device accumulator, in the same order, so the
// plan trains bitwise as one whose accumulators stay on the device.
// insertEvents orders the rest by the bytes: a fetch into ring bytes waits
// for the copy back of the visit there before it, and the next part's
// fetch for this part's copy back.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"

#include "megatrain/plan/FormatVersion.h"

#include <algorithm>

namespace megatrain::emission {

bool PlanBuilder::visits(const std::string &param) const {
  return visitingAccumulators.contains(param);
}

void PlanBuilder::findVisits(llvm::ArrayRef<mlir::Operation *> ops) {
  if (visitingAccumulators.empty())
    return;
  // In plan order, the ops that add a part to a visiting accumulator, and
  // the part's index.
  std::map<std::string, int64_t> parts;
  std::map<std::string, size_t> previous; // parameter -> its last visit so far
  std::vector<size_t> after;              // per visit: the earliest anchor
  for (mlir::Operation *op : ops) {
    std::string param;
    int64_t index = -1;
    mlir::Type type;
    if (auto product = productParts.find(op); product != productParts.end()) {
      param = product->second.first;
      index = product->second.second;
      type = op->getResult(0).getType();
    } else if (auto part = mlir::dyn_cast<mt::GradPartOp>(op)) {
      ++parts[part.getParam().str()];
      if (fusedSinks.contains(op) || part.getIndex() == 0)
        continue;
      param = part.getParam().str();
      index = static_cast<int64_t>(part.getIndex());
      type = part.getGrad().getType();
    } else if (auto update = mlir::dyn_cast<mt::AdamWOp>(op)) {
      auto earlier = parts.find(update.getParam().str());
      if (fusedSinks.contains(op) || earlier == parts.end())
        continue;
      param = update.getParam().str();
      index = earlier->second;
      type = update.getGrad().getType();
    } else {
      continue;
    }
    if (!visits(param))
      continue;
    size_t n = visitList.size();
    visitList.push_back({param, index, op, type});
    visitOf[op] = n;
    auto last = previous.find(param);
    after.push_back(last == previous.end() ? 0 : last->second + 1);
    previous[param] = n;
  }
  // The ring's slots of the largest visiting accumulator (mt-tier sized it
  // so), and part k >= 1 fetched `lead` visits ahead: before the op of
  // visit n - lead, but after this parameter's previous visit.
  uint64_t largest = RingPool::padded(0);
  for (const Visit &visit : visitList)
    largest = std::max(largest, RingPool::padded(tensorTypeBytes(visit.type)));
  // Half the slots ahead (mt-tier gives the ring at least 3): the live
  // visits are the last lead + 1 placed, which with the bytes a wrap leaves
  // unused at the ring's end take at most lead + 2 slots; the slots beyond
  // give the copies back time before a fetch reuses their bytes.
  visitSlots = std::max<uint64_t>(3, visitRing.size / largest);
  const size_t lead = static_cast<size_t>(visitSlots / 2);
  for (size_t n = 0; n < visitList.size(); ++n) {
    if (visitList[n].index == 0)
      continue;
    size_t anchor = std::max(n >= lead ? n - lead : 0, after[n]);
    visitFetchesBefore[visitList[anchor].op].push_back(n);
  }
}

mlir::FailureOr<uint32_t> PlanBuilder::addVisitStage(mlir::Operation *op, const std::string &param,
                                                      mlir::Type type) {
  return addRingStage(visitRing, op, "acc_visit:", param, type, "accumulator",
                      "ring of accumulator visits (mt.visit_ring_size)", kPlanMinorVisits);
}

mlir::LogicalResult PlanBuilder::emitVisitFetches(mlir::Operation *op, int64_t opStep) {
  auto fetches = visitFetchesBefore.find(op);
  if (fetches == visitFetchesBefore.end())
    return mlir::success();
  for (size_t n : fetches->second) {
    Visit &visit = visitList[n];
    auto accumulator = hostGradients.find(visit.param);
    if (accumulator == hostGradients.end())
      return visit.op->emitError("gradient part ")
             << visit.index << " of '" << visit.param << "' comes before its part 0";
    mlir::FailureOr<uint32_t> tensor = addVisitStage(op, visit.param, visit.type);
    if (mlir::failed(tensor))
      return mlir::failure();
    visit.tensor = *tensor;
    pb::Step &copy = addStep(kHostToDevice, op, opStep);
    copy.mutable_copy()->set_src(accumulator->second);
    copy.mutable_copy()->set_dst(*tensor);
  }
  return mlir::success();
}

mlir::FailureOr<uint32_t> PlanBuilder::deviceSumOf(mlir::Operation *op, const std::string &param) {
  if (visits(param))
    return visitTensorOf(op);
  auto found = hostGradients.find(param);
  if (found == hostGradients.end())
    return op->emitError("a gradient part of '") << param << "' comes before its part 0";
  return found->second;
}

mlir::FailureOr<uint32_t> PlanBuilder::visitTensorOf(mlir::Operation *op) {
  auto n = visitOf.find(op);
  if (n == visitOf.end())
    return op->emitError("no accumulator visit was planned for this part");
  Visit &visit = visitList[n->second];
  if (visit.index == 0) {
    // Part 0 of a product: the product's output is the visit; the host
    // accumulator it is copied into is made here.
    mlir::FailureOr<uint32_t> host =
        addTensor(op, "grad:" + visit.param, visit.type, pb::GRADIENT);
    if (mlir::failed(host))
      return mlir::failure();
    placeOnHost(*host);
    hostGradients[visit.param] = *host;
    mlir::FailureOr<uint32_t> tensor = addVisitStage(op, visit.param, visit.type);
    if (mlir::failed(tensor))
      return mlir::failure();
    visit.tensor = *tensor;
  }
  if (visit.tensor == UINT32_MAX)
    return op->emitError("the accumulator visit of part ")
           << visit.index << " of '" << visit.param << "' was never fetched";
  return visit.tensor;
}

void PlanBuilder::emitVisitReturn(mlir::Operation *op, const std::string &param, uint32_t visit,
                                  int64_t opStep) {
  pb::Step &copy = addStep(kDeviceToHost, op, opStep);
  copy.mutable_copy()->set_src(visit);
  copy.mutable_copy()->set_dst(hostGradients.at(param));
}

} // namespace megatrain::emission
