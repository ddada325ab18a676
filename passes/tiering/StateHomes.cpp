//===- StateHomes.cpp - bytes of each parameter's training state per home -===//
#include "tiering/StateHomes.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Dialect/MtDialect.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>

namespace megatrain {

namespace {

/// The emitter places host tensors at 256-byte multiples, at least 256.
uint64_t hostPadded(uint64_t bytes) {
  return std::max<uint64_t>((bytes + 255) / 256 * 256, 256);
}

/// Disk files are read with O_DIRECT: 4 KiB blocks.
uint64_t diskPadded(uint64_t bytes) { return (bytes + 4095) / 4096 * 4096; }

} // namespace

llvm::StringRef homeName(Home home) {
  switch (home) {
  case Home::Device:
    return "device";
  case Home::Host:
    return "host";
  case Home::Disk:
    return "disk";
  }
  return "host";
}

std::optional<Home> parseHome(llvm::StringRef name) {
  if (name == "device")
    return Home::Device;
  if (name == "host")
    return Home::Host;
  if (name == "disk")
    return Home::Disk;
  return std::nullopt;
}

std::vector<ParameterState> collectParameterState(mlir::func::FuncOp func,
                                                  bool keepGradients) {
  const bool microbatches = microbatchCount(func) > 1;
  std::vector<ParameterState> states;
  llvm::StringMap<size_t> index;
  int64_t position = 0;
  for (mlir::Operation &op : func.getBody().front()) {
    if (auto param = mlir::dyn_cast<mt::ParamOp>(op)) {
      auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
      auto [it, inserted] = index.try_emplace(param.getName(), states.size());
      if (inserted) {
        ParameterState state;
        state.name = param.getName().str();
        state.elements = static_cast<uint64_t>(type.getNumElements());
        state.trainable = param.getTrainable();
        states.push_back(std::move(state));
      }
      ParameterState &state = states[it->second];
      // A compute-type fetch (mt-precision) reads a bf16 copy of an f32 master.
      if (param->hasAttr(mt::attr::kMasterElement))
        state.computeCopy = true;
    } else if (auto update = mlir::dyn_cast<mt::AdamWOp>(op)) {
      auto it = index.find(update.getParam());
      if (it != index.end())
        states[it->second].updateIndex = position;
    }
    ++position;
  }
  for (ParameterState &state : states) {
    // Masters are f32 (mt-precision keeps them so) or the fetch's own type.
    uint64_t master = hostPadded(state.elements * 4);
    // The host keeps the bf16 copy it sends: half the bytes over h2d. A
    // device home keeps none: its fetch casts the master over HBM.
    uint64_t compute = state.computeCopy ? hostPadded(state.elements * 2) : 0;
    // A persistent gradient: the micro-batch accumulator, or every gradient
    // when clipping needs them all before any update. Otherwise the host
    // update reads its gradient from the staging ring (gradientStageBytes).
    uint64_t gradient = keepGradients || microbatches ? master : 0;
    const int dev = static_cast<int>(Home::Device), hst = static_cast<int>(Home::Host),
              dsk = static_cast<int>(Home::Disk);
    auto &device = state.bytes[dev];
    auto &host = state.bytes[hst];
    auto &disk = state.bytes[dsk];
    if (!state.trainable) {
      // A frozen weight: its master (and on the host its compute copy); no disk form.
      device[dev] = master;
      host[hst] = master + compute;
      disk[hst] = host[hst];
      continue;
    }
    state.accumulatorBytes = microbatches ? master : 0;
    // Device: master, m, v; the gradient is transient unless micro-batches
    // accumulate it.
    device[dev] = 3 * master + (microbatches ? master : 0);
    // Host: master, m, v, compute copy, the kept gradient.
    host[hst] = 3 * master + compute + gradient;
    // Disk: the moments on disk; master, compute copy, kept gradient on the host.
    disk[dsk] = 2 * diskPadded(state.elements * 4);
    disk[hst] = master + compute + gradient;
  }
  return states;
}

int64_t microbatchCount(mlir::func::FuncOp func) {
  if (auto count = func->getAttrOfType<mlir::IntegerAttr>("mt.microbatches"))
    return std::max<int64_t>(1, count.getInt());
  return 1;
}

/// Whether, with `microbatches` > 1, a byte of device accumulator saves
/// more per step than a byte of device home, by the cost model: an
/// accumulator on the device saves the M - 1 copies out of a part and the
/// host's sums of them; the rest of a device home (master and moments)
/// saves the host AdamW, the M fetches of the compute copy and the one copy
/// out that is left. Summed over the trainable parameters (every term is
/// per element, so the answer is the same for each).
bool accumulatorSavesMorePerByte(llvm::ArrayRef<ParameterState> states, int64_t microbatches,
                                 const DeviceProfile &profile) {
  double accumulatorSaves = 0, homeSaves = 0;
  uint64_t accumulatorBytes = 0, homeBytes = 0;
  const double parts = static_cast<double>(microbatches);
  for (const ParameterState &state : states) {
    if (!state.trainable || state.accumulatorBytes == 0)
      continue;
    double copyOut = transferSeconds(state.elements * 4, Link::DeviceToHost, profile);
    accumulatorSaves +=
        (parts - 1) * (copyOut + hostAccumulateSeconds(state.elements, profile));
    accumulatorBytes += state.accumulatorBytes;
    homeSaves += hostAdamWSeconds(state.elements, profile) +
                 parts * transferSeconds(state.elements * (state.computeCopy ? 2 : 4),
                                         Link::HostToDevice, profile) +
                 copyOut;
    const int device = static_cast<int>(Home::Device);
    homeBytes += state.bytes[device][device] - state.accumulatorBytes;
  }
  if (accumulatorBytes == 0 || homeBytes == 0)
    return false;
  return accumulatorSaves * static_cast<double>(homeBytes) >
         homeSaves * static_cast<double>(accumulatorBytes);
}

uint64_t gradientStageBytes(llvm::ArrayRef<ParameterState> states, bool keepGradients,
                            bool microbatches) {
  if (keepGradients && !microbatches)
    return 0;
  uint64_t largest = 0, total = 0;
  for (const ParameterState &state : states)
    if (state.trainable) {
      largest = std::max(largest, hostPadded(state.elements * 4));
      total += hostPadded(state.elements * 4);
    }
  return std::min(kGradientStageSlots * largest, total);
}

uint64_t wholeGradientStageBytes(llvm::ArrayRef<ParameterState> states, bool keepGradients,
                                 bool microbatches) {
  if (keepGradients && !microbatches)
    return 0;
  uint64_t total = 0;
  for (const ParameterState &state : states)
    if (state.trainable)
      total += hostPadded(state.elements * 4);
  return total;
}

uint64_t holdRingBytes(llvm::ArrayRef<ParameterState> states, bool keepGradients,
                       bool microbatches, uint64_t slots, uint64_t otherHostBytes,
                       int64_t hostMemory, double hostShare) {
  const uint64_t whole = wholeGradientStageBytes(states, keepGradients, microbatches);
  if (whole <= slots || hostMemory < 0)
    return std::max(whole, slots);
  uint64_t hostForm = whole;
  for (const ParameterState &state : states)
    hostForm += state.bytes[static_cast<int>(Home::Host)][static_cast<int>(Home::Host)];
  const double share = std::clamp(hostShare, 0.0, 1.0);
  const uint64_t needed =
      otherHostBytes + static_cast<uint64_t>(std::ceil(share * static_cast<double>(hostForm)));
  return needed <= static_cast<uint64_t>(hostMemory) ? whole : slots;
}

AccumulatorVisits planAccumulatorVisits(llvm::ArrayRef<ParameterState> states,
                                        uint64_t slots) {
  std::vector<uint64_t> sizes;
  uint64_t whole = 0;
  for (const ParameterState &state : states)
    if (state.trainable && state.accumulatorBytes > 0) {
      sizes.push_back(state.accumulatorBytes);
      whole += state.accumulatorBytes;
    }
  std::sort(sizes.begin(), sizes.end());
  AccumulatorVisits best;
  uint64_t bestBytes = whole; // none visits: every accumulator whole
  if (slots == 0)
    return best;
  uint64_t below = 0; // bytes of the accumulators up to sizes[i]
  for (size_t i = 0; i < sizes.size(); ++i) {
    below += sizes[i];
    if (i + 1 < sizes.size() && sizes[i + 1] == sizes[i])
      continue;
    const uint64_t bytes = slots * sizes[i] + (whole - below);
    if (bytes < bestBytes) {
      bestBytes = bytes;
      best.slotBytes = sizes[i];
      best.ringBytes = slots * sizes[i];
    }
  }
  return best;
}

uint64_t diskStageBytes(llvm::ArrayRef<ParameterState> states) {
  uint64_t largest = 0;
  for (const ParameterState &state : states)
    if (state.trainable)
      largest = std::max(largest, diskPadded(state.elements * 4));
  return 4 * largest;
}

std::optional<std::vector<HomeForcing>>
parseHomeForcings(llvm::ArrayRef<std::string> entries, std::string &why) {
  std::vector<HomeForcing> forcings;
  for (const std::string &entry : entries) {
    llvm::StringRef text(entry);
    auto [tier, pattern] = text.split(':');
    const bool moments = tier == "visit-master";
    const bool visit = tier == "visit" || moments;
    std::optional<Home> home = visit ? std::optional<Home>(Home::Host) : parseHome(tier);
    if (!home) {
      why = "--state-home '" + entry + "': the tier is '" + tier.str() +
            "', expected device, host, disk, visit or visit-master (TIER or TIER:REGEX)";
      return std::nullopt;
    }
    HomeForcing forcing{*home, pattern.str(), nullptr, visit, moments};
    if (!pattern.empty()) {
      forcing.regex = std::make_shared<llvm::Regex>(pattern);
      std::string error;
      if (!forcing.regex->isValid(error)) {
        why = "--state-home '" + entry + "': bad regex: " + error;
        return std::nullopt;
      }
    }
    forcings.push_back(std::move(forcing));
  }
  return forcings;
}

/// The first forcing whose regex matches `parameter` (none: nullptr).
static const HomeForcing *matchingForcing(llvm::ArrayRef<HomeForcing> forcings,
                                          llvm::StringRef parameter) {
  for (const HomeForcing &forcing : forcings)
    if (!forcing.regex || forcing.regex->match(parameter))
      return &forcing;
  return nullptr;
}

std::optional<Home> forcedHome(llvm::ArrayRef<HomeForcing> forcings,
                               llvm::StringRef parameter) {
  const HomeForcing *forcing = matchingForcing(forcings, parameter);
  return forcing ? std::optional<Home>(forcing->home) : std::nullopt;
}

bool forcedVisit(llvm::ArrayRef<HomeForcing> forcings, llvm::StringRef parameter) {
  const HomeForcing *forcing = matchingForcing(forcings, parameter);
  return forcing && forcing->visit;
}

bool forcedMomentsOnDevice(llvm::ArrayRef<HomeForcing> forcings, llvm::StringRef parameter) {
  const HomeForcing *forcing = matchingForcing(forcings, parameter);
  return forcing && forcing->momentsOnDevice;
}

void applyMomentsOnDevice(std::vector<ParameterState> &states,
                          llvm::ArrayRef<HomeForcing> forcings) {
  const int dev = static_cast<int>(Home::Device), hst = static_cast<int>(Home::Host);
  for (ParameterState &state : states) {
    if (!state.trainable || !forcedMomentsOnDevice(forcings, state.name))
      continue;
    const uint64_t moments = 2 * hostPadded(state.elements * 4);
    state.bytes[hst][hst] -= moments;
    state.bytes[hst][dev] += moments;
  }
}

uint64_t updateVisitSlotBytes(const ParameterState &state, bool microbatches,
                              bool momentsOnDevice) {
  // Ring tensors take 256-byte multiples, as host ones do.
  const uint64_t f32 = hostPadded(state.elements * 4);
  return (momentsOnDevice ? 1 : 3) * f32 + (state.computeCopy ? hostPadded(state.elements * 2) : 0) +
         (microbatches ? f32 : 0);
}

uint64_t updateVisitRingBytes(llvm::ArrayRef<ParameterState> states,
                              llvm::ArrayRef<HomeForcing> forcings, bool microbatches) {
  uint64_t largest = 0;
  for (const ParameterState &state : states)
    if (state.trainable && forcedVisit(forcings, state.name))
      largest = std::max(largest, updateVisitSlotBytes(state, microbatches,
                                                       forcedMomentsOnDevice(forcings, state.name)));
  return kUpdateVisitSlots * largest;
}

uint64_t deviceStateReserve(llvm::ArrayRef<ParameterState> states,
                            llvm::ArrayRef<HomeForcing> forcings,
                            int64_t hostCapacity, uint64_t diskCapacity) {
  const int dev = static_cast<int>(Home::Device), hst = static_cast<int>(Home::Host),
            dsk = static_cast<int>(Home::Disk);
  uint64_t reserve = 0;
  uint64_t hostUsed = 0, diskUsed = 0;
  std::vector<const ParameterState *> free;
  for (const ParameterState &state : states) {
    std::optional<Home> forced = forcedHome(forcings, state.name);
    if (!forced) {
      free.push_back(&state);
      continue;
    }
    const auto &bytes = state.bytes[static_cast<int>(*forced)];
    reserve += bytes[dev];
    hostUsed += bytes[hst];
    diskUsed += bytes[dsk];
  }
  // The others below the device, largest first, each in the form that takes
  // the least host memory (disk: only its master, compute copy and kept gradient
  // stay on the host) while the disk has room, else on the host; what
  // neither holds goes to the device.
  std::stable_sort(free.begin(), free.end(), [](auto *a, auto *b) {
    return a->elements > b->elements;
  });
  auto fitsHost = [&](uint64_t bytes) {
    return hostCapacity < 0 || hostUsed + bytes <= static_cast<uint64_t>(hostCapacity);
  };
  for (const ParameterState *state : free) {
    const auto &onHost = state->bytes[hst];
    const auto &onDisk = state->bytes[dsk];
    if (onDisk[dsk] > 0 && diskUsed + onDisk[dsk] <= diskCapacity && fitsHost(onDisk[hst])) {
      diskUsed += onDisk[dsk];
      hostUsed += onDisk[hst];
    } else if (fitsHost(onHost[hst])) {
      hostUsed += onHost[hst];
    } else {
      reserve += state->bytes[dev][dev];
    }
  }
  return reserve;
}

} // namespace megatrain
