//===- Passes.td - the passes of the megatrain pipeline ------------------===//
//
// One pass per file in passes/, each with a lit test in tests/lit/passes/.
// Passes talk to each other only through the IR: ops and the discardable
// attributes named in MtDialect.h (mt.step, mt.live_end, mt.offset, ...).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TD
#define MEGATRAIN_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Phase 1: from a model to a training step
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
  }];
  let options = [
    Option<"lossOutput", "loss-output", "std::string", "\"\"",
           "Name of a scalar graph output to minimize">,
    Option<"mode", "mode", "std::string", "\"output\"",
           "output | next-token-ce">,
    Option<"logits", "logits", "std::string", "\"logits\"",
           "Graph output holding [B, T, V] logits (next-token-ce)">,
    Option<"tokens", "tokens", "std::string", "\"input_ids\"",
           "Graph input holding [B, T] token ids (next-token-ce)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Target id that contributes no loss">,
    ListOption<"keepOutputs", "keep-outputs", "std::string",
               "Graph outputs to keep readable after the step (mt.output)">,
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

//===----------------------------------------------------------------------===//
// Fusion: decomposed attention, rotary embedding and cross-entropy into
// fused ops (run after import, before mt-add-loss; off with --no-fusion)
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Phase 2: schedule and memory
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
    it has none.
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

#endif // MEGATRAIN_PASSES_TD
