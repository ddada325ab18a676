//===- Pipeline.cpp - the pass pipeline of megatrain-compile --------------===//
#include "megatrain/Pipeline.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

namespace megatrain {

namespace {

/// The gradients, micro-batches and updates of a training step, after
/// mt-add-loss; an evaluation step (forward-only) runs none of them.
void addTrainingPasses(mlir::OpPassManager &pm, const PipelineOptions &options) {
  pm.addNestedPass<mlir::func::FuncOp>(createAutodiff());
  if (options.microbatches > 1) {
    MicrobatchOptions microbatch;
    microbatch.count = options.microbatches;
    pm.addNestedPass<mlir::func::FuncOp>(createMicrobatch(microbatch));
  }
  AdamWOptions adamw;
  adamw.lr = options.lr;
  adamw.beta1 = options.beta1;
  adamw.beta2 = options.beta2;
  adamw.eps = options.eps;
  adamw.weightDecay = options.weightDecay;
  pm.addNestedPass<mlir::func::FuncOp>(createAdamW(adamw));
}

} // namespace

std::optional<EmitStage> parseEmitStage(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<EmitStage>>(name)
      .Case("mt", EmitStage::Mt)
      .Case("training", EmitStage::Training)
      .Case("scheduled", EmitStage::Scheduled)
      .Case("planned", EmitStage::Planned)
      .Case("plan", EmitStage::Plan)
      .Default(std::nullopt);
}

void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                   EmitStage upTo) {
  if (upTo == EmitStage::Mt)
    return;

  if (options.fusion)
    buildFusionPipeline(pm);

  AddLossOptions loss;
  loss.mode = options.lossMode;
  loss.lossOutput = options.lossOutput;
  loss.logits = options.logits;
  loss.tokens = options.tokens;
  loss.ignoreIndex = options.ignoreIndex;
  loss.targets = options.targets;
  loss.keepOutputs = options.keepOutputs;
  loss.forwardOnly = options.forwardOnly;
  pm.addNestedPass<mlir::func::FuncOp>(createAddLoss(loss));
  // The output projection and the loss mt-add-loss wrote, as one op.
  if (options.fusion && options.fuseLinearCe) {
    FuseLinearCrossEntropyOptions linearCe;
    linearCe.chunk = options.linearCeChunk;
    pm.addNestedPass<mlir::func::FuncOp>(createFuseLinearCrossEntropy(linearCe));
  }
  if (!options.forwardOnly)
    addTrainingPasses(pm, options);
  // Merge identical ops (repeated fills, constants, transposes of one weight)
  // and erase the ones left dead, before the schedule numbers them.
  pm.addPass(mlir::createCSEPass());

  buildPlanningPipeline(pm, options, upTo);
}

void buildFusionPipeline(mlir::OpPassManager &pm) {
  // Layer norm first: its decomposition contains an RMS norm of x - mean(x),
  // which mt-fuse-rms-norm would otherwise take.
  pm.addNestedPass<mlir::func::FuncOp>(createFuseLayerNorm());
  pm.addNestedPass<mlir::func::FuncOp>(createFuseRmsNorm());
  pm.addNestedPass<mlir::func::FuncOp>(createFuseActivations());
  // Then attention and its neighbours. None of their patterns holds an op the
  // passes above rewrite (no mean of squares, no sigmoid, tanh or erf), so
  // they match the same after them.
  pm.addNestedPass<mlir::func::FuncOp>(createFuseRotary());
  pm.addNestedPass<mlir::func::FuncOp>(createFuseAttention());
  pm.addNestedPass<mlir::func::FuncOp>(createFuseCrossEntropy());
}

void buildPlanningPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                           EmitStage upTo) {
  if (upTo == EmitStage::Mt || upTo == EmitStage::Training)
    return;
  // The head transposes around attention and rotary into their operands'
  // layouts, on the fused ops and their gradients.
  if (options.foldHeadTransposes)
    pm.addNestedPass<mlir::func::FuncOp>(createFoldHeadTransposes());
  // The compute precision of products, on the whole training step (forward,
  // backward, updates) before the schedule orders it.
  PrecisionOptions precision;
  precision.precision = options.precision;
  pm.addNestedPass<mlir::func::FuncOp>(createPrecision(precision));
  // bf16-precision attention on bf16 tensors, its conversions in the graph
  // where the casts around it cancel or fold into rotary.
  if (options.bf16Attention)
    pm.addNestedPass<mlir::func::FuncOp>(createBf16Attention());
  // Transposes of the last two dims into the matmul flags, after the casts
  // of mt-precision have been hoisted above the weights' transposes.
  if (options.foldTranspose)
    pm.addNestedPass<mlir::func::FuncOp>(createFoldTranspose());
  // Adds of a product and another value into the product's epilogue, on
  // the products mt-precision and mt-fold-transpose left, before the
  // elementwise chains could take the adds.
  if (options.matmulEpilogues)
    pm.addNestedPass<mlir::func::FuncOp>(createFuseMatmulEpilogues());
  // Elementwise chains into one kernel each, on the whole step (the forward,
  // the backward and the casts mt-precision wrote), before the schedule
  // numbers the ops and the tiering prices them.
  if (options.fusePointwise)
    pm.addNestedPass<mlir::func::FuncOp>(createFusePointwise());
  // The residual gradient's add and its bf16 cast into the norm gradient
  // before them, on the adds and casts mt-fuse-pointwise left.
  if (options.fuseNormGradAdds)
    pm.addNestedPass<mlir::func::FuncOp>(createFuseNormGradAdds());
  // RMS norms read only by their bf16 casts write bf16 themselves, after
  // mt-fuse-pointwise has made the weight gradients read the norm's cast
  // (reshaped) instead of the norm.
  if (options.foldNormCasts)
    pm.addNestedPass<mlir::func::FuncOp>(createFoldNormCasts());
  // Products read only by their bf16 casts write bf16 themselves, likewise.
  if (options.foldProductCasts)
    pm.addNestedPass<mlir::func::FuncOp>(createFoldProductCasts());
  // Opt-in: products read only by elementwise programs round to bf16, as
  // torch.autocast does (a change of values, not of form).
  if (options.bf16Activations)
    pm.addNestedPass<mlir::func::FuncOp>(createBf16Activations());
  pm.addNestedPass<mlir::func::FuncOp>(createSchedule());
  pm.addNestedPass<mlir::func::FuncOp>(createLiveness());
  if (upTo == EmitStage::Scheduled)
    return;
  TierOptions tier;
  tier.deviceMemory = options.deviceMemory;
  tier.policy = options.tieringPolicy;
  tier.fill = options.tieringFill;
  tier.spill = options.tieringSpill;
  tier.fillSearch = options.tieringFillSearch;
  tier.lead = options.tieringLead;
  tier.log = options.tieringLog;
  tier.deviceProfile = options.deviceProfile;
  tier.deviceCapacity = options.deviceCapacity;
  tier.hostMemory = options.hostCapacity;
  tier.diskMemory = options.diskCapacity;
  tier.stateHome = options.stateHomes;
  tier.keepGradients = options.keepGradients;
  tier.accumulatorVisits = options.accumulatorVisits;
  tier.visitSlots = options.visitSlots;
  pm.addNestedPass<mlir::func::FuncOp>(createTier(tier));
  // Reshapes as views of their operands' bytes, on the tiered step.
  if (options.viewAliases)
    pm.addNestedPass<mlir::func::FuncOp>(createViewAliases());
  PlanMemoryOptions memory;
  memory.noReuse = options.noMemoryReuse;
  pm.addNestedPass<mlir::func::FuncOp>(createPlanMemory(memory));
  HomesOptions homes;
  homes.deviceMemory = options.deviceCapacity;
  homes.hostMemory = options.hostCapacity;
  homes.diskMemory = options.diskCapacity;
  homes.stateHome = options.stateHomes;
  homes.keepGradients = options.keepGradients;
  homes.deviceProfile = options.deviceProfile;
  homes.allVisit = options.allAccumulatorsVisit;
  pm.addNestedPass<mlir::func::FuncOp>(createHomes(homes));
}

} // namespace megatrain
