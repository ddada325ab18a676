//===- Homes.cpp - mt-homes: the home of each parameter's training state --===//
//
// Input: a planned function (mt-plan-memory: mt.arena_size, mt.offset).
// Output: `mt.home` on every mt.param, the capacities and the gradient
// staging ring's size (mt.grad_stage_size) on the function.
// The home of a parameter is where its master, AdamW moments, compute copy
// and the gradient its update reads live, and where the update runs
// (docs/tiering.md, "State homes"):
//
//   1. State bytes per home (tiering/StateHomes.cpp).
//   2. Rooms: the device's is the capacity minus the arena mt-tier planned
//      (its budget already left room for the state that host and disk
//      cannot hold: deviceStateReserve); the host's is the capacity minus
//      the host staging pool of offloaded activations.
//   3. Forced homes (`state-home`) first, each checked against its room.
//   4. Every other parameter, updated last first: the device while it has
//      room, then the host, then the disk. Under the cost model every cost
//      a home saves is per element (the gradient's d2h copy, the host AdamW,
//      the h2d fetch against the device AdamW over HBM), so every byte on
//      the device saves the same; what differs is when: the parameters
//      updated last are the ones whose host update is left exposed after
//      backward, so they get the device first, and the ones updated first
//      get the disk, whose read-back has the most of backward to hide in.
//   5. With micro-batches, the host and disk homes' gradient accumulators go
//      to the device while it has room (mt.accumulate = "device"), updated
//      last first. Where a byte of accumulator saves more per step than a
//      byte of device home (the cost model: the M - 1 copies out and host
//      sums it saves, against the host AdamW, M fetches and one copy out a
//      home saves for the rest of its bytes), every accumulator takes the
//      device's room first (4a), and the homes get what is left.
//   6. Update visits (`state-home visit[:REGEX]`): host homes whose update
//      runs on the device (mt.update = "visit"); their ring
//      (mt.update_ring_size) comes out of the device's room before any home.
//   7. Accumulator visits (mt-tier's `accumulator-visits`): the ring
//      (mt.visit_ring_size) comes out of the device's room first; the
//      accumulators mt-tier marked "visit" take device room only after the
//      homes, and the rest keep the mark: they live on the host and visit
//      the device for each part.
//
// Not optimal for: the arena was planned first, so a large keep-everything
// arena leaves less room for state than a joint choice would.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "IrCost.h"
#include "tiering/StateHomes.h"

#include "megatrain/plan/Format.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

namespace megatrain {
#define GEN_PASS_DEF_HOMES
#include "megatrain/Passes/Passes.h.inc"

namespace {

constexpr int kDev = static_cast<int>(Home::Device);
constexpr int kHst = static_cast<int>(Home::Host);
constexpr int kDsk = static_cast<int>(Home::Disk);

struct Rooms {
  uint64_t left[kHomes];   // bytes still free per tier
  bool unlimited[kHomes];  // host without a capacity
  bool fits(const ParameterState &state, Home home) const {
    for (int tier = 0; tier < kHomes; ++tier) {
      uint64_t need = state.bytes[static_cast<int>(home)][tier];
      if (need > 0 && !unlimited[tier] && need > left[tier])
        return false;
    }
    // A frozen parameter has no disk form (its disk bytes are all host).
    return home != Home::Disk || state.bytes[kDsk][kDsk] > 0;
  }
  void take(const ParameterState &state, Home home) {
    for (int tier = 0; tier < kHomes; ++tier)
      if (!unlimited[tier])
        left[tier] -= state.bytes[static_cast<int>(home)][tier];
  }
};

struct Homes : impl::HomesBase<Homes> {
  using HomesBase::HomesBase;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    auto arenaAttr = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kArenaSize);
    if (!arenaAttr) {
      func.emitError("mt-homes: the function has no mt.arena_size; run mt-plan-memory first");
      return signalPassFailure();
    }
    std::string why;
    std::optional<std::vector<HomeForcing>> forcings = parseHomeForcings(std::vector<std::string>(stateHome.begin(), stateHome.end()), why);
    if (!forcings) {
      func.emitError("mt-homes: ") << why;
      return signalPassFailure();
    }
    uint64_t arena = static_cast<uint64_t>(arenaAttr.getInt());
    uint64_t stage = 0;
    if (auto attr = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kHostStageSize))
      stage = static_cast<uint64_t>(attr.getInt());
    // The host pool's readouts (the loss, kept outputs) count with staging.
    func.walk([&](mlir::Operation *op) {
      if (mlir::isa<mt::LossOp, mt::OutputOp>(op))
        stage += std::max<uint64_t>((valueBytes(op->getOperand(0)) + 255) / 256 * 256, 256);
    });

    Rooms rooms{};
    rooms.left[kDev] = deviceMemory > arena ? deviceMemory - arena : 0;
    rooms.unlimited[kHst] = hostMemory < 0;
    uint64_t hostCapacity = hostMemory < 0 ? 0 : static_cast<uint64_t>(hostMemory);
    rooms.left[kHst] = hostCapacity > stage ? hostCapacity - stage : 0;
    rooms.left[kDsk] = diskMemory;
    std::vector<ParameterState> states = collectParameterState(func, keepGradients);
    applyMomentsOnDevice(states, *forcings);
    const int64_t parts = microbatchCount(func);
    const bool microbatches = parts > 1;
    DeviceProfile profile;
    if (mlir::failed(loadProfileOption(func, deviceProfile, "mt-homes", profile)))
      return signalPassFailure();
    // The gradient staging ring and, with a disk, its staging (two slots of
    // m and v of the largest parameter, 4 KiB blocks) come out of the
    // host's room, at their largest (before the homes are known).
    stage += gradientStageBytes(states, keepGradients, microbatches) +
             (diskMemory > 0 ? diskStageBytes(states) : 0);
    rooms.left[kHst] = hostCapacity > stage ? hostCapacity - stage : 0;
    const Rooms initial = rooms;

    // Update visits (`state-home visit[:REGEX]`): the ring comes out of the
    // device's room before any home.
    const uint64_t updateRing = updateVisitRingBytes(states, *forcings, microbatches);
    if (updateRing > rooms.left[kDev]) {
      func.emitError("mt-homes: the ring of update visits (")
          << formatBytes(updateRing) << ", " << kUpdateVisitSlots
          << " slots of the largest visiting parameter's master, moments and compute copy) "
             "finds no room on the device: "
          << describe(initial, rooms, arena, stage)
          << "; raise --device-memory or let fewer parameters visit (--state-home visit:REGEX)";
      return signalPassFailure();
    }
    rooms.left[kDev] -= updateRing;
    llvm::StringSet<> updateVisitors;
    for (const ParameterState &state : states)
      if (state.trainable && forcedVisit(*forcings, state.name))
        updateVisitors.insert(state.name);

    llvm::StringMap<Home> homes;
    std::vector<const ParameterState *> free;
    for (const ParameterState &state : states) {
      std::optional<Home> forced = forcedHome(*forcings, state.name);
      if (!forced) {
        free.push_back(&state);
        continue;
      }
      if (*forced == Home::Disk && state.bytes[kDsk][kDsk] == 0) {
        func.emitError("mt-homes: --state-home forces frozen parameter '")
            << state.name << "' to disk; only trainable parameters have disk state";
        return signalPassFailure();
      }
      if (!rooms.fits(state, *forced)) {
        func.emitError("mt-homes: --state-home forces '")
            << state.name << "' to "
            << (forcedMomentsOnDevice(*forcings, state.name)
                    ? std::string("the host with its moments on the device (visit-master)")
                    : homeName(*forced).str())
            << ", which has no room left: "
            << describe(initial, rooms, arena, stage);
        return signalPassFailure();
      }
      rooms.take(state, *forced);
      homes[state.name] = *forced;
    }
    // Updated last first (stable: ties keep fetch order); frozen parameters
    // (no update) last.
    std::stable_sort(free.begin(), free.end(), [](auto *a, auto *b) {
      return a->updateIndex > b->updateIndex;
    });
    // Accumulator visits (mt-tier marked the candidates, mt.accumulate =
    // "visit"): the ring comes out of the device's room first; without the
    // room, none visits.
    llvm::StringSet<> visiting;
    uint64_t visitRing = 0;
    if (auto ring = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kVisitRingSize))
      visitRing = static_cast<uint64_t>(std::max<int64_t>(0, ring.getInt()));
    func.walk([&](mt::ParamOp param) {
      if (auto accumulate = param->getAttrOfType<mlir::StringAttr>(mt::attr::kAccumulate);
          accumulate && accumulate.getValue() == "visit" && microbatches && !keepGradients &&
          param.getTrainable())
        visiting.insert(param.getName());
    });
    if (visiting.empty() || visitRing == 0 || visitRing > rooms.left[kDev]) {
      visiting.clear();
      visitRing = 0;
    } else {
      rooms.left[kDev] -= visitRing;
    }
    // Accumulators go to the device, updated last first, while it has room,
    // for the parameters `wanted` accepts that have none there yet.
    llvm::StringSet<> deviceAccumulators;
    auto placeAccumulators = [&](llvm::function_ref<bool(const ParameterState &)> wanted) {
      std::vector<const ParameterState *> accumulated;
      for (const ParameterState &state : states)
        if (state.accumulatorBytes > 0 && !deviceAccumulators.contains(state.name) &&
            wanted(state))
          accumulated.push_back(&state);
      std::stable_sort(accumulated.begin(), accumulated.end(), [](auto *a, auto *b) {
        return a->updateIndex > b->updateIndex;
      });
      for (const ParameterState *state : accumulated) {
        if (state->accumulatorBytes > rooms.left[kDev])
          continue;
        rooms.left[kDev] -= state->accumulatorBytes;
        deviceAccumulators.insert(state->name);
      }
    };
    // 4a. Accumulators first where a byte of one saves more than a byte of
    // home: the room they take is set aside, and a parameter that then gets
    // a device home takes its own accumulator's share back.
    if (microbatches && !keepGradients && accumulatorSavesMorePerByte(states, parts, profile))
      placeAccumulators([&](const ParameterState &state) {
        auto it = homes.find(state.name);
        // Not forced to the device; a visiting one only where room is left
        // once the homes are placed (below).
        return (it == homes.end() || it->second != Home::Device) &&
               !visiting.contains(state.name);
      });
    std::vector<const ParameterState *> below;
    for (const ParameterState *state : free) {
      uint64_t own = deviceAccumulators.contains(state->name) ? state->accumulatorBytes : 0;
      rooms.left[kDev] += own;
      if (rooms.fits(*state, Home::Device)) {
        rooms.take(*state, Home::Device);
        homes[state->name] = Home::Device;
        deviceAccumulators.erase(state->name);
      } else {
        rooms.left[kDev] -= own;
        below.push_back(state);
      }
    }
    // Host for the later updates, disk for the earlier ones. A parameter on
    // disk still keeps its master and gradient on the host, so one goes to
    // the host only while the host keeps room for every later one in its
    // disk form (when the disk can take them): the latest updates get the
    // host, and the rest still fit.
    std::vector<uint64_t> diskFormHostAfter(below.size() + 1, 0);
    for (size_t i = below.size(); i-- > 0;)
      diskFormHostAfter[i] = diskFormHostAfter[i + 1] + below[i]->bytes[kDsk][kHst];
    for (size_t i = 0; i < below.size(); ++i) {
      const ParameterState *state = below[i];
      Home home = Home::Host;
      bool leavesRoom = rooms.unlimited[kHst] || diskMemory == 0 || !state->trainable ||
                        (rooms.fits(*state, Home::Host) &&
                         rooms.left[kHst] - state->bytes[kHst][kHst] >= diskFormHostAfter[i + 1]);
      if (!rooms.fits(*state, Home::Host) || !leavesRoom) {
        home = Home::Disk;
        if (!rooms.fits(*state, Home::Disk)) {
          uint64_t needed = 0;
          for (const ParameterState *rest : below)
            if (!homes.count(rest->name))
              needed += rest->bytes[kHst][kHst];
          func.emitError("mt-homes: the training state does not fit: parameter '")
              << state->name << "' and the others left (" << formatBytes(needed)
              << " as host state) find no room: " << describe(initial, rooms, arena, stage)
              << "; raise --device-memory, --host-memory or --disk-memory (with "
                 "megatrain-run --disk-dir)";
          return signalPassFailure();
        }
      }
      rooms.take(*state, home);
      homes[state->name] = home;
    }

    // With micro-batches, a host or disk home accumulates its gradient on
    // the device while the device has room for the accumulator, updated
    // last first: part 0 copied and the later parts added there, in the
    // order the host adds them, and one copy out per update instead of one
    // per micro-batch (the d2h link and the host's additions saved, and the
    // host's accumulator). Kept gradients (clipping) stay on the host. A
    // forced home (--state-home) is a home, not where its sum is kept: its
    // accumulator goes to the device like any other.
    auto belowDevice = [&](const ParameterState &state) {
      auto it = homes.find(state.name);
      return it != homes.end() && it->second != Home::Device &&
             !(allVisit && visiting.contains(state.name));
    };
    if (!keepGradients)
      placeAccumulators(belowDevice);
    // Where every visitor found room for its sum whole, the ring is not
    // needed: its room goes to the accumulators still summed on the host.
    if (visitRing > 0 && llvm::none_of(visiting.keys(), [&](llvm::StringRef name) {
          auto it = homes.find(name);
          return it != homes.end() && it->second != Home::Device &&
                 !deviceAccumulators.contains(name);
        })) {
      rooms.left[kDev] += visitRing;
      visitRing = 0;
      visiting.clear();
      placeAccumulators(belowDevice);
    }

    mlir::Builder builder(&getContext());
    bool anyVisit = false;
    func.walk([&](mt::ParamOp param) {
      auto it = homes.find(param.getName());
      Home home = it == homes.end() ? Home::Host : it->second;
      param->setAttr(mt::attr::kHome, builder.getStringAttr(homeName(home)));
      param->removeAttr(mt::attr::kAccumulate);
      if (deviceAccumulators.contains(param.getName())) {
        param->setAttr(mt::attr::kAccumulate, builder.getStringAttr("device"));
      } else if (visiting.contains(param.getName()) && home != Home::Device) {
        param->setAttr(mt::attr::kAccumulate, builder.getStringAttr("visit"));
        anyVisit = true;
      }
      param->removeAttr(mt::attr::kUpdate);
      param->removeAttr(mt::attr::kMoments);
      if (updateVisitors.contains(param.getName())) {
        param->setAttr(mt::attr::kUpdate, builder.getStringAttr("visit"));
        if (forcedMomentsOnDevice(*forcings, param.getName()))
          param->setAttr(mt::attr::kMoments, builder.getStringAttr("device"));
      }
    });
    if (updateRing > 0)
      func->setAttr(mt::attr::kUpdateRingSize,
                    builder.getI64IntegerAttr(static_cast<int64_t>(updateRing)));
    else
      func->removeAttr(mt::attr::kUpdateRingSize);
    if (anyVisit)
      func->setAttr(mt::attr::kVisitRingSize,
                    builder.getI64IntegerAttr(static_cast<int64_t>(visitRing)));
    else
      func->removeAttr(mt::attr::kVisitRingSize);
    // The ring the gradients of the host and disk homes pass through: a
    // slot for each of them where the host's room left holds it (their
    // copies out then never wait for the host's updates, which run on into
    // the next step where they fall behind), else as many slots as the
    // room taken before the homes were known has of their largest.
    std::vector<ParameterState> ringed;
    for (const ParameterState &state : states) {
      auto it = homes.find(state.name);
      // A visiting update reads its gradient on the device.
      if ((it == homes.end() || it->second != Home::Device) &&
          !updateVisitors.contains(state.name))
        ringed.push_back(state);
    }
    uint64_t ring = gradientStageBytes(ringed, keepGradients, microbatches);
    const uint64_t whole = wholeGradientStageBytes(ringed, keepGradients, microbatches);
    if (whole > ring &&
        (rooms.unlimited[kHst] || rooms.left[kHst] >= whole - ring))
      ring = whole;
    func->setAttr(mt::attr::kGradStageSize,
                  builder.getI64IntegerAttr(static_cast<int64_t>(ring)));
    func->setAttr(mt::attr::kDeviceCapacity,
                  builder.getI64IntegerAttr(static_cast<int64_t>(deviceMemory)));
    func->setAttr(mt::attr::kHostCapacity, builder.getI64IntegerAttr(hostMemory));
    func->setAttr(mt::attr::kDiskCapacity,
                  builder.getI64IntegerAttr(static_cast<int64_t>(diskMemory)));
  }

  /// "device 3.0 GiB of 8.0 GiB free (capacity minus the 5.0 GiB arena), ..."
  std::string describe(const Rooms &initial, const Rooms &left, uint64_t arena,
                       uint64_t stage) const {
    std::string text = "device " + formatBytes(left.left[kDev]) + " of " +
                       formatBytes(initial.left[kDev]) + " free (--device-memory " +
                       formatBytes(deviceMemory) + " minus the " + formatBytes(arena) +
                       " arena), host ";
    if (left.unlimited[kHst])
      text += "unlimited";
    else
      text += formatBytes(left.left[kHst]) + " of " + formatBytes(initial.left[kHst]) +
              " free (--host-memory " + formatBytes(static_cast<uint64_t>(hostMemory)) +
              " minus " + formatBytes(stage) + " of staging and readouts)";
    text += ", disk " + formatBytes(left.left[kDsk]) + " of " +
            formatBytes(initial.left[kDsk]) + " free (--disk-memory)";
    return text;
  }
};

} // namespace
} // namespace megatrain
