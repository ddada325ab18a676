// PlanVerifier.cpp - proves a plan's schedule safe: stream order, memory sharing, the device budget.
//
// Written apart from the compiler's event insertion (compiler/lib/Plan/
// Events.cpp) and sharing none of its code, so that it catches that pass's
// mistakes as well as a hand-edited plan's.
//
// 1. Happens-before. Every step gets a vector clock: entry y counts the steps
//    of stream y known complete when it runs (its own stream's entry counts
//    itself). A step starts from its stream's clock; a wait joins the clock
//    of the latest earlier record of its event. Step a happens before step b
//    when a precedes b in plan order and b's clock has reached a's own entry.
// 2. Accesses. Per step, the tensors read and written (kernel: inputs /
//    outputs; copy: src / dst; ADAMW: reads grad, reads and writes param, m,
//    v, writes the optional compute copy; READ_LOSS: reads its tensor; ACCUMULATE: reads addend, reads and
//    writes acc). Per tensor and stream, the steps that touch it, in order.
// 3. Reads: the latest earlier writer of the tensor happens before the read.
//    Writes: on every stream, the latest earlier access of every tensor whose
//    bytes overlap the written one (itself included) happens before it.
// 4. Lifetimes in plan order: from the writer (step 0 for tensors the runtime
//    writes) to the last access or last_use_step, whichever is later; the
//    whole step for PARAMETER, PARAMETER_COMPUTE, GRADIENT, OPTIMIZER_STATE,
//    CONSTANT and the
//    readouts. Two tensors alive together must not share bytes; a read after
//    last_use_step reads poisoned bytes.
// 5. Budget: every DEVICE pool and the peak of live device bytes against
//    header.device_budget_bytes (0: no budget).
// 6. Poisoning: a DEVICE tensor (not a CONSTANT) dies at its last_use_step;
//    the runtime may poison its bytes on that step's stream right after it.
//    That poison is a write: every access of the tensor on another stream
//    happens before the step, and every later write of overlapping bytes
//    happens after it (it counts as an access of the tensor there).
// 7. Optimizer: every trainable PARAMETER is the parameter of exactly one
//    ADAMW task per step (of none in an evaluation plan, header.evaluation),
//    and every ADAMW updates a trainable PARAMETER, or its visit to the
//    device (minor 11: a STATE_STAGE copied from the PARAMETER before the
//    update and back into it after). A plan that drops a
//    parameter's update, or updates one twice, trains to other numbers while
//    every access above stays well ordered.
// 8. Views (Tensor.alias_of, minor 8): an access of a view is an access of
//    its base for everything above, and only the base dies and is poisoned.
//    A view names a base that is no view, has its base's pool, offset and
//    size, is an ACTIVATION over an arena tensor (never over training state
//    a host task rewrites), never outlives its base (its last_use_step is
//    at most the base's, which covers every read of the view), is written
//    by no step, and no step writes the base while the view is live, from
//    the base's defining write to the view's last use.
#include "megatrain/plan/PlanVerifier.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "megatrain/plan/Aliases.h"

namespace megatrain {
namespace {

bool runtimeWritten(plan::Role role) {
  return role == plan::INPUT || role == plan::CONSTANT || role == plan::PARAMETER ||
         role == plan::GRADIENT || role == plan::OPTIMIZER_STATE || role == plan::PARAMETER_COMPUTE;
}

bool persistent(plan::Role role) {
  return role == plan::PARAMETER || role == plan::GRADIENT || role == plan::OPTIMIZER_STATE ||
         role == plan::CONSTANT || role == plan::LOSS_READOUT || role == plan::OUTPUT_READOUT ||
         role == plan::PARAMETER_COMPUTE;
}

class ScheduleVerifier {
 public:
  explicit ScheduleVerifier(const plan::Plan& plan)
      : plan_(plan), steps_(plan.steps_size()), tensors_(plan.tensors_size()) {}

  std::vector<std::string> run() {
    orderSteps();
    collectAccesses();
    for (int s = 0; s < steps_; ++s) {
      for (int t : reads_[s]) checkRead(s, t);
      for (int t : writes_[s]) checkWrite(s, t);
    }
    checkPoisoning();
    computeLifetimes();
    checkSharing();
    checkBudget();
    checkCapacities();
    checkOptimizerUpdates();
    checkViews();
    return failures_;
  }

 private:
  struct Lifetime {
    bool live = false;
    int first = 0, last = 0;  // steps, inclusive
  };

  std::string what(int s) const {
    const plan::Step& step = plan_.steps(s);
    switch (step.op_case()) {
      case plan::Step::kKernel: return "kernel " + step.kernel().kernel();
      case plan::Step::kCopy: return "copy";
      case plan::Step::kRecord: return "record " + step.record().event();
      case plan::Step::kWait: return "wait " + step.wait().event();
      case plan::Step::kHostTask:
        return "host_task " + plan::HostTask::Kind_Name(step.host_task().kind());
      default: return "empty";
    }
  }

  // "step 41 (compute, kernel matmul)"
  std::string label(int s) const {
    return "step " + std::to_string(s) + " (" + plan_.steps(s).stream() + ", " + what(s) + ")";
  }

  // "step 12 (h2d)"
  std::string brief(int s) const {
    return "step " + std::to_string(s) + " (" + plan_.steps(s).stream() + ")";
  }

  std::string name(int t) const { return "'" + plan_.tensors(t).name() + "'"; }

  void fail(const std::string& message) { failures_.push_back(message); }

  void orderSteps() {
    std::unordered_map<std::string, size_t> streamIds;
    for (const std::string& stream : plan_.streams()) streamIds.emplace(stream, streamIds.size());
    for (const plan::Step& step : plan_.steps()) streamIds.emplace(step.stream(), streamIds.size());
    streamCount_ = streamIds.size();

    std::vector<std::vector<uint32_t>> streamClock(streamCount_, std::vector<uint32_t>(streamCount_, 0));
    std::unordered_map<std::string, int> latestRecord;
    stream_.resize(steps_);
    clock_.resize(steps_);
    for (int s = 0; s < steps_; ++s) {
      const plan::Step& step = plan_.steps(s);
      const size_t x = streamIds.at(step.stream());
      stream_[s] = x;
      std::vector<uint32_t>& mine = streamClock[x];
      if (step.has_wait()) {
        auto record = latestRecord.find(step.wait().event());
        if (record == latestRecord.end()) {
          fail(label(s) + ": waits for event '" + step.wait().event() +
               "', which no earlier step records");
        } else {
          const std::vector<uint32_t>& theirs = clock_[record->second];
          for (size_t y = 0; y < streamCount_; ++y) mine[y] = std::max(mine[y], theirs[y]);
        }
      }
      ++mine[x];
      clock_[s] = mine;
      if (step.has_record()) latestRecord[step.record().event()] = s;
    }
  }

  bool happensBefore(int a, int b) const {
    if (a >= b) return false;
    const size_t y = stream_[a];
    return clock_[b][y] >= clock_[a][y];
  }

  bool validTensor(int s, uint32_t id) {
    if (id < static_cast<uint32_t>(tensors_)) return true;
    fail(label(s) + ": names tensor " + std::to_string(id) + ", the plan has " +
         std::to_string(tensors_));
    return false;
  }

  void collectAccesses() {
    reads_.assign(steps_, {});
    writes_.assign(steps_, {});
    bases_ = aliasBases(plan_);
    viewLastRead_.assign(tensors_, -1);
    for (int s = 0; s < steps_; ++s) {
      const plan::Step& step = plan_.steps(s);
      // A view's access is its base's (stage 8); its own reads are kept for
      // its last_use_step, a write of it is refused.
      auto read = [&](uint32_t id) {
        if (!validTensor(s, id)) return;
        if (bases_[id] != id) {
          viewLastRead_[id] = s;
          const int64_t last = plan_.tensors(static_cast<int>(id)).last_use_step();
          if (last >= 0 && s > last)
            fail(label(s) + ": reads view " + name(static_cast<int>(id)) + " after its last_use_step " +
                 std::to_string(last));
        }
        reads_[s].push_back(static_cast<int>(bases_[id]));
      };
      auto write = [&](uint32_t id) {
        if (!validTensor(s, id)) return;
        if (bases_[id] != id)
          fail(label(s) + ": writes view " + name(static_cast<int>(id)) + " of " +
               name(static_cast<int>(bases_[id])) + "; a view is written only by its base's step");
        writes_[s].push_back(static_cast<int>(bases_[id]));
      };
      if (step.has_kernel()) {
        for (uint32_t id : step.kernel().inputs()) read(id);
        for (uint32_t id : step.kernel().outputs()) write(id);
      } else if (step.has_copy()) {
        read(step.copy().src());
        write(step.copy().dst());
      } else if (step.has_host_task()) {
        const plan::HostTask& task = step.host_task();
        const int n = task.tensors_size();
        switch (task.kind()) {
          case plan::HostTask::ADAMW:  // param, grad, m, v [, compute copy, written only]
            for (int i = 0; i < std::min(n, 4); ++i) read(task.tensors(i));
            for (int i = 0; i < n; ++i)
              if (i != 1) write(task.tensors(i));
            break;
          case plan::HostTask::ACCUMULATE:  // acc += addend
            for (int i = 0; i < n; ++i) read(task.tensors(i));
            if (n > 0) write(task.tensors(0));
            break;
          case plan::HostTask::READ_LOSS:
            for (int i = 0; i < n; ++i) read(task.tensors(i));
            break;
          default:  // unknown: the most it could do
            for (int i = 0; i < n; ++i) read(task.tensors(i));
            for (int i = 0; i < n; ++i) write(task.tensors(i));
            break;
        }
      }
    }
    writers_.assign(tensors_, {});
    touches_.assign(static_cast<size_t>(tensors_) * streamCount_, {});
    // The DEVICE tensors poisoned right after each step (their last_use_step).
    poisoned_.assign(steps_, {});
    for (int t = 0; t < tensors_; ++t) {
      const plan::Tensor& tensor = plan_.tensors(t);
      const int64_t last = tensor.last_use_step();
      const uint32_t pool = tensor.buffer().pool();
      if (last >= 0 && last < steps_ && tensor.role() != plan::CONSTANT && bases_[t] == static_cast<uint32_t>(t) &&
          pool < static_cast<uint32_t>(plan_.pools_size()) &&
          plan_.pools(static_cast<int>(pool)).tier() == plan::DEVICE)
        poisoned_[static_cast<size_t>(last)].push_back(t);
    }
    for (int s = 0; s < steps_; ++s) {
      for (int t : writes_[s]) writers_[t].push_back(s);
      std::vector<int> touched = reads_[s];
      touched.insert(touched.end(), writes_[s].begin(), writes_[s].end());
      touched.insert(touched.end(), poisoned_[s].begin(), poisoned_[s].end());
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      for (int t : touched) touches_[static_cast<size_t>(t) * streamCount_ + stream_[s]].push_back(s);
    }
    overlapping_ = sharedBytes();
  }

  // For every tensor, the other tensors whose bytes overlap it in its pool.
  std::vector<std::vector<int>> sharedBytes() const {
    std::vector<int> byStart;
    // A view shares its base's bytes by design: stage 8 checks the pair.
    for (int t = 0; t < tensors_; ++t)
      if (plan_.tensors(t).buffer().size_bytes() > 0 && !plan_.tensors(t).has_alias_of()) byStart.push_back(t);
    auto buffer = [&](int t) -> const plan::Buffer& { return plan_.tensors(t).buffer(); };
    std::stable_sort(byStart.begin(), byStart.end(), [&](int a, int b) {
      return buffer(a).pool() != buffer(b).pool() ? buffer(a).pool() < buffer(b).pool()
                                                  : buffer(a).offset() < buffer(b).offset();
    });
    std::vector<std::vector<int>> result(tensors_);
    for (size_t i = 0; i < byStart.size(); ++i) {
      const plan::Buffer& a = buffer(byStart[i]);
      for (size_t j = i + 1; j < byStart.size(); ++j) {
        const plan::Buffer& b = buffer(byStart[j]);
        if (b.pool() != a.pool() || b.offset() >= a.offset() + a.size_bytes()) break;
        result[byStart[i]].push_back(byStart[j]);
        result[byStart[j]].push_back(byStart[i]);
      }
    }
    return result;
  }

  // The latest step before `s` in `steps` (ascending), or -1.
  static int latestBefore(const std::vector<int>& steps, int s) {
    auto it = std::lower_bound(steps.begin(), steps.end(), s);
    return it == steps.begin() ? -1 : *std::prev(it);
  }

  void checkRead(int s, int t) {
    const plan::Tensor& tensor = plan_.tensors(t);
    const int writer = latestBefore(writers_[t], s);
    if (writer < 0) {
      if (!runtimeWritten(tensor.role()))
        fail(label(s) + ": reads " + name(t) + ", which no earlier step writes");
    } else if (!happensBefore(writer, s)) {
      fail(label(s) + ": reads " + name(t) + " written by " + brief(writer) +
           " with no event ordering them");
    }
    if (tensor.last_use_step() >= 0 && s > tensor.last_use_step() && !persistent(tensor.role()))
      fail(label(s) + ": reads " + name(t) + " after its last_use_step " +
           std::to_string(tensor.last_use_step()) + ", when its bytes are dead");
  }

  void checkWrite(int s, int u) {
    std::vector<int> holders{u};
    holders.insert(holders.end(), overlapping_[u].begin(), overlapping_[u].end());
    for (int t : holders) {
      for (size_t y = 0; y < streamCount_; ++y) {
        const int earlier = latestBefore(touches_[static_cast<size_t>(t) * streamCount_ + y], s);
        if (earlier < 0 || happensBefore(earlier, s)) continue;
        const bool wrote = std::find(writes_[earlier].begin(), writes_[earlier].end(), t) !=
                           writes_[earlier].end();
        const bool read = std::find(reads_[earlier].begin(), reads_[earlier].end(), t) != reads_[earlier].end();
        fail(label(s) + ": writes " + name(u) + (t == u ? "" : " over bytes of " + name(t)) + " " +
             (wrote ? "written" : read ? "read" : "poisoned after its last use") + " by " + brief(earlier) +
             " with no event ordering them");
        return;  // one line per written tensor
      }
    }
  }

  // A dying DEVICE tensor is poisoned (a write of its bytes) on the stream of
  // its last_use_step, right after that step: every access on another stream
  // must happen before that step, or the poison may overwrite the bytes
  // before (or while) that access reads them. (A later write of the bytes
  // must happen after the poison: checkWrite, through touches_.)
  void checkPoisoning() {
    for (int l = 0; l < steps_; ++l)
      for (int t : poisoned_[l])
      for (size_t y = 0; y < streamCount_; ++y) {
        if (y == stream_[l]) continue;
        const int earlier = latestBefore(touches_[static_cast<size_t>(t) * streamCount_ + y], l);
        if (earlier < 0 || happensBefore(earlier, l)) continue;
        const bool wrote = std::find(writes_[earlier].begin(), writes_[earlier].end(), t) != writes_[earlier].end();
        fail(label(l) + ": poisons " + name(t) + " after its last use, but " + brief(earlier) + " " +
             (wrote ? "writes" : "reads") + " it with no event ordering them");
        break;  // one line per tensor
      }
  }

  void computeLifetimes() {
    life_.assign(tensors_, {});
    std::vector<int> firstWrite(tensors_, -1), firstAccess(tensors_, -1), lastAccess(tensors_, -1);
    for (int s = 0; s < steps_; ++s) {
      for (int t : writes_[s])
        if (firstWrite[t] < 0) firstWrite[t] = s;
      for (const std::vector<int>* list : {&reads_[s], &writes_[s]})
        for (int t : *list) {
          if (firstAccess[t] < 0) firstAccess[t] = s;
          lastAccess[t] = s;
        }
    }
    const int lastStep = std::max(steps_ - 1, 0);
    for (int t = 0; t < tensors_; ++t) {
      const plan::Tensor& tensor = plan_.tensors(t);
      Lifetime& life = life_[t];
      if (persistent(tensor.role())) {
        life = {true, 0, lastStep};
        continue;
      }
      if (runtimeWritten(tensor.role())) {
        life = {true, 0, 0};
      } else if (firstWrite[t] >= 0) {
        life = {true, firstWrite[t], firstWrite[t]};
      } else if (firstAccess[t] >= 0) {
        life = {true, firstAccess[t], firstAccess[t]};  // read, never written: reported above
      } else {
        continue;  // never touched: holds nothing
      }
      life.last = std::max({life.last, lastAccess[t],
                            static_cast<int>(std::min<int64_t>(tensor.last_use_step(), lastStep))});
    }
  }

  std::string poolName(uint32_t pool) const {
    return pool < static_cast<uint32_t>(plan_.pools_size()) ? "'" + plan_.pools(static_cast<int>(pool)).name() + "'"
                                                            : std::to_string(pool);
  }

  void checkSharing() {
    for (int a = 0; a < tensors_; ++a) {
      for (int b : overlapping_[a]) {
        if (b < a) continue;  // each pair once
        const Lifetime& la = life_[a];
        const Lifetime& lb = life_[b];
        if (!la.live || !lb.live || la.last < lb.first || lb.last < la.first) continue;
        // Name the one that comes alive second, at the step that makes it so.
        const bool bLater = lb.first > la.first || (lb.first == la.first && b > a);
        const int later = bLater ? b : a, held = bLater ? a : b;
        const Lifetime& heldLife = life_[held];
        const plan::Buffer& x = plan_.tensors(later).buffer();
        const plan::Buffer& y = plan_.tensors(held).buffer();
        const uint64_t lo = std::max(x.offset(), y.offset());
        const uint64_t hi = std::min(x.offset() + x.size_bytes(), y.offset() + y.size_bytes());
        const std::string bytes = "bytes [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  ") of pool " + poolName(x.pool());
        const std::string holds = name(held) + " holds from step " + std::to_string(heldLife.first) +
                                  " to step " + std::to_string(heldLife.last);
        const int start = life_[later].first;
        const bool written = start < steps_ && std::find(writes_[start].begin(), writes_[start].end(),
                                                         later) != writes_[start].end();
        if (written)
          fail(label(start) + ": writes " + name(later) + " into " + bytes + " that " + holds);
        else
          fail(name(later) + " and " + name(held) + " share " + bytes + " and are both live at step " +
               std::to_string(start) + " (" + holds + ")");
      }
    }
  }

  // Device-resident training state (minor 7: PARAMETER, GRADIENT,
  // OPTIMIZER_STATE, PARAMETER_COMPUTE in a DEVICE pool) and its staging
  // (minor 10: STATE_STAGE, the accumulators' visits) sit beside the arena:
  // the budget is the arena's, the capacity the device's.
  static bool isState(const plan::Tensor& tensor) {
    const plan::Role role = tensor.role();
    return role == plan::PARAMETER || role == plan::GRADIENT || role == plan::OPTIMIZER_STATE ||
           role == plan::PARAMETER_COMPUTE || role == plan::STATE_STAGE;
  }

  void checkCapacities() {
    const plan::Header& header = plan_.header();
    const struct {
      plan::Tier tier;
      uint64_t capacity;
      const char* what;
    } tiers[] = {{plan::DEVICE, header.device_capacity_bytes(), "device capacity (--device-memory)"},
                 {plan::HOST_PINNED, header.host_capacity_bytes(), "host capacity (--host-memory)"},
                 {plan::DISK, header.disk_capacity_bytes(), "disk capacity (--disk-memory)"}};
    for (const auto& tier : tiers) {
      if (tier.capacity == 0) continue;
      uint64_t total = 0;
      for (const plan::Pool& pool : plan_.pools())
        if (pool.tier() == tier.tier) total += pool.size_bytes();
      if (total > tier.capacity)
        fail("the " + std::string(plan::Tier_Name(tier.tier)) + " pools total " + std::to_string(total) +
             " bytes, over the " + tier.what + " of " + std::to_string(tier.capacity) + " bytes");
    }
  }

  void checkBudget() {
    const uint64_t budget = plan_.header().device_budget_bytes();
    if (budget == 0) return;
    std::vector<bool> statePool(static_cast<size_t>(plan_.pools_size()), true);
    std::vector<bool> used(static_cast<size_t>(plan_.pools_size()), false);
    for (int t = 0; t < tensors_; ++t) {
      const uint32_t pool = plan_.tensors(t).buffer().pool();
      if (pool >= statePool.size()) continue;
      used[pool] = true;
      if (!isState(plan_.tensors(t))) statePool[pool] = false;
    }
    auto onDevice = [&](uint32_t pool) {
      return pool < static_cast<uint32_t>(plan_.pools_size()) &&
             plan_.pools(static_cast<int>(pool)).tier() == plan::DEVICE;
    };
    for (const plan::Pool& pool : plan_.pools())
      if (pool.tier() == plan::DEVICE && !(used[pool.id()] && statePool[pool.id()]) &&
          pool.size_bytes() > budget)
        fail("pool '" + pool.name() + "' is " + std::to_string(pool.size_bytes()) +
             " bytes, over the device budget of " + std::to_string(budget) + " bytes");
    if (steps_ == 0) return;
    std::vector<int64_t> delta(static_cast<size_t>(steps_) + 1, 0);
    for (int t = 0; t < tensors_; ++t) {
      const plan::Tensor& tensor = plan_.tensors(t);
      if (!life_[t].live || !onDevice(tensor.buffer().pool()) || isState(tensor)) continue;
      delta[life_[t].first] += static_cast<int64_t>(tensor.buffer().size_bytes());
      delta[life_[t].last + 1] -= static_cast<int64_t>(tensor.buffer().size_bytes());
    }
    int64_t live = 0, peak = 0;
    int peakStep = 0;
    for (int s = 0; s < steps_; ++s) {
      live += delta[s];
      if (live > peak) peak = live, peakStep = s;
    }
    if (static_cast<uint64_t>(peak) > budget)
      fail(label(peakStep) + ": " + std::to_string(peak) +
           " bytes are live on the device, over the device budget of " + std::to_string(budget) +
           " bytes");
  }

  void checkOptimizerUpdates() {
    std::vector<std::vector<int>> updates(static_cast<size_t>(tensors_));  // per tensor: its ADAMW steps
    for (int s = 0; s < steps_; ++s) {
      const plan::Step& step = plan_.steps(s);
      if (step.op_case() != plan::Step::kHostTask || step.host_task().kind() != plan::HostTask::ADAMW ||
          step.host_task().tensors_size() == 0)
        continue;
      uint32_t param = step.host_task().tensors(0);
      if (param >= static_cast<uint32_t>(tensors_)) continue;  // the validator names a bad id
      // An update visit (minor 11): the master's visit to the device, copied
      // from the PARAMETER before the update and back into it after.
      if (plan_.tensors(static_cast<int>(param)).role() == plan::STATE_STAGE) {
        const uint32_t visit = param;
        param = visitedMaster(visit, s);
        if (param == kNoTensor) {
          fail(label(s) + ": updates " + name(static_cast<int>(visit)) +
               ", a visit that is not copied from a trainable PARAMETER before the update and "
               "back into it after");
          continue;
        }
      }
      const plan::Tensor& tensor = plan_.tensors(static_cast<int>(param));
      if (tensor.role() != plan::PARAMETER || !tensor.trainable())
        fail(label(s) + ": updates tensor '" + tensor.name() + "', which is not a trainable PARAMETER");
      updates[param].push_back(s);
    }
    // An evaluation plan reads its parameters and updates none.
    const bool evaluation = plan_.header().evaluation();
    const size_t expected = evaluation ? 0 : 1;
    for (int t = 0; t < tensors_; ++t) {
      const plan::Tensor& tensor = plan_.tensors(t);
      if (tensor.role() != plan::PARAMETER || !tensor.trainable()) continue;
      const std::vector<int>& steps = updates[static_cast<size_t>(t)];
      if (steps.size() == expected) continue;
      std::string where;
      for (int s : steps) where += std::string(where.empty() ? " (steps " : ", ") + std::to_string(s);
      fail("trainable parameter '" + tensor.name() + "' is updated by " + std::to_string(steps.size()) +
           " ADAMW tasks" + (where.empty() ? "" : where + ")") +
           (evaluation ? ", expected none in an evaluation plan" : ", expected exactly one per step"));
    }
  }

  static constexpr uint32_t kNoTensor = UINT32_MAX;

  // The PARAMETER whose master `visit` holds for the update at step `s`: the
  // last copy into `visit` before `s` reads a trainable PARAMETER, and a
  // copy after `s` writes `visit` back into it (kNoTensor otherwise).
  uint32_t visitedMaster(uint32_t visit, int s) const {
    uint32_t from = kNoTensor;
    for (int i = s - 1; i >= 0 && from == kNoTensor; --i) {
      const plan::Step& step = plan_.steps(i);
      if (step.op_case() == plan::Step::kCopy && step.copy().dst() == visit) from = step.copy().src();
    }
    if (from == kNoTensor || from >= static_cast<uint32_t>(tensors_)) return kNoTensor;
    const plan::Tensor& master = plan_.tensors(static_cast<int>(from));
    if (master.role() != plan::PARAMETER || !master.trainable()) return kNoTensor;
    for (int i = s + 1; i < steps_; ++i) {
      const plan::Step& step = plan_.steps(i);
      if (step.op_case() == plan::Step::kCopy && step.copy().src() == visit && step.copy().dst() == from)
        return from;
    }
    return kNoTensor;
  }

  // Stage 8.
  void checkViews() {
    for (int v = 0; v < tensors_; ++v) {
      const plan::Tensor& view = plan_.tensors(v);
      if (!view.has_alias_of()) continue;
      const uint32_t b = view.alias_of();
      if (b >= static_cast<uint32_t>(tensors_) || b == static_cast<uint32_t>(v)) {
        fail("view " + name(v) + ": alias_of " + std::to_string(b) + " names no other tensor (the plan has " +
             std::to_string(tensors_) + ")");
        continue;
      }
      const plan::Tensor& base = plan_.tensors(static_cast<int>(b));
      if (base.has_alias_of()) {
        fail("view " + name(v) + " is a view of view " + name(static_cast<int>(b)) +
             "; alias_of names the base itself");
        continue;
      }
      const plan::Buffer& x = view.buffer();
      const plan::Buffer& y = base.buffer();
      if (x.pool() != y.pool() || x.offset() != y.offset() || x.size_bytes() != y.size_bytes())
        fail("view " + name(v) + " is " + std::to_string(x.size_bytes()) + " bytes at offset " +
             std::to_string(x.offset()) + " of pool " + poolName(x.pool()) + ", its base " +
             name(static_cast<int>(b)) + " " + std::to_string(y.size_bytes()) + " bytes at offset " +
             std::to_string(y.offset()) + " of pool " + poolName(y.pool()) + "; a view has its base's bytes");
      if (view.role() != plan::ACTIVATION)
        fail("view " + name(v) + " has role " + plan::Role_Name(view.role()) + "; a view is an ACTIVATION");
      if (persistent(base.role()) && base.role() != plan::CONSTANT)
        fail("view " + name(v) + " is of " + name(static_cast<int>(b)) + ", a " + plan::Role_Name(base.role()) +
             " that host tasks rewrite; views are of arena tensors");
      const int64_t baseLast = base.last_use_step();
      if (baseLast >= 0 && (view.last_use_step() < 0 || view.last_use_step() > baseLast))
        fail("view " + name(v) + " outlives its base " + name(static_cast<int>(b)) + ": last_use_step " +
             std::to_string(view.last_use_step()) + " after the base's " + std::to_string(baseLast));
      // Live from the base's defining write to the view's last use.
      const std::vector<int>& writers = writers_[b];
      const bool defined = !runtimeWritten(base.role()) && !writers.empty();
      const int64_t end = std::max<int64_t>(viewLastRead_[v], view.last_use_step());
      for (size_t k = defined ? 1 : 0; k < writers.size(); ++k)
        if (writers[k] <= end) {
          fail(label(writers[k]) + ": writes " + name(static_cast<int>(b)) + " while its view " + name(v) +
               " is live (to step " + std::to_string(end) + ")");
          break;
        }
    }
  }

  const plan::Plan& plan_;
  const int steps_;
  const int tensors_;
  size_t streamCount_ = 0;
  std::vector<size_t> stream_;                   // per step
  std::vector<std::vector<uint32_t>> clock_;     // per step
  std::vector<std::vector<int>> reads_, writes_;  // per step
  std::vector<std::vector<int>> poisoned_;       // per step: DEVICE tensors whose last_use_step it is
  std::vector<std::vector<int>> writers_;        // per tensor, ascending steps
  std::vector<std::vector<int>> touches_;        // per tensor x stream, ascending steps
  std::vector<std::vector<int>> overlapping_;    // per tensor
  std::vector<Lifetime> life_;                   // per tensor
  std::vector<uint32_t> bases_;                  // per tensor: itself, or a view's base
  std::vector<int> viewLastRead_;                // per view: its last reading step (-1: none)
  std::vector<std::string> failures_;
};

}  // namespace

std::vector<std::string> verifySchedule(const plan::Plan& plan) { return ScheduleVerifier(plan).run(); }

}  // namespace megatrain
