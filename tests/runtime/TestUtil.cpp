// TestUtil.cpp - helpers for the runtime tests: host tensors, a one-kernel harness, a plan builder.
#include "TestUtil.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {

plan::Attribute intAttr(const std::string& name, int64_t value) {
  plan::Attribute a;
  a.set_name(name);
  a.set_i(value);
  return a;
}

plan::Attribute floatAttr(const std::string& name, double value) {
  plan::Attribute a;
  a.set_name(name);
  a.set_f(value);
  return a;
}

plan::Attribute intsAttr(const std::string& name, const std::vector<int64_t>& values) {
  plan::Attribute a;
  a.set_name(name);
  plan::IntList* list = a.mutable_ints();  // set even when empty
  for (int64_t v : values) list->add_values(v);
  return a;
}

plan::Attribute floatsAttr(const std::string& name, const std::vector<double>& values) {
  plan::Attribute a;
  a.set_name(name);
  plan::FloatList* list = a.mutable_floats();  // set even when empty: a program without constants
  for (double v : values) list->add_values(v);
  return a;
}

plan::Attribute stringAttr(const std::string& name, const std::string& value) {
  plan::Attribute a;
  a.set_name(name);
  a.set_s(value);
  return a;
}

int64_t HostTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor randomTensor(const std::vector<int64_t>& shape, plan::DType dtype, std::mt19937& rng,
                        double lo, double hi) {
  HostTensor t{shape, dtype, {}};
  std::uniform_real_distribution<double> dist(lo, hi);
  t.values.resize(static_cast<size_t>(t.elements()));
  for (double& v : t.values) {
    v = dist(rng);
    if (dtype == plan::F32) v = static_cast<float>(v);
    if (dtype == plan::BF16) v = bf16ToFloat(floatToBf16(static_cast<float>(v)));
  }
  return t;
}

HostTensor intTensor(const std::vector<int64_t>& shape, const std::vector<int64_t>& values) {
  HostTensor t{shape, plan::I64, {}};
  for (int64_t v : values) t.values.push_back(static_cast<double>(v));
  return t;
}

double tolerance(plan::DType dtype) { return dtype == plan::F32 ? 2e-5 : 1e-12; }

void expectAllNear(const std::vector<double>& actual, const std::vector<double>& expected,
                   double tol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tol * (1 + std::abs(expected[i]))) << "at element " << i;
}

void expectSameBits(const std::vector<double>& actual, const std::vector<double>& expected,
                    const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(double)), 0)
        << what << ": element " << i << " is " << actual[i] << ", expected " << expected[i];
}

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

namespace {

size_t sizeOf(plan::DType dtype) {
  if (dtype == plan::BOOL) return 1;
  if (dtype == plan::BF16) return 2;
  return dtype == plan::F32 || dtype == plan::I32 ? 4 : 8;
}

void store(std::byte* p, const HostTensor& t) {
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double v = t.values[i];
    switch (t.dtype) {
      case plan::F32: { float f = static_cast<float>(v); std::memcpy(p + 4 * i, &f, 4); break; }
      case plan::F64: std::memcpy(p + 8 * i, &v, 8); break;
      case plan::I64: { int64_t n = static_cast<int64_t>(v); std::memcpy(p + 8 * i, &n, 8); break; }
      case plan::I32: { int32_t n = static_cast<int32_t>(v); std::memcpy(p + 4 * i, &n, 4); break; }
      case plan::BOOL: p[i] = std::byte{v != 0 ? uint8_t{1} : uint8_t{0}}; break;
      case plan::BF16: { uint16_t b = floatToBf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &b, 2); break; }
      default: break;
    }
  }
}

void load(const std::byte* p, HostTensor& t) {
  t.values.resize(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < t.values.size(); ++i) {
    switch (t.dtype) {
      case plan::F32: { float f; std::memcpy(&f, p + 4 * i, 4); t.values[i] = f; break; }
      case plan::F64: std::memcpy(&t.values[i], p + 8 * i, 8); break;
      case plan::I64: { int64_t n; std::memcpy(&n, p + 8 * i, 8); t.values[i] = static_cast<double>(n); break; }
      case plan::I32: { int32_t n; std::memcpy(&n, p + 4 * i, 4); t.values[i] = n; break; }
      case plan::BOOL: t.values[i] = static_cast<double>(std::to_integer<uint8_t>(p[i])); break;
      case plan::BF16: { uint16_t b; std::memcpy(&b, p + 2 * i, 2); t.values[i] = bf16ToFloat(b); break; }
      default: break;
    }
  }
}

// A plan holding only the kernel's operands and the one kernel step.
plan::Plan kernelPlan(const std::string& kernel, const std::vector<HostTensor>& inputs,
                      const std::vector<OutputSpec>& outputs,
                      const std::vector<plan::Attribute>& attributes) {
  PlanBuilder builder;
  std::vector<uint32_t> in, out;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(builder.tensor("in" + std::to_string(i), inputs[i].shape, inputs[i].dtype,
                                plan::ACTIVATION));
  for (size_t i = 0; i < outputs.size(); ++i)
    out.push_back(builder.tensor("out" + std::to_string(i), outputs[i].first, outputs[i].second,
                                 plan::ACTIVATION));
  builder.kernel(kernel, in, out, attributes);
  return builder.build();
}

}  // namespace

std::vector<HostTensor> runKernel(const std::string& kernel, const std::vector<HostTensor>& inputs,
                                  const std::vector<OutputSpec>& outputs,
                                  const std::vector<plan::Attribute>& attributes) {
  const plan::Plan plan = kernelPlan(kernel, inputs, outputs, attributes);
  CpuBackend backend;
  backend.prepare(plan);
  for (size_t i = 0; i < inputs.size(); ++i)
    store(backend.data(plan.tensors(static_cast<int>(i))), inputs[i]);
  backend.launchKernel(0);
  std::vector<HostTensor> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    HostTensor t{outputs[i].first, outputs[i].second, {}};
    load(backend.data(plan.tensors(static_cast<int>(inputs.size() + i))), t);
    results.push_back(std::move(t));
  }
  return results;
}

std::string kernelError(const std::string& kernel, const std::vector<HostTensor>& inputs,
                        const std::vector<OutputSpec>& outputs,
                        const std::vector<plan::Attribute>& attributes) {
  try {
    runKernel(kernel, inputs, outputs, attributes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

PlanBuilder::PlanBuilder() {
  plan_.set_magic(kPlanMagic);
  plan_.mutable_header()->set_format_major(kPlanFormatMajor);
  plan_.mutable_header()->set_format_minor(0);
  plan_.mutable_header()->set_generator("megatrain tests");
  plan::AdamW* adamw = plan_.mutable_header()->mutable_optimizer();
  adamw->set_lr(1e-2);
  adamw->set_beta1(0.9);
  adamw->set_beta2(0.999);
  adamw->set_eps(1e-8);
  adamw->set_weight_decay(0.1);
  const char* names[2] = {"device", "host"};
  const plan::Tier tiers[2] = {plan::DEVICE, plan::HOST_PINNED};
  for (int i = 0; i < 2; ++i) {
    plan::Pool* pool = plan_.add_pools();
    pool->set_id(static_cast<uint32_t>(i));
    pool->set_name(names[i]);
    pool->set_tier(tiers[i]);
  }
  for (const char* stream : {"compute", "h2d", "d2h", "host"}) plan_.add_streams(stream);
}

uint32_t PlanBuilder::tensor(const std::string& name, const std::vector<int64_t>& shape,
                             plan::DType dtype, plan::Role role) {
  plan::Tensor* t = plan_.add_tensors();
  t->set_id(static_cast<uint32_t>(plan_.tensors_size() - 1));
  t->set_name(name);
  for (int64_t d : shape) t->add_shape(d);
  t->set_dtype(dtype);
  t->set_role(role);
  t->set_last_use_step(-1);
  const bool host = role == plan::PARAMETER || role == plan::GRADIENT ||
                    role == plan::OPTIMIZER_STATE || role == plan::LOSS_READOUT ||
                    role == plan::OUTPUT_READOUT || role == plan::PARAMETER_COMPUTE;
  const uint32_t pool = host ? 1 : 0;
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  const uint64_t size = static_cast<uint64_t>(elements) * sizeOf(dtype);
  t->mutable_buffer()->set_pool(pool);
  t->mutable_buffer()->set_offset(used_[pool]);
  t->mutable_buffer()->set_size_bytes(size);
  used_[pool] += (size + 63) / 64 * 64;
  if (role == plan::PARAMETER) t->set_source(name);  // trainable once an ADAMW updates it
  if (role == plan::INPUT) t->set_source(name);
  if (role == plan::LOSS_READOUT) plan_.mutable_header()->set_loss_tensor(t->id());
  return t->id();
}

plan::Step& PlanBuilder::addStep(const std::string& stream) {
  plan::Step* step = plan_.add_steps();
  step->set_index(static_cast<uint32_t>(plan_.steps_size() - 1));
  step->set_stream(stream);
  return *step;
}

uint32_t PlanBuilder::kernel(const std::string& name, const std::vector<uint32_t>& inputs,
                             const std::vector<uint32_t>& outputs,
                             const std::vector<plan::Attribute>& attributes) {
  plan::Step& step = addStep("compute");
  plan::Kernel* k = step.mutable_kernel();
  k->set_kernel(name);
  for (uint32_t id : inputs) k->add_inputs(id);
  for (uint32_t id : outputs) k->add_outputs(id);
  for (const plan::Attribute& a : attributes) *k->add_attributes() = a;
  return step.index();
}

uint32_t PlanBuilder::copy(uint32_t src, uint32_t dst, const std::string& stream) {
  plan::Step& step = addStep(stream);
  step.mutable_copy()->set_src(src);
  step.mutable_copy()->set_dst(dst);
  return step.index();
}

uint32_t PlanBuilder::record(const std::string& event, const std::string& stream) {
  plan::Step& step = addStep(stream);
  step.mutable_record()->set_event(event);
  return step.index();
}

uint32_t PlanBuilder::wait(const std::string& event, const std::string& stream) {
  plan::Step& step = addStep(stream);
  step.mutable_wait()->set_event(event);
  return step.index();
}

uint32_t PlanBuilder::adamw(uint32_t param, uint32_t grad, uint32_t m, uint32_t v) {
  plan::Step& step = addStep("host");
  step.mutable_host_task()->set_kind(plan::HostTask::ADAMW);
  for (uint32_t id : {param, grad, m, v}) step.mutable_host_task()->add_tensors(id);
  plan_.mutable_tensors(static_cast<int>(param))->set_trainable(true);
  return step.index();
}

uint32_t PlanBuilder::readLoss(uint32_t readout) {
  plan::Step& step = addStep("host");
  step.mutable_host_task()->set_kind(plan::HostTask::READ_LOSS);
  step.mutable_host_task()->add_tensors(readout);
  return step.index();
}

uint32_t PlanBuilder::readLossThroughD2h(uint32_t loss, uint32_t readout) {
  record("loss_ready", "compute");
  wait("loss_ready", "d2h");
  copy(loss, readout, "d2h");
  record("readout_ready", "d2h");
  wait("readout_ready", "host");
  return readLoss(readout);
}

plan::Plan PlanBuilder::build() {
  std::vector<int64_t> last(static_cast<size_t>(plan_.tensors_size()), -1);
  for (const plan::Step& step : plan_.steps()) {
    auto touch = [&](uint32_t id) { last[id] = step.index(); };
    if (step.has_kernel()) {
      for (uint32_t id : step.kernel().inputs()) touch(id);
      for (uint32_t id : step.kernel().outputs()) touch(id);
    } else if (step.has_copy()) {
      touch(step.copy().src());
      touch(step.copy().dst());
    }
  }
  for (plan::Tensor& t : *plan_.mutable_tensors())
    if (t.buffer().pool() == 0 && t.role() != plan::CONSTANT) t.set_last_use_step(last[t.id()]);
  for (int i = 0; i < 2; ++i) plan_.mutable_pools(i)->set_size_bytes(used_[i]);
  return plan_;
}

namespace {

// The directories makeTempDir created, removed with everything in them when the test
// binary exits, so that a run of the suite leaves the temp dir as it found it.
class TempDirs {
 public:
  ~TempDirs() {
    for (const std::string& dir : dirs_) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }
  void add(std::string dir) { dirs_.push_back(std::move(dir)); }

 private:
  std::vector<std::string> dirs_;
};

TempDirs& tempDirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string makeTempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "megatrain-test-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw Error("cannot create a temp dir");
  tempDirs().add(pattern);
  return pattern;
}

std::string planValidationError(const plan::Plan& plan) {
  CpuBackend backend;
  try {
    validatePlan(plan, backend, "t.plan");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace megatrain::runtime::testing
