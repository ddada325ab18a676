// TinyPlans.h - small hand-built training plans (and their ONNX weights) for executor and tool tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "TestUtil.h"

namespace megatrain::runtime::testing {

// loss = reduce_mean(y * y) with y = x @ W; x [4, 3] INPUT, W [3, 2]
// PARAMETER. The backward is written out by hand from docs/ops.md kernels:
// dy = 2 * (broadcast(1) / 8) * y, dW = x^T dy; then grad copy, AdamW, and
// READ_LOSS of the forward loss. Streams h2d/compute/d2h/host, with the events
// that order them (the plan passes the schedule verifier).
// With keepOutput, a last step copies y into the OUTPUT_READOUT `output:y`.
plan::Plan linearPlan(plan::DType dtype, bool keepOutput = false);

// A tied-embedding next-token model: E [5, 3] PARAMETER, tokens [2, 4] INPUT
// (header.token_input), h = gather(E, tokens), logits = h @ E^T,
// loss = next_token_ce(logits, tokens). dE = sum_b dlogits^T h + gather_grad(dh).
plan::Plan tokenPlan(plan::DType dtype);

// The forward and loss of tokenPlan as an evaluation plan (header.evaluation,
// format minor 6): E [5, 3] PARAMETER of `dtype`, tokens [batch, 4] INPUT,
// no gradients or updates.
plan::Plan tokenEvalPlan(plan::DType dtype, int64_t batch);

// Writes an ONNX model whose graph holds the given initializers (float_data
// for F32 tensors, double_data for F64).
void writeModel(const std::string& path, const std::map<std::string, HostTensor>& initializers);

// Serializes a plan to a file.
void writePlan(const std::string& path, const plan::Plan& plan);

}  // namespace megatrain::runtime::testing
