//===- MtDialect.td - the mt dialect: tensors of a training step ---------===//
//
// The `mt` dialect holds a model and, after autodiff, its whole training step:
// forward ops, gradient ops, the loss and the optimizer update, on statically
// shaped builtin tensors. Passes annotate ops with discardable attributes
// (mt.step, mt.live_end, mt.offset, ...) that plan emission reads.
//
//===----------------------------------------------------------------------===//
#ifndef MT_DIALECT_TD
#define MT_DIALECT_TD

include "mlir/IR/OpBase.td"

def Mt_Dialect : Dialect {
  let name = "mt";
  let cppNamespace = "::megatrain::mt";
  let summary = "Tensor ops of a megatrain training step";
  let description = [{
    Value-semantic ops on statically shaped `tensor<...>` values. Every op that
    reaches the plan maps to one runtime kernel of the same name (see
    docs/ops.md). Parameters and inputs are ops (`mt.param`, `mt.input`) that
    name their source; weights are never stored in the IR.
  }];
}

class Mt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mt_Dialect, mnemonic, traits>;

#endif // MT_DIALECT_TD
