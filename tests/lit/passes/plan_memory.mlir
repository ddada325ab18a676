// RUN: megatrain-opt %s --split-input-file --verify-diagnostics --mt-plan-memory | FileCheck %s
// RUN: megatrain-opt %s --split-input-file --verify-diagnostics --mt-plan-memory=no-reuse | FileCheck %s --check-prefix=NOREUSE

// mt-plan-memory reads only mt.step and mt.live_end, so each case states them
// by hand. Lifetimes are inclusive [def, live_end]; every value here is a
// multiple of the 256-byte alignment.

// A chain of 256-byte values: each one's bytes are free once its reader ran,
// so the chain alternates between two slots.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME:    mt.arena_size = 512
// NOREUSE-LABEL: func.func @reuse
// NOREUSE-SAME:    mt.arena_size = 1024
func.func @reuse() -> tensor<64xf32> {
  // [0, 1] -> 0 (no-reuse: 0)
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 0>
  // NOREUSE: mt.input {{.*}}mt.offset = array<i64: 0>
  %x = mt.input {name = "x", mt.step = 0 : i64, mt.live_end = array<i64: 1>} : tensor<64xf32>
  // [1, 2] -> 256, above the live %x (no-reuse: 256)
  // CHECK: mt.relu {{.*}}mt.offset = array<i64: 256>
  // NOREUSE: mt.relu {{.*}}mt.offset = array<i64: 256>
  %a = mt.relu %x {mt.step = 1 : i64, mt.live_end = array<i64: 2>} : tensor<64xf32>
  // [2, 3] -> 0: %x died at step 1 (no-reuse: 512)
  // CHECK: mt.tanh {{.*}}mt.offset = array<i64: 0>
  // NOREUSE: mt.tanh {{.*}}mt.offset = array<i64: 512>
  %b = mt.tanh %a {mt.step = 2 : i64, mt.live_end = array<i64: 3>} : tensor<64xf32>
  // [3, 4] -> 256: %a died at step 2 (no-reuse: 768)
  // CHECK: mt.sigmoid {{.*}}mt.offset = array<i64: 256>
  // NOREUSE: mt.sigmoid {{.*}}mt.offset = array<i64: 768>
  %c = mt.sigmoid %b {mt.step = 3 : i64, mt.live_end = array<i64: 4>} : tensor<64xf32>
  return {mt.step = 4 : i64} %c : tensor<64xf32>
}

// -----

// Values are placed biggest first, so the small ones fill the gaps the big
// ones leave when they die.
// CHECK-LABEL: func.func @big_first
// CHECK-SAME:    mt.arena_size = 1792
func.func @big_first() {
  // 1024 B, [0, 1] -> 0: placed first
  // CHECK: mt.fill {{.*}}mt.offset = array<i64: 0>{{.*}}tensor<256xf32>
  %w = mt.fill {value = 0.0 : f64, mt.step = 0 : i64, mt.live_end = array<i64: 1>} : tensor<256xf32>
  // 256 B, [1, 1] -> 1536: above %w and %y, which are live at step 1
  // CHECK: mt.fill {{.*}}mt.offset = array<i64: 1536>{{.*}}tensor<64xf32>
  %v = mt.fill {value = 0.0 : f64, mt.step = 1 : i64, mt.live_end = array<i64: 1>} : tensor<64xf32>
  // 512 B, [0, 4] would overlap %w -> 1024 (mt.input: live from step 0)
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 1024>{{.*}}tensor<128xf32>
  %y = mt.input {name = "y", mt.step = 2 : i64, mt.live_end = array<i64: 4>} : tensor<128xf32>
  // 256 B, [3, 4] -> 0: the gap below %y that %w left
  // CHECK: mt.fill {{.*}}mt.offset = array<i64: 0>{{.*}}tensor<64xf32>
  %z = mt.fill {value = 0.0 : f64, mt.step = 3 : i64, mt.live_end = array<i64: 4>} : tensor<64xf32>
  // 256 B, [4, 4] -> 256: the rest of that gap
  // CHECK: mt.fill {{.*}}mt.offset = array<i64: 256>{{.*}}tensor<64xf32>
  %u = mt.fill {value = 0.0 : f64, mt.step = 4 : i64, mt.live_end = array<i64: -1>} : tensor<64xf32>
  return {mt.step = 5 : i64}
}

// -----

// Inputs and constants keep their bytes to themselves. The runtime writes an
// input before step 0, so %y lives from step 0 although defined at step 3;
// a constant is written once at start and never dies, though nothing reads
// %c after step 1. Without those rules %b would reuse %c's bytes (0) and %a
// would reuse %y's.
// CHECK-LABEL: func.func @inputs_and_constants
// CHECK-SAME:    mt.arena_size = 1024
// NOREUSE-LABEL: func.func @inputs_and_constants
// NOREUSE-SAME:    mt.arena_size = 1280
func.func @inputs_and_constants() -> tensor<64xf32> {
  // [0, forever] -> 0
  // CHECK: mt.constant {{.*}}mt.offset = array<i64: 0>
  %c = mt.constant {value = dense<1.0> : tensor<64xf32>, mt.step = 0 : i64, mt.live_end = array<i64: 1>} : tensor<64xf32>
  // [1, 2] -> 512
  // CHECK: mt.relu {{.*}}mt.offset = array<i64: 512>
  %a = mt.relu %c {mt.step = 1 : i64, mt.live_end = array<i64: 2>} : tensor<64xf32>
  // [2, 4] -> 768
  // CHECK: mt.tanh {{.*}}mt.offset = array<i64: 768>
  %b = mt.tanh %a {mt.step = 2 : i64, mt.live_end = array<i64: 4>} : tensor<64xf32>
  // [0, 4] -> 256
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 256>
  %y = mt.input {name = "y", mt.step = 3 : i64, mt.live_end = array<i64: 4>} : tensor<64xf32>
  // [4, 5] -> 512, where %a was: the one free slot
  // CHECK: mt.add {{.*}}mt.offset = array<i64: 512>
  %d = mt.add %b, %y {mt.step = 4 : i64, mt.live_end = array<i64: 5>} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return {mt.step = 5 : i64} %d : tensor<64xf32>
}

// -----

// Several results get one offset each; a result nobody reads (live_end -1)
// still takes bytes at its def step.
// CHECK-LABEL: func.func @results
// CHECK-SAME:    mt.arena_size = 1280
func.func @results() {
  // [0, 2] -> 0 and 256
  %x = mt.input {name = "x", mt.step = 0 : i64, mt.live_end = array<i64: 2>} : tensor<64xf32>
  %g = mt.input {name = "g", mt.step = 1 : i64, mt.live_end = array<i64: 2>} : tensor<64xf32>
  // dx [2, 3], dscale [2, 3], dbias [2, 2]: all live with %x and %g
  // CHECK: mt.layer_norm_grad {{.*}}mt.offset = array<i64: 512, 768, 1024>
  %dx, %dg, %db = mt.layer_norm_grad %x, %g, %x {axis = 0 : i64, epsilon = 1.0e-5 : f64, mt.step = 2 : i64, mt.live_end = array<i64: 3, 3, -1>} : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
  // [3, 3] -> 0: the tightest gap once %x, %g and dbias are dead
  // CHECK: mt.add {{.*}}mt.offset = array<i64: 0>
  %s = mt.add %dx, %dg {mt.step = 3 : i64, mt.live_end = array<i64: -1>} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return {mt.step = 4 : i64}
}

// -----

// Sizes are whole bytes, at least one: an empty tensor still has an address.
// CHECK-LABEL: func.func @odd_sizes
// CHECK-SAME:    mt.arena_size = 1024
func.func @odd_sizes() {
  // 0 bytes -> 1 -> one 256-byte unit, at 512
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 512>{{.*}}tensor<0xf32>
  %e = mt.input {name = "e", mt.step = 0 : i64, mt.live_end = array<i64: 3>} : tensor<0xf32>
  // 3 x i1 = 3 bytes -> one unit, at 768
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 768>{{.*}}tensor<3xi1>
  %m = mt.input {name = "m", mt.step = 1 : i64, mt.live_end = array<i64: 3>} : tensor<3xi1>
  // 65 x f32 = 260 bytes -> two units; the biggest, so placed first, at 0
  // CHECK: mt.input {{.*}}mt.offset = array<i64: 0>{{.*}}tensor<65xf32>
  %k = mt.input {name = "k", mt.step = 2 : i64, mt.live_end = array<i64: 3>} : tensor<65xf32>
  return {mt.step = 3 : i64}
}

// -----

func.func @unplanned() {
  // expected-error @+1 {{op has no mt.step / mt.live_end; run mt-schedule and mt-liveness before mt-plan-memory}}
  %x = mt.input {name = "x", mt.step = 0 : i64} : tensor<4xf32>
  return {mt.step = 1 : i64}
}
