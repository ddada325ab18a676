//===- Pipeline.h - the pass pipeline of megatrain-compile ----------------===//
#ifndef MEGATRAIN_PIPELINE_H
#define MEGATRAIN_PIPELINE_H

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatrain {

/// Everything the pipeline's passes are configured with. Defaults match the
/// passes' own defaults (Passes.td).
struct PipelineOptions {
  // mt-add-loss
  std::string lossMode = "output"; // "output" | "next-token-ce"
  std::string lossOutput;          // lossMode == "output": graph output to minimize
  std::string logits = "logits";   // lossMode == "next-token-ce"
  std::string tokens = "input_ids";
  int64_t ignoreIndex = -100;
  std::string targets;  // a separate targets input for the loss (a loss mask); empty: the tokens
  std::vector<std::string> keepOutputs; // graph outputs kept as mt.output
  // An evaluation step: mt-add-loss marks the function mt.evaluation and
  // mt-autodiff, mt-microbatch and mt-adamw do not run (forward and loss only).
  bool forwardOnly = false;
  // mt-adamw
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
  // mt-tier
  uint64_t deviceMemory = 0;           // device arena budget in bytes, 0: none
  std::string tieringPolicy = "auto";  // auto | keep | checkpoint | offload
  // mt-tier's fill (auto): off with megatrain-compile --no-tiering-fill.
  bool tieringFill = true;
  // mt-tier's spill (with the fill): off with megatrain-compile --no-tiering-spill.
  bool tieringSpill = true;
  // The fill's search (where the state competes for the device): off with
  // megatrain-compile --no-tiering-fill-search.
  bool tieringFillSearch = true;
  // mt-tier's lead (parameter fetches moved ahead of the link's queue): off with
  // megatrain-compile --no-tiering-lead.
  bool tieringLead = true;
  // mt-tier's log of every plan it considers (megatrain-compile --tiering-log;
  // empty: none, "-": stderr).
  std::string tieringLog;
  std::string deviceProfile;           // JSON file; empty: the H200 defaults
  // Capacities for training state (mt-tier's reserve, mt-homes;
  // docs/tiering.md "State homes"): the device (arena plus device state;
  // 0: no device state), the host (-1: unlimited), the disk (0: none), and
  // the forced homes (TIER or TIER:REGEX).
  uint64_t deviceCapacity = 0;
  int64_t hostCapacity = -1;
  uint64_t diskCapacity = 0;
  std::vector<std::string> stateHomes;
  // A persistent fp32 gradient per host and disk home (gradient clipping);
  // otherwise the update consumes it from the staging ring in the same step.
  bool keepGradients = false;
  // With micro-batches, the accumulators up to a slot's size live on the host
  // and visit the device for each part (docs/tiering.md, "Accumulator visits";
  // megatrain-compile's default, as measured on the H200).
  bool accumulatorVisits = true;
  uint64_t visitSlots = 8;            // the ring's slots of the largest visitor
  bool allAccumulatorsVisit = false;  // even where the device has room (tests)
  // mt-plan-memory
  bool noMemoryReuse = false;
  // The fusion passes (mt-fuse-*): off with megatrain-compile --no-fusion.
  bool fusion = true;
  // mt-microbatch: gradients of this many micro-batches per update (1: the
  // pass does not run).
  int64_t microbatches = 1;
  // mt-precision: "fp32" | "tf32" | "bf16" (megatrain-compile's default is
  // bf16; the pass's own default, kept here, is fp32).
  std::string precision = "fp32";
  // mt-fold-head-transposes (before mt-precision): off with megatrain-compile
  // --no-fold-head-transposes.
  bool foldHeadTransposes = true;
  // mt-bf16-attention (right after mt-precision): off with megatrain-compile
  // --no-bf16-attention.
  bool bf16Attention = true;
  // mt-fold-transpose (after mt-bf16-attention): off with megatrain-compile
  // --no-fold-transpose.
  bool foldTranspose = true;
  // mt-view-aliases (after mt-tier): off with megatrain-compile
  // --no-view-aliases (every reshape a copy kernel).
  bool viewAliases = true;
  // mt-fuse-matmul-epilogues (after mt-fold-transpose): off with
  // megatrain-compile --no-matmul-epilogues.
  bool matmulEpilogues = true;
  // mt-fuse-pointwise (after mt-fuse-matmul-epilogues): off with
  // megatrain-compile --no-fuse-pointwise.
  bool fusePointwise = true;
  // mt-fuse-norm-grad-adds (after mt-fuse-pointwise): off with
  // megatrain-compile --no-fuse-norm-grad-adds.
  bool fuseNormGradAdds = true;
  // mt-fold-norm-casts (after mt-fuse-pointwise): off with
  // megatrain-compile --no-fold-norm-casts.
  bool foldNormCasts = true;
  // mt-fold-product-casts (after mt-fuse-pointwise): off with
  // megatrain-compile --no-fold-product-casts.
  bool foldProductCasts = true;
  // mt-bf16-activations (after mt-fuse-pointwise): opt-in with
  // megatrain-compile --bf16-activations; changes the values (autocast's
  // rounding of the products elementwise programs read).
  bool bf16Activations = false;
  // mt-fuse-linear-ce (after mt-add-loss, with the fusion passes): off with
  // megatrain-compile --no-fuse-linear-ce; linearCeChunk > 0 forces its
  // chunk (--linear-ce-chunk), 0 lets the pass choose.
  bool fuseLinearCe = true;
  int64_t linearCeChunk = 0;
};

/// How far the pipeline runs; each stage includes the ones before it.
enum class EmitStage {
  Mt,        // as imported
  Training,  // + fusion (unless off), mt-add-loss, mt-autodiff, mt-adamw, cse
             //   (forward-only: mt-add-loss and cse)
  Scheduled, // + mt-fold-head-transposes, mt-precision, mt-fold-transpose,
             //   mt-fuse-matmul-epilogues,
             //   mt-fuse-pointwise, mt-schedule, mt-liveness
  Planned,   // + mt-tier, mt-view-aliases, mt-plan-memory, mt-homes
  Plan,      // the same passes as Planned; the driver then emits the plan
};

/// "mt", "training", "scheduled", "planned", "plan" -> the stage.
std::optional<EmitStage> parseEmitStage(llvm::StringRef name);

/// Adds to `pm` (a module pass manager) the passes that take an imported
/// module up to `upTo`.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                   EmitStage upTo);

/// Adds the fusion passes (mt-fuse-layer-norm, mt-fuse-rms-norm,
/// mt-fuse-activations, mt-fuse-rotary, mt-fuse-attention,
/// mt-fuse-cross-entropy) that rewrite decomposed patterns of an imported
/// module into fused mt ops; buildPipeline runs them unless options.fusion
/// is false.
void buildFusionPipeline(mlir::OpPassManager &pm);

/// Adds the passes from a training step (the output of EmitStage::Training)
/// to EmitStage::Planned: the part of the pipeline that does not need an
/// ONNX model.
void buildPlanningPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                           EmitStage upTo);

} // namespace megatrain

#endif // MEGATRAIN_PIPELINE_H
