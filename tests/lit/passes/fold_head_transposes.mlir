// RUN: megatrain-opt %s --split-input-file --mt-fold-head-transposes | FileCheck %s

// A grouped-query attention layer as exported and differentiated: the
// projections' [B, S, H, D] heads transposed to [B, H, S, D] before rotary
// and attention, the output transposed back, and the gradient's mirror
// images. Every head transpose folds: rotary and rotary_grad read and write
// [B, S, H, D] (bshd = true), attention takes q, k, v and y in that layout
// (bshd = 15), its gradient q, k, v, y and dy (bshd = 31) and writes dq, dk,
// dv in it.
// CHECK-LABEL: func.func @layer
// CHECK-NOT:     mt.transpose
// CHECK:         %[[A:.*]] = mt.input {name = "a"} : tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[KV:.*]] = mt.input {name = "kv"} : tensor<2x8x2x16xf32>
// CHECK-NEXT:    %[[COS:.*]] = mt.input {name = "cos"} : tensor<1x1x8x16xf32>
// CHECK-NEXT:    %[[SIN:.*]] = mt.input {name = "sin"} : tensor<1x1x8x16xf32>
// CHECK-NEXT:    %[[Q:.*]] = mt.rotary %[[A]], %[[COS]], %[[SIN]] {bshd = true} : (tensor<2x8x4x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[K:.*]] = mt.rotary %[[KV]], %[[COS]], %[[SIN]] {bshd = true} : (tensor<2x8x2x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x8x2x16xf32>
// CHECK-NEXT:    %[[Y:.*]], %[[LSE:.*]] = mt.attention %[[Q]], %[[K]], %[[KV]] {bshd = 15 : i64, causal = true, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT:    %[[DYB:.*]] = mt.input {name = "dy"} : tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = mt.attention_grad %[[Q]], %[[K]], %[[KV]], %[[Y]], %[[LSE]], %[[DYB]] {bshd = 31 : i64, causal = true, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
// CHECK-NEXT:    %[[DA:.*]] = mt.rotary_grad %[[DQ]], %[[COS]], %[[SIN]] {bshd = true} : (tensor<2x8x4x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[DKR:.*]] = mt.rotary_grad %[[DK]], %[[COS]], %[[SIN]] {bshd = true} : (tensor<2x8x2x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x8x2x16xf32>
// CHECK-NEXT:    mt.output %[[Y]] {name = "y"} : tensor<2x8x4x16xf32>
// CHECK-NEXT:    mt.output %[[DA]] {name = "da"} : tensor<2x8x4x16xf32>
// CHECK-NEXT:    mt.output %[[DKR]] {name = "dk"} : tensor<2x8x2x16xf32>
// CHECK-NEXT:    mt.output %[[DV]] {name = "dv"} : tensor<2x8x2x16xf32>
func.func @layer() {
  %a = mt.input {name = "a"} : tensor<2x8x4x16xf32>
  %kv = mt.input {name = "kv"} : tensor<2x8x2x16xf32>
  %cos = mt.input {name = "cos"} : tensor<1x1x8x16xf32>
  %sin = mt.input {name = "sin"} : tensor<1x1x8x16xf32>
  %qt = mt.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %q = mt.rotary %qt, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %kt = mt.transpose %kv {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x16xf32>) -> tensor<2x2x8x16xf32>
  %k = mt.rotary %kt, %cos, %sin : (tensor<2x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x2x8x16xf32>
  %y, %lse = mt.attention %q, %k, %kt {scale = 0.25 : f64, causal = true} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %yt = mt.transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  %dyb = mt.input {name = "dy"} : tensor<2x8x4x16xf32>
  %dy = mt.transpose %dyb {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %dq, %dk, %dv = mt.attention_grad %q, %k, %kt, %y, %lse, %dy {scale = 0.25 : f64, causal = true} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  %dqr = mt.rotary_grad %dq, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %da = mt.transpose %dqr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  %dkr = mt.rotary_grad %dk, %cos, %sin : (tensor<2x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x2x8x16xf32>
  %dkt = mt.transpose %dkr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x16xf32>) -> tensor<2x8x2x16xf32>
  %dvt = mt.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x16xf32>) -> tensor<2x8x2x16xf32>
  mt.output %yt {name = "y"} : tensor<2x8x4x16xf32>
  mt.output %da {name = "da"} : tensor<2x8x4x16xf32>
  mt.output %dkt {name = "dk"} : tensor<2x8x2x16xf32>
  mt.output %dvt {name = "dv"} : tensor<2x8x2x16xf32>
  return
}

// -----

// No gain, no change. y is read by its transpose (one saved) and by an
// output in [B, H, S, D] (one transpose back added). q's transpose is also
// read by an output, so it would stay. k comes from an input already
// [B, H, S, D]: moving it would add a transpose and save none.
// CHECK-LABEL: func.func @no_gain
// CHECK:         %[[A:.*]] = mt.input {name = "a"} : tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[K:.*]] = mt.input {name = "k"} : tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[QT:.*]] = mt.transpose %[[A]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = mt.attention %[[QT]], %[[K]], %[[K]] {causal = false, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT:    %[[YT:.*]] = mt.transpose %[[Y]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    mt.output %[[YT]] {name = "yt"}
// CHECK-NEXT:    mt.output %[[Y]] {name = "y"} : tensor<2x4x8x16xf32>
// CHECK-NEXT:    mt.output %[[QT]] {name = "q"} : tensor<2x4x8x16xf32>
func.func @no_gain() {
  %a = mt.input {name = "a"} : tensor<2x8x4x16xf32>
  %k = mt.input {name = "k"} : tensor<2x4x8x16xf32>
  %qt = mt.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %y, %lse = mt.attention %qt, %k, %k {scale = 0.25 : f64, causal = false} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %yt = mt.transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  mt.output %yt {name = "yt"} : tensor<2x8x4x16xf32>
  mt.output %y {name = "y"} : tensor<2x4x8x16xf32>
  mt.output %qt {name = "q"} : tensor<2x4x8x16xf32>
  return
}

// -----

// Other readers keep their layout when the group flips. q's group (its
// transpose, the rotary, attention_grad's dq, the rotary_grad and its
// transpose back) saves two transposes and adds one: the rotary writes
// [B, S, H, D] and the output that reads q gets a transpose back. k, v and dy
// come from inputs already [B, H, S, D] and stay; so does y, read by an
// output (no head transpose of it to save).
// CHECK-LABEL: func.func @other_reader
// CHECK:         %[[A:.*]] = mt.input {name = "a"} : tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[K:.*]] = mt.input {name = "k"} : tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[COS:.*]] = mt.input {name = "cos"}
// CHECK-NEXT:    %[[SIN:.*]] = mt.input {name = "sin"}
// CHECK-NEXT:    %[[Q:.*]] = mt.rotary %[[A]], %[[COS]], %[[SIN]] {bshd = true} : (tensor<2x8x4x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NEXT:    %[[BACK:.*]] = mt.transpose %[[Q]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[Y:.*]], %[[LSE:.*]] = mt.attention %[[Q]], %[[K]], %[[K]] {bshd = 1 : i64, causal = true, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT:    %[[DY:.*]] = mt.input {name = "dy"} : tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[DQ:.*]], %{{.*}}, %{{.*}} = mt.attention_grad %[[Q]], %[[K]], %[[K]], %[[Y]], %[[LSE]], %[[DY]] {bshd = 1 : i64, causal = true, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
// CHECK-NEXT:    %[[DA:.*]] = mt.rotary_grad %[[DQ]], %[[COS]], %[[SIN]] {bshd = true} : (tensor<2x8x4x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NEXT:    mt.output %[[Y]] {name = "y"} : tensor<2x4x8x16xf32>
// CHECK-NEXT:    mt.output %[[BACK]] {name = "q"} : tensor<2x4x8x16xf32>
// CHECK-NEXT:    mt.output %[[DA]] {name = "da"} : tensor<2x8x4x16xf32>
func.func @other_reader() {
  %a = mt.input {name = "a"} : tensor<2x8x4x16xf32>
  %k = mt.input {name = "k"} : tensor<2x4x8x16xf32>
  %cos = mt.input {name = "cos"} : tensor<1x1x8x16xf32>
  %sin = mt.input {name = "sin"} : tensor<1x1x8x16xf32>
  %qt = mt.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %q = mt.rotary %qt, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y, %lse = mt.attention %q, %k, %k {scale = 0.25 : f64, causal = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %dy = mt.input {name = "dy"} : tensor<2x4x8x16xf32>
  %dq, %dk, %dv = mt.attention_grad %q, %k, %k, %y, %lse, %dy {scale = 0.25 : f64, causal = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  %dqr = mt.rotary_grad %dq, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %da = mt.transpose %dqr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  mt.output %y {name = "y"} : tensor<2x4x8x16xf32>
  mt.output %q {name = "q"} : tensor<2x4x8x16xf32>
  mt.output %da {name = "da"} : tensor<2x8x4x16xf32>
  return
}
