//===- Passes.td - the passes of the megatrain pipeline ------------------===//
//
// One pass per file in passes/, each with a lit test in tests/lit/passes/.
// The definitions follow the order the pipeline runs them in
// (compiler/lib/Pipeline.cpp), grouped by phase.
// Passes talk to each other only through the IR: ops and the discardable
// attributes named in MtDialect.h (mt.step, mt.live_end, mt.offset, ...).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TD
#define MEGATRAIN_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Import cleanup: fusion of normalizations, activations, rotary embedding,
// attention and the shifted cross-entropy into fused ops, in this order
// (buildFusionPipeline; off with megatrain-compile --no-fusion)
//===----------------------------------------------------------------------===//

def FuseLayerNorm : Pass<"mt-fuse-layer-norm", "mlir::func::FuncOp"> {
  let summary = "Rewrite decomposed layer normalizations into mt.layer_norm";
  let description = [{
    Matches d = x - reduce_mean(x), var = reduce_mean(d^2) (powf 2 or d * d)
    over the trailing axes [axis, rank) with keepdims, then
    d / sqrt(var + eps) or d * reciprocal(sqrt(var + eps)), and writes
    mt.layer_norm(x, ones, zeros). A following multiply by a weight of shape
    x.shape[axis:] and add of a bias of that shape are folded into a
    layer_norm whose scale is a fill of 1 and bias a fill of 0 (and a bias
    add into one whose bias is a fill of 0), imported ones included. eps is
    a constant or fill with one value. Nothing is rewritten when an
    intermediate value has a user outside the pattern.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseRmsNorm : Pass<"mt-fuse-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Rewrite decomposed RMS normalizations into mt.rms_norm";
  let description = [{
    Matches x * reciprocal(sqrt(reduce_mean(x^2) + eps)) (x^2 as powf 2 or
    x * x; the inverse root also as powf -0.5, or x / sqrt(...)), the mean
    over the trailing axes [axis, rank) with keepdims, as Llama, Qwen2 and
    Mistral export their RMSNorm, and writes mt.rms_norm(x, ones); a
    following multiply by a weight of shape x.shape[axis:] (on either side)
    is folded into an rms_norm whose weight is a fill of 1. Nothing is
    rewritten when an intermediate value has a user outside the pattern.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseActivations : Pass<"mt-fuse-activations", "mlir::func::FuncOp"> {
  let summary = "Rewrite SiLU, SwiGLU and GELU compositions into mt.silu, mt.swiglu, mt.gelu";
  let description = [{
    x * sigmoid(x) becomes mt.silu(x); silu(g) * u with g, u and the product
    of one type becomes mt.swiglu(g, u). 0.5 x (1 + erf(x / sqrt 2)) becomes
    mt.gelu {approximate = "none"} and
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) mt.gelu
    {approximate = "tanh"}, in the arrangements exporters write (scalar
    constants on either side of mt.mul, mt.scale, x / sqrt 2, x^3 as powf 3
    or products); constants must match to 1e-6 relative (f32 rounding).
    Nothing is rewritten when an intermediate value has a user outside the
    pattern.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseRotary : Pass<"mt-fuse-rotary", "mlir::func::FuncOp"> {
  let summary = "Rewrite rotate-half rotary embeddings into mt.rotary";
  let description = [{
    Matches `x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin` with cos and
    sin constants that broadcast to x, as torch.onnx.export writes Hugging
    Face's apply_rotary_pos_emb, and replaces it with `mt.rotary`. Groups with
    an intermediate read elsewhere, or with computed cos/sin, stay as they are.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseAttention : Pass<"mt-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Rewrite causal scaled dot-product attention into mt.attention";
  let description = [{
    Matches softmax(q k^T * scale + causal mask) v (scalings on either side
    of the product, k given transposed or not, an optional where(isnan(p), 0,
    p) after the softmax, k and v repeated per query-head group by
    reshape/broadcast_to/reshape) and replaces it with one `mt.attention` on
    the unrepeated q, k and v. Fuses only when the mask is a constant that is
    provably causal and the scores and probabilities have no other users.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseCrossEntropy : Pass<"mt-fuse-cross-entropy", "mlir::func::FuncOp"> {
  let summary = "Rewrite softmax_ce of shifted logits and tokens into mt.next_token_ce";
  let description = [{
    F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    imports as slices and reshapes feeding `mt.softmax_ce` (reduction mean);
    that is `mt.next_token_ce` of the unsliced logits and tokens, which
    needs no sliced copy of the logits. Fuses only when the sliced logits
    have no other user.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseLinearCrossEntropy : Pass<"mt-fuse-linear-ce", "mlir::func::FuncOp"> {
  let summary = "Fuse the output projection and next_token_ce into mt.linear_ce";
  let description = [{
    `mt.next_token_ce(mt.matmul(h, W^T), ids)` whose logits have no other
    user becomes `mt.linear_ce h, W, ids`, which never holds the [B*T, V]
    logits: it computes them `chunk` vocabulary rows at a time (forward and
    backward). Runs after mt-add-loss (which writes the loss) and before
    mt-autodiff; off with megatrain-compile --no-fuse-linear-ce.
  }];
  let options = [
    Option<"tileBytes", "tile-bytes", "uint64_t", /*default=*/"268435456",
           "bytes of one [tokens, chunk] f32 logits tile; picks the chunk">,
    Option<"chunk", "chunk", "int64_t", /*default=*/"0",
           "vocabulary rows per chunk (0: from tile-bytes)">,
  ];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

//===----------------------------------------------------------------------===//
// Training: from a model to a training step (loss, gradients, micro-batches
// with --microbatches N > 1, updates), then the form of its products: the
// compute precision (--precision) and transposes folded into matmuls
// (off with --no-fold-transpose)
//===----------------------------------------------------------------------===//

def AddLoss : Pass<"mt-add-loss", "mlir::func::FuncOp"> {
  let summary = "Append the loss to the imported model and drop its outputs";
  let description = [{
    Either marks a scalar graph output as the loss (`loss-output`), or appends
    the next-token cross-entropy of a logits output against a token input
    (`mode=next-token-ce`). Graph outputs are found by the `mt.output_name`
    attribute the importer puts on the function results; afterwards the
    function returns nothing and the value is marked with `mt.loss`. Each
    graph output named in `keep-outputs` is marked with `mt.output` before the
    results are dropped, so it survives and reaches the plan as a readout.
    With `forward-only` the function is also marked `mt.evaluation`: an
    evaluation step, to which the pipeline adds no gradients or updates and
    which plan emission writes as an evaluation plan.
  }];
  let options = [
    Option<"lossOutput", "loss-output", "std::string", "\"\"",
           "Name of a scalar graph output to minimize">,
    Option<"mode", "mode", "std::string", "\"output\"",
           "output | next-token-ce">,
    Option<"logits", "logits", "std::string", "\"logits\"",
           "Graph output holding [B, T, V] logits (next-token-ce); with the "
           "default name, the only output of a graph with one output">,
    Option<"tokens", "tokens", "std::string", "\"input_ids\"",
           "Graph input holding [B, T] token ids (next-token-ce); with the "
           "default name, the only input of a graph with one input">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Target id that contributes no loss">,
    Option<"targets", "targets", "std::string", "\"\"",
           "Name of a new [B, T] graph input the loss reads its targets from "
           "instead of the tokens (next-token-ce; empty: the tokens)">,
    ListOption<"keepOutputs", "keep-outputs", "std::string",
               "Graph outputs to keep readable after the step (mt.output)">,
    Option<"forwardOnly", "forward-only", "bool", "false",
           "Mark the function mt.evaluation: forward and loss only">,
  ];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def Autodiff : Pass<"mt-autodiff", "mlir::func::FuncOp"> {
  let summary = "Reverse-mode differentiation from mt.loss to the trainable parameters";
  let description = [{
    Seeds the gradient 1 at the `mt.loss` value and walks the ops in reverse,
    calling each op's GradientOpInterface rule; gradients reaching one value
    along several uses are summed. Ends each trainable `mt.param` with one
    `mt.param_grad` (a parameter used twice, e.g. tied embeddings, gets the
    summed gradient). A trainable parameter the loss does not depend on gets a
    zero gradient. An op on the path with no gradient rule is an error naming it.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def Microbatch : Pass<"mt-microbatch", "mlir::func::FuncOp"> {
  let summary = "Accumulate gradients over N micro-batches before one update";
  let description = [{
    On a differentiated function (mt-autodiff: one mt.loss, its backward, one
    mt.param_grad per trainable parameter), repeats the step body `count`
    times in sequence, micro-batch k after micro-batch k-1. Micro-batch k >= 1
    is a clone whose mt.input ops are renamed `<name>@<k>` (micro-batch 0
    keeps the plain names; mt.param ops are cloned as they are). Right
    after each micro-batch gradient g_k comes `mt.scale` by 1/count and a
    sink: `mt.grad_part {param, index = k, count}` for k < count-1, the
    parameter's one mt.param_grad for the last; plan emission accumulates the
    parts on the host in fp32. The
    losses are summed and scaled by 1/count into one mt.loss (the mean over
    micro-batches). An mt.output is kept for micro-batch 0 only. Sets
    `mt.microbatches` on the function. count = 1 changes nothing.
  }];
  let options = [
    Option<"count", "count", "int64_t", "1",
           "Number of micro-batches per optimizer update (>= 1)">,
  ];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def AdamW : Pass<"mt-adamw", "mlir::func::FuncOp"> {
  let summary = "Turn each mt.param_grad into an AdamW update";
  let options = [
    Option<"lr", "lr", "double", "1e-3", "Learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "First-moment decay">,
    Option<"beta2", "beta2", "double", "0.999", "Second-moment decay">,
    Option<"eps", "eps", "double", "1e-8", "Denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.01",
           "Decoupled weight decay (applied to every trainable parameter)">,
  ];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def Precision : Pass<"mt-precision", "mlir::func::FuncOp"> {
  let summary = "Choose the compute precision of matrix products and attention";
  let description = [{
    On a training step (after mt-autodiff, mt-microbatch and mt-adamw),
    before mt-schedule. Sets `mt.precision` on the function to the option.
    fp32 changes nothing else (exact fp32, no TF32). tf32 puts
    `precision = "tf32"` on every f32 mt.matmul, mt.attention and
    mt.attention_grad. bf16 casts the operands of every f32 mt.matmul to bf16
    (one mt.cast per distinct value, right after its definition), keeps the
    f32 result (fp32 accumulation) and marks the matmul `precision = "bf16"`;
    mt.attention and mt.attention_grad keep f32 operands and get
    `precision = "bf16"`. An f32 mt.param whose every use is a cast to bf16
    becomes a bf16 mt.param (the cast folds away) with `mt.master_element =
    f32`: plan emission fetches it from the parameter's host bf16 copy.
    Gradients and updates stay f32.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"",
           "fp32 | tf32 | bf16">,
  ];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FoldHeadTransposes : Pass<"mt-fold-head-transposes", "mlir::func::FuncOp"> {
  let summary = "Fold the [B, H, S, D] <-> [B, S, H, D] transposes around attention into its operands' layout";
  let description = [{
    The heads of an exported attention are transposed from the projection's
    [B, S, H, D] to [B, H, S, D] (perm [0, 2, 1, 3]) before rotary and
    attention, and back after; the gradient mirrors them. mt.attention and
    mt.attention_grad read and write any operand in [B, S, H, D] when its bit
    of `bshd` is set (q 1, k 2, v 4, y 8, dy 16; dq, dk, dv follow q, k, v),
    and mt.rotary / mt.rotary_grad with `bshd = true` read and write x in
    [B, S, H, D]. The pass groups the values that must change layout
    together (a rotary's input and result, attention_grad's q and dq, k and
    dk, v and dv), starting from attention's operands, and flips a group to
    [B, S, H, D] when that removes more head transposes than it adds: a
    transpose producing a member is read past (and erased once unused), a
    transpose of a member becomes the member itself, a member read by
    another op keeps a transpose for that op. Only memory order changes:
    every element is the same computation.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FoldTranspose : Pass<"mt-fold-transpose", "mlir::func::FuncOp"> {
  let summary = "Fold transposes of the last two dims into mt.matmul's transpose flags";
  let description = [{
    A matmul operand that is an `mt.transpose` swapping only the last two
    dims (perm [0, .., n-3, n-1, n-2]) becomes the transpose's input with the
    matmul's `transpose_a` / `transpose_b` toggled. Such a transpose of a
    matmul result that is the result's only user becomes the product of the
    swapped operands, (A B)^T = B^T A^T: `matmul(b, a)` with `transpose_a =
    !transpose_b` and `transpose_b = !transpose_a` (other attributes, such
    as `precision`, kept). Transposes left without users are erased. The
    same elements are multiplied and summed in the same order, so results
    do not change; the device reads the layouts for free (cuBLASLt).
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseMatmulEpilogues : Pass<"mt-fuse-matmul-epilogues", "mlir::func::FuncOp"> {
  let summary = "Fuse the add of a product and another value, a GELU after a bias, and a GELU's backward after a product, into the product's epilogue";
  let description = [{
    Runs on the whole training step after mt-precision and
    mt-fold-transpose, before mt-fuse-pointwise (off with megatrain-compile
    --no-matmul-epilogues). `mt.add(mt.matmul(a, b), r)`, where the product
    has no other reader and the add's type, f32 or f64, and r has that type
    or (f32) is a bias over the last dim, becomes `mt.matmul_add(a, b, r)`
    with the product's flags and precision: the residual adds and biases of
    the forward and the gradient sums of the backward. Of
    an add of two such products, the later one takes the earlier as r, and
    the fused op stands where it stood; otherwise it stands where the add
    did. Then a `mt.gelu {approximate = "tanh"}` of such an f32 sum with a
    bias (directly or through reshapes), whose sum no op but the gelu and
    tanh `mt.gelu_grad`s reading it as x reads, becomes
    `mt.matmul_bias_gelu(a, b, bias)` at the sum's place: its second result,
    the pre-activation, replaces the sum, its first the gelu. Then a tanh
    `mt.gelu_grad` whose dy is an f32 `mt.matmul` (directly or through
    reshapes) read by nothing else becomes `mt.matmul_gelu_grad(a, b, z)`,
    z the gelu_grad's x in the product's shape. The values do not change
    (docs/ops.md "Matmul epilogues").
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FusePointwise : Pass<"mt-fuse-pointwise", "mlir::func::FuncOp"> {
  let summary = "Fuse chains of elementwise ops into mt.pointwise programs";
  let description = [{
    Runs on the whole training step after mt-precision and mt-fold-transpose
    (off with megatrain-compile --no-fuse-pointwise). First a bf16 cast of a
    reshape becomes a reshape of the reshaped value's existing cast, or, when
    the reshape has no other reader, of a new cast of the value, so the cast
    can join that value's chain. Grows, in program
    order, groups of elementwise ops (add, sub, mul, div, max, min, scale,
    the unary math ops, the activations and their gradient kernels, casts
    between bf16 and f32 or f64) of one result shape and compute type, each
    reading its group's values or values broadcast into that shape, and
    replaces each group of two or more by one mt.pointwise at its last member:
    its inputs are read once and every value with a reader outside the group
    is written once. A group is not grown past an op outside it that reads
    one of its values before the candidate, nor to a candidate more than 8
    ops after its last member, nor when the fused op would hold more bytes
    (inputs and values read outside) than the widest op it replaces, nor
    past 8 inputs, 8 outputs or 48 instructions. The program gives, on the CPU backend, the bits of the
    unfused chain.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def Bf16Attention : Pass<"mt-bf16-attention", "mlir::func::FuncOp"> {
  let summary = "Give bf16-precision attention bf16 operands and results";
  let description = [{
    Runs on the whole training step right after mt-precision, on a function
    whose mt.precision is bf16 (off with megatrain-compile
    --no-bf16-attention). Every mt.attention and mt.attention_grad marked
    precision = "bf16" with f32 tensors gets bf16 q, k, v, y (dy, dq, dk, dv)
    and keeps an f32 lse: one mt.cast to bf16 per f32 operand, after its
    definition, and casts back to f32 for readers of the results that want
    f32. Casts that cancel (bf16 to f32 to bf16, also through a reshape) go;
    rotary and rotary_grad read bf16 sources directly and write bf16 when
    only bf16 casts read them. The values are the ones the fused kernels
    computed with their own conversions (docs/ops.md).
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FoldProductCasts : Pass<"mt-fold-product-casts", "mlir::func::FuncOp"> {
  let summary = "Give a bf16 product read only by bf16 casts a bf16 result";
  let description = [{
    Runs on the whole training step after mt-fuse-pointwise (off with
    megatrain-compile --no-fold-product-casts). An mt.matmul with bf16
    operands and an f32 result whose every reader is an mt.cast to bf16 of
    its shape, directly or through reshapes, gets a bf16 result, which
    replaces the casts; the product rounds its f32 result as the cast did,
    so the values do not change (docs/ops.md "matmul with a bf16 result").
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def Bf16Activations : Pass<"mt-bf16-activations", "mlir::func::FuncOp"> {
  let summary = "Round the bf16 products that elementwise programs read to bf16";
  let description = [{
    Opt-in (megatrain-compile --bf16-activations); runs on the whole training
    step after mt-fuse-pointwise. An mt.matmul with bf16 operands and an f32
    result whose every reader is an mt.pointwise, directly or through
    reshapes (a Llama layer's gate and up projections, the gradient of its
    MLP activation), gets a bf16 result: the product rounds its f32 result
    to nearest even, as torch.autocast does, and the programs read it
    exactly. This changes the values (one rounding per such product) and
    halves the bytes of the widest values a layer keeps for its backward.
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FuseNormGradAdds : Pass<"mt-fuse-norm-grad-adds", "mlir::func::FuncOp"> {
  let summary = "Fuse the residual gradient's add (and its bf16 cast) into rms_norm_grad";
  let description = [{
    Runs on the whole training step after mt-fuse-pointwise (off with
    megatrain-compile --no-fuse-norm-grad-adds). An mt.rms_norm_grad whose
    dx is read only by an mt.add of dx's type, whose other operand is
    defined before the norm's gradient, becomes an mt.rms_norm_grad_add at
    its place: the sum is its dx. The sum's casts to bf16 of its shape, when
    it is f32, become the fused op's third result. The values do not change
    (docs/ops.md "rms_norm_grad_add").
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

def FoldNormCasts : Pass<"mt-fold-norm-casts", "mlir::func::FuncOp"> {
  let summary = "Give an RMS norm read only by bf16 casts a bf16 result";
  let description = [{
    Runs on the whole training step after mt-precision and
    mt-fuse-pointwise (off with megatrain-compile --no-fold-norm-casts). An
    mt.rms_norm with f32 operands and result whose every reader is an
    mt.cast to bf16 of its shape gets a bf16 result, which replaces the
    casts; the norm rounds its f32 result as the cast did, so the values do
    not change (docs/ops.md "rms_norm with a bf16 result").
  }];
  let dependentDialects = ["::megatrain::mt::MtDialect"];
}

//===----------------------------------------------------------------------===//
// Scheduling: a linear order of the step and the lifetimes over it
//===----------------------------------------------------------------------===//

def Schedule : Pass<"mt-schedule", "mlir::func::FuncOp"> {
  let summary = "Fix the linear order of the step and number it (mt.step)";
  let description = [{
    Orders the ops topologically, placing each source op (mt.param, mt.input,
    mt.constant, mt.fill) just before its first user so its lifetime is short,
    and sets `mt.step` on every op to its position.
  }];
}

def Liveness : Pass<"mt-liveness", "mlir::func::FuncOp"> {
  let summary = "Record when each value dies (mt.live_end)";
  let description = [{
    Over the order fixed by mt-schedule, sets `mt.live_end` on every op with
    results: for each result, the largest `mt.step` among its users, or -1 when
    it has none. With `hold-copies` (mt-tier's last stage keeps the holds
    that fit its budget), a value copied to the host by mt.offload,
    mt.adamw, mt.grad_part, mt.loss or mt.output lives on until a step that
    runs a kernel once the compute issued before it covers the time the
    copy finishes, the copies queued on the link in step order, on the
    device profile, so the next value placed in its bytes does not wait for
    the link.
  }];
  let options = [
    Option<"holdCopies", "hold-copies", "bool", "false",
           "Keep values copied to the host live until compute covers the copy">,
    Option<"deviceProfile", "device-profile", "std::string", "\"\"",
           "JSON device profile file the hold is timed on (default: the H200 figures)">,
  ];
}

//===----------------------------------------------------------------------===//
// Tiering and placement: where each value lives at each step under the
// device budget (megatrain-compile --device-memory)
//===----------------------------------------------------------------------===//

def Tier : Pass<"mt-tier", "mlir::func::FuncOp"> {
  let summary = "Keep, offload, re-fetch or recompute values to fit a device budget";
  let description = [{
    On a scheduled function (mt-schedule, mt-liveness): moves every parameter
    fetch (mt.param) ahead of its first use as far as the host-to-device link
    needs to hide it, then, while the peak of live device bytes is above the
    budget, frees the cheapest value live at the peak over the gap around it:
    a parameter is fetched again later, an activation is offloaded
    (mt.offload, mt.prefetch) or recomputed (its producers cloned with
    `mt.recompute`). Costs come from the device profile. Renumbers `mt.step`
    and sets `mt.live_end` as mt-liveness does, with the `hold-copies` holds
    (gradients also waiting for room in the gradient staging ring) that
    fit the budget, the most wait saved per byte first. With `fill` (default), auto
    also gives the room a fitting plan leaves back to recomputed and
    offloaded values, best seconds saved per byte first, and with `spill`
    (default) tries each plan with the recompute left traded for offloads
    the links' spare time hides. The algorithm is in
    passes/Tiering.cpp and docs/tiering.md.
  }];
  let options = [
    Option<"deviceMemory", "device-memory", "uint64_t", "0",
           "Device arena budget in bytes (0: none)">,
    Option<"policy", "policy", "std::string", "\"auto\"",
           "auto | keep | checkpoint | offload (tests: also checkpoint+greedy, "
           "offload+greedy, and any of these followed by +fill or +spill)">,
    Option<"fill", "fill", "bool", "true",
           "Under auto, spend budget the plan leaves unused on undoing "
           "recompute and offloads, and leave room for the device state">,
    Option<"spill", "spill", "bool", "true",
           "With the fill, also try each plan with recompute traded for "
           "offloads the links' spare time hides (the spill)">,
    Option<"fillSearch", "fill-search", "bool", "true",
           "Where the state competes with the arena for the device, also "
           "choose how much the fill takes by the timeline, not only by the "
           "state's price per byte (the fill's search)">,
    Option<"lead", "lead", "bool", "true",
           "On the chosen plan, move the parameter fetches the link's queue "
           "lands after their use earlier, within the budget (the lead)">,
    Option<"deviceProfile", "device-profile", "std::string", "\"\"",
           "JSON device profile file (default: the H200 figures)">,
    Option<"log", "log", "std::string", "\"\"",
           "Append one line per plan considered (the budgets tried, the "
           "portfolio's entries, the fill's and the spill's searches, the "
           "choice) to this file ('-': stderr; empty: none)">,
    Option<"deviceCapacity", "device-capacity", "uint64_t", "0",
           "Device capacity (arena plus device state) when device-memory is 0 "
           "and state must live on the device (0: none)">,
    Option<"hostMemory", "host-memory", "int64_t", "-1",
           "Host capacity for training state in bytes (-1: unlimited)">,
    Option<"diskMemory", "disk-memory", "uint64_t", "0",
           "Disk capacity for training state in bytes (0: no disk)">,
    ListOption<"stateHome", "state-home", "std::string",
               "Forced homes: TIER or TIER:REGEX (device, host, disk)">,
    Option<"keepGradients", "keep-gradients", "bool", "false",
           "Keep a persistent fp32 gradient per host and disk home (gradient clipping)">,
    Option<"accumulatorVisits", "accumulator-visits", "bool", "false",
           "With micro-batches, keep the gradient accumulators up to a slot's "
           "size on the host and let each visit the device for its parts, "
           "through a ring of `visit-slots` slots (mt.accumulate = visit, "
           "mt.visit_ring_size): the arena gets the room the rest of the sums "
           "would take">,
    Option<"visitSlots", "visit-slots", "uint64_t", "8",
           "Slots in the ring of accumulator visits (at least 3)">,
  ];
}

//===----------------------------------------------------------------------===//
// Memory planning: static offsets in the device arena and the host staging
// pool
//===----------------------------------------------------------------------===//

def ViewAliases : Pass<"mt-view-aliases", "mlir::func::FuncOp"> {
  let summary = "Mark the reshapes and order-keeping transposes that are views";
  let description = [{
    After mt-tier: puts `mt.alias` on every `mt.reshape`, and on every
    `mt.transpose` that moves only dims of extent 1, whose operand is a
    device value (not an `mt.offload` result) of the same byte size.
    mt-plan-memory gives such a result its base's bytes, over the union of
    the lifetimes, and plan emission writes a view tensor (`alias_of`)
    with no step. Off with megatrain-compile `--no-view-aliases`.
  }];
}

def PlanMemory : Pass<"mt-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Place every value at a static offset in the device arena";
  let description = [{
    Assigns `mt.offset` to every result (byte offset in the device arena,
    aligned to 256 bytes) so that values whose lifetimes overlap never share
    bytes, and sets `mt.arena_size` on the function. With `no-reuse`, every
    value gets its own bytes (used to check that reuse changes nothing).
  }];
  let options = [
    Option<"noReuse", "no-reuse", "bool", "false",
           "Give every value its own bytes (no sharing)">,
  ];
}

//===----------------------------------------------------------------------===//
// State homes: where each parameter's training state lives
//===----------------------------------------------------------------------===//

def Homes : Pass<"mt-homes", "mlir::func::FuncOp"> {
  let summary = "Choose the home (device, host, disk) of each parameter's state";
  let description = [{
    After mt-plan-memory (the arena is placed): puts `mt.home` on every
    `mt.param`, the tier where the parameter's master, moments, compute copy
    and gradient live and where its update runs: the device while the
    capacity minus the arena has room, then pinned host memory, then disk,
    parameters updated last first (their host update is the one backward
    cannot hide). Forced homes (`state-home`) come first. With micro-batches
    the gradient accumulators of the parameters below the device take the
    device's room before the device homes do where the cost model says a
    byte of accumulator saves more than a byte of home. Sets the
    capacities on the function for the plan header, and `mt.grad_stage_size`,
    the bytes of the host ring that the gradients of host and disk homes
    pass through on their way to the update (0: persistent gradients). The algorithm and the
    plan it gives are in docs/tiering.md, "State homes".

    ```mlir
    %w = mt.param {name = "fc.weight", trainable = true, mt.home = "device"} : tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"deviceMemory", "device-memory", "uint64_t", "0",
           "Device capacity in bytes: arena plus device state (0: no device state)">,
    Option<"hostMemory", "host-memory", "int64_t", "-1",
           "Host capacity in bytes (-1: unlimited)">,
    Option<"diskMemory", "disk-memory", "uint64_t", "0",
           "Disk capacity in bytes (0: no disk)">,
    ListOption<"stateHome", "state-home", "std::string",
               "Forced homes: TIER or TIER:REGEX (device, host, disk); the first match wins">,
    Option<"keepGradients", "keep-gradients", "bool", "false",
           "Keep a persistent fp32 gradient per host and disk home (gradient "
           "clipping); otherwise a gradient the host update consumes in the same "
           "step passes through the staging ring (mt.grad_stage_size)">,
    Option<"deviceProfile", "device-profile", "std::string", "\"\"",
           "JSON device profile file that prices a byte of device accumulator "
           "against a byte of device home (default: the H200 figures)">,
    Option<"allVisit", "all-visit", "bool", "false",
           "Every accumulator mt-tier marked to visit keeps visiting, even where "
           "the device has room left for it whole (tests)">,
  ];
}

#endif // MEGATRAIN_PASSES_TD
