// RUN: megatrain-opt %s --split-input-file --mt-precision=precision=bf16 | FileCheck %s --check-prefix=BF16
// RUN: megatrain-opt %s --split-input-file --mt-precision=precision=tf32 | FileCheck %s --check-prefix=TF32
// RUN: megatrain-opt %s --split-input-file --mt-precision | FileCheck %s --check-prefix=FP32
// RUN: not megatrain-opt %s --split-input-file --mt-precision=precision=fp16 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: invalid mt-precision option precision=fp16 (fp32, tf32 or bf16)

// bf16: the weight read only by matmuls becomes a bf16 fetch (one cast per
// value, folded into the mt.param) with mt.master_element = f32; the input x
// gets one cast right after its definition, shared by both matmuls; the
// matmuls keep f32 results. The norm weight g is also read by a mul, so it
// stays f32 and a cast feeds the matmul. The gradient and the update stay
// f32.
// BF16-LABEL: func.func @mlp
// BF16-SAME:    mt.precision = "bf16"
// BF16:         %[[X:.*]] = mt.input {name = "x"} : tensor<2x8xf32>
// BF16-NEXT:    %[[XB:.*]] = mt.cast %[[X]] : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// BF16-NEXT:    %[[W:.*]] = mt.param {mt.master_element = f32, name = "w", trainable = true} : tensor<8x8xbf16>
// BF16-NEXT:    %[[G:.*]] = mt.param {name = "g", trainable = true} : tensor<8x8xf32>
// BF16-NEXT:    %[[GB:.*]] = mt.cast %[[G]] : (tensor<8x8xf32>) -> tensor<8x8xbf16>
// BF16-NEXT:    %[[Y:.*]] = mt.matmul %[[XB]], %[[W]] {precision = "bf16"} : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xf32>
// BF16-NEXT:    %[[Z:.*]] = mt.matmul %[[XB]], %[[GB]] {precision = "bf16", transpose_b = true} : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xf32>
// BF16-NEXT:    mt.mul %[[G]], %[[G]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// BF16:         mt.adamw %{{.*}} {{{.*}}param = "w"{{.*}}} : tensor<8x8xf32>
// BF16-NOT:     mt.cast

// TF32-LABEL: func.func @mlp
// TF32-SAME:    mt.precision = "tf32"
// TF32-NOT:     mt.cast
// TF32:         mt.param {name = "w", trainable = true} : tensor<8x8xf32>
// TF32:         mt.matmul {{.*}} {precision = "tf32"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// TF32:         mt.matmul {{.*}} {precision = "tf32", transpose_b = true}

// FP32-LABEL: func.func @mlp
// FP32-SAME:    mt.precision = "fp32"
// FP32-NOT:     mt.cast
// FP32-NOT:     {{[{ ]}}precision = "
// FP32:         return
func.func @mlp() {
  %x = mt.input {name = "x"} : tensor<2x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8x8xf32>
  %y = mt.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %z = mt.matmul %x, %g {transpose_b = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %gg = mt.mul %g, %g : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = mt.add %y, %z : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = mt.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  mt.adamw %gg {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, param = "w", weight_decay = 0.000000e+00 : f64} : tensor<8x8xf32>
  return
}

// -----

// Attention keeps f32 operands; forward and backward carry the precision.
// Two fetches of one parameter are rewritten each on its own.
// BF16-LABEL: func.func @attention
// BF16:         mt.param {mt.master_element = f32, name = "w", trainable = true} : tensor<4x4xbf16>
// BF16:         mt.attention {{.*}}precision = "bf16"{{.*}} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
// BF16:         mt.attention_grad {{.*}}precision = "bf16"
// BF16:         mt.param {mt.master_element = f32, name = "w", trainable = true} : tensor<4x4xbf16>
// TF32-LABEL: func.func @attention
// TF32:         mt.attention {{.*}}precision = "tf32"
// TF32:         mt.attention_grad {{.*}}precision = "tf32"
// FP32-LABEL: func.func @attention
// FP32-NOT:     {{[{ ]}}precision = "
// FP32:         return
func.func @attention() {
  %q = mt.input {name = "q"} : tensor<1x2x4x4xf32>
  %w1 = mt.param {name = "w", trainable = true} : tensor<4x4xf32>
  %p = mt.matmul %q, %w1 : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %y, %lse = mt.attention %p, %p, %p {scale = 5.000000e-01 : f64, causal = true} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = mt.attention_grad %p, %p, %p, %y, %lse, %y {scale = 5.000000e-01 : f64, causal = true} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
  %w2 = mt.param {name = "w", trainable = true} : tensor<4x4xf32>
  %r = mt.matmul %dq, %w2 {transpose_b = true} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %l = mt.reduce_sum %r {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x2x4x4xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// A weight read through a transpose (an exported x @ W^T): the cast moves
// above the transpose, which then moves bf16, and the fetch becomes bf16.
// BF16-LABEL: func.func @transposed_weight
// BF16:         %[[W:.*]] = mt.param {mt.master_element = f32, name = "w", trainable = true} : tensor<4x8xbf16>
// BF16-NEXT:    %[[T:.*]] = mt.transpose %[[W]] {perm = array<i64: 1, 0>} : (tensor<4x8xbf16>) -> tensor<8x4xbf16>
// BF16:         mt.matmul %{{.*}}, %[[T]] {precision = "bf16"} : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xf32>
// TF32-LABEL: func.func @transposed_weight
// TF32:         mt.transpose {{.*}} -> tensor<8x4xf32>
func.func @transposed_weight() {
  %x = mt.input {name = "x"} : tensor<2x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<4x8xf32>
  %t = mt.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %y = mt.matmul %x, %t : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %l = mt.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}
