// RUN: megatrain-opt %s --split-input-file --verify-diagnostics --mt-plan-memory | FileCheck %s

// A view (mt.alias, mt-view-aliases) takes no bytes: it gets its base's
// offset, and the base keeps its bytes until the view's last use.
// CHECK-LABEL: func.func @view
// CHECK-SAME:    mt.arena_size = 768
func.func @view() -> (tensor<8x8xf32>, tensor<64xf32>) {
  // [0, 3] -> 0
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 0>
  %x = mt.input {name = "x", mt.step = 0 : i64, mt.live_end = array<i64: 3>} : tensor<64xf32>
  // [1, 2] alone, [1, 4] with its view -> 256
  // CHECK: mt.relu {{.*}}mt.offset = array<i64: 256>
  %a = mt.relu %x {mt.step = 1 : i64, mt.live_end = array<i64: 2>} : tensor<64xf32>
  // the base's bytes
  // CHECK: mt.reshape {{.*}}mt.offset = array<i64: 256>
  %v = mt.reshape %a {mt.alias, mt.step = 2 : i64, mt.live_end = array<i64: 4>} : (tensor<64xf32>) -> tensor<8x8xf32>
  // [3, 4]: %x is live at step 3, and %a's bytes hold %v until step 4 (without
  // the union they would be free after step 2) -> 512
  // CHECK: mt.tanh {{.*}}mt.offset = array<i64: 512>
  %c = mt.tanh %x {mt.step = 3 : i64, mt.live_end = array<i64: 4>} : tensor<64xf32>
  return {mt.step = 4 : i64} %v, %c : tensor<8x8xf32>, tensor<64xf32>
}

// -----

// A view of a view has the first base's bytes, which live until the last
// view's use.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    mt.arena_size = 512
func.func @chain() -> tensor<64xf32> {
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 0>
  %x = mt.input {name = "x", mt.step = 0 : i64, mt.live_end = array<i64: 1>} : tensor<64xf32>
  // CHECK: mt.reshape {{.*}}mt.offset = array<i64: 0>
  %a = mt.reshape %x {mt.alias, mt.step = 1 : i64, mt.live_end = array<i64: 2>} : (tensor<64xf32>) -> tensor<8x8xf32>
  // CHECK: mt.reshape {{.*}}mt.offset = array<i64: 0>
  %b = mt.reshape %a {mt.alias, mt.step = 2 : i64, mt.live_end = array<i64: 3>} : (tensor<8x8xf32>) -> tensor<2x32xf32>
  // [3, 4]: %x's bytes hold %b at step 3 -> 256
  // CHECK: mt.relu {{.*}}mt.offset = array<i64: 256>
  %c = mt.relu %b {mt.step = 3 : i64, mt.live_end = array<i64: 4>} : tensor<2x32xf32>
  %d = mt.reshape %c {mt.step = 4 : i64, mt.live_end = array<i64: 5>} : (tensor<2x32xf32>) -> tensor<64xf32>
  return {mt.step = 5 : i64} %d : tensor<64xf32>
}

// -----

// A view's base must be a value mt-plan-memory places: a function argument
// has no bytes in the arena.
func.func @view_of_argument(%a: tensor<4x8xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{mt.alias on a result whose base is no device value of its size}}
  %v = mt.reshape %a {mt.alias, mt.step = 0 : i64, mt.live_end = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<32xf32>
  return {mt.step = 1 : i64} %v : tensor<32xf32>
}

// -----

// Best fit is not monotone: with both views of %a kept, the step needs 1280
// bytes, though mt-tier fitted its 1024-byte budget with every view a copy.
// Stage 3b keeps the views that fit, those that lengthen their base's life
// least first: %v1 (ends with %a) stays a view, %v3 (one step past it) becomes
// a copy again, and the arena is 1024 bytes.
// CHECK-LABEL: func.func @views_that_fit
// CHECK-SAME:    mt.arena_size = 1024
func.func @views_that_fit() attributes {mt.device_budget = 1024 : i64} {
  // CHECK: mt.fill {{.*}}mt.offset = array<i64: [[A:[0-9]+]]>{{.*}}tensor<64xf32>
  %a = mt.fill {value = 0.0 : f64, mt.step = 0 : i64, mt.live_end = array<i64: 3>} : tensor<64xf32>
  // CHECK: mt.reshape {{.*}}mt.alias{{.*}}mt.offset = array<i64: [[A]]>
  %v1 = mt.reshape %a {mt.alias, mt.step = 1 : i64, mt.live_end = array<i64: 3>} : (tensor<64xf32>) -> tensor<8x8xf32>
  %b = mt.fill {value = 0.0 : f64, mt.step = 2 : i64, mt.live_end = array<i64: 5>} : tensor<64xf32>
  // CHECK: mt.reshape
  // CHECK-NOT: mt.alias
  // CHECK-SAME: mt.step = 3
  %v3 = mt.reshape %a {mt.alias, mt.step = 3 : i64, mt.live_end = array<i64: 4>} : (tensor<64xf32>) -> tensor<8x8xf32>
  %c = mt.fill {value = 0.0 : f64, mt.step = 4 : i64, mt.live_end = array<i64: 4>} : tensor<128xf32>
  %d = mt.fill {value = 0.0 : f64, mt.step = 5 : i64, mt.live_end = array<i64: 6>} : tensor<64xf32>
  %e = mt.fill {value = 0.0 : f64, mt.step = 6 : i64, mt.live_end = array<i64: 7>} : tensor<192xf32>
  return {mt.step = 7 : i64}
}
