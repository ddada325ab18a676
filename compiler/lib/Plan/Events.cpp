//===- Events.cpp - order the streams of a plan with record/wait events ----===//
//
// Each stream runs its steps in plan order; nothing orders two streams but
// events. insertEvents walks the plan once, in order, and keeps:
//
//   1. per step, a vector clock: for every stream, how many of that stream's
//      steps are known to be complete when the step starts (its own stream's
//      entry counts the step itself). A wait merges the clock of the step its
//      event was recorded after; a stream's clock carries over to its next step.
//   2. per tensor and stream, the clock value of the latest step on that
//      stream that read it and the latest that wrote it.
//   3. per tensor, the tensors whose bytes overlap it in the same pool (the
//      arena and the staging pool reuse bytes), found once by a sweep over
//      offsets.
//
// A step's dependencies are, on every other stream: the latest write of any
// tensor overlapping one it reads (RAW), and the latest read or write of any
// tensor overlapping one it writes (WAR, WAW); at a DEVICE tensor's
// last_use_step, also the latest read or write of that tensor (its death:
// the runtime may poison the bytes on the step's stream right after it),
// and that death counts as a write of the tensor at that step, so a later
// tensor that reuses its bytes waits for the poison too (a last_use_step may
// lie after the tensor's last access). A dependency whose clock value
// the step's stream already knows is implied and dropped; of the rest, one
// implied by another (through that one's clock) is dropped too. Each that is
// left gets a `record` right after the earlier step (one per step, shared by
// every later wait on it) and a `wait` right before the later one.
//
// Reads and writes per step: a kernel reads its inputs and writes its
// outputs; a copy reads src and writes dst; ADAMW (param, grad, m, v) reads
// grad and reads and writes the other three, and writes its optional fifth
// tensor (the bf16 compute copy); READ_LOSS reads its tensor;
// ACCUMULATE (acc, addend) reads addend and reads and writes acc. Tensors the
// runtime writes before the step (INPUT, CONSTANT, PARAMETER,
// PARAMETER_COMPUTE, GRADIENT, OPTIMIZER_STATE) need no event for that write: it happens before every step.
// A view (Tensor.alias_of) is its base's bytes: its accesses count as its
// base's, and only the base dies (at a last_use_step that covers the view's).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Plan/Events.h"
#include "megatrain/Plan/StepAccess.h"

#include "megatrain/plan/Aliases.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace megatrain {

namespace pb = megatrain::plan;

StepAccess accessOf(const pb::Step &step) {
  StepAccess access;
  switch (step.op_case()) {
  case pb::Step::kKernel:
    access.reads.assign(step.kernel().inputs().begin(), step.kernel().inputs().end());
    access.writes.assign(step.kernel().outputs().begin(), step.kernel().outputs().end());
    break;
  case pb::Step::kCopy:
    access.reads.push_back(step.copy().src());
    access.writes.push_back(step.copy().dst());
    break;
  case pb::Step::kHostTask: {
    const pb::HostTask &task = step.host_task();
    auto tensor = [&](int i) { return task.tensors(i); };
    if (task.kind() == pb::HostTask::ADAMW && task.tensors_size() == 4) {
      access.reads = {tensor(0), tensor(1), tensor(2), tensor(3)};
      access.writes = {tensor(0), tensor(2), tensor(3)};
    } else if (task.kind() == pb::HostTask::ADAMW && task.tensors_size() == 5) {
      // The bf16 compute copy: written from the updated master, so it waits
      // for the h2d copies that fetch it (WAR).
      access.reads = {tensor(0), tensor(1), tensor(2), tensor(3)};
      access.writes = {tensor(0), tensor(2), tensor(3), tensor(4)};
    } else if (task.kind() == pb::HostTask::READ_LOSS) {
      access.reads.assign(task.tensors().begin(), task.tensors().end());
    } else if (task.kind() == pb::HostTask::ACCUMULATE && task.tensors_size() == 2) {
      access.reads = {tensor(0), tensor(1)};
      access.writes = {tensor(0)};
    } else {
      // A task this pass does not know: assume it reads and writes everything.
      access.reads.assign(task.tensors().begin(), task.tensors().end());
      access.writes = access.reads;
    }
    break;
  }
  default:
    break;
  }
  return access;
}

std::vector<std::vector<uint32_t>> overlappingTensors(const pb::Plan &plan) {
  const uint32_t count = static_cast<uint32_t>(plan.tensors_size());
  std::vector<std::vector<uint32_t>> result(count);
  std::vector<uint32_t> order;
  for (uint32_t id = 0; id < count; ++id) {
    result[id].push_back(id);
    if (plan.tensors(id).buffer().size_bytes() > 0)
      order.push_back(id);
  }
  auto key = [&](uint32_t id) {
    const pb::Buffer &b = plan.tensors(id).buffer();
    return std::make_pair(b.pool(), b.offset());
  };
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  // Sorted by (pool, offset): every later tensor of the same pool that starts
  // before this one ends overlaps it, and no other does.
  for (size_t i = 0; i < order.size(); ++i) {
    const pb::Buffer &a = plan.tensors(order[i]).buffer();
    const uint64_t end = a.offset() + a.size_bytes();
    for (size_t j = i + 1; j < order.size(); ++j) {
      const pb::Buffer &b = plan.tensors(order[j]).buffer();
      if (b.pool() != a.pool() || b.offset() >= end)
        break;
      result[order[i]].push_back(order[j]);
      result[order[j]].push_back(order[i]);
    }
  }
  return result;
}

namespace {

using Clock = std::vector<uint32_t>;

void join(Clock &into, const Clock &other) {
  for (size_t i = 0; i < into.size(); ++i)
    into[i] = std::max(into[i], other[i]);
}

} // namespace

std::size_t insertEvents(pb::Plan &plan) {
  const int stepCount = plan.steps_size();
  const uint32_t tensorCount = static_cast<uint32_t>(plan.tensors_size());

  std::map<std::string, size_t> streamIndex;
  for (const std::string &stream : plan.streams())
    streamIndex.emplace(stream, streamIndex.size());
  for (const pb::Step &step : plan.steps())
    streamIndex.emplace(step.stream(), streamIndex.size());
  const size_t streams = streamIndex.size();

  std::set<std::string> usedNames;
  for (const pb::Step &step : plan.steps()) {
    if (step.has_record())
      usedNames.insert(step.record().event());
    if (step.has_wait())
      usedNames.insert(step.wait().event());
  }
  size_t nextName = 0;
  auto newName = [&]() {
    std::string name;
    do
      name = "e" + std::to_string(nextName++);
    while (usedNames.count(name));
    return name;
  };

  const std::vector<std::vector<uint32_t>> overlapping = overlappingTensors(plan);
  // lastRead/lastWrite[tensor * streams + stream]: clock value of that
  // stream's latest step reading/writing the tensor (0: none).
  std::vector<uint32_t> lastRead(static_cast<size_t>(tensorCount) * streams, 0);
  std::vector<uint32_t> lastWrite(static_cast<size_t>(tensorCount) * streams, 0);
  std::vector<Clock> streamClock(streams, Clock(streams, 0));
  std::vector<Clock> stepClock(static_cast<size_t>(stepCount));
  // stepOn[stream][clock - 1]: the step with that clock value on that stream.
  std::vector<std::vector<int>> stepOn(streams);
  std::map<std::string, Clock> recorded; // events already in the plan

  // dyingAt[step]: the DEVICE tensors (CONSTANTs never die) whose
  // last_use_step it is.
  std::vector<std::vector<uint32_t>> dyingAt(static_cast<size_t>(stepCount));
  const std::vector<uint32_t> bases = aliasBases(plan);
  for (uint32_t id = 0; id < tensorCount; ++id) {
    const pb::Tensor &tensor = plan.tensors(id);
    const int64_t last = tensor.last_use_step();
    const uint32_t pool = tensor.buffer().pool();
    if (last >= 0 && last < stepCount && tensor.role() != pb::CONSTANT && bases[id] == id &&
        pool < static_cast<uint32_t>(plan.pools_size()) &&
        plan.pools(static_cast<int>(pool)).tier() == pb::DEVICE)
      dyingAt[static_cast<size_t>(last)].push_back(id);
  }

  std::vector<std::string> recordAfter(static_cast<size_t>(stepCount));
  std::vector<std::vector<std::string>> waitsBefore(static_cast<size_t>(stepCount));
  size_t added = 0;

  for (int s = 0; s < stepCount; ++s) {
    const pb::Step &step = plan.steps(s);
    const size_t x = streamIndex.at(step.stream());
    Clock &current = streamClock[x];
    if (step.has_record()) {
      recorded[step.record().event()] = current;
      continue;
    }
    if (step.has_wait()) {
      auto it = recorded.find(step.wait().event());
      if (it != recorded.end())
        join(current, it->second);
      continue;
    }

    StepAccess access = accessOf(step);
    mapToBases(bases, access.reads);
    mapToBases(bases, access.writes);
    Clock need(streams, 0);
    auto require = [&](uint32_t tensor, bool write) {
      if (tensor >= tensorCount)
        return;
      for (uint32_t other : overlapping[tensor])
        for (size_t y = 0; y < streams; ++y) {
          need[y] = std::max(need[y], lastWrite[other * streams + y]);
          if (write)
            need[y] = std::max(need[y], lastRead[other * streams + y]);
        }
    };
    for (uint32_t id : access.reads)
      require(id, false);
    for (uint32_t id : access.writes)
      require(id, true);
    // A DEVICE tensor dies here: the runtime may poison its bytes on this
    // stream right after this step, a write that must follow every access
    // on the other streams (an offload's d2h copy, say).
    for (uint32_t id : dyingAt[static_cast<size_t>(s)])
      for (size_t y = 0; y < streams; ++y)
        need[y] = std::max({need[y], lastRead[id * streams + y], lastWrite[id * streams + y]});

    std::vector<size_t> pending;
    for (size_t y = 0; y < streams; ++y)
      if (y != x && need[y] > current[y])
        pending.push_back(y);
    std::vector<int> dependencies;
    for (size_t y : pending) {
      bool implied = false;
      for (size_t z : pending)
        if (z != y && stepClock[stepOn[z][need[z] - 1]][y] >= need[y])
          implied = true;
      if (!implied)
        dependencies.push_back(stepOn[y][need[y] - 1]);
    }
    for (int earlier : dependencies) {
      std::string &event = recordAfter[static_cast<size_t>(earlier)];
      if (event.empty()) {
        event = newName();
        ++added;
      }
      waitsBefore[static_cast<size_t>(s)].push_back(event);
      join(current, stepClock[static_cast<size_t>(earlier)]);
    }

    ++current[x];
    stepOn[x].push_back(s);
    stepClock[static_cast<size_t>(s)] = current;
    for (uint32_t id : access.reads)
      if (id < tensorCount)
        lastRead[id * streams + x] = current[x];
    for (uint32_t id : access.writes)
      if (id < tensorCount)
        lastWrite[id * streams + x] = current[x];
    // The poison is a write of the dead bytes here: a later tensor that
    // reuses them must wait for it, not only for the last access.
    for (uint32_t id : dyingAt[static_cast<size_t>(s)])
      lastWrite[id * streams + x] = current[x];
  }
  if (added == 0)
    return 0;

  // Rebuild the step list: waits, the step, its record.
  google::protobuf::RepeatedPtrField<pb::Step> old;
  old.Swap(plan.mutable_steps());
  std::vector<int64_t> newIndex(static_cast<size_t>(stepCount));
  auto append = [&](pb::Step &&step) {
    step.set_index(static_cast<uint32_t>(plan.steps_size()));
    *plan.add_steps() = std::move(step);
  };
  for (int s = 0; s < stepCount; ++s) {
    const std::string stream = old.Get(s).stream();
    for (const std::string &event : waitsBefore[static_cast<size_t>(s)]) {
      pb::Step wait;
      wait.set_stream(stream);
      wait.mutable_wait()->set_event(event);
      append(std::move(wait));
    }
    newIndex[static_cast<size_t>(s)] = plan.steps_size();
    append(std::move(*old.Mutable(s)));
    if (!recordAfter[static_cast<size_t>(s)].empty()) {
      pb::Step record;
      record.set_stream(stream);
      record.mutable_record()->set_event(recordAfter[static_cast<size_t>(s)]);
      append(std::move(record));
    }
  }
  for (pb::Tensor &tensor : *plan.mutable_tensors()) {
    const int64_t last = tensor.last_use_step();
    if (last >= 0 && last < stepCount)
      tensor.set_last_use_step(newIndex[static_cast<size_t>(last)]);
  }
  return added;
}

} // namespace megatrain
