// RUN: megatrain-opt %s --split-input-file --mt-bf16-attention | FileCheck %s

// One attention layer, forward and backward, as mt-precision leaves it: q and
// k from rotary, v a reshaped product, y reshaped and cast for the output
// projection; dy a reshaped product, dq and dk through rotary_grad, every
// gradient reshaped and cast for its products. After the pass the attention
// ops move bf16: rotary and rotary_grad write bf16, v and dy get one cast
// each (v's shared by the forward and the backward), y and dv reach their
// products through a bf16 reshape, and no cast back to f32 is left.
// CHECK-LABEL: func.func @layer
// CHECK:         %[[VB:.*]] = mt.cast %[[V:.*]] : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xbf16>
// CHECK:         %[[Q:.*]] = mt.rotary %{{.*}}, %{{.*}}, %{{.*}} {bshd = true} : (tensor<2x8x2x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xbf16>
// CHECK:         %[[K:.*]] = mt.rotary %{{.*}}, %{{.*}}, %{{.*}} {bshd = true} : (tensor<2x8x2x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xbf16>
// CHECK:         %[[Y:.*]], %[[LSE:.*]] = mt.attention %[[Q]], %[[K]], %[[VB]] {{.*}} : (tensor<2x8x2x4xbf16>, tensor<2x8x2x4xbf16>, tensor<2x8x2x4xbf16>) -> (tensor<2x8x2x4xbf16>, tensor<2x2x8xf32>)
// CHECK-NEXT:    %[[YR:.*]] = mt.reshape %[[Y]] : (tensor<2x8x2x4xbf16>) -> tensor<2x8x8xbf16>
// CHECK-NEXT:    mt.output %[[YR]] {name = "y"} : tensor<2x8x8xbf16>
// CHECK:         %[[DYB:.*]] = mt.cast %{{.*}} : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xbf16>
// CHECK-NEXT:    %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = mt.attention_grad %[[Q]], %[[K]], %[[VB]], %[[Y]], %[[LSE]], %[[DYB]] {{.*}} -> (tensor<2x8x2x4xbf16>, tensor<2x8x2x4xbf16>, tensor<2x8x2x4xbf16>)
// CHECK-NEXT:    %[[GQ:.*]] = mt.rotary_grad %[[DQ]], %{{.*}}, %{{.*}} {bshd = true} : (tensor<2x8x2x4xbf16>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xbf16>
// CHECK-NEXT:    %[[GQR:.*]] = mt.reshape %[[GQ]] : (tensor<2x8x2x4xbf16>) -> tensor<2x8x8xbf16>
// CHECK-NEXT:    mt.output %[[GQR]] {name = "dq"} : tensor<2x8x8xbf16>
// CHECK-NEXT:    %[[GK:.*]] = mt.rotary_grad %[[DK]], %{{.*}}, %{{.*}} {bshd = true} : (tensor<2x8x2x4xbf16>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT:    mt.output %[[GK]] {name = "dk"} : tensor<2x8x2x4xf32>
// CHECK-NEXT:    %[[DVR:.*]] = mt.reshape %[[DV]] : (tensor<2x8x2x4xbf16>) -> tensor<2x8x8xbf16>
// CHECK-NEXT:    mt.output %[[DVR]] {name = "dv"} : tensor<2x8x8xbf16>
// CHECK-NOT:     tensor<2x8x2x4xbf16>) -> tensor<2x8x2x4xf32>
func.func @layer() attributes {mt.precision = "bf16"} {
  %qx = mt.input {name = "q"} : tensor<2x8x2x4xf32>
  %kx = mt.input {name = "k"} : tensor<2x8x2x4xf32>
  %v = mt.input {name = "v"} : tensor<2x8x2x4xf32>
  %cos = mt.input {name = "cos"} : tensor<1x1x8x4xf32>
  %sin = mt.input {name = "sin"} : tensor<1x1x8x4xf32>
  %q = mt.rotary %qx, %cos, %sin {bshd = true} : (tensor<2x8x2x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xf32>
  %k = mt.rotary %kx, %cos, %sin {bshd = true} : (tensor<2x8x2x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xf32>
  %y, %lse = mt.attention %q, %k, %v {bshd = 15 : i64, causal = true, precision = "bf16", scale = 0.5 : f64} : (tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> (tensor<2x8x2x4xf32>, tensor<2x2x8xf32>)
  %yr = mt.reshape %y : (tensor<2x8x2x4xf32>) -> tensor<2x8x8xf32>
  %yb = mt.cast %yr : (tensor<2x8x8xf32>) -> tensor<2x8x8xbf16>
  mt.output %yb {name = "y"} : tensor<2x8x8xbf16>
  %g = mt.input {name = "g"} : tensor<2x8x8xf32>
  %dy = mt.reshape %g : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %y, %lse, %dy {bshd = 31 : i64, causal = true, precision = "bf16", scale = 0.5 : f64} : (tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x2x8xf32>, tensor<2x8x2x4xf32>) -> (tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  %gq = mt.rotary_grad %dq, %cos, %sin {bshd = true} : (tensor<2x8x2x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xf32>
  %gqr = mt.reshape %gq : (tensor<2x8x2x4xf32>) -> tensor<2x8x8xf32>
  %gqb = mt.cast %gqr : (tensor<2x8x8xf32>) -> tensor<2x8x8xbf16>
  mt.output %gqb {name = "dq"} : tensor<2x8x8xbf16>
  %gk = mt.rotary_grad %dk, %cos, %sin {bshd = true} : (tensor<2x8x2x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x8x2x4xf32>
  mt.output %gk {name = "dk"} : tensor<2x8x2x4xf32>
  %dvr = mt.reshape %dv : (tensor<2x8x2x4xf32>) -> tensor<2x8x8xf32>
  %dvb = mt.cast %dvr : (tensor<2x8x8xf32>) -> tensor<2x8x8xbf16>
  mt.output %dvb {name = "dv"} : tensor<2x8x8xbf16>
  return
}

// -----

// An f32 reader of y keeps its f32 widening; the backward reads the bf16 y.
// CHECK-LABEL: func.func @f32_reader
// CHECK:         %[[Y:.*]], %{{.*}} = mt.attention {{.*}} -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
// CHECK-NEXT:    %[[W:.*]] = mt.cast %[[Y]] : (tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT:    mt.output %[[W]] {name = "y"} : tensor<1x2x4x8xf32>
// CHECK:         mt.attention_grad {{.*}}, %[[Y]], {{.*}} -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
func.func @f32_reader() attributes {mt.precision = "bf16"} {
  %q = mt.input {name = "q"} : tensor<1x2x4x8xf32>
  %y, %lse = mt.attention %q, %q, %q {causal = false, precision = "bf16", scale = 0.5 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  mt.output %y {name = "y"} : tensor<1x2x4x8xf32>
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %y, %lse, %q {causal = false, precision = "bf16", scale = 0.5 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  mt.output %dq {name = "dq"} : tensor<1x2x4x8xf32>
  mt.output %dk {name = "dk"} : tensor<1x2x4x8xf32>
  mt.output %dv {name = "dv"} : tensor<1x2x4x8xf32>
  return
}

// -----

// Other precisions, and a step that is not bf16, keep f32 attention.
// CHECK-LABEL: func.func @tf32_step
// CHECK-NOT:     mt.cast
// CHECK:         mt.attention {{.*}} -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
func.func @tf32_step() attributes {mt.precision = "tf32"} {
  %q = mt.input {name = "q"} : tensor<1x2x4x8xf32>
  %y, %lse = mt.attention %q, %q, %q {causal = false, precision = "tf32", scale = 0.5 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  mt.output %y {name = "y"} : tensor<1x2x4x8xf32>
  return
}

// -----

// CHECK-LABEL: func.func @fp32_attention_in_bf16_step
// CHECK-NOT:     mt.cast
// CHECK:         mt.attention {{.*}} -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
func.func @fp32_attention_in_bf16_step() attributes {mt.precision = "bf16"} {
  %q = mt.input {name = "q"} : tensor<1x2x4x8xf32>
  %y, %lse = mt.attention %q, %q, %q {causal = false, precision = "fp32", scale = 0.5 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  mt.output %y {name = "y"} : tensor<1x2x4x8xf32>
  return
}

// -----

// The weight gradients read the values through a second reshape: the chains
// of reshapes move bf16 and their casts go (y's widening, dq's rotary_grad).
// CHECK-LABEL: func.func @reshape_chains
// CHECK:         %[[Y:.*]], %[[LSE:.*]] = mt.attention
// CHECK-NEXT:    %[[YW:.*]] = mt.reshape %[[Y]] : (tensor<1x4x2x8xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT:    mt.output %[[YW]] {name = "y"} : tensor<4x16xbf16>
// CHECK:         %[[G:.*]] = mt.rotary_grad {{.*}} -> tensor<1x4x2x8xbf16>
// CHECK-NEXT:    %[[GR:.*]] = mt.reshape %[[G]] : (tensor<1x4x2x8xbf16>) -> tensor<1x4x16xbf16>
// CHECK-NEXT:    %[[GW:.*]] = mt.reshape %[[GR]] : (tensor<1x4x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT:    mt.output %[[GR]] {name = "dq"} : tensor<1x4x16xbf16>
// CHECK-NEXT:    mt.output %[[GW]] {name = "dqw"} : tensor<4x16xbf16>
// CHECK-NOT:     mt.cast
func.func @reshape_chains() attributes {mt.precision = "bf16"} {
  %q = mt.input {name = "q"} : tensor<1x4x2x8xbf16>
  %t = mt.input {name = "t"} : tensor<1x1x4x8xf32>
  %lse = mt.input {name = "lse"} : tensor<1x2x4xf32>
  %qf = mt.cast %q : (tensor<1x4x2x8xbf16>) -> tensor<1x4x2x8xf32>
  %y, %l = mt.attention %qf, %qf, %qf {bshd = 15 : i64, causal = true, precision = "bf16", scale = 0.5 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %yr = mt.reshape %y : (tensor<1x4x2x8xf32>) -> tensor<1x4x16xf32>
  %yw = mt.reshape %yr : (tensor<1x4x16xf32>) -> tensor<4x16xf32>
  %ywb = mt.cast %yw : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  mt.output %ywb {name = "y"} : tensor<4x16xbf16>
  %dq, %dk, %dv = mt.attention_grad %qf, %qf, %qf, %y, %l, %qf {bshd = 31 : i64, causal = true, precision = "bf16", scale = 0.5 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  %g = mt.rotary_grad %dq, %t, %t {bshd = true} : (tensor<1x4x2x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x4x2x8xf32>
  %gr = mt.reshape %g : (tensor<1x4x2x8xf32>) -> tensor<1x4x16xf32>
  %grb = mt.cast %gr : (tensor<1x4x16xf32>) -> tensor<1x4x16xbf16>
  %gw = mt.reshape %gr : (tensor<1x4x16xf32>) -> tensor<4x16xf32>
  %gwb = mt.cast %gw : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  mt.output %grb {name = "dq"} : tensor<1x4x16xbf16>
  mt.output %gwb {name = "dqw"} : tensor<4x16xbf16>
  return
}
