// RUN: megatrain-opt %s --split-input-file --verify-diagnostics

// The verifiers of the fused ops reject what the kernels could not run.

func.func @rms_norm_weight_shape(%x: tensor<4x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must have shape [8]}}
  %y = mt.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @rms_norm_axis(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{axis -1 out of range}}
  %y = mt.rms_norm %x, %w {axis = -1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// A bf16 result is x's shape from an f32 x only (mt-fold-norm-casts).
func.func @rms_norm_bf16_from_f64(%x: tensor<4x8xf64>, %w: tensor<8xf64>) {
  // expected-error @+1 {{result must have the input's type (or its shape in bf16 when x is f32)}}
  %y = mt.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf64>, tensor<8xf64>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @rms_norm_bf16_shape(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{result must have the input's type (or its shape in bf16 when x is f32)}}
  %y = mt.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8x4xbf16>
  return
}

// -----

func.func @rms_norm_grad_dweight(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{dweight must have the weight's type}}
  %dx, %dw = mt.rms_norm_grad %x, %w, %x {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @gelu_form(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %y = mt.gelu %x {approximate = "fast"} : tensor<4x8xf32>
  return
}

// -----

func.func @swiglu_shapes(%g: tensor<4x8xf32>, %u: tensor<8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "mt.swiglu"(%g, %u) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pointwise_register_undefined(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 0 (add) reads register 1, which is not written before it}}
  %y = mt.pointwise %x {code = array<i64: 0, 0, 1, -1>, constants = array<f64>, outputs = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pointwise_broadcast(%x: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{input [4] does not broadcast to the result shape [4x8]}}
  %y = mt.pointwise %x, %b {code = array<i64: 0, 0, 1, -1>, constants = array<f64>, outputs = array<i64: 2>} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pointwise_mixed_compute(%x: tensor<4x8xf32>, %d: tensor<4x8xf64>) {
  // expected-error @+1 {{computes in one of f32 and f64, not both}}
  %y = mt.pointwise %x, %d {code = array<i64: 0, 0, 1, -1>, constants = array<f64>, outputs = array<i64: 2>} : (tensor<4x8xf32>, tensor<4x8xf64>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pointwise_constant_index(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 0 (scale) reads constant 0 of 0}}
  %y = mt.pointwise %x {code = array<i64: 19, 0, 0, -1>, constants = array<f64>, outputs = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_add_addend(%x: tensor<3x8xf32>, %w: tensor<8x4xf32>, %r: tensor<3xf32>) {
  // expected-error @+1 {{addend type 'tensor<3xf32>' is neither the result type 'tensor<3x4xf32>' nor a bias over its last dim}}
  %y = mt.matmul_add %x, %w, %r : (tensor<3x8xf32>, tensor<8x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @matmul_add_inner(%x: tensor<3x8xf32>, %w: tensor<5x4xf32>, %r: tensor<3x4xf32>) {
  // expected-error @+1 {{cannot multiply [3x8] by [5x4]}}
  %y = mt.matmul_add %x, %w, %r : (tensor<3x8xf32>, tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

// The `bshd` layouts of attention and rotary (mt-fold-head-transposes).
func.func @attention_bshd_bits(%q: tensor<1x2x3x4xf32>) {
  // expected-error @+1 {{bshd 16 has bits outside 15 (q 1, k 2, v 4, y 8)}}
  %y, %lse = mt.attention %q, %q, %q {scale = 0.5 : f64, causal = true, bshd = 16 : i64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3xf32>)
  return
}

// -----

func.func @attention_bshd_v_layout(%q: tensor<1x2x3x4xf32>) {
  // expected-error @+1 {{must be [B, Hq, Sq, D] and [B, Hkv, Skv, D] with Hkv dividing Hq (read through bshd 4)}}
  %y, %lse = mt.attention %q, %q, %q {scale = 0.5 : f64, causal = false, bshd = 4 : i64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3xf32>)
  return
}

// -----

func.func @attention_bshd_result(%q: tensor<1x2x3x4xf32>) {
  // expected-error @+1 {{result must have q's shape [1x2x3x4] (read through bshd 8)}}
  %y, %lse = mt.attention %q, %q, %q {scale = 0.5 : f64, causal = false, bshd = 8 : i64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3xf32>)
  return
}

// -----

func.func @attention_grad_dq_type(%q: tensor<1x3x2x4xf32>, %k: tensor<1x2x3x4xf32>, %lse: tensor<1x2x3xf32>) {
  // expected-error @+1 {{dq, dk and dv must have the types of q, k and v}}
  %dq, %dk, %dv = mt.attention_grad %q, %k, %k, %k, %lse, %k {scale = 0.5 : f64, causal = false, bshd = 1 : i64} : (tensor<1x3x2x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3xf32>, tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>)
  return
}

// -----

func.func @rotary_bshd_rank(%x: tensor<2x4x6xf32>, %t: tensor<4x6xf32>) {
  // expected-error @+1 {{bshd needs x of rank 4, got [2x4x6]}}
  %y = mt.rotary %x, %t, %t {bshd = true} : (tensor<2x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @rotary_grad_bshd_tables(%x: tensor<1x3x4x6xf32>, %t: tensor<4x6xf32>) {
  // expected-error @+1 {{cos and sin [4x6] must broadcast to x [1x4x3x6] (x read as [B, H, S, D]) and keep its last dim}}
  %y = mt.rotary_grad %x, %t, %t {bshd = true} : (tensor<1x3x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<1x3x4x6xf32>
  return
}

// -----

// bf16 attention operands (mt-bf16-attention) come with an f32 lse.
func.func @attention_bf16_lse(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{with bf16 q, every operand and result but lse (f32) must be bf16}}
  %y, %lse = mt.attention %q, %q, %q {scale = 0.5 : f64, causal = true, precision = "bf16"} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>)
  return
}

// -----

func.func @attention_bf16_mixed(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{with bf16 q, every operand and result but lse (f32) must be bf16}}
  %y, %lse = mt.attention %q, %k, %q {scale = 0.5 : f64, causal = true, precision = "bf16"} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_bf16_precision(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{bf16 operands need precision = "bf16"}}
  %y, %lse = mt.attention %q, %q, %q {scale = 0.5 : f64, causal = true, precision = "tf32"} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_grad_bf16_dq(%q: tensor<1x2x4x8xbf16>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{with bf16 q, every operand and result but lse (f32) must be bf16}}
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %q, %lse, %q {scale = 0.5 : f64, causal = true, precision = "bf16"} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
  return
}

// -----

// A bf16 x or result comes with f32 tables.
func.func @rotary_bf16_tables(%x: tensor<1x2x4x8xbf16>, %t: tensor<1x1x4x8xbf16>) {
  // expected-error @+1 {{x, cos, sin and the result must share one element type, or x and the result be f32 or bf16 with f32 cos and sin}}
  %y = mt.rotary %x, %t, %t : (tensor<1x2x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @rotary_grad_f64_to_bf16(%x: tensor<1x2x4x8xf64>, %t: tensor<1x1x4x8xf64>) {
  // expected-error @+1 {{x, cos, sin and the result must share one element type, or x and the result be f32 or bf16 with f32 cos and sin}}
  %y = mt.rotary_grad %x, %t, %t : (tensor<1x2x4x8xf64>, tensor<1x1x4x8xf64>, tensor<1x1x4x8xf64>) -> tensor<1x2x4x8xbf16>
  return
}

// -----

func.func @rotary_result_shape(%x: tensor<1x2x4x8xf32>, %t: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{result must have x's shape [1x2x4x8]}}
  %y = mt.rotary %x, %t, %t : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x4x2x8xbf16>
  return
}

// -----

// The accepted bf16 forms.
func.func @bf16_attention_and_rotary(%x: tensor<1x2x4x8xf32>, %t: tensor<1x1x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  %q = mt.rotary %x, %t, %t : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xbf16>
  %y, %l = mt.attention %q, %q, %q {scale = 0.5 : f64, causal = true, precision = "bf16"} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %y, %l, %y {scale = 0.5 : f64, causal = true, precision = "bf16"} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
  %g = mt.rotary_grad %dq, %t, %t : (tensor<1x2x4x8xbf16>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %h = mt.rotary_grad %dk, %t, %t : (tensor<1x2x4x8xbf16>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xbf16>
  return
}
