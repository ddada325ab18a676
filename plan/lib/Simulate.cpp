//===- Simulate.cpp - the plan simulator ----------------------------------===//
//
// Replays a plan on a device profile (docs/tiering.md, "Streams and events"
// and "Predictions and inspection"):
//
// 1. Each step gets a duration from the cost model (OpCost.h).
// 2. Steps are visited in plan order; each stream keeps the time at which it
//    is free. A step starts when its stream is free and its dependencies are
//    met, and ends its duration later. Dependencies: with events, a wait is
//    released by the latest earlier record of its event; without any event
//    in the plan, a step waits for the writers of the tensors it reads and a
//    write waits for the last access of every tensor sharing its bytes (the
//    orderings the event pass would make explicit).
// 3. Every time point carries its cause (the kind of step that produced it),
//    so a gap on the compute stream is charged to the transfer it waited on
//    (exposed transfer) or left as idle.
// 4. Memory: memoryTimelines (PlanTimeline.h) on the predicted times (the
//    same definition of live bytes megatrain-inspect draws).
//
//===----------------------------------------------------------------------===//
#include "megatrain/plan/Simulate.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/plan/Aliases.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/plan/PlanTimeline.h"
#include "megatrain/plan/Streams.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megatrain {

namespace pb = plan;

namespace {

/// What produced a point in time: a gap on the compute stream that ends at a
/// point caused by a copy is transfer the schedule failed to hide.
enum class Cause { None, Compute, Transfer, Host };

struct TimePoint {
  double time = 0;
  Cause cause = Cause::None;
};

/// The later of two points (the first on a tie).
TimePoint later(TimePoint a, TimePoint b) { return b.time > a.time ? b : a; }

/// One direction of the host link, which every stream copying that way
/// shares: the intervals it is busy, and the earliest start at or after a
/// copy's ready time where the copy fits whole. A stream's copies come in its
/// order, so a link one stream uses is a queue; two streams (`h2d` and
/// `fetch`) fill each other's gaps, as a copy waiting for its event does not
/// hold the link.
class LinkQueue {
public:
  double place(double ready, double seconds) {
    double start = ready;
    auto it = busy.upper_bound(start);
    if (it != busy.begin() && std::prev(it)->second > start)
      start = std::prev(it)->second;
    for (; it != busy.end() && it->first < start + seconds; ++it)
      start = std::max(start, it->second);
    if (seconds > 0)
      busy.emplace(start, start + seconds);
    return start;
  }

private:
  std::map<double, double> busy; // start -> end, disjoint
};

TensorShape shapeOf(const pb::Tensor &tensor) {
  TensorShape shape;
  shape.dims.assign(tensor.shape().begin(), tensor.shape().end());
  shape.elementBytes = static_cast<unsigned>(dtypeSize(tensor.dtype()));
  return shape;
}

class Simulator {
public:
  Simulator(pb::Plan &plan, const DeviceProfile &profile, Precision precision)
      : plan(plan), profile(profile), precision(precision) {}

  void run();

private:
  pb::Tier tierOf(uint32_t tensor) const {
    auto it = poolTiers.find(plan.tensors(static_cast<int>(tensor)).buffer().pool());
    return it == poolTiers.end() ? pb::DEVICE : it->second;
  }
  double kernelSeconds(const pb::Kernel &kernel) const;
  double copySeconds(const pb::Copy &copy);
  double hostTaskSeconds(const pb::HostTask &task) const;
  void buildOverlaps();

  pb::Plan &plan;
  const DeviceProfile &profile;
  Precision precision;
  std::map<uint32_t, pb::Tier> poolTiers;
  uint64_t h2dBytes = 0, d2hBytes = 0;
  // Without events: for each tensor, the tensors whose bytes overlap its own.
  std::vector<std::vector<uint32_t>> overlaps;
};

double Simulator::kernelSeconds(const pb::Kernel &kernel) const {
  KernelDesc desc;
  desc.kernel = kernel.kernel();
  // A weight gradient's part added into its accumulator in place (the addend
  // is the output: docs/tiering.md "Micro-batches") is a product of the
  // matmul family's shapes (K the tokens), not a residual's matmul_add.
  if (desc.kernel == "matmul_add" && kernel.inputs_size() == 3 && kernel.outputs_size() == 1 &&
      kernel.inputs(2) == kernel.outputs(0))
    desc.family = "matmul";
  for (uint32_t id : kernel.inputs())
    desc.inputs.push_back(shapeOf(plan.tensors(static_cast<int>(id))));
  for (uint32_t id : kernel.outputs())
    desc.outputs.push_back(shapeOf(plan.tensors(static_cast<int>(id))));
  // A matmul or attention step names its precision (mt-precision); the
  // others run at the simulation's.
  Precision rate = precision;
  for (const pb::Attribute &attribute : kernel.attributes()) {
    if (attribute.value_case() == pb::Attribute::kI)
      desc.intAttrs[attribute.name()] = attribute.i();
    else if (attribute.name() == "precision" && attribute.value_case() == pb::Attribute::kS)
      rate = precisionNamed(attribute.s(), precision);
  }
  return estimateKernel(desc, profile, rate).seconds;
}

double Simulator::copySeconds(const pb::Copy &copy) {
  const uint64_t bytes = plan.tensors(static_cast<int>(copy.src())).buffer().size_bytes();
  const pb::Tier from = tierOf(copy.src()), to = tierOf(copy.dst());
  const double size = static_cast<double>(bytes);
  if (from != pb::DEVICE && to == pb::DEVICE) {
    h2dBytes += bytes;
    return transferSeconds(bytes, Link::HostToDevice, profile);
  }
  if (from == pb::DEVICE && to != pb::DEVICE) {
    d2hBytes += bytes;
    return transferSeconds(bytes, Link::DeviceToHost, profile);
  }
  if (to == pb::DISK)
    return size / profile.diskWriteBytesPerS + profile.launchS;
  if (from == pb::DISK)
    return size / profile.diskReadBytesPerS + profile.launchS;
  // Within one memory: the bytes are read and written, and both rates count
  // reads plus writes.
  const double rate = from == pb::DEVICE ? profile.hbmBytesPerS : profile.hostBytesPerS;
  return 2 * size / rate + profile.launchS;
}

double Simulator::hostTaskSeconds(const pb::HostTask &task) const {
  if (task.tensors_size() == 0)
    return 0;
  const uint64_t elements =
      shapeOf(plan.tensors(static_cast<int>(task.tensors(0)))).elements();
  // A device-resident parameter's update and accumulation run on the device.
  if (tierOf(task.tensors(0)) == pb::DEVICE) {
    if (task.kind() == pb::HostTask::ADAMW)
      return deviceAdamWSeconds(elements, task.tensors_size() > 4, profile);
    if (task.kind() == pb::HostTask::ACCUMULATE)
      return deviceAccumulateSeconds(elements, profile);
  }
  switch (task.kind()) {
  case pb::HostTask::ADAMW:
    return hostAdamWSeconds(elements, profile);
  case pb::HostTask::ACCUMULATE:
    return hostAccumulateSeconds(elements, profile);
  default:
    return 0; // READ_LOSS: the runtime reads a few bytes
  }
}

void Simulator::buildOverlaps() {
  const int tensors = plan.tensors_size();
  overlaps.assign(static_cast<size_t>(tensors), {});
  std::map<uint32_t, std::vector<uint32_t>> byPool;
  for (int id = 0; id < tensors; ++id)
    if (plan.tensors(id).buffer().size_bytes() > 0)
      byPool[plan.tensors(id).buffer().pool()].push_back(static_cast<uint32_t>(id));
  for (auto &[pool, ids] : byPool) {
    auto offset = [&](uint32_t id) { return plan.tensors(static_cast<int>(id)).buffer().offset(); };
    auto end = [&](uint32_t id) {
      return offset(id) + plan.tensors(static_cast<int>(id)).buffer().size_bytes();
    };
    std::sort(ids.begin(), ids.end(),
              [&](uint32_t a, uint32_t b) { return offset(a) < offset(b); });
    for (size_t i = 0; i < ids.size(); ++i)
      for (size_t j = i + 1; j < ids.size() && offset(ids[j]) < end(ids[i]); ++j) {
        overlaps[ids[i]].push_back(ids[j]);
        overlaps[ids[j]].push_back(ids[i]);
      }
  }
}

void Simulator::run() {
  for (const pb::Pool &pool : plan.pools())
    poolTiers[pool.id()] = pool.tier();
  bool events = false, disk = false;
  for (const pb::Step &step : plan.steps())
    events |= step.has_record() || step.has_wait();
  for (const pb::Pool &pool : plan.pools())
    disk |= pool.tier() == pb::DISK;
  if (!events)
    buildOverlaps();
  // The host stream: the one that reads the loss. The host tasks after the
  // READ_LOSS run on beside the next step (docs/runtime.md, "Host updates
  // across steps"; not with a disk tier, which the runtime keeps in step).
  std::string hostStream;
  int readLoss = -1;
  for (int i = 0; i < plan.steps_size(); ++i)
    if (plan.steps(i).has_host_task() &&
        plan.steps(i).host_task().kind() == pb::HostTask::READ_LOSS) {
      hostStream = plan.steps(i).stream();
      readLoss = i;
    }
  const bool carried = readLoss >= 0 && !disk;

  // The compute stream is the one named so, else the stream of the first kernel.
  std::string computeStream = pb::kComputeStream;
  if (std::find(plan.streams().begin(), plan.streams().end(), computeStream) ==
      plan.streams().end())
    for (const pb::Step &step : plan.steps())
      if (step.has_kernel()) {
        computeStream = step.stream();
        break;
      }

  const size_t tensors = static_cast<size_t>(plan.tensors_size());
  std::map<std::string, TimePoint> streamFree, recorded;
  LinkQueue toDevice, toHost;
  std::vector<TimePoint> lastWrite(tensors), lastAccess(tensors);
  double computeS = 0, recomputeS = 0, exposedS = 0;
  std::vector<std::pair<double, double>> hostTasks;
  std::vector<uint32_t> reads, writes;
  const std::vector<uint32_t> bases = aliasBases(plan);
  // For the host tasks carried into the next step: when a step of another
  // stream first touches each tensor, when the device's streams and the loss
  // are done, and the host stream's span.
  std::vector<double> firstTouch(tensors, -1);
  double deviceEnd = 0, hostBusy = 0;
  std::vector<std::pair<int, double>> carriedEnds; // step index, end

  for (int index = 0; index < plan.steps_size(); ++index) {
    pb::Step &step = *plan.mutable_steps(index);
    TimePoint &free = streamFree[step.stream()];
    TimePoint ready = free;
    double seconds = 0;
    Cause cause = Cause::None;
    switch (step.op_case()) {
    case pb::Step::kKernel:
      seconds = kernelSeconds(step.kernel());
      cause = Cause::Compute;
      break;
    case pb::Step::kCopy:
      seconds = copySeconds(step.copy());
      cause = Cause::Transfer;
      break;
    case pb::Step::kHostTask:
      seconds = hostTaskSeconds(step.host_task());
      cause = step.stream() == pb::kComputeStream ? Cause::Compute : Cause::Host;
      break;
    case pb::Step::kWait: {
      auto it = recorded.find(step.wait().event());
      if (it != recorded.end())
        ready = later(ready, it->second);
      break;
    }
    default:
      break;
    }

    stepReadsWrites(step, reads, writes);
    mapToBases(bases, reads); // a view's accesses are its base's
    mapToBases(bases, writes);
    if (!events) {
      for (uint32_t id : reads)
        if (id < tensors)
          ready = later(ready, lastWrite[id]);
      for (uint32_t id : writes) {
        if (id >= tensors)
          continue;
        ready = later(ready, lastAccess[id]);
        for (uint32_t other : overlaps[id])
          ready = later(ready, lastAccess[other]);
      }
    }

    if (step.has_copy() && step.stream() != computeStream) {
      const pb::Tier from = tierOf(step.copy().src()), to = tierOf(step.copy().dst());
      if (from == pb::HOST_PINNED && to == pb::DEVICE)
        ready.time = toDevice.place(ready.time, seconds);
      else if (from == pb::DEVICE && to == pb::HOST_PINNED)
        ready.time = toHost.place(ready.time, seconds);
    }
    const double start = step.has_wait() ? free.time : ready.time;
    const double end = ready.time + seconds;
    if (step.stream() == computeStream && ready.time > free.time &&
        ready.cause == Cause::Transfer)
      exposedS += ready.time - free.time;
    step.set_predicted_start_s(start);
    step.set_predicted_end_s(end);
    if (carried) {
      if (step.stream() != hostStream || index == readLoss) {
        deviceEnd = std::max(deviceEnd, step.has_record() || step.has_wait() ? start : end);
        if (step.stream() != hostStream)
          for (const std::vector<uint32_t> *ids : {&reads, &writes})
            for (uint32_t id : *ids)
              if (id < tensors && (firstTouch[id] < 0 || start < firstTouch[id]))
                firstTouch[id] = start;
      } else if (step.has_host_task()) {
        hostBusy += end - start;
        if (index > readLoss)
          carriedEnds.emplace_back(index, end);
      }
    }

    if (step.has_record()) {
      recorded[step.record().event()] = free;
    } else if (step.has_wait()) {
      free = ready;
    } else {
      free = {end, cause};
    }
    if (step.has_kernel() && step.stream() == computeStream)
      (step.recompute() ? recomputeS : computeS) += seconds;
    // The update's work off the device: host tasks, and the disk copies of
    // disk-resident state (its read-back before the update, the write-back after).
    if (step.has_host_task() ||
        (step.has_copy() && (tierOf(step.copy().src()) == pb::DISK || tierOf(step.copy().dst()) == pb::DISK)))
      hostTasks.emplace_back(start, end);
    if (!events) {
      const TimePoint done{end, cause};
      for (uint32_t id : reads)
        if (id < tensors)
          lastAccess[id] = later(lastAccess[id], done);
      for (uint32_t id : writes)
        if (id < tensors) {
          lastWrite[id] = done;
          lastAccess[id] = later(lastAccess[id], done);
        }
    }
  }

  double stepS = predictedEnd(plan);
  // Host tasks carried into the next step: the steps repeat once the
  // device's streams and the loss are done, no sooner than each carried
  // task's end less the start of the first step of the next that touches its
  // bytes (which waits for it), nor than the host's own work of a step.
  double carriedTailS = -1;
  if (carried && !carriedEnds.empty()) {
    // The tensors the other streams touch, by pool: a carried task's bytes
    // are looked up among those of its own (host) pool only.
    std::map<uint32_t, std::vector<uint32_t>> touchedByPool;
    for (uint32_t id = 0; id < tensors; ++id)
      if (firstTouch[id] >= 0)
        touchedByPool[plan.tensors(static_cast<int>(id)).buffer().pool()].push_back(id);
    double period = std::max(deviceEnd, hostBusy);
    for (auto [index, end] : carriedEnds) {
      stepReadsWrites(plan.steps(index), reads, writes);
      mapToBases(bases, reads);
      double first = -1;
      for (uint32_t id : reads) { // a host task reads every tensor it has
        if (id >= tensors)
          continue;
        const pb::Buffer &mine = plan.tensors(static_cast<int>(id)).buffer();
        for (uint32_t other : touchedByPool[mine.pool()]) {
          const pb::Buffer &theirs = plan.tensors(static_cast<int>(other)).buffer();
          if (theirs.offset() < mine.offset() + mine.size_bytes() &&
              mine.offset() < theirs.offset() + theirs.size_bytes() &&
              (first < 0 || firstTouch[other] < first))
            first = firstTouch[other];
        }
      }
      if (first >= 0)
        period = std::max(period, end - first);
    }
    carriedTailS = std::max(0.0, period - deviceEnd);
    stepS = std::min(stepS, period);
  }
  const double computeEnd = streamFree.count(computeStream) ? streamFree[computeStream].time : 0;
  // Host-task (and disk copy) time after the compute stream's last step: the
  // optimizer tail.
  std::sort(hostTasks.begin(), hostTasks.end());
  double hostTailS = 0, covered = computeEnd;
  for (auto [start, end] : hostTasks) {
    start = std::max(start, covered);
    if (end > start) {
      hostTailS += end - start;
      covered = end;
    }
  }
  if (carriedTailS >= 0) // only what delays the next step
    hostTailS = std::min(hostTailS, carriedTailS);

  pb::Header &header = *plan.mutable_header();
  requirePlanFormatMinor(header, kPlanMinorTiering);
  header.set_predicted_step_s(stepS);
  pb::StepTimeBreakdown &breakdown = *header.mutable_predicted_breakdown();
  breakdown.set_compute_s(computeS);
  breakdown.set_recompute_s(recomputeS);
  breakdown.set_exposed_transfer_s(exposedS);
  breakdown.set_host_optimizer_s(hostTailS);
  breakdown.set_idle_s(std::max(0.0, stepS - computeS - recomputeS - exposedS - hostTailS));
  header.set_h2d_bytes(h2dBytes);
  header.set_d2h_bytes(d2hBytes);
  header.set_device_profile(deviceProfileToJson(profile));
  header.clear_predicted_peak();
  for (const PoolTimeline &timeline : memoryTimelines(plan)) {
    pb::PoolUsage &usage = *header.add_predicted_peak();
    usage.set_pool(timeline.pool);
    usage.set_peak_bytes(timeline.peakBytes);
  }
}

} // namespace

void simulatePlan(pb::Plan &plan, const DeviceProfile &profile, Precision precision) {
  Simulator(plan, profile, precision).run();
}

double hostRateFloor(const pb::Plan &plan, const DeviceProfile &profile, Precision precision,
                     double tolerance) {
  std::map<uint32_t, pb::Tier> tiers;
  for (const pb::Pool &pool : plan.pools())
    tiers[pool.id()] = pool.tier();
  const bool hostUpdates = std::any_of(plan.steps().begin(), plan.steps().end(), [&](const pb::Step &step) {
    if (!step.has_host_task() || step.host_task().kind() != pb::HostTask::ADAMW ||
        step.host_task().tensors_size() == 0)
      return false;
    const uint32_t id = step.host_task().tensors(0);
    if (id >= static_cast<uint32_t>(plan.tensors_size()))
      return false;
    auto tier = tiers.find(plan.tensors(static_cast<int>(id)).buffer().pool());
    return tier != tiers.end() && tier->second != pb::DEVICE;
  });
  if (!hostUpdates)
    return 0;
  pb::Plan copy = plan;
  auto stepAt = [&](double rate) {
    DeviceProfile slower = profile;
    slower.hostAdamWParamsPerS = rate;
    simulatePlan(copy, slower, precision);
    return copy.header().predicted_step_s();
  };
  const double bound = stepAt(profile.hostAdamWParamsPerS) * (1 + tolerance);
  double fast = profile.hostAdamWParamsPerS, slow = fast / 64;
  if (stepAt(slow) <= bound)
    return slow;
  while (fast > slow * 1.01) { // the step grows as the rate falls: bisect on its log
    const double mid = std::sqrt(fast * slow);
    (stepAt(mid) <= bound ? fast : slow) = mid;
  }
  return fast;
}

std::string describeHostRateFloor(const pb::Plan &plan) {
  DeviceProfile profile;
  std::string error;
  if (plan.header().device_profile().empty() ||
      !parseDeviceProfile(plan.header().device_profile(), profile, error))
    return "";
  const double floor = hostRateFloor(plan, profile, Precision::FP32);
  if (floor <= 0)
    return "";
  const double rate = profile.hostAdamWParamsPerS;
  char text[200];
  std::snprintf(text, sizeof text,
                "the step stays within 1%% of its prediction down to a host AdamW of %.2f G "
                "params/s (the profile's %.2f%s)",
                std::ceil(floor * 1e-7) * 1e-2, rate * 1e-9,
                floor > 0.97 * rate ? "; the host's updates bound the step" : "");
  return text;
}

} // namespace megatrain
