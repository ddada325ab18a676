// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-adamw="lr=0.5 beta1=0.8 beta2=0.99 eps=1e-6 weight-decay=0.1" | FileCheck %s
// RUN: megatrain-opt %s --split-input-file --mt-adamw | FileCheck %s --check-prefix=DEFAULT
// RUN: not megatrain-opt %s --split-input-file --mt-adamw="beta2=1.0" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: invalid mt-adamw option beta2=1 (lr, eps and weight-decay must be >= 0, betas in [0, 1))

// Every param_grad becomes an adamw on the same gradient and parameter, with
// the pass options as hyper-parameters.
// CHECK-LABEL: func.func @two_params
// CHECK:         %[[G1:.*]] = mt.fill {value = 1.0
// CHECK:         %[[G2:.*]] = mt.fill {value = 2.0
// CHECK-NOT:     mt.param_grad
// CHECK:         mt.adamw %[[G1]] {beta1 = 8.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, eps = 9.9999999999999995E-7 : f64, lr = 5.000000e-01 : f64, param = "a", weight_decay = 1.000000e-01 : f64} : tensor<4xf32>
// CHECK-NEXT:    mt.adamw %[[G2]] {{{.*}}param = "b"{{.*}}} : tensor<2x3xf32>
// CHECK-NOT:     mt.param_grad
// DEFAULT-LABEL: func.func @two_params
// DEFAULT:         mt.adamw %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, param = "a", weight_decay = 1.000000e-02 : f64}
func.func @two_params() {
  %g1 = mt.fill {value = 1.0 : f64} : tensor<4xf32>
  %g2 = mt.fill {value = 2.0 : f64} : tensor<2x3xf32>
  mt.param_grad %g1 {param = "a"} : tensor<4xf32>
  mt.param_grad %g2 {param = "b"} : tensor<2x3xf32>
  return
}
