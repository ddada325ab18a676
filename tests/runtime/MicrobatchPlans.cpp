// MicrobatchPlans.cpp - hand-built plans with micro-batch gradient parts (ACCUMULATE).
#include "MicrobatchPlans.h"

#include "TestUtil.h"
#include "megatrain/plan/FormatVersion.h"

namespace megatrain::runtime::testing {

plan::Plan accumulatePlan(plan::DType dtype, bool warWait) {
  PlanBuilder b;
  b.plan().mutable_header()->set_source_model("linear.onnx");
  b.plan().mutable_header()->set_format_minor(kPlanMinorTiering);  // ACCUMULATE
  const uint32_t w = b.tensor("W", {3, 2}, dtype, plan::PARAMETER);
  const uint32_t gradW = b.tensor("grad:W", {3, 2}, dtype, plan::GRADIENT);
  const uint32_t partW = b.tensor("grad_part:W", {3, 2}, dtype, plan::GRADIENT);
  const uint32_t m = b.tensor("adam_m:W", {3, 2}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t v = b.tensor("adam_v:W", {3, 2}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t readout = b.tensor("loss_readout", {}, dtype, plan::LOSS_READOUT);
  const uint32_t devW = b.tensor("dev:W", {3, 2}, dtype, plan::PARAMETER_COPY);
  const uint32_t x = b.tensor("x", {4, 3}, dtype, plan::INPUT);
  const uint32_t g0 = b.tensor("g0", {3, 2}, dtype, plan::INPUT);
  const uint32_t g1 = b.tensor("g1", {3, 2}, dtype, plan::INPUT);
  const uint32_t g2 = b.tensor("g2", {3, 2}, dtype, plan::INPUT);
  const uint32_t y = b.tensor("y", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t sq = b.tensor("sq", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, dtype, plan::LOSS);
  auto accumulateStep = [&](uint32_t acc, uint32_t addend) {
    plan::Step* step = b.plan().add_steps();
    step->set_index(static_cast<uint32_t>(b.plan().steps_size() - 1));
    step->set_stream("host");
    step->mutable_host_task()->set_kind(plan::HostTask::ACCUMULATE);
    step->mutable_host_task()->add_tensors(acc);
    step->mutable_host_task()->add_tensors(addend);
  };

  b.copy(w, devW, "h2d");                                                    // 0
  b.record("w_ready", "h2d");                                                // 1
  b.wait("w_ready", "compute");                                              // 2
  b.kernel("matmul", {x, devW}, {y});                                        // 3
  b.kernel("mul", {y, y}, {sq});                                             // 4
  b.kernel("reduce_mean", {sq}, {loss}, {intsAttr("axes", {0, 1}), intAttr("keepdims", 0)});  // 5
  b.readLossThroughD2h(loss, readout);                                       // 6-11
  b.copy(g0, gradW, "d2h");                                                  // 12
  b.copy(g1, partW, "d2h");                                                  // 13
  b.record("part1", "d2h");                                                  // 14
  b.wait("part1", "host");                                                   // 15
  accumulateStep(gradW, partW);                                                // 16
  if (warWait) {
    b.record("added1", "host");                                              // 17
    b.wait("added1", "d2h");                                                 // 18
  }
  b.copy(g2, partW, "d2h");
  b.record("part2", "d2h");
  b.wait("part2", "host");
  accumulateStep(gradW, partW);
  b.adamw(w, gradW, m, v);
  return b.build();
}

}  // namespace megatrain::runtime::testing
