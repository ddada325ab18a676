//===- Tiering.cpp - mt-tier: fit the training step into a device budget --===//
//
// Input: a scheduled function (mt.step, mt.live_end). Every op result lives in
// the device arena from its def to its last use; parameters are fetched from
// their host masters by mt.param. Output: the same computation, rewritten so
// that the peak of live device bytes fits the budget, at the least predicted
// cost. Offloading never changes the math: every rewrite either moves bytes
// unchanged (fetch, offload, prefetch) or re-runs the same kernel on the same
// inputs (recompute).
//
// The algorithm (docs/tiering.md); the stages live in passes/tiering/ as
// named, this file runs them:
//
//   1. Model (TieringModel). Positions are op indices in the block. Each
//      compute op costs estimateKernel (OpCost.h) on the device profile; each
//      fetch (mt.param, mt.prefetch) loads the host-to-device link, each
//      mt.offload the device-to-host link, at the position where it is
//      issued. A value lives in the arena over [def, last use] (inputs from
//      0, constants forever).
//   2. Prefetch distance (TieringRewrites). Every parameter fetch moves to
//      the latest position k before its first use b such that the compute
//      time of [k, b) covers its transfer plus the transfers already issued
//      in [k, b) on the link. The distance comes from the costs, not from a
//      fixed count.
//   3. Greedy freeing (TieringGreedy; policy auto). While the peak of live
//      bytes exceeds the target: at the peak position p, every value live at
//      p but not read there sits in a gap (a, b) between two of its uses.
//      Price each way to free it over the gap (the rewrites are in
//      TieringRewrites):
//        - a fetched value (parameter, prefetched activation): fetch it again
//          before b, no earlier than p + 1 (for a parameter, before its
//          optimizer update, which rewrites the master);
//        - a fetch not yet used: issue it later, after p;
//        - a computed value: offload it after its def and prefetch it before
//          b, or recompute it before b: clone its producer, whose operands
//          must be live at b, fetchable, or recomputable in turn (depth
//          bounded by kMaxRecomputeDepth).
//      The price is the predicted exposed time (the part of a transfer that
//      the compute of its window cannot hide) or the recompute time; the
//      cheapest per byte freed wins (ties: the bigger value). Apply, re-model,
//      repeat. No candidate at the peak: the budget is infeasible, and the
//      error gives the smallest budget the planner reached and what is live.
//   4. Fragmentation (TieringGreedy). Place the arena (placeBestFit, as
//      mt-plan-memory will); if it exceeds the budget, lower the target by
//      the excess and continue 3.
//   5. Fill (TieringFill). The stages above only free memory, so a plan
//      that fits with room to spare keeps all of its recompute. The fill
//      spends the room: each recompute clone may hand its users the
//      original's results (saving the clone's compute and the chain that
//      fed only it), each prefetch the offloaded value (saving its exposed
//      transfer), priced by seconds saved per byte kept, best first, while
//      the lifetimes, placed as mt-plan-memory will, fit the budget. Each
//      op is priced by its own cost, so a matmul's or an attention's output
//      is kept before an elementwise op's or a norm's: the checkpoint
//      policy's recompute becomes selective. Where the state competes with
//      the arena (a floor: the state's price per byte), fills without the
//      floor cut to a prefix of the order compete with the floor's, the
//      prefix chosen by the timeline with the state's host share (the
//      search; off: --no-tiering-fill-search). Off: --no-tiering-fill.
//   5b. Spill (TieringFill, spillToLink). The recompute the fill leaves may
//      instead read its original's values offloaded after their def and
//      prefetched before their use, where the links have room: the clones
//      that save the most compute per second of h2d first, each taken when
//      its copies are hidden beside those already on the links and the
//      lifetimes place within the budget. The links' checks are local, so
//      how many of them are kept (a prefix of that order) is chosen by the
//      three-queue timeline (golden-section search), with the share of the
//      state the device will not hold on the host (the parameters updated
//      first). Not where the host works more than half the step, nor where
//      the host cannot hold all the state. The spilled plan competes as
//      "<plan>+spill". Off: --no-tiering-spill.
//   6. Portfolio (TieringPolicies). The greedy also starts from two
//      reference policies' plans (checkpoint at layer boundaries, offload
//      everything backward reads) instead of from keeping everything, and
//      the three reference policies are built as they are; each fitting
//      plan is also filled and spilled (stages 5, 5b); auto keeps
//      whichever fitting plan the three-queue timeline model (compute, h2d,
//      d2h, plus the host optimizer; TieringModel) predicts fastest (within
//      a millionth, the one with the least compute), so it is never worse
//      than them by the model. The plan header names the winner, e.g.
//      "auto (checkpoint+greedy+fill)". With the fill and a device capacity,
//      the budget leaves room for all the state on the device when the
//      checkpoint plan still fits in what is left (joint arena and state:
//      jointBudget below, docs/tiering.md "The fill").
//   6b. Lead (TieringLead), on the chosen plan: the link replayed as one
//      queue in position order (fetches and prefetches, each starting once
//      the compute before it is done), each parameter fetch that lands after
//      its first use moves to the latest position from which it lands in
//      time; the moves whose lifetimes place within the budget are kept.
//      Off: --no-tiering-lead.
//   7. Renumber mt.step and set mt.live_end as mt-liveness does
//      (setLiveEnds, Liveness.h), with the copy holds that fit the budget
//      (this file, renumber): a value copied to the host keeps its bytes
//      until the compute issued before a step covers the time its copy
//      finishes (CopyHold: the copies queue on the d2h link in step order,
//      a gradient's also waits for room in the gradient staging ring, which
//      the host AdamW frees update after update, unless the host has the
//      room for a slot for every gradient), so the value placed there
//      next does not wait on the link. When all the holds do not fit, they
//      are ranked by the wait each saves per byte held, and the longest
//      prefix that places within the budget is kept (bisection).
//
// Not optimal for: the choice is greedy at the current peak, one value at a
// time, so a rewrite that would free several peaks at once can be missed;
// recompute chains are bounded; the link model ignores the duplex rate and
// the stalls memory reuse adds (the plan simulator predicts those).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "IrCost.h"
#include "Liveness.h"
#include "tiering/StateHomes.h"
#include "tiering/TieringLead.h"
#include "tiering/TieringPolicies.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Passes/Placement.h"
#include "megatrain/plan/Format.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <memory>

namespace megatrain {
#define GEN_PASS_DEF_TIER
#include "megatrain/Passes/Passes.h.inc"

namespace {

/// The device arena mt-plan-memory will place for the live ends just set.
uint64_t deviceArenaBytes(mlir::func::FuncOp func) {
  std::vector<Slot> slots;
  for (mlir::Operation &op : func.getBody().front()) {
    if (op.getNumResults() == 0 || mlir::isa<mt::OffloadOp>(op))
      continue; // host staging, not the arena
    int64_t step = op.getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep).getInt();
    auto ends = op.getAttrOfType<mlir::DenseI64ArrayAttr>(mt::attr::kLiveEnd);
    for (auto [index, result] : llvm::enumerate(op.getResults()))
      slots.push_back(lifetimeSlot(&op, step, ends[index], valueBytes(result)));
  }
  return placeBestFit(slots);
}

/// The host staging pool of the plan's mt.offload results, placed as
/// mt-plan-memory will place it, with lifetimes from block order (def to
/// last user).
uint64_t offloadBytes(mlir::func::FuncOp func) {
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  int64_t index = 0;
  for (mlir::Operation &op : func.getBody().front())
    position[&op] = index++;
  std::vector<Slot> slots;
  for (mlir::Operation &op : func.getBody().front()) {
    auto offload = mlir::dyn_cast<mt::OffloadOp>(op);
    if (!offload)
      continue;
    Slot slot;
    slot.first = position[&op];
    slot.last = slot.first;
    for (mlir::Operation *user : offload.getResult().getUsers())
      slot.last = std::max(slot.last, position.lookup(user));
    slot.size = valueBytes(offload.getResult());
    slots.push_back(slot);
  }
  return placeBestFit(slots);
}

/// The host readouts (loss, kept outputs), as the emitter pads them.
uint64_t readoutBytes(mlir::func::FuncOp func) {
  uint64_t bytes = 0;
  func.walk([&](mlir::Operation *op) {
    if (mlir::isa<mt::LossOp, mt::OutputOp>(op))
      bytes += std::max<uint64_t>((valueBytes(op->getOperand(0)) + 255) / 256 * 256, 256);
  });
  return bytes;
}

constexpr int kDeviceHome = static_cast<int>(Home::Device);

/// Joint arena and state (stage 6; docs/tiering.md, "The fill"): the arena
/// budget that leaves the device room for every parameter's state in its
/// device form, or 0 when there is no such room below `budget`.
uint64_t deviceFormBytes(llvm::ArrayRef<ParameterState> states) {
  uint64_t all = 0;
  for (const ParameterState &state : states)
    all += state.bytes[kDeviceHome][kDeviceHome];
  return all;
}

uint64_t jointBudget(llvm::ArrayRef<ParameterState> states, uint64_t device, uint64_t budget) {
  uint64_t all = deviceFormBytes(states);
  // A margin for mt-homes' order of placement (it fills by update order).
  all += all / 256 + (1ull << 20);
  if (device <= all || device - all >= budget)
    return 0;
  return device - all;
}

/// The seconds a byte of device state saves per step, for the parameter
/// that saves the least (the one an arena that grows displaces first): its
/// host update, its compute copy's fetch and its gradient's copy out, by
/// the cost model, over its device bytes.
double stateSecondsPerByte(llvm::ArrayRef<ParameterState> states, const DeviceProfile &profile) {
  double least = 0;
  bool any = false;
  for (const ParameterState &state : states) {
    uint64_t bytes = state.bytes[kDeviceHome][kDeviceHome];
    if (!state.trainable || bytes == 0)
      continue;
    double saved = hostAdamWSeconds(state.elements, profile) +
                   transferSeconds(state.elements * (state.computeCopy ? 2 : 4),
                                   Link::HostToDevice, profile) +
                   transferSeconds(state.elements * 4, Link::DeviceToHost, profile);
    double perByte = saved / static_cast<double>(bytes);
    least = any ? std::min(least, perByte) : perByte;
    any = true;
  }
  return least;
}

/// Stage 7: number the steps, then set the live ends with the copy holds
/// (CopyHold, Liveness.h; `ringBytes`: the gradient staging ring) that fit
/// `budget` (0: all of them). Without room for all, the holds are ranked by
/// the seconds compute would wait for the copy per byte held, and the
/// longest prefix whose arena places within the budget is kept (bisection:
/// a handful of placements, not one per value).
mlir::LogicalResult renumber(mlir::func::FuncOp func, const DeviceProfile &profile,
                             uint64_t budget, uint64_t ringBytes) {
  mlir::Builder builder(func.getContext());
  mlir::Block &block = func.getBody().front();
  int64_t step = 0;
  for (mlir::Operation &op : block)
    op.setAttr(mt::attr::kStep, builder.getI64IntegerAttr(step++));
  // The live ends without holds (this also checks the order).
  if (mlir::failed(setLiveEnds(func, nullptr)))
    return mlir::failure();
  CopyHold hold(block, profile, stepAttrOf, ringBytes);
  // The arena's lifetimes, and where each held value's is.
  std::vector<Slot> slots;
  llvm::DenseMap<mlir::Value, size_t> slotOf;
  for (mlir::Operation &op : block) {
    if (op.getNumResults() == 0 || mlir::isa<mt::OffloadOp>(op))
      continue; // host staging, not the arena
    int64_t at = op.getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep).getInt();
    auto ends = op.getAttrOfType<mlir::DenseI64ArrayAttr>(mt::attr::kLiveEnd);
    for (auto [index, result] : llvm::enumerate(op.getResults())) {
      slotOf[result] = slots.size();
      slots.push_back(lifetimeSlot(&op, at, ends[index], valueBytes(result)));
    }
  }
  struct Held {
    mlir::Value value;
    size_t slot;
    int64_t end;
    double score; // stall seconds per byte held
  };
  std::vector<Held> holds;
  for (mlir::Value value : hold.values()) {
    auto it = slotOf.find(value);
    if (it == slotOf.end())
      continue;
    const Slot &slot = slots[it->second];
    int64_t end = hold.end(value);
    if (slot.last == kLivesForever || end <= slot.last)
      continue;
    holds.push_back({value, it->second, end,
                     hold.stall(value, slot.last) / static_cast<double>(std::max<uint64_t>(slot.size, 1))});
  }
  std::stable_sort(holds.begin(), holds.end(),
                   [](const Held &x, const Held &y) { return x.score > y.score; });
  auto arenaWith = [&](size_t prefix) {
    std::vector<Slot> held = slots;
    for (size_t i = 0; i < prefix; ++i)
      held[holds[i].slot].last = std::max(held[holds[i].slot].last, holds[i].end);
    return placeBestFit(held);
  };
  size_t kept = holds.size();
  if (budget != 0 && !holds.empty() && arenaWith(kept) > budget)
    kept = longestFittingPrefix(kept, [&](size_t prefix) { return arenaWith(prefix) <= budget; });
  llvm::DenseSet<mlir::Value> keep;
  for (size_t i = 0; i < kept; ++i)
    keep.insert(holds[i].value);
  return setLiveEnds(func, hold, [&](mlir::Value value) { return keep.contains(value); });
}

struct Tier : impl::TierBase<Tier> {
  using TierBase::TierBase;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    DeviceProfile profile;
    if (mlir::failed(loadProfileOption(func, deviceProfile, "mt-tier", profile)))
      return signalPassFailure();
    // A portfolio entry with its fill or spill (checkpoint+fill, ...) is for tests.
    llvm::StringRef entry = llvm::StringRef(policy);
    if (entry.ends_with("+fill"))
      entry = entry.drop_back(5);
    else if (entry.ends_with("+spill"))
      entry = entry.drop_back(6);
    if (!llvm::is_contained({"auto", "keep", "checkpoint", "offload", "checkpoint+greedy",
                             "offload+greedy"},
                            entry)) {
      func.emitError("mt-tier: unknown policy '")
          << policy << "' (auto, keep, checkpoint or offload)";
      return signalPassFailure();
    }
    // --tiering-log: one line per plan considered, appended (megatrain-compile
    // starts the file empty).
    std::unique_ptr<llvm::raw_fd_ostream> logFile;
    llvm::raw_ostream *logStream = nullptr;
    if (!log.empty()) {
      if (log == "-") {
        logStream = &llvm::errs();
      } else {
        std::error_code error;
        logFile = std::make_unique<llvm::raw_fd_ostream>(log, error, llvm::sys::fs::OF_Append);
        if (error) {
          func.emitError("mt-tier: cannot open the tiering log '")
              << log << "': " << error.message();
          return signalPassFailure();
        }
        logStream = logFile.get();
      }
      *logStream << "mt-tier @" << func.getSymName() << ": policy " << policy << "\n";
    }
    std::string why;
    // The state that host and disk cannot hold (and the state forced to the
    // device) lives on the device beside the arena: the arena's budget is
    // what the device has left (docs/tiering.md, "State homes").
    std::optional<std::vector<HomeForcing>> forcings = parseHomeForcings(std::vector<std::string>(stateHome.begin(), stateHome.end()), why);
    if (!forcings) {
      func.emitError("mt-tier: ") << why;
      return signalPassFailure();
    }
    // The host also holds what is not state: the staging of offloaded
    // activations (known once a plan is chosen: planned again when it takes
    // room the state needed), the readouts, the gradient staging ring and,
    // with a disk, its staging.
    std::vector<ParameterState> states = collectParameterState(func, keepGradients);
    applyMomentsOnDevice(states, *forcings);
    // Update visits (`state-home visit:REGEX` alone) leave the other homes to
    // the joint choice below; their state lives on the host whatever the
    // arena, so it never competes for the device's room.
    const bool onlyVisits = llvm::all_of(*forcings, [](const HomeForcing &f) { return f.visit; });
    std::vector<ParameterState> jointStates;
    uint64_t visitorDeviceBytes = 0; // the moments of visit-master homes
    for (const ParameterState &state : states)
      if (!(state.trainable && forcedVisit(*forcings, state.name)))
        jointStates.push_back(state);
      else
        visitorDeviceBytes += state.bytes[static_cast<int>(Home::Host)][static_cast<int>(Home::Device)];
    const int64_t parts = microbatchCount(func);
    const bool microbatches = parts > 1;
    // With micro-batches, where a byte of device accumulator saves more than
    // a byte of device home, mt-homes gives the accumulators the device's
    // room first; the arena then leaves room for them as for the state
    // (jointly: without forced homes).
    // With accumulator visits, the sums up to a slot's size take the ring's
    // room instead of their own: their parameters are marked for mt-homes
    // and for the timeline, which prices their parts' trips over the links.
    AccumulatorVisits visits;
    if (accumulatorVisits && microbatches && !keepGradients) {
      if (visitSlots < 3) {
        func.emitError("mt-tier: visit-slots must be at least 3, got ") << visitSlots;
        return signalPassFailure();
      }
      visits = planAccumulatorVisits(states, visitSlots);
    }
    {
      llvm::StringSet<> visiting;
      for (const ParameterState &state : states)
        if (visits.visits(state))
          visiting.insert(state.name);
      mlir::Builder builder(&getContext());
      func.walk([&](mt::ParamOp param) {
        if (visiting.contains(param.getName()))
          param->setAttr(mt::attr::kAccumulate, builder.getStringAttr("visit"));
      });
      if (visits.ringBytes > 0)
        func->setAttr(mt::attr::kVisitRingSize,
                      builder.getI64IntegerAttr(static_cast<int64_t>(visits.ringBytes)));
    }
    uint64_t accumulators = 0;
    if (microbatches && !keepGradients && accumulatorSavesMorePerByte(states, parts, profile))
      for (const ParameterState &state : states)
        accumulators += visits.visits(state) ? 0 : state.accumulatorBytes;
    accumulators += visits.ringBytes;
    const uint64_t ringBytes = gradientStageBytes(states, keepGradients, microbatches);
    const uint64_t stateStaging = ringBytes +
                                  (diskMemory > 0 ? diskStageBytes(states) : 0);
    uint64_t hostFixed = readoutBytes(func) + stateStaging;
    uint64_t device = deviceMemory != 0 ? deviceMemory : deviceCapacity;
    mlir::FailureOr<TieringChoice> choice = mlir::failure();
    uint64_t budget = deviceMemory;
    // What the chosen plan was judged with: the share of the state beside it on the host.
    FillOptions chosenFill;
    for (int attempt = 0;; ++attempt) {
      int64_t host = hostMemory < 0 ? hostMemory
                                    : std::max<int64_t>(0, hostMemory - static_cast<int64_t>(hostFixed));
      // With 1/16 more: mt-homes fills the device by update order, not by
      // size, so the parameters it leaves below need not pack as these did.
      uint64_t reserve = deviceStateReserve(states, *forcings, host, diskMemory);
      reserve += reserve / 16;
      // The ring the updates forced to visit the device pass through.
      const uint64_t updateRing = updateVisitRingBytes(states, *forcings, microbatches);
      budget = deviceMemory;
      if (reserve + updateRing > 0 && device != 0) {
        // (Without a device capacity, megatrain-opt's default, the arena keeps no budget.)
        if (device <= reserve + updateRing) {
          func.emitError("mt-tier: ")
              << formatBytes(reserve + updateRing) << " of training state must live on the device "
              << "(what --host-memory and --disk-memory cannot hold, --state-home "
                 "device, and the ring of --state-home visit), leaving no arena in --device-memory "
              << formatBytes(device)
              << " (the host keeps " << formatBytes(hostFixed)
              << " of readouts and staging); raise --device-memory, --host-memory or "
                 "--disk-memory";
          return signalPassFailure();
        }
        budget = device - reserve - updateRing;
      }
      if (mlir::succeeded(choice))
        choice->plan.erase();
      // Joint arena and state, with default homes: leave the device room
      // for all the state when the checkpoint plan still fits beside it;
      // else keep the budget, and let the fill take room the state would
      // have only where it saves more per byte than the state does.
      FillOptions fillOptions;
      fillOptions.enabled = fill;
      // The spill's offloads take host staging; where the host cannot hold
      // all the state (reserve > 0), that room is the state's.
      fillOptions.spill = spill && reserve == 0;
      fillOptions.search = fillSearch;
      fillOptions.log = logStream;
      // The device less the update visits' ring and the moments they keep there.
      const uint64_t stateDevice =
          device > updateRing + visitorDeviceBytes ? device - updateRing - visitorDeviceBytes : 0;
      if (onlyVisits) {
        fillOptions.deviceBytes = stateDevice;
        fillOptions.stateDeviceBytes = deviceFormBytes(jointStates);
        fillOptions.accumulatorBytes = accumulators;
      }
      auto plan = [&]() -> mlir::FailureOr<TieringChoice> {
        bool joint = fill && policy == "auto" && onlyVisits && budget != 0 && device != 0;
        fillOptions.minSecondsPerByte = 0;
        // The room left beside the arena, tried in order while the
        // checkpoint plan fits: all the state, then the accumulators alone
        // (the rest of the state competing by price: the floor).
        auto roomFor = [&](uint64_t roomy, double floor,
                           llvm::StringRef room) -> mlir::FailureOr<TieringChoice> {
          if (logStream)
            *logStream << "budget " << roomy << " B for the arena, room beside it for " << room
                       << " (only while the checkpoint plan fits)\n";
          fillOptions.mustFit = "checkpoint";
          fillOptions.minSecondsPerByte = floor;
          std::string whyNot;
          mlir::FailureOr<TieringChoice> roomyChoice =
              choosePlan(func, policy, profile, roomy, fillOptions, whyNot);
          fillOptions.mustFit.clear();
          if (mlir::succeeded(roomyChoice))
            budget = roomy;
          return roomyChoice;
        };
        if (uint64_t roomy = joint ? jointBudget(jointStates, stateDevice, budget) : 0)
          if (mlir::FailureOr<TieringChoice> choice = roomFor(roomy, 0, "all the state");
              mlir::succeeded(choice))
            return choice;
        const double floor = joint ? stateSecondsPerByte(jointStates, profile) : 0;
        if (joint && accumulators > 0 && accumulators < budget)
          if (mlir::FailureOr<TieringChoice> choice =
                  roomFor(budget - accumulators, floor, "the accumulators");
              mlir::succeeded(choice))
            return choice;
        fillOptions.minSecondsPerByte = floor;
        if (logStream)
          *logStream << "budget " << budget << " B for the arena"
                     << (floor > 0 ? ", the state competing for it by price" : "") << "\n";
        return choosePlan(func, policy, profile, budget, fillOptions, why);
      };
      choice = plan();
      chosenFill = fillOptions;
      if (mlir::failed(choice)) {
        func.emitError("mt-tier: ") << why;
        return signalPassFailure();
      }
      // Nothing has to live on the device, but a capacity is known: the
      // unbudgeted arena must still fit it, and leave the device room for
      // the state in its device form (the fastest home), else plan again
      // within the capacity, jointly with the state: the same plan as an
      // explicit --device-memory of the default capacity.
      if (budget == 0 && device != 0) {
        mlir::func::FuncOp probe = choice->plan.clone();
        uint64_t state = onlyVisits ? deviceFormBytes(jointStates) : 0;
        bool over = mlir::succeeded(renumber(probe, profile, 0, ringBytes)) &&
                    deviceArenaBytes(probe) + state > device;
        probe.erase();
        if (over) {
          budget = device;
          choice->plan.erase();
          choice = plan();
          if (mlir::failed(choice)) {
            func.emitError("mt-tier: ") << why;
            return signalPassFailure();
          }
        }
      }
      uint64_t staged = offloadBytes(choice->plan);
      if (hostMemory < 0 || reserve == 0 || attempt == 3 ||
          readoutBytes(func) + stateStaging + staged <= hostFixed)
        break;
      hostFixed = readoutBytes(func) + stateStaging + staged;
    }
    // The winner's body replaces the function's; the copy goes.
    func.getBody().takeBody(choice->plan.getBody());
    choice->plan.erase();
    // The share of the state the host keeps beside the chosen arena, as the
    // fill and the spill judged the plan (all of it where the capacities are
    // unknown): the lead's fetches of the parameters updated last are the
    // device homes' casts (mt-homes), and the copy holds assume the ring
    // mt-homes will give the host homes (holdRingBytes; with a disk tier,
    // all of the state on the host).
    TieringModel model(func, profile);
    model.analyze();
    const double hostShare = hostShareBeside(model.arenaBytes(), chosenFill).state;
    if (lead) {
      LeadResult moved = leadParamFetches(model, budget, model.hostShares(hostShare));
      if (logStream && moved.late > 0)
        *logStream << "lead: " << moved.late << " parameter fetches land late ("
                   << llvm::format("%.3f", moved.lateSeconds * 1e3) << " ms), " << moved.moved
                   << " moved earlier within the budget ("
                   << llvm::format("%.3f", moved.savedSeconds * 1e3) << " ms)\n";
    }
    if (mlir::failed(renumber(func, profile, budget,
                              holdRingBytes(states, keepGradients, microbatches, ringBytes,
                                            readoutBytes(func) + offloadBytes(func) +
                                                (diskMemory > 0 ? diskStageBytes(states) : 0),
                                            hostMemory, diskMemory > 0 ? 1.0 : hostShare))))
      return signalPassFailure();
    mlir::Builder builder(&getContext());
    func->setAttr(mt::attr::kDeviceBudget,
                  builder.getI64IntegerAttr(static_cast<int64_t>(budget)));
    func->setAttr(mt::attr::kTieringPolicy, builder.getStringAttr(choice->policy));
  }
};

} // namespace
} // namespace megatrain
