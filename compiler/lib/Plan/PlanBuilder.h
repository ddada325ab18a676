//===- PlanBuilder.h - internal to plan emission: the plan being built ----===//
//
// emitPlan (PlanEmitter.h) runs one PlanBuilder over the planned function.
// Its members live in two files: PlanEmitter.cpp holds the tensor table, the
// placement of tensors in the pools, kernels, parameter fetches, activation
// copies and the header; HostTaskEmitter.cpp the host side of the training
// step: the loss readout (READ_LOSS), gradients copied to the host, micro-batch
// parts (ACCUMULATE) and the optimizer update (ADAMW).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_LIB_PLAN_PLANBUILDER_H
#define MEGATRAIN_LIB_PLAN_PLANBUILDER_H

#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/plan/Streams.h"
#include "megatrain/plan/plan.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace megatrain::emission {

namespace pb = megatrain::plan;

/// Set by mt-microbatch (passes/Microbatch.cpp) on a function that holds N
/// micro-batches.
inline constexpr llvm::StringLiteral kMicrobatchesAttr = "mt.microbatches";

/// The plan's streams (megatrain/plan/Streams.h), in plan.streams order.
inline constexpr const char *kCompute = pb::kComputeStream;
inline constexpr const char *kHostToDevice = pb::kHostToDeviceStream;
inline constexpr const char *kDeviceToHost = pb::kDeviceToHostStream;
/// Host-resident parameters' fetches, with PlanEmitOptions::fetchStream.
inline constexpr const char *kParamFetch = pb::kParamFetchStream;
inline constexpr const char *kHostStream = pb::kHostStream;
/// The device-resident parameters' updates, with PlanEmitOptions::optimizerStream.
inline constexpr const char *kOptimizerStream = pb::kOptimizerStream;
/// Copies between the disk tier and its host staging (plans with disk homes).
inline constexpr const char *kDiskStream = pb::kDiskStream;

/// What emission needs to remember about an arena tensor beyond the proto.
struct ArenaTensor {
  uint32_t id;
  mlir::Operation *op;    // the defining op
  unsigned result;        // which of its results
  int64_t defOpStep;      // mt.step of the defining op
  int64_t defPlanStep;    // first plan step holding the value (0: inputs)
  bool constant = false;
  std::vector<int64_t> reads; // plan steps reading it, ascending
  std::optional<uint32_t> viewOf; // a view (mt.alias): its base's tensor id
};

/// A ring pool (the gradient staging ring, the accumulator visits' ring):
/// each tensor takes the next bytes, 256-byte aligned, wrapping to the start
/// where it does not fit before the end; insertEvents orders the reuse.
struct RingPool {
  uint32_t pool = 0;
  uint64_t size = 0;   // 0: no ring
  uint64_t top = 0;    // the offset of the next tensor
  uint64_t extent = 0; // the end of the furthest one (the pool's size)
  /// The bytes a tensor of `bytes` takes in a ring.
  static uint64_t padded(uint64_t bytes) { return std::max<uint64_t>((bytes + 255) / 256 * 256, 256); }
  /// Places `buffer` at the ring's next bytes; false when it is larger than the ring.
  bool place(pb::Buffer &buffer) {
    const uint64_t padded = RingPool::padded(buffer.size_bytes());
    if (padded > size)
      return false;
    if (top + padded > size)
      top = 0;
    buffer.set_pool(pool);
    buffer.set_offset(top);
    top += padded;
    extent = std::max(extent, top);
    return true;
  }
};

/// Bytes of a statically shaped tensor type (bits rounded up to bytes).
inline uint64_t tensorTypeBytes(mlir::Type type) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(type);
  uint64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return static_cast<uint64_t>(tensor.getNumElements()) * ((bits + 7) / 8);
}

class PlanBuilder {
public:
  PlanBuilder(mlir::func::FuncOp func, const PlanEmitOptions &options)
      : func(func), options(options) {}

  mlir::LogicalResult build(pb::Plan &out);

private:
  // ---- Tensors, placement and device steps (PlanEmitter.cpp) ----
  mlir::LogicalResult addParameterMasters(llvm::ArrayRef<mlir::Operation *> ops);
  mlir::LogicalResult emitOp(mlir::Operation *op, int64_t opStep);
  mlir::LogicalResult emitKernel(mlir::Operation *op, int64_t opStep);
  /// The kernel's inputs: the tensors of `op`'s operands, each noted as read.
  mlir::LogicalResult addKernelInputs(mlir::Operation *op, pb::Kernel &kernel);
  /// The kernel's parameters: `op`'s inherent attributes (docs/ops.md) and
  /// its compute precision.
  mlir::LogicalResult addKernelAttributes(mlir::Operation *op, pb::Kernel &kernel);
  /// Finds the gradient parts a product writes into the device accumulator
  /// (PlanEmitOptions::accumulateInProducts): productParts, fusedSinks.
  void findProductParts(llvm::ArrayRef<mlir::Operation *> ops);
  /// A product whose result is micro-batch part `index` of `param`'s
  /// gradient, accumulated on the device: part 0 `matmul` into the
  /// accumulator grad:<param> (made here), parts k >= 1 `matmul_add` with
  /// the accumulator as addend and output.
  mlir::LogicalResult emitProductPart(mt::MatMulOp op, const std::string &param,
                                      int64_t index, int64_t opStep);
  mlir::LogicalResult emitView(mlir::Operation *op, int64_t opStep);
  mlir::LogicalResult emitOutput(mt::OutputOp op, int64_t opStep);
  mlir::LogicalResult emitOffload(mt::OffloadOp op, int64_t opStep);
  mlir::LogicalResult emitPrefetch(mt::PrefetchOp op, int64_t opStep);
  mlir::LogicalResult setLastUses();
  mlir::LogicalResult setTokenInput(mt::LossOp loss);

  /// A new tensor of `type` named `name` (made unique if taken), unplaced.
  mlir::FailureOr<uint32_t> addTensor(mlir::Operation *op, const std::string &name,
                                      mlir::Type type, pb::Role role);
  void placeOnHost(uint32_t id);
  /// Places a parameter's state tensor in its home's pool: the host pool, or
  /// the device_state pool for a device home (mt-homes).
  void placeState(const std::string &param, uint32_t id);
  /// Places a tensor in the device_state pool.
  void placeOnDeviceState(uint32_t id);
  /// Whether `param`'s state lives on the device (mt.home = "device").
  bool onDevice(const std::string &param) const;
  /// Whether `param`'s micro-batch accumulator lives on the device: a device
  /// home's, or a host or disk home's with mt.accumulate = "device".
  bool accumulatesOnDevice(const std::string &param) const;
  bool onDisk(const std::string &param) const;
  /// Whether every reader of this fetch has an mt.step before the
  /// parameter's mt.adamw (always, for a frozen parameter).
  bool readsPrecedeUpdate(mt::ParamOp param) const;
  /// The disk tier (HostTaskEmitter.cpp): every disk-home parameter's m, v in
  /// the disk pool and their staging tensors, made before the steps.
  mlir::LogicalResult addDiskState(llvm::ArrayRef<mlir::Operation *> ops);
  /// `copy` on disk of disk parameter `index`'s m, v into their staging.
  void emitDiskReadBack(size_t index, mlir::Operation *op, int64_t opStep);
  /// A STATE_STAGE `<prefix><param>` of `type` at the next bytes of `ring`
  /// (format minor `minor`); `holder` and `ringName` word the error when it
  /// does not fit.
  mlir::FailureOr<uint32_t> addRingStage(RingPool &ring, mlir::Operation *op,
                                         llvm::StringRef prefix, const std::string &param,
                                         mlir::Type type, llvm::StringRef holder,
                                         llvm::StringRef ringName, uint32_t minor);
  /// A STATE_STAGE `grad_stage:<param>` of `type` at the next bytes of the
  /// gradient staging ring (pool grad_stage), wrapping to its start.
  mlir::FailureOr<uint32_t> addGradientStage(mlir::Operation *op, const std::string &param,
                                             mlir::Type type);
  /// Places result `result` of `op` (already a tensor `id`) at its mt.offset.
  mlir::LogicalResult placeInArena(mlir::Operation *op, unsigned result,
                                   uint32_t id, int64_t opStep,
                                   int64_t defPlanStep);
  pb::Step &addStep(const char *stream, mlir::Operation *op, int64_t opStep);
  /// Records that the last added step reads tensor `id` (arena tensors only).
  void noteRead(uint32_t id);
  mlir::FailureOr<uint32_t> tensorOf(mlir::Operation *user, mlir::Value value);

  // ---- Accumulator visits (VisitEmitter.cpp) ----
  /// Whether `param`'s accumulator lives on the host and visits the device
  /// for each part (mt.accumulate = "visit").
  bool visits(const std::string &param) const;
  /// Plans the visits in plan order (after findProductParts): visitList,
  /// visitOf, and where each part k >= 1 is fetched (visitFetchesBefore).
  void findVisits(llvm::ArrayRef<mlir::Operation *> ops);
  /// A STATE_STAGE `acc_visit:<param>` of `type` at the next bytes of the
  /// ring of accumulator visits (pool acc_visit), wrapping to its start.
  mlir::FailureOr<uint32_t> addVisitStage(mlir::Operation *op, const std::string &param,
                                          mlir::Type type);
  /// The `copy` h2d of each visit fetched before `op`'s steps.
  mlir::LogicalResult emitVisitFetches(mlir::Operation *op, int64_t opStep);
  /// The visit tensor of the part `op` adds: the fetched one, or for part 0
  /// of a product a new one (and the host accumulator grad:<param>).
  mlir::FailureOr<uint32_t> visitTensorOf(mlir::Operation *op);
  /// The sum on the device that a micro-batch part `op` of `param` adds into:
  /// its visit (visitTensorOf) or the device accumulator part 0 made (an
  /// error when there is none yet).
  mlir::FailureOr<uint32_t> deviceSumOf(mlir::Operation *op, const std::string &param);
  /// `copy` d2h of visit tensor `visit` back into `param`'s host accumulator.
  void emitVisitReturn(mlir::Operation *op, const std::string &param, uint32_t visit,
                       int64_t opStep);

  // ---- Update visits (UpdateVisitEmitter.cpp) ----
  /// Whether `param` is a host home whose update visits the device
  /// (mt.update = "visit").
  bool visitsForUpdate(const std::string &param) const;
  /// Plans the visits in plan order (after findVisits): updateVisitList,
  /// updateVisitOf, and where each is fetched (updateFetchesBefore).
  void findUpdateVisits(llvm::ArrayRef<mlir::Operation *> ops);
  /// A STATE_STAGE `<prefix><param>` at the next bytes of the update ring.
  mlir::FailureOr<uint32_t> addUpdateStage(mlir::Operation *op, llvm::StringRef prefix,
                                           const std::string &param, mlir::Type type);
  /// The `copy` h2d of the master and moments of each visit fetched before `op`.
  mlir::LogicalResult emitUpdateVisitFetches(mlir::Operation *op, int64_t opStep);
  /// The device ADAMW of a visiting update and the copies back to the host.
  mlir::LogicalResult emitVisitingUpdate(mt::AdamWOp op, const std::string &param,
                                         uint32_t master, uint32_t gradient, mlir::Type type,
                                         bool accumulated, int64_t opStep);

  // ---- Host tasks (HostTaskEmitter.cpp) ----
  mlir::LogicalResult emitLoss(mt::LossOp op, int64_t opStep);
  mlir::LogicalResult emitAdamW(mt::AdamWOp op, int64_t opStep);
  mlir::LogicalResult emitGradPart(mt::GradPartOp op, int64_t opStep);
  /// `copy` d2h of `gradient` into grad_part:<param> + ACCUMULATE into the
  /// host gradient of `param` (micro-batch k >= 1).
  /// With `returnVisit` false, an accumulator's visit stays on the device
  /// (the last part of a visiting update, which reads it in place).
  mlir::LogicalResult emitAccumulate(mlir::Operation *op, const std::string &param,
                                     uint32_t gradient, mlir::Type type,
                                     int64_t opStep, bool returnVisit = true);
  /// The tensor of gradient value `grad`, checked to have the master's shape and dtype.
  mlir::FailureOr<uint32_t> gradientOf(mlir::Operation *op, const std::string &param,
                                       mlir::Value grad, uint32_t master);

  mlir::func::FuncOp func;
  const PlanEmitOptions &options;
  pb::Plan plan;
  uint64_t arenaSize = 0;
  uint64_t stageSize = 0;
  uint64_t hostTop = 0;
  // Device-resident training state (docs/tiering.md "State homes"): the
  // pool's id (after the host staging pool when there is one) and its top.
  uint32_t statePool = 2;
  uint64_t stateTop = 0;
  std::map<std::string, std::string> homes; // parameter -> mt.home
  llvm::StringSet<> deviceAccumulators;     // mt.accumulate = "device"
  // The disk tier: pool ids, the disk pool's top, the staging slot size,
  // and per disk parameter in update order its m, v and staging tensors.
  uint32_t diskPool = 0;
  uint32_t diskStagePool = 0;
  uint64_t diskTop = 0;
  uint64_t diskSlotBytes = 0;
  struct DiskState {
    std::string param;
    uint32_t m, v, stageM, stageV;
  };
  std::vector<DiskState> diskStates;
  std::map<std::string, size_t> diskIndex;
  // The gradient staging ring (mt.grad_stage_size; size 0: persistent host
  // gradients).
  RingPool gradStage;
  llvm::StringSet<> names;
  llvm::DenseMap<mlir::Value, uint32_t> valueTensors;
  std::map<std::string, uint32_t> parameterMasters;
  std::map<std::string, int64_t> updateSteps; // parameter -> its mt.adamw's mt.step
  // Host bf16 compute copies (PARAMETER_COMPUTE), per parameter name.
  std::map<std::string, uint32_t> computeCopies;
  std::vector<ArenaTensor> arena;
  llvm::DenseMap<uint32_t, size_t> arenaIndex;   // tensor id -> arena entry
  std::vector<int64_t> planStepOpStep;           // plan step -> mt.step
  std::map<int64_t, int64_t> planStepsThrough;   // mt.step -> #plan steps so far
  unsigned constants = 0;

  // Host-task state: the updates so far (one per parameter, all with the
  // first one's hyper-parameters), the loss, and the micro-batch gradient
  // parts per parameter: the host gradient, the staging tensor of parts
  // k >= 1, how many parts came so far and the last one (its count).
  std::map<std::string, mt::AdamWOp> updates;
  std::optional<mt::AdamWOp> firstUpdate;
  std::optional<mt::LossOp> loss;
  std::map<std::string, uint32_t> hostGradients;
  std::map<std::string, uint32_t> partStages;
  std::map<std::string, int64_t> partsSeen;
  std::map<std::string, mt::GradPartOp> lastPart;
  // Products that write a gradient part into the device accumulator
  // (findProductParts): the product -> (parameter, part index), and the
  // grad_part and adamw ops whose copy or ACCUMULATE that product made.
  llvm::DenseMap<mlir::Operation *, std::pair<std::string, int64_t>> productParts;
  llvm::DenseSet<mlir::Operation *> fusedSinks;
  // Accumulator visits (mt.accumulate = "visit", mt.visit_ring_size): the
  // parameters, the ring (pool acc_visit), the slots it has of the largest
  // visiting accumulator, and per visit in plan order the parameter, the
  // part, the op that adds it and its tensor.
  llvm::StringSet<> visitingAccumulators;
  RingPool visitRing;
  uint64_t visitSlots = 3;
  struct Visit {
    std::string param;
    int64_t index;
    mlir::Operation *op;
    mlir::Type type;
    uint32_t tensor = UINT32_MAX;
  };
  std::vector<Visit> visitList;
  llvm::DenseMap<mlir::Operation *, size_t> visitOf;
  llvm::DenseMap<mlir::Operation *, std::vector<size_t>> visitFetchesBefore;
  // The product that writes each accumulated parameter's last part.
  std::map<std::string, mlir::Operation *> lastProductParts;
  // Update visits (mt.update = "visit", mt.update_ring_size): the
  // parameters, the ring (pool update_visit), and per visit in plan order
  // the parameter, its mt.adamw, the gradient's type, its tensors on the
  // device and its moments on the host.
  llvm::StringSet<> updateVisitors;
  llvm::StringSet<> deviceMoments; // mt.moments = "device": only the master visits
  RingPool updateRing;
  struct UpdateVisit {
    std::string param;
    mlir::Operation *op;
    mlir::Type type;
    uint32_t master = UINT32_MAX, m = UINT32_MAX, v = UINT32_MAX, compute = UINT32_MAX;
    uint32_t hostM = UINT32_MAX, hostV = UINT32_MAX;
  };
  std::vector<UpdateVisit> updateVisitList;
  std::map<std::string, size_t> updateVisitOf;
  llvm::DenseMap<mlir::Operation *, std::vector<size_t>> updateFetchesBefore;
};

} // namespace megatrain::emission

#endif // MEGATRAIN_LIB_PLAN_PLANBUILDER_H
