//===- StateHomes.h - bytes of each parameter's training state per home ---===//
//
// A parameter's training state (fp32 master, AdamW moments, the bf16 compute
// copy where the home keeps one, the gradient where it is kept) lives in one
// home: the device, pinned host memory or disk (docs/tiering.md, "State
// homes"). mt-tier takes the
// state the host and disk cannot hold out of the arena's budget; mt-homes
// chooses each parameter's home once the arena is placed. Both price the
// state with these functions, so they agree.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_STATEHOMES_H
#define MEGATRAIN_PASSES_TIERING_STATEHOMES_H

#include "megatrain/plan/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace megatrain {

/// Where a parameter's state lives; also the index of a tier in `bytes`.
enum class Home { Device = 0, Host = 1, Disk = 2 };
inline constexpr int kHomes = 3;

llvm::StringRef homeName(Home home);
std::optional<Home> parseHome(llvm::StringRef name);

/// One parameter's state.
struct ParameterState {
  std::string name;
  uint64_t elements = 0;
  bool trainable = false;
  bool computeCopy = false;  // fetched as bf16 from an f32 master (mt-precision)
  int64_t updateIndex = -1;  // position of its mt.adamw in the block (-1: none)
  /// With micro-batches, the bytes of the f32 accumulator (0 without): on
  /// the host for a host or disk home, unless mt-homes puts it on the device.
  uint64_t accumulatorBytes = 0;
  /// bytes[home][tier]: what the state takes in each tier with that home.
  std::array<std::array<uint64_t, kHomes>, kHomes> bytes{};
};

/// The function's micro-batches a step (`mt.microbatches`; 1 without).
int64_t microbatchCount(mlir::func::FuncOp func);

/// Every parameter the function fetches, in first-fetch order.
/// `keepGradients`: every host and disk home keeps a persistent fp32
/// gradient (gradient clipping reads them all before any update); otherwise
/// only an accumulator across micro-batches is kept, and a gradient the
/// update consumes in the same step passes through the staging ring.
std::vector<ParameterState> collectParameterState(mlir::func::FuncOp func,
                                                  bool keepGradients);

/// Slots of the host gradient staging ring (pool `grad_stage`), each the
/// size of the largest gradient that passes through it: the d2h copies may
/// run this many gradients ahead of the host updates that consume them.
inline constexpr uint64_t kGradientStageSlots = 4;

/// The host memory that is not per-parameter state but is there for it:
/// the gradient staging ring (bounded by kGradientStageSlots of the largest
/// trainable parameter's gradient; none with `keepGradients` and no
/// micro-batches) and, with a disk, the disk staging (two slots of the
/// largest parameter's m and v, 4 KiB blocks).
uint64_t gradientStageBytes(llvm::ArrayRef<ParameterState> states, bool keepGradients,
                            bool microbatches);
/// The gradient staging ring with a slot for every trainable gradient (none
/// with `keepGradients` and no micro-batches): the d2h copies then never wait
/// for the host updates, which may fall behind the backward and run on into
/// the next step (docs/runtime.md, "Host updates across steps"). mt-homes
/// takes it where the host has the room once the homes are placed.
uint64_t wholeGradientStageBytes(llvm::ArrayRef<ParameterState> states, bool keepGradients,
                                 bool microbatches);
uint64_t diskStageBytes(llvm::ArrayRef<ParameterState> states);

/// The gradient staging ring mt-tier's copy holds assume (docs/tiering.md,
/// "The copy hold"), before mt-homes sizes it: a slot for every gradient
/// (wholeGradientStageBytes) where the host's `hostMemory` (< 0: unlimited)
/// holds that ring and the state beside `otherHostBytes` (readouts, offload
/// and disk staging), else `slots`. The host keeps `hostShare` of the state
/// and of the gradients, its host forms and its slots (mt-homes gives the
/// rest device homes, whose gradients never pass through the ring).
uint64_t holdRingBytes(llvm::ArrayRef<ParameterState> states, bool keepGradients,
                       bool microbatches, uint64_t slots, uint64_t otherHostBytes,
                       int64_t hostMemory, double hostShare);

/// Whether, with `microbatches` > 1, a byte of device accumulator saves
/// more per step than a byte of device home (master and moments), by the
/// cost model: then mt-homes gives the accumulators the device's room
/// first, and mt-tier leaves room for them beside the arena.
bool accumulatorSavesMorePerByte(llvm::ArrayRef<ParameterState> states, int64_t microbatches,
                                 const DeviceProfile &profile);

/// Accumulator visits (docs/tiering.md, "Accumulator visits"): with
/// micro-batches, the accumulators of at most `slotBytes` live on the host
/// and visit the device for each part, through a ring of `ringBytes`; the
/// larger ones stay whole on the device (or are summed on the host).
struct AccumulatorVisits {
  uint64_t slotBytes = 0; // 0: none visits
  uint64_t ringBytes = 0;
  bool visits(const ParameterState &state) const {
    return slotBytes > 0 && state.trainable && state.accumulatorBytes > 0 &&
           state.accumulatorBytes <= slotBytes;
  }
};
/// The slot size that takes the least device memory for the sums: `slots`
/// slots of it, plus every accumulator larger than it whole; none visits
/// where keeping every accumulator whole takes no more.
AccumulatorVisits planAccumulatorVisits(llvm::ArrayRef<ParameterState> states,
                                        uint64_t slots);

/// `--state-home TIER[:REGEX]`, in order; the first that matches wins.
/// TIER `visit` is a host home whose update visits the device (`visit`
/// true): "Update visits" in docs/tiering.md.
struct HomeForcing {
  Home home;
  std::string pattern;                 // empty: every parameter
  std::shared_ptr<llvm::Regex> regex;  // null when pattern is empty
  bool visit = false;
  /// TIER `visit-master`: the moments stay on the device (pool device_state)
  /// and only the master (with the compute copy) visits it for the update.
  bool momentsOnDevice = false;
};

/// Parses the option's entries; on a bad one returns nullopt and sets `why`.
std::optional<std::vector<HomeForcing>>
parseHomeForcings(llvm::ArrayRef<std::string> entries, std::string &why);

std::optional<Home> forcedHome(llvm::ArrayRef<HomeForcing> forcings,
                               llvm::StringRef parameter);

/// Update visits (docs/tiering.md, "Update visits"): a host home whose
/// master, moments and compute copy visit the device for its update, through
/// a ring of `kUpdateVisitSlots` slots in the DEVICE pool `update_visit`.
inline constexpr uint64_t kUpdateVisitSlots = 4;
/// Whether `--state-home visit[:REGEX]` (or visit-master) is the forcing that matches.
bool forcedVisit(llvm::ArrayRef<HomeForcing> forcings, llvm::StringRef parameter);
/// Whether the forcing that matches is `visit-master`.
bool forcedMomentsOnDevice(llvm::ArrayRef<HomeForcing> forcings, llvm::StringRef parameter);
/// Gives the trainable parameters forced to `visit-master` their host home's
/// bytes with the moments moved to the device: the forced home (host) then
/// takes them from both tiers.
void applyMomentsOnDevice(std::vector<ParameterState> &states,
                          llvm::ArrayRef<HomeForcing> forcings);
/// The ring bytes one visit of `state` takes: its master, m and v (f32), its
/// compute copy (bf16, where it has one) and, with micro-batches, room for
/// its sum where that is kept on the host; each tensor 256-byte aligned.
uint64_t updateVisitSlotBytes(const ParameterState &state, bool microbatches,
                              bool momentsOnDevice = false);
/// The ring for the trainable parameters forced to visit: kUpdateVisitSlots
/// slots of the largest one's (0: none visits).
uint64_t updateVisitRingBytes(llvm::ArrayRef<ParameterState> states,
                              llvm::ArrayRef<HomeForcing> forcings, bool microbatches);

/// Bytes of state that must live on the device: those forced there, plus
/// what the host (`hostCapacity`, -1: unlimited) and disk cannot hold when
/// every other parameter takes the cheapest home below the device.
uint64_t deviceStateReserve(llvm::ArrayRef<ParameterState> states,
                            llvm::ArrayRef<HomeForcing> forcings,
                            int64_t hostCapacity, uint64_t diskCapacity);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_STATEHOMES_H
