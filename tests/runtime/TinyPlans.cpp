// TinyPlans.cpp - small hand-built training plans (and their ONNX weights) for executor and tool tests.
#include "TinyPlans.h"

#include <fstream>

#include "megatrain/plan/Error.h"
#include "onnx/onnx.pb.h"

namespace megatrain::runtime::testing {

plan::Plan linearPlan(plan::DType dtype, bool keepOutput) {
  PlanBuilder b;
  b.plan().mutable_header()->set_source_model("linear.onnx");
  const uint32_t w = b.tensor("W", {3, 2}, dtype, plan::PARAMETER);
  const uint32_t gradW = b.tensor("grad:W", {3, 2}, dtype, plan::GRADIENT);
  const uint32_t m = b.tensor("adam_m:W", {3, 2}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t v = b.tensor("adam_v:W", {3, 2}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t readout = b.tensor("loss_readout", {}, dtype, plan::LOSS_READOUT);
  const uint32_t devW = b.tensor("dev:W", {3, 2}, dtype, plan::PARAMETER_COPY);
  const uint32_t x = b.tensor("x", {4, 3}, dtype, plan::INPUT);
  const uint32_t y = b.tensor("y", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t sq = b.tensor("sq", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, dtype, plan::LOSS);
  const uint32_t dloss = b.tensor("dloss", {}, dtype, plan::ACTIVATION);
  const uint32_t dsq = b.tensor("dsq", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t dsqMean = b.tensor("dsq_mean", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t dyHalf = b.tensor("dy_half", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t dy = b.tensor("dy", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t dW = b.tensor("dW", {3, 2}, dtype, plan::ACTIVATION);

  b.copy(w, devW, "h2d");                                                    // 0
  b.record("w_ready", "h2d");                                                // 1
  b.wait("w_ready", "compute");                                              // 2
  b.kernel("matmul", {x, devW}, {y});                                        // 3
  b.kernel("mul", {y, y}, {sq});                                             // 4
  b.kernel("reduce_mean", {sq}, {loss}, {intsAttr("axes", {0, 1}), intAttr("keepdims", 0)});  // 5
  b.readLossThroughD2h(loss, readout);                                       // 6-11
  b.kernel("fill", {}, {dloss}, {floatAttr("value", 1.0)});                  // 12
  b.kernel("broadcast_to", {dloss}, {dsq});                                  // 13
  b.kernel("scale", {dsq}, {dsqMean}, {floatAttr("alpha", 1.0 / 8)});        // 14
  b.kernel("mul", {dsqMean, y}, {dyHalf});                                   // 15: d(y*y) = 2 y
  b.kernel("scale", {dyHalf}, {dy}, {floatAttr("alpha", 2.0)});              // 16
  b.kernel("matmul", {x, dy}, {dW}, {intAttr("transpose_a", 1)});            // 17
  b.record("dw_ready", "compute");                                           // 18
  b.wait("dw_ready", "d2h");                                                 // 19
  b.copy(dW, gradW, "d2h");                                                  // 20
  b.record("grad_ready", "d2h");                                             // 21
  b.wait("grad_ready", "host");                                              // 22
  b.adamw(w, gradW, m, v);                                                   // 23
  if (keepOutput) {
    // Last, so y must stay alive (unpoisoned) through the whole step; d2h
    // already waited (dw_ready) for the compute step that wrote it.
    b.copy(y, b.tensor("output:y", {4, 2}, dtype, plan::OUTPUT_READOUT), "d2h");  // 24
    b.plan().mutable_header()->set_format_minor(1);
  }
  return b.build();
}

plan::Plan tokenPlan(plan::DType dtype) {
  PlanBuilder b;
  b.plan().mutable_header()->set_source_model("tokens.onnx");
  b.plan().mutable_header()->set_token_input("tokens");
  b.plan().mutable_header()->set_tokens_per_step(8);
  const uint32_t e = b.tensor("E", {5, 3}, dtype, plan::PARAMETER);
  const uint32_t gradE = b.tensor("grad:E", {5, 3}, dtype, plan::GRADIENT);
  const uint32_t m = b.tensor("adam_m:E", {5, 3}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t v = b.tensor("adam_v:E", {5, 3}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t readout = b.tensor("loss_readout", {}, dtype, plan::LOSS_READOUT);
  const uint32_t devE = b.tensor("dev:E", {5, 3}, dtype, plan::PARAMETER_COPY);
  const uint32_t tokens = b.tensor("tokens", {2, 4}, plan::I64, plan::INPUT);
  const uint32_t h = b.tensor("h", {2, 4, 3}, dtype, plan::ACTIVATION);
  const uint32_t logits = b.tensor("logits", {2, 4, 5}, dtype, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, dtype, plan::LOSS);
  const uint32_t dloss = b.tensor("dloss", {}, dtype, plan::ACTIVATION);
  const uint32_t dlogits = b.tensor("dlogits", {2, 4, 5}, dtype, plan::ACTIVATION);
  const uint32_t dEBatched = b.tensor("dE_batched", {2, 5, 3}, dtype, plan::ACTIVATION);
  const uint32_t dEOut = b.tensor("dE_out", {5, 3}, dtype, plan::ACTIVATION);
  const uint32_t dh = b.tensor("dh", {2, 4, 3}, dtype, plan::ACTIVATION);
  const uint32_t dEIn = b.tensor("dE_in", {5, 3}, dtype, plan::ACTIVATION);
  const uint32_t dE = b.tensor("dE", {5, 3}, dtype, plan::ACTIVATION);

  const auto axis0 = intAttr("axis", 0);
  b.copy(e, devE, "h2d");
  b.record("e_ready", "h2d");
  b.wait("e_ready", "compute");
  b.kernel("gather", {devE, tokens}, {h}, {axis0});
  b.kernel("matmul", {h, devE}, {logits}, {intAttr("transpose_b", 1)});
  b.kernel("next_token_ce", {logits, tokens}, {loss}, {intAttr("ignore_index", -100)});
  b.readLossThroughD2h(loss, readout);
  b.kernel("fill", {}, {dloss}, {floatAttr("value", 1.0)});
  b.kernel("next_token_ce_grad", {logits, tokens, dloss}, {dlogits}, {intAttr("ignore_index", -100)});
  // logits = h E^T: dE += sum_b dlogits[b]^T h[b], dh = dlogits E.
  b.kernel("matmul", {dlogits, h}, {dEBatched}, {intAttr("transpose_a", 1)});
  b.kernel("reduce_sum", {dEBatched}, {dEOut}, {intsAttr("axes", {0}), intAttr("keepdims", 0)});
  b.kernel("matmul", {dlogits, devE}, {dh});
  b.kernel("gather_grad", {tokens, dh}, {dEIn}, {axis0});
  b.kernel("add", {dEOut, dEIn}, {dE});
  b.record("de_ready", "compute");
  b.wait("de_ready", "d2h");
  b.copy(dE, gradE, "d2h");
  b.record("grad_ready", "d2h");
  b.wait("grad_ready", "host");
  b.adamw(e, gradE, m, v);
  return b.build();
}

plan::Plan tokenEvalPlan(plan::DType parameterDType, int64_t batch) {
  PlanBuilder b;
  plan::Header& header = *b.plan().mutable_header();
  header.set_source_model("tokens.onnx");
  header.set_token_input("tokens");
  header.set_tokens_per_step(static_cast<uint64_t>(batch) * 4);
  header.set_evaluation(true);
  header.set_format_minor(6);
  const plan::DType dtype = parameterDType;
  const uint32_t e = b.tensor("E", {5, 3}, dtype, plan::PARAMETER);
  // Trainable, as the compiler emits it: the verifier then checks that no
  // ADAMW updates it.
  b.plan().mutable_tensors(static_cast<int>(e))->set_trainable(true);
  const uint32_t readout = b.tensor("loss_readout", {}, dtype, plan::LOSS_READOUT);
  const uint32_t devE = b.tensor("dev:E", {5, 3}, dtype, plan::PARAMETER_COPY);
  const uint32_t tokens = b.tensor("tokens", {batch, 4}, plan::I64, plan::INPUT);
  const uint32_t h = b.tensor("h", {batch, 4, 3}, dtype, plan::ACTIVATION);
  const uint32_t logits = b.tensor("logits", {batch, 4, 5}, dtype, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, dtype, plan::LOSS);
  b.copy(e, devE, "h2d");
  b.record("e_ready", "h2d");
  b.wait("e_ready", "compute");
  b.kernel("gather", {devE, tokens}, {h}, {intAttr("axis", 0)});
  b.kernel("matmul", {h, devE}, {logits}, {intAttr("transpose_b", 1)});
  b.kernel("next_token_ce", {logits, tokens}, {loss}, {intAttr("ignore_index", -100)});
  b.readLossThroughD2h(loss, readout);
  return b.build();
}

void writeModel(const std::string& path, const std::map<std::string, HostTensor>& initializers) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("test");
  for (const auto& [name, tensor] : initializers) {
    onnx::TensorProto* init = graph->add_initializer();
    init->set_name(name);
    for (int64_t d : tensor.shape) init->add_dims(d);
    if (tensor.dtype == plan::F64) {
      init->set_data_type(onnx::TensorProto::DOUBLE);
      for (double v : tensor.values) init->add_double_data(v);
    } else {
      init->set_data_type(onnx::TensorProto::FLOAT);
      for (double v : tensor.values) init->add_float_data(static_cast<float>(v));
    }
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!model.SerializeToOstream(&out)) throw Error(path + ": cannot write model");
}

void writePlan(const std::string& path, const plan::Plan& plan) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!plan.SerializeToOstream(&out)) throw Error(path + ": cannot write plan");
}

}  // namespace megatrain::runtime::testing
