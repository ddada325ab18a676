//===- MtOps.td - ops of the mt dialect ----------------------------------===//
//
// Every op here that reaches the plan is one runtime kernel of the same name;
// docs/ops.md is the operand/attribute contract. Differentiable ops implement
// GradientOpInterface (rules in lib/Dialect/Gradients.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MT_OPS_TD
#define MT_OPS_TD

include "megatrain/Dialect/MtDialect.td"
include "megatrain/Dialect/GradientInterface.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

defvar Differentiable = DeclareOpInterfaceMethods<Mt_GradientOpInterface>;
def Mt_Tensor : RankedTensorOf<[AnyType]>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Mt_ParamOp : Mt_Op<"param", [Pure]> {
  let summary = "a model parameter or frozen weight, by initializer name";
  let description = [{
    The value of the ONNX initializer `name`. Its data stays in the model file;
    the runtime loads it. Trainable parameters get a gradient and an optimizer
    update.

    ```mlir
    %w = mt.param {name = "fc1.weight", trainable = true} : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, BoolAttr:$trainable);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Mt_InputOp : Mt_Op<"input", [Pure]> {
  let summary = "a graph input, fed by the runtime every step";
  let description = [{
    ```mlir
    %x = mt.input {name = "input_ids"} : tensor<8x64xi64>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Mt_ConstantOp : Mt_Op<"constant", [Pure]> {
  let summary = "a small literal tensor";
  let description = [{
    Only small values (at most 64 KiB) are kept as literals; weights are
    `mt.param`.

    ```mlir
    %c = mt.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mt_FillOp : Mt_Op<"fill", [Pure]> {
  let summary = "a tensor filled with one value";
  let description = [{
    ```mlir
    %one = mt.fill {value = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Mt_BinaryOp<string mnemonic, string doc>
    : Mt_Op<mnemonic, [Pure, Differentiable]> {
  let summary = doc # ", with numpy broadcasting";
  let description = [{
    Shapes broadcast as in numpy/ONNX; the result type is the broadcast shape.

    ```mlir
    %y = mt.}] # mnemonic # [{ %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$lhs, Mt_Tensor:$rhs);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_AddOp : Mt_BinaryOp<"add", "elementwise a + b">;
def Mt_SubOp : Mt_BinaryOp<"sub", "elementwise a - b">;
def Mt_MulOp : Mt_BinaryOp<"mul", "elementwise a * b">;
def Mt_DivOp : Mt_BinaryOp<"div", "elementwise a / b">;

class Mt_UnaryOp<string mnemonic, string doc, list<Trait> traits = []>
    : Mt_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType], traits)> {
  let summary = doc;
  let description = [{
    ```mlir
    %y = mt.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Mt_ReluOp : Mt_UnaryOp<"relu", "max(x, 0)", [Differentiable]>;
def Mt_TanhOp : Mt_UnaryOp<"tanh", "hyperbolic tangent", [Differentiable]>;
def Mt_SigmoidOp : Mt_UnaryOp<"sigmoid", "1 / (1 + exp(-x))", [Differentiable]>;
def Mt_SoftplusOp : Mt_UnaryOp<"softplus", "log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|))",
                               [Differentiable]>;

def Mt_ScaleOp : Mt_Op<"scale", [Pure, SameOperandsAndResultType, Differentiable]> {
  let summary = "alpha * x";
  let description = [{
    ```mlir
    %y = mt.scale %x {alpha = -1.0 : f64} : tensor<4xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, F64Attr:$alpha);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

class Mt_ActivationGradOp<string mnemonic, string doc>
    : Mt_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = doc;
  let description = [{
    ```mlir
    %dx = mt.}] # mnemonic # [{ %v, %dy : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$value, Mt_Tensor:$dy);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$value `,` $dy attr-dict `:` type($result)";
}

def Mt_ReluGradOp : Mt_ActivationGradOp<"relu_grad", "dy * (x > 0), from the input x">;
def Mt_TanhGradOp : Mt_ActivationGradOp<"tanh_grad", "dy * (1 - y^2), from the output y">;
def Mt_SigmoidGradOp : Mt_ActivationGradOp<"sigmoid_grad", "dy * y * (1 - y), from the output y">;

//===----------------------------------------------------------------------===//
// Linear algebra, shapes, reductions
//===----------------------------------------------------------------------===//

def Mt_MatMulOp : Mt_Op<"matmul", [Pure, Differentiable]> {
  let summary = "batched matrix product with optional transposes";
  let description = [{
    y[..., m, n] = sum_k A[..., m, k] * B[..., k, n] where A is `a` (or its
    last two dims swapped when `transpose_a`), likewise B. Batch dims
    broadcast; either operand may be rank 2.

    a and b have one element type; y has it too, except that two bf16
    operands may give an f32 y (products accumulated in fp32, the bf16
    plans of mt-precision). The discardable string attribute `precision`
    ("fp32", "tf32" or "bf16"; absent: fp32), set by mt-precision and
    emitted into the plan, is the arithmetic the device may use: "tf32"
    lets f32 products run on TF32 tensor cores.

    ```mlir
    %y = mt.matmul %x, %w {transpose_b = true} : (tensor<8x16x32xf32>, tensor<64x32xf32>) -> tensor<8x16x64xf32>
    %z = mt.matmul %xb, %wb {precision = "bf16"} : (tensor<8x32xbf16>, tensor<32x64xbf16>) -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$a, Mt_Tensor:$b,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_MatMulAddOp : Mt_Op<"matmul_add", [Pure]> {
  let summary = "a matrix product with an addend accumulated in its epilogue";
  let description = [{
    y = A B + r: `mt.matmul` of `a` and `b` (same flags, same element types,
    same `precision` attribute), then r added to the product before y is
    written, in one kernel. r has y's type, or is a bias of y's element type
    and shape [n] (y's last dim) added to every row. The rounding is the unfused
    pair's: the product is the fp32 (or f64) accumulator, r is added to it in
    y's type and the sum rounded once, so on the CPU backend y is bitwise
    mt.add(mt.matmul(a, b), r) (docs/ops.md "Matmul epilogues").

    Written by mt-fuse-matmul-epilogues after autodiff (the residual adds and
    biases of the forward, the gradient sums dX = dY W^T + dX' of the
    backward); it has no gradient rule.

    ```mlir
    %y = mt.matmul_add %x, %w, %r {precision = "bf16"} : (tensor<8x32xbf16>, tensor<32x64xbf16>, tensor<8x64xf32>) -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$a, Mt_Tensor:$b, Mt_Tensor:$r,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$a `,` $b `,` $r attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_MatMulBiasGeluOp : Mt_Op<"matmul_bias_gelu", [Pure]> {
  let summary = "a matrix product, a bias and the tanh GELU in its epilogue";
  let description = [{
    z = A B + bias, y = gelu_tanh(z): `mt.matmul_add` of `a`, `b` and a bias
    [n] (y's last dim) added to every row, then `mt.gelu {approximate =
    "tanh"}` of that sum, in one kernel. Both results are written: y, and the
    pre-activation z that the backward's `mt.gelu_grad` reads. y and z are
    f32 (a and b f32, or bf16 accumulated in fp32), the bias f32. Per element
    z is matmul_add's value and y gelu's of it, so on the CPU backend the
    results are bitwise those of the unfused pair (docs/ops.md "Matmul
    epilogues").

    Written by mt-fuse-matmul-epilogues after autodiff (GPT-2's c_fc and its
    GELU, where the GELU is not read only by a bf16 cast); it has no
    gradient rule.

    ```mlir
    %y, %z = mt.matmul_bias_gelu %x, %w, %bias : (tensor<8x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Mt_Tensor:$a, Mt_Tensor:$b, Mt_Tensor:$bias,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Mt_Tensor:$y, Mt_Tensor:$z);
  let assemblyFormat = "$a `,` $b `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_MatMulGeluGradOp : Mt_Op<"matmul_gelu_grad", [Pure]> {
  let summary = "a matrix product times the tanh GELU's slope at a pre-activation, in its epilogue";
  let description = [{
    dz = A B * gelu_tanh'(z): `mt.matmul` of `a` and `b`, then `mt.gelu_grad
    {approximate = "tanh"}` with x = `z` (the pre-activation, of the
    product's type) and dy = the product, in one kernel. dz and z are f32 (a
    and b f32, or bf16 accumulated in fp32). Per element the product is
    matmul's value and dz gelu_grad's of it, so on the CPU backend dz is
    bitwise that of the unfused pair (docs/ops.md "Matmul epilogues").

    Written by mt-fuse-matmul-epilogues after autodiff (the backward of
    GPT-2's GELU: the gradient of the GELU's output, a product, times the
    slope at c_fc's pre-activation); it has no gradient rule.

    ```mlir
    %dz = mt.matmul_gelu_grad %dy, %w, %z {transpose_b = true} : (tensor<8x64xf32>, tensor<256x64xf32>, tensor<8x256xf32>) -> tensor<8x256xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$a, Mt_Tensor:$b, Mt_Tensor:$z,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Mt_Tensor:$dz);
  let assemblyFormat = "$a `,` $b `,` $z attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_SoftmaxOp : Mt_Op<"softmax", [Pure, SameOperandsAndResultType, Differentiable]> {
  let summary = "softmax along one axis";
  let description = [{
    ```mlir
    %p = mt.softmax %x {axis = 1 : i64} : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, I64Attr:$axis);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Mt_SoftmaxGradOp : Mt_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "y * (dy - sum(dy * y, axis)), from the softmax output y";
  let description = [{
    ```mlir
    %dx = mt.softmax_grad %y, %dy {axis = 1 : i64} : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$y, Mt_Tensor:$dy, I64Attr:$axis);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($result)";
}

def Mt_ReshapeOp : Mt_Op<"reshape", [Pure, Differentiable]> {
  let summary = "same elements, new static shape";
  let description = [{
    ```mlir
    %y = mt.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_TransposeOp : Mt_Op<"transpose", [Pure, Differentiable]> {
  let summary = "permute dimensions: result.shape[i] = x.shape[perm[i]]";
  let description = [{
    ```mlir
    %y = mt.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Mt_ReduceOp<string mnemonic, string doc>
    : Mt_Op<mnemonic, [Pure, Differentiable]> {
  let summary = doc;
  let description = [{
    `axes` are sorted and non-negative; `keepdims` keeps them as size 1.

    ```mlir
    %y = mt.}] # mnemonic # [{ %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_ReduceSumOp : Mt_ReduceOp<"reduce_sum", "sum over axes">;
def Mt_ReduceMeanOp : Mt_ReduceOp<"reduce_mean", "mean over axes">;

def Mt_BroadcastToOp : Mt_Op<"broadcast_to", [Pure, Differentiable]> {
  let summary = "numpy broadcast of x to the result shape";
  let description = [{
    ```mlir
    %y = mt.broadcast_to %x : (tensor<1x8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_SumToOp : Mt_Op<"sum_to", [Pure, Differentiable]> {
  let summary = "sum over broadcast dims down to the result shape";
  let description = [{
    The adjoint of `mt.broadcast_to`: the result shape broadcasts to x's shape.

    ```mlir
    %y = mt.sum_to %x : (tensor<4x8xf32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_GatherOp : Mt_Op<"gather", [Pure, Differentiable]> {
  let summary = "ONNX Gather along one axis (embedding lookup)";
  let description = [{
    result.shape = data.shape[:axis] + indices.shape + data.shape[axis+1:].

    ```mlir
    %e = mt.gather %table, %ids {axis = 0 : i64} : (tensor<256x64xf32>, tensor<8x32xi64>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$data, Mt_Tensor:$indices, I64Attr:$axis);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_GatherGradOp : Mt_Op<"gather_grad", [Pure]> {
  let summary = "scatter-add of dy into zeros shaped like the gathered data";
  let description = [{
    ```mlir
    %dt = mt.gather_grad %ids, %dy {axis = 0 : i64} : (tensor<8x32xi64>, tensor<8x32x64xf32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$indices, Mt_Tensor:$dy, I64Attr:$axis);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$indices `,` $dy attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Elementwise math of exported LLMs (RMSNorm, GELU, rotary embeddings, masks)
//===----------------------------------------------------------------------===//

def Mt_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Mt_BoolTensor : RankedTensorOf<[I1]>;

class Mt_MathOp<string mnemonic, string doc>
    : Mt_Op<mnemonic, [Pure, SameOperandsAndResultType, Differentiable]> {
  let summary = doc;
  let description = [{
    Elementwise on a floating-point tensor.

    ```mlir
    %y = mt.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Mt_NegOp : Mt_MathOp<"neg", "-x">;
def Mt_SqrtOp : Mt_MathOp<"sqrt", "square root">;
def Mt_ReciprocalOp : Mt_MathOp<"reciprocal", "1 / x">;
def Mt_ExpOp : Mt_MathOp<"exp", "e^x">;
def Mt_LogOp : Mt_MathOp<"log", "natural logarithm">;
def Mt_ErfOp : Mt_MathOp<"erf", "the error function (exact GELU)">;
def Mt_CosOp : Mt_MathOp<"cos", "cosine">;
def Mt_SinOp : Mt_MathOp<"sin", "sine">;

def Mt_PowfOp : Mt_Op<"powf", [Pure, SameOperandsAndResultType, Differentiable]> {
  let summary = "x^exponent for a constant exponent";
  let description = [{
    ONNX Pow with a scalar constant exponent (RMSNorm's x^2, x^-0.5). A
    negative x with a non-integer exponent gives NaN, as std::pow does.

    ```mlir
    %y = mt.powf %x {exponent = 2.0 : f64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, F64Attr:$exponent);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Mt_MaxOp : Mt_BinaryOp<"max", "elementwise max(a, b)">;
def Mt_MinOp : Mt_BinaryOp<"min", "elementwise min(a, b)">;

def Mt_ErfGradOp : Mt_ActivationGradOp<"erf_grad",
    "dy * 2/sqrt(pi) * exp(-x^2), from the input x">;

class Mt_MinMaxGradOp<string mnemonic, string doc> : Mt_Op<mnemonic, [Pure]> {
  let summary = doc;
  let description = [{
    `dy` has the broadcast shape of `lhs` and `rhs`; both results have dy's
    shape (the rule sums them down to each operand with mt.sum_to). Where
    lhs and rhs tie, lhs gets dy.

    ```mlir
    %dl, %dr = mt.}] # mnemonic # [{ %a, %b, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    ```
  }];
  let arguments = (ins Mt_Tensor:$lhs, Mt_Tensor:$rhs, Mt_Tensor:$dy);
  let results = (outs Mt_Tensor:$dlhs, Mt_Tensor:$drhs);
  let assemblyFormat = "$lhs `,` $rhs `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_MaxGradOp : Mt_MinMaxGradOp<"max_grad",
    "routes dy to the larger operand of max (lhs on ties)">;
def Mt_MinGradOp : Mt_MinMaxGradOp<"min_grad",
    "routes dy to the smaller operand of min (lhs on ties)">;

def Mt_IsNanOp : Mt_Op<"isnan", [Pure]> {
  let summary = "true where x is NaN";
  let description = [{
    ```mlir
    %m = mt.isnan %x : (tensor<4x8xf32>) -> tensor<4x8xi1>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x);
  let results = (outs Mt_BoolTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_WhereOp : Mt_Op<"where", [Pure, Differentiable]> {
  let summary = "cond ? x : y, with numpy broadcasting of all three";
  let description = [{
    ONNX Where. The result shape is the broadcast of the three shapes; x, y
    and the result share one element type. The gradient flows to x where
    cond holds and to y elsewhere; cond gets none.

    ```mlir
    %y = mt.where %mask, %scores, %ninf : (tensor<1x1x16x16xi1>, tensor<8x4x16x16xf32>, tensor<f32>) -> tensor<8x4x16x16xf32>
    ```
  }];
  let arguments = (ins Mt_BoolTensor:$cond, Mt_Tensor:$x, Mt_Tensor:$y);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$cond `,` $x `,` $y attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Concat, slice, cast
//===----------------------------------------------------------------------===//

def Mt_ConcatOp : Mt_Op<"concat", [Pure, Differentiable]> {
  let summary = "join tensors along one axis";
  let description = [{
    ONNX Concat: inputs of one rank and element type that agree on every dim
    but `axis` (non-negative); the result's `axis` dim is their sum. One to
    eight inputs (the runtime's operand limit): nest concats for more.

    ```mlir
    %y = mt.concat %a, %b {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins Variadic<Mt_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Mt_SliceOp : Mt_Op<"slice", [Pure, Differentiable]> {
  let summary = "strided slice, one normalized (start, end, step) per dim";
  let description = [{
    ONNX Slice with every dim listed and its ranges normalized: 0 <= start
    <= dim, 0 <= end <= dim, step >= 1 (negative steps are not supported).
    result.shape[d] = max(0, ceil((end[d] - start[d]) / step[d])), and
    result[i...] = x[start + i * step ...].

    ```mlir
    %y = mt.slice %x {starts = array<i64: 0, 4>, ends = array<i64: 2, 8>, steps = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_SliceGradOp : Mt_Op<"slice_grad", [Pure]> {
  let summary = "zeros of the sliced input's shape with dy at the sliced positions";
  let description = [{
    The adjoint of mt.slice with the same attributes: the result has the
    shape of the slice's input x, and slicing it gives back dy.

    ```mlir
    %dx = mt.slice_grad %dy {starts = array<i64: 0, 4>, ends = array<i64: 2, 8>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$dy, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_CastTensor : RankedTensorOf<[F32, F64, BF16, I64, I1]>;

def Mt_CastOp : Mt_Op<"cast", [Pure, Differentiable]> {
  let summary = "element type conversion among f32, f64, i64 and i1";
  let description = [{
    The result type carries the target. Floats become i64 by truncation
    toward zero, anything becomes i1 as `x != 0` (NaN is true), i1 becomes
    0 or 1. Only float-to-float casts pass a gradient (cast back). bf16
    converts only to and from f32 and f64 (round to nearest even).

    ```mlir
    %y = mt.cast %x : (tensor<4x8xf32>) -> tensor<4x8xf64>
    ```
  }];
  let arguments = (ins Mt_CastTensor:$x);
  let results = (outs Mt_CastTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization and losses
//===----------------------------------------------------------------------===//

def Mt_LayerNormOp : Mt_Op<"layer_norm", [Pure, Differentiable]> {
  let summary = "layer normalization over dims [axis, rank)";
  let description = [{
    y = (x - mean) / sqrt(var + epsilon) * scale + bias, statistics over the
    trailing dims from `axis`; scale and bias have shape x.shape[axis:].

    ```mlir
    %y = mt.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<8x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, Mt_Tensor:$scale, Mt_Tensor:$bias,
                   I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$x `,` $scale `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_LayerNormGradOp : Mt_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradients of layer_norm: dx, dscale, dbias";
  let description = [{
    ```mlir
    %dx, %dg, %db = mt.layer_norm_grad %x, %g, %dy {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<8x32x64xf32>, tensor<64xf32>, tensor<8x32x64xf32>) -> (tensor<8x32x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Mt_Tensor:$x, Mt_Tensor:$scale, Mt_Tensor:$dy,
                   I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Mt_Tensor:$dx, Mt_Tensor:$dscale, Mt_Tensor:$dbias);
  let assemblyFormat = "$x `,` $scale `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Mt_SoftmaxCrossEntropyOp : Mt_Op<"softmax_ce", [Pure, Differentiable]> {
  let summary = "ONNX SoftmaxCrossEntropyLoss (no weights), scalar result";
  let description = [{
    logits [N, C, D...], labels [N, D...] (i64); labels equal to
    `ignore_index` are skipped; `reduction` is "mean" or "sum".

    ```mlir
    %l = mt.softmax_ce %x, %y {ignore_index = -100 : i64, reduction = "mean"} : (tensor<16x10xf32>, tensor<16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$logits, Mt_Tensor:$labels,
                   I64Attr:$ignore_index, StrAttr:$reduction);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_SoftmaxCrossEntropyGradOp : Mt_Op<"softmax_ce_grad", [Pure]> {
  let summary = "gradient of softmax_ce with respect to the logits";
  let description = [{
    ```mlir
    %dx = mt.softmax_ce_grad %x, %y, %dl {ignore_index = -100 : i64, reduction = "mean"} : (tensor<16x10xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x10xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$logits, Mt_Tensor:$labels, Mt_Tensor:$dloss,
                   I64Attr:$ignore_index, StrAttr:$reduction);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $dloss attr-dict `:` functional-type(operands, results)";
}

def Mt_NextTokenCrossEntropyOp : Mt_Op<"next_token_ce", [Pure, Differentiable]> {
  let summary = "mean next-token cross-entropy of logits against tokens shifted by one";
  let description = [{
    Mean over b and t < T-1 (skipping targets equal to `ignore_index`) of
    -log softmax(logits[b, t])[tokens[b, t+1]].

    ```mlir
    %l = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<8x32x256xf32>, tensor<8x32xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$logits, Mt_Tensor:$tokens, I64Attr:$ignore_index);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$logits `,` $tokens attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_NextTokenCrossEntropyGradOp : Mt_Op<"next_token_ce_grad", [Pure]> {
  let summary = "gradient of next_token_ce with respect to the logits";
  let description = [{
    ```mlir
    %dx = mt.next_token_ce_grad %logits, %ids, %dl {ignore_index = -100 : i64} : (tensor<8x32x256xf32>, tensor<8x32xi64>, tensor<f32>) -> tensor<8x32x256xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$logits, Mt_Tensor:$tokens, Mt_Tensor:$dloss,
                   I64Attr:$ignore_index);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$logits `,` $tokens `,` $dloss attr-dict `:` functional-type(operands, results)";
}

def Mt_LinearCrossEntropyOp : Mt_Op<"linear_ce", [Pure, Differentiable]> {
  let summary = "next_token_ce of the output projection hidden W^T, over vocabulary chunks";
  let description = [{
    The value of `mt.next_token_ce(mt.matmul(hidden, weight, transpose_b), tokens)`
    without the [B, T, V] logits: hidden [B, T, H], weight [V, H] (the
    projection as nn.Linear stores it), tokens [B, T] i64. The logits are
    computed `chunk` vocabulary rows at a time and folded into a running
    max and sum of exponentials per position; the second result is the
    per-position logsumexp [B, T] (0 where no target counts), which
    the gradient reads instead of recomputing the statistics. `chunk` is
    chosen by mt-fuse-linear-ce. hidden and weight share one element type;
    the results are f32 when it is bf16 (fp32 accumulation), else that type.

    ```mlir
    %l, %lse = mt.linear_ce %h, %w, %ids {chunk = 128 : i64, ignore_index = -100 : i64} : (tensor<2x32x64xf32>, tensor<256x64xf32>, tensor<2x32xi64>) -> (tensor<f32>, tensor<2x32xf32>)
    ```
  }];
  let arguments = (ins Mt_Tensor:$hidden, Mt_Tensor:$weight, Mt_Tensor:$tokens,
                   I64Attr:$ignore_index, I64Attr:$chunk);
  let results = (outs Mt_Tensor:$result, Mt_Tensor:$lse);
  let assemblyFormat = "$hidden `,` $weight `,` $tokens attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_LinearCrossEntropyGradOp : Mt_Op<"linear_ce_grad", [Pure]> {
  let summary = "gradients of linear_ce with respect to hidden and weight";
  let description = [{
    Chunk by chunk: the chunk's logits recomputed, dlogits = dloss / count *
    (exp(logits - lse) - onehot(target)), dhidden += dlogits W_chunk,
    dweight[chunk] = dlogits^T hidden.

    ```mlir
    %dh, %dw = mt.linear_ce_grad %h, %w, %ids, %lse, %dl {chunk = 128 : i64, ignore_index = -100 : i64} : (tensor<2x32x64xf32>, tensor<256x64xf32>, tensor<2x32xi64>, tensor<2x32xf32>, tensor<f32>) -> (tensor<2x32x64xf32>, tensor<256x64xf32>)
    ```
  }];
  let arguments = (ins Mt_Tensor:$hidden, Mt_Tensor:$weight, Mt_Tensor:$tokens,
                   Mt_Tensor:$lse, Mt_Tensor:$dloss, I64Attr:$ignore_index, I64Attr:$chunk);
  let results = (outs Mt_Tensor:$dhidden, Mt_Tensor:$dweight);
  let assemblyFormat = "$hidden `,` $weight `,` $tokens `,` $lse `,` $dloss attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Fused attention and rotary embedding (written by the fusion passes)
//===----------------------------------------------------------------------===//

def Mt_AttentionOp : Mt_Op<"attention", [Pure, Differentiable]> {
  let summary = "scaled dot-product attention, grouped-query, optionally causal";
  let description = [{
    q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] with Hq % Hkv == 0: query head
    h reads kv head h / (Hq / Hkv) (grouped-query; Hkv = 1 is multi-query).
    y = softmax(q k^T * scale + mask) v, where the causal mask hides key j
    from query i when j > i (upper-left aligned). The second result is the
    per-row logsumexp of the masked, scaled scores [B, Hq, Sq], which the
    gradient uses to recompute the probabilities instead of storing them.
    The discardable `precision` attribute ("fp32", "tf32", "bf16"; absent:
    fp32; also on attention_grad) is the arithmetic the device may use for
    the products inside. Operands and results share one element type, or,
    under precision "bf16", q, k, v and y (attention_grad: also dy, dq, dk
    and dv) are bf16 and lse is f32 (mt-bf16-attention): bf16 operands are
    read exactly and bf16 results are the f32 results rounded to nearest
    even, as mt.cast rounds.

    `bshd` (default 0; written by mt-fold-head-transposes) says which
    operands lie in memory as [B, S, H, D] instead of [B, H, S, D]: bit 0 q,
    bit 1 k, bit 2 v, bit 3 y (the result; attention_grad's y input), bit 4
    dy (attention_grad only); attention_grad's dq, dk and dv take q's, k's
    and v's bits. Such an operand's type is the transposed shape; the math
    is the same, only the memory order differs. lse is always [B, Hq, Sq].

    ```mlir
    %y, %lse = mt.attention %q, %k, %v {scale = 0.25 : f64, causal = true} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$q, Mt_FloatTensor:$k, Mt_FloatTensor:$v,
                   F64Attr:$scale, BoolAttr:$causal,
                   DefaultValuedAttr<I64Attr, "0">:$bshd);
  let results = (outs Mt_FloatTensor:$result, Mt_FloatTensor:$lse);
  let assemblyFormat = "$q `,` $k `,` $v attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_AttentionGradOp : Mt_Op<"attention_grad", [Pure]> {
  let summary = "gradients of attention: dq, dk, dv";
  let description = [{
    From the forward's inputs, its output y, its logsumexp and dy. dk and dv
    are summed over the query heads that share a kv head. `bshd` as on
    mt.attention (bits q, k, v, y, dy; dq, dk, dv follow q, k, v).

    ```mlir
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %y, %lse, %dy {scale = 0.25 : f64, causal = true} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$q, Mt_FloatTensor:$k, Mt_FloatTensor:$v,
                   Mt_FloatTensor:$y, Mt_FloatTensor:$lse, Mt_FloatTensor:$dy,
                   F64Attr:$scale, BoolAttr:$causal,
                   DefaultValuedAttr<I64Attr, "0">:$bshd);
  let results = (outs Mt_FloatTensor:$dq, Mt_FloatTensor:$dk, Mt_FloatTensor:$dv);
  let assemblyFormat = "$q `,` $k `,` $v `,` $y `,` $lse `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_RotaryOp : Mt_Op<"rotary", [Pure, Differentiable]> {
  let summary = "rotary position embedding, rotate-half form";
  let description = [{
    y = x * cos + rotate_half(x) * sin with rotate_half(x) = concat(-x2, x1),
    x1 and x2 the halves of x's last dim (even). cos and sin broadcast to x
    (numpy rules) and have x's last dim. They must not depend on a trainable
    parameter: the gradient is with respect to x only. x, the tables and
    the result share one element type, or x and the result are each f32 or
    bf16 with f32 tables (also on rotary_grad): a bf16 x is read exactly, a
    bf16 result is the f32 result rounded to nearest even, as mt.cast does.

    `bshd` (default false; written by mt-fold-head-transposes, also on
    rotary_grad): x and the result are rank 4 and lie as [B, S, H, D], the
    transpose of the [B, H, S, D] tensor that cos and sin broadcast to; each
    element is computed as in the [B, H, S, D] form.

    ```mlir
    %y = mt.rotary %x, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, Mt_FloatTensor:$cos, Mt_FloatTensor:$sin,
                   DefaultValuedAttr<BoolAttr, "false">:$bshd);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$x `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_RotaryGradOp : Mt_Op<"rotary_grad", [Pure]> {
  let summary = "gradient of rotary with respect to x";
  let description = [{
    dx = dy * cos - rotate_half(dy * sin), the adjoint of rotary.

    ```mlir
    %dx = mt.rotary_grad %dy, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$dy, Mt_FloatTensor:$cos, Mt_FloatTensor:$sin,
                   DefaultValuedAttr<BoolAttr, "false">:$bshd);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$dy `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_PointwiseOp : Mt_Op<"pointwise", [Pure]> {
  let summary = "a fused chain of elementwise ops: a straight-line program per element";
  let description = [{
    Written by mt-fuse-pointwise after autodiff; it has no gradient rule, so a
    loss that depends on one before mt-autodiff is an error. Registers
    0..N-1 are the inputs, each read through its own numpy broadcast against
    the common result shape; instruction i writes register N + i. `code` holds
    four integers per instruction (opcode, then operand registers, -1 where
    unused; scale and powf name an entry of `constants` in their second slot);
    `outputs` names the register each result stores. Opcodes are numbered in
    megatrain/plan/PointwiseProgram.h. Values compute in the f32 or f64 of
    the non-bf16 operands; a bf16 input is read exactly and a bf16 result is
    rounded to nearest even, as `mt.cast` does.

    ```mlir
    // y = x + r (kept as an output), and y as bf16 for a matmul
    %y, %yb = mt.pointwise %x, %r {code = array<i64: 0, 0, 1, -1, 21, 2, -1, -1>,
        constants = array<f64>, outputs = array<i64: 2, 3>}
        : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>)
    ```
  }];
  let arguments = (ins Variadic<Mt_FloatTensor>:$inputs, DenseI64ArrayAttr:$code,
                   DenseF64ArrayAttr:$constants, DenseI64ArrayAttr:$outputs);
  let results = (outs Variadic<Mt_FloatTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def Mt_LossOp : Mt_Op<"loss", []> {
  let summary = "marks the scalar that training minimizes";
  let description = [{
    Autodiff seeds the gradient 1 here; the runtime reports this value.

    ```mlir
    mt.loss %l : tensor<f32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Mt_OutputOp : Mt_Op<"output", []> {
  let summary = "keeps a graph output to read back after the step";
  let description = [{
    Written by mt-add-loss for each `keep-outputs` name: the value stays alive
    until this op, which plan emission turns into a device-to-host copy into
    the host tensor `output:<name>` (role OUTPUT_READOUT). Training ignores it;
    the runtime can dump it after a step (`megatrain-run --dump-output`).

    ```mlir
    mt.output %logits {name = "logits"} : tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$value, StrAttr:$name);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Mt_ParamGradOp : Mt_Op<"param_grad", []> {
  let summary = "marks the final gradient of a trainable parameter";
  let description = [{
    Written by autodiff, one per trainable parameter; the optimizer pass turns
    it into the parameter's update.

    ```mlir
    mt.param_grad %g {param = "fc1.weight"} : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$grad, StrAttr:$param);
  let assemblyFormat = "$grad attr-dict `:` type($grad)";
}

def Mt_AdamWOp : Mt_Op<"adamw", []> {
  let summary = "AdamW update of one parameter from its final gradient";
  let description = [{
    torch.optim.AdamW's update (bias-corrected, decoupled weight decay) of the
    parameter named `param`, run by the host optimizer once `grad` is final.

    ```mlir
    mt.adamw %g {param = "fc1.weight", lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$grad, StrAttr:$param, F64Attr:$lr, F64Attr:$beta1,
                   F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let assemblyFormat = "$grad attr-dict `:` type($grad)";
}

//===----------------------------------------------------------------------===//
// Memory tiers (mt-tier, docs/tiering.md)
//===----------------------------------------------------------------------===//

def Mt_OffloadOp : Mt_Op<"offload", [SameOperandsAndResultType]> {
  let summary = "copy a device value to the host staging pool";
  let description = [{
    Written by mt-tier: the result is the host copy of `value` (device to host,
    on the d2h stream), placed by mt-plan-memory in the host staging arena. Only
    mt.prefetch reads it.

    ```mlir
    %h = mt.offload %x : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$value);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mt_PrefetchOp : Mt_Op<"prefetch", [SameOperandsAndResultType]> {
  let summary = "copy an offloaded value back into the device arena";
  let description = [{
    Written by mt-tier: host to device on the h2d stream, placed ahead of the
    value's next use so the copy overlaps compute.

    ```mlir
    %x2 = mt.prefetch %h : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$host);
  let results = (outs Mt_Tensor:$result);
  let assemblyFormat = "$host attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Fused normalizations and activations (written by the fusion passes:
// mt-fuse-rms-norm, mt-fuse-activations; never by the importer)
//===----------------------------------------------------------------------===//

def Mt_RmsNormOp : Mt_Op<"rms_norm", [Pure, Differentiable]> {
  let summary = "RMS normalization over dims [axis, rank), times a weight";
  let description = [{
    y = x / sqrt(mean(x^2 over dims [axis, rank)) + epsilon) * weight, the
    RMSNorm of Llama, Qwen2 and Mistral; weight has shape x.shape[axis:].
    Written by mt-fuse-rms-norm from the exported composition. The result
    has x's type, or x's shape in bf16 when x is f32 (mt-fold-norm-casts:
    the f32 result rounded to nearest even, as a cast would).

    ```mlir
    %y = mt.rms_norm %x, %w {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<8x32x64xf32>, tensor<64xf32>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, Mt_FloatTensor:$weight,
                   I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$x `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_RmsNormGradOp : Mt_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradients of rms_norm: dx, dweight";
  let description = [{
    With r = 1/sqrt(mean(x^2) + epsilon), n = x r and g = dy weight, per row:
    dx = r (g - n mean(g n)); dweight = the sum over rows of dy n.

    ```mlir
    %dx, %dw = mt.rms_norm_grad %x, %w, %dy {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<8x32x64xf32>, tensor<64xf32>, tensor<8x32x64xf32>) -> (tensor<8x32x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, Mt_FloatTensor:$weight, Mt_FloatTensor:$dy,
                   I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Mt_FloatTensor:$dx, Mt_FloatTensor:$dweight);
  let assemblyFormat = "$x `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_RmsNormGradAddOp : Mt_Op<"rms_norm_grad_add", [Pure]> {
  let summary = "rms_norm_grad whose dx is added to another gradient (and its bf16 copy)";
  let description = [{
    The backward of a pre-norm residual block: the gradient that flows
    through the norm meets the one that skips it. dx = addend + the dx of
    rms_norm_grad (rounded to x's type first, then added in it, as the
    unfused pair computes); dweight as rms_norm_grad's. With a third result
    (f32 x only) the kernel also writes dx rounded to bf16 to nearest even,
    as a cast would: the copy the next products read. Written by
    mt-fuse-norm-grad-adds; the bits are the unfused ops' (docs/ops.md).

    ```mlir
    %dx, %dw, %dx16 = mt.rms_norm_grad_add %x, %w, %dy, %r {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<8x32x64xf32>, tensor<64xf32>, tensor<8x32x64xf32>, tensor<8x32x64xf32>) -> (tensor<8x32x64xf32>, tensor<64xf32>, tensor<8x32x64xbf16>)
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, Mt_FloatTensor:$weight, Mt_FloatTensor:$dy,
                   Mt_FloatTensor:$addend, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Mt_FloatTensor:$dx, Mt_FloatTensor:$dweight,
                 Optional<Mt_FloatTensor>:$dx_bf16);
  let assemblyFormat = "$x `,` $weight `,` $dy `,` $addend attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mt_SiluOp : Mt_MathOp<"silu", "x * sigmoid(x) (SiLU, swish)">;

def Mt_SiluGradOp : Mt_ActivationGradOp<"silu_grad",
    "dy * s * (1 + x * (1 - s)) with s = sigmoid(x), from the input x">;

def Mt_SwigluOp : Mt_Op<"swiglu", [Pure, SameOperandsAndResultType, Differentiable]> {
  let summary = "silu(gate) * up (the gated MLP of Llama, Qwen2, Mistral)";
  let description = [{
    Elementwise, no broadcasting: gate, up and the result share one type.

    ```mlir
    %y = mt.swiglu %gate, %up : tensor<8x32x176xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$gate, Mt_FloatTensor:$up);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Mt_SwigluGradOp : Mt_Op<"swiglu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradients of swiglu: dgate = dy * up * silu'(gate), dup = dy * silu(gate)";
  let description = [{
    ```mlir
    %dg, %du = mt.swiglu_grad %gate, %up, %dy : tensor<8x32x176xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$gate, Mt_FloatTensor:$up, Mt_FloatTensor:$dy);
  let results = (outs Mt_FloatTensor:$dgate, Mt_FloatTensor:$dup);
  let assemblyFormat = "$gate `,` $up `,` $dy attr-dict `:` type($dy)";
}

def Mt_GeluOp : Mt_Op<"gelu", [Pure, SameOperandsAndResultType, Differentiable]> {
  let summary = "GELU, exact (erf) or with the tanh approximation";
  let description = [{
    `approximate = "none"`: 0.5 x (1 + erf(x / sqrt 2)).
    `approximate = "tanh"`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    ```mlir
    %y = mt.gelu %x {approximate = "tanh"} : tensor<8x32x256xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, StrAttr:$approximate);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Mt_GeluGradOp : Mt_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "dy * gelu'(x), from the input x";
  let description = [{
    ```mlir
    %dx = mt.gelu_grad %x, %dy {approximate = "tanh"} : tensor<8x32x256xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$x, Mt_FloatTensor:$dy, StrAttr:$approximate);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// End of fused normalizations and activations.

// Micro-batch gradient parts (mt-microbatch, docs/tiering.md "Micro-batches").

def Mt_GradPartOp : Mt_Op<"grad_part", []> {
  let summary = "one micro-batch's share of a parameter's gradient, sent to the host";
  let description = [{
    Written by mt-microbatch: `grad` is micro-batch `index`'s gradient of the
    parameter `param`, already scaled by 1/`count`. The plan copies it to the
    host as soon as it is final: part 0 into the host gradient `grad:<param>`,
    part k >= 1 into the staging tensor `grad_part:<param>`, then a host
    ACCUMULATE adds it to `grad:<param>` in fp32. Parts 0 .. count-2 are
    mt.grad_part; the last one is the parameter's mt.param_grad (mt.adamw),
    whose plan steps accumulate it before the update.

    ```mlir
    mt.grad_part %g {param = "fc1.weight", index = 0 : i64, count = 2 : i64} : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Mt_Tensor:$grad, StrAttr:$param, I64Attr:$index, I64Attr:$count);
  let assemblyFormat = "$grad attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

// End of micro-batch gradient parts.

#endif // MT_OPS_TD
