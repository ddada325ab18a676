// CudnnAttention.cpp - the cuDNN fused attention path: graphs through the cuDNN frontend, built at prepare time, run on the compute stream.
//
// Layout and conventions (CudnnAttention.h says when a step takes this path):
//   q, y, dy, dq  [B, Hq, Sq, D] contiguous; k, v, dk, dv [B, Hkv, Skv, D];
//   an operand whose `bshd` bit is set lies as [B, S, H, D] instead: the
//   graph declares it with the strides (S H D, D, H D, 1) of that order, and
//   its bf16 copy (an elementwise conversion) keeps the layout;
//   lse [B, Hq, Sq] f32, which is cuDNN's Stats [B, Hq, Sq, 1] with strides
//   (Hq Sq, Sq, 1, 1). Grouped- and multi-query heads are cuDNN's own: K and V
//   declare Hkv heads, query head h reads kv head h / (Hq / Hkv), and the
//   backward graph writes dK, dV per kv head, summed over its query heads.
//   Causal is the diagonal band aligned top left with right bound 0: key j is
//   visible to query i when j <= i (docs/ops.md; Sq <= Skv, as the op needs).
//   The scale is the step's `scale`, rounded to f32 (the graph attribute).
// bf16 operands (a --precision bf16 step: q, k, v, y, dy, dq, dk, dv bf16,
// lse f32) go into the variant pack as they are, each execution's slice of
// the batch at its offset (the batch is dim 0 in both layouts), and the
// step's scratch is the graph's workspace alone. F32 operands are rounded
// into bf16 copies first and the results widened back: the same graph on the
// same bf16 values, so the two give the same bits (the f32 results are
// bf16 values widened). One such step's scratch, each piece 256-byte
// aligned: the bf16 copies of one execution's slice of the batch (forward q,
// k, v, y; backward q, k, v, y, dy and the dq, dk, dv cuDNN writes), then the
// graph's workspace.
// The backward is cuDNN's default (non-deterministic) algorithm: dq is
// accumulated with atomics, so its last bits may differ between runs;
// MEGATRAIN_ATTENTION_DETERMINISTIC=1 builds the backward graphs with cuDNN's
// deterministic algorithm instead.
#include "CudnnAttention.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "AttentionGemm.h"
#include "EnvSetting.h"

#if MEGATRAIN_HAVE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend.h>
#endif

namespace megatrain::runtime::cuda {

AttentionPath attentionPathSetting() {
  switch (envChoice("MEGATRAIN_ATTENTION", {"auto", "cudnn", "gemm"})) {
    case 1: return AttentionPath::Cudnn;
    case 2: return AttentionPath::Gemm;
    default: return AttentionPath::Auto;
  }
}

namespace {

// MEGATRAIN_ATTENTION_DETERMINISTIC=1: the backward graphs take cuDNN's
// deterministic algorithm (dq without atomics), so a bf16 plan's steps repeat
// bit for bit; unset or 0: cuDNN's default, faster one.
bool deterministicBackward() { return envChoice("MEGATRAIN_ATTENTION_DETERMINISTIC", {"0", "1"}) == 1; }

bool logPaths() { return envFlag("MEGATRAIN_ATTENTION_LOG"); }

// The steps this path considers: attention kernels, F32 or BF16 operands,
// precision bf16 (the shape rule has checked that BF16 operands come with it).
bool candidate(const Launch& launch) {
  const bool forward = std::strcmp(launch.kernel, "attention") == 0;
  const bool backward = std::strcmp(launch.kernel, "attention_grad") == 0;
  if (!forward && !backward) return false;
  if (launch.in[0].dtype != DType::F32 && launch.in[0].dtype != DType::BF16) return false;
  return attentionPrecision(launch) == AttentionPrecision::Bf16;
}

[[maybe_unused]] std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

#if MEGATRAIN_HAVE_CUDNN

namespace fe = cudnn_frontend;

namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The graph tensors' uids (the variant pack's keys).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// Everything a graph depends on; `batch` is one execution's slice.
struct GraphKey {
  bool backward = false;
  int64_t batch = 0, qHeads = 0, kvHeads = 0, sq = 0, skv = 0, d = 0;
  bool causal = false;
  float scale = 1;
  int64_t bshd = 0;  // AttentionRole bits: operands laid out [B, S, H, D]
  bool deterministic = false;  // backward: cuDNN's deterministic algorithm

  auto tie() const {
    uint32_t scaleBits;
    std::memcpy(&scaleBits, &scale, sizeof scaleBits);
    return std::make_tuple(backward, batch, qHeads, kvHeads, sq, skv, d, causal, scaleBits, bshd, deterministic);
  }
  bool operator<(const GraphKey& other) const { return tie() < other.tie(); }
};

// A built graph, or why cuDNN declined the shape.
struct BuiltGraph {
  std::shared_ptr<fe::graph::Graph> graph;  // null: declined
  size_t workspace = 0;
  std::string declined;
};

// One prepared step: its graph, how the batch is cut, where its pieces lie in the scratch.
struct StepRecord {
  const BuiltGraph* built = nullptr;  // null: the step keeps the GEMM path
  std::string declined;
  bool backward = false;
  bool direct = false;  // bf16 operands: no copies
  AttentionDims dims;
  int64_t slice = 0;  // batch elements per execution
  size_t q = 0, k = 0, v = 0, o = 0, dO = 0, dq = 0, dk = 0, dv = 0, workspace = 0, bytes = 0;
  mutable std::unordered_map<int64_t, void*> pack;  // keys fixed at prepare; values set per execution
};

// Strides of dims (b, h, s, d) for the [B, H, S, D] order, or [B, S, H, D] when `bshd`.
std::vector<int64_t> strides(int64_t h, int64_t s, int64_t d, bool bshd) {
  if (bshd) return {s * h * d, d, h * d, 1};
  return {h * s * d, s * d, d, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> operand(fe::graph::Graph& g, const char* name, int64_t uid,
                                                      int64_t b, int64_t h, int64_t s, int64_t d, bool bshd) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({b, h, s, d}).set_stride(
      strides(h, s, d, bshd)));
}

void setResult(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid, int64_t b, int64_t h, int64_t s,
               int64_t d, bool bshd) {
  t->set_output(true).set_uid(uid).set_dim({b, h, s, d}).set_stride(strides(h, s, d, bshd));
}

std::shared_ptr<fe::graph::Graph> describeGraph(const GraphKey& k) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const bool bq = k.bshd & kRoleQ, bk = k.bshd & kRoleK, bv = k.bshd & kRoleV, by = k.bshd & kRoleY,
             bdy = k.bshd & kRoleDy;
  auto q = operand(*g, "q", kQ, k.batch, k.qHeads, k.sq, k.d, bq);
  auto kk = operand(*g, "k", kK, k.batch, k.kvHeads, k.skv, k.d, bk);
  auto v = operand(*g, "v", kV, k.batch, k.kvHeads, k.skv, k.d, bv);
  const std::vector<int64_t> statsDim = {k.batch, k.qHeads, k.sq, 1}, statsStride = {k.qHeads * k.sq, k.sq, 1, 1};
  if (!k.backward) {
    auto attrs = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true).set_attn_scale(k.scale);
    if (k.causal) attrs.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    auto [o, stats] = g->sdpa(q, kk, v, attrs);
    setResult(o, kO, k.batch, k.qHeads, k.sq, k.d, by);
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(statsDim).set_stride(
        statsStride);
  } else {
    auto o = operand(*g, "y", kO, k.batch, k.qHeads, k.sq, k.d, by);
    auto dO = operand(*g, "dy", kDO, k.batch, k.qHeads, k.sq, k.d, bdy);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("lse")
                               .set_uid(kStats)
                               .set_dim(statsDim)
                               .set_stride(statsStride)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto attrs = fe::graph::SDPA_backward_attributes().set_name("attention_grad").set_attn_scale(k.scale);
    if (k.causal) attrs.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    if (k.deterministic) attrs.set_deterministic_algorithm(true);
    auto [dq, dk, dv] = g->sdpa_backward(q, kk, v, o, dO, stats, attrs);
    setResult(dq, kDQ, k.batch, k.qHeads, k.sq, k.d, bq);
    setResult(dk, kDK, k.batch, k.kvHeads, k.skv, k.d, bk);
    setResult(dv, kDV, k.batch, k.kvHeads, k.skv, k.d, bv);
  }
  return g;
}

// Validates, lowers, picks the heuristics' plan and builds it; on any
// refusal the graph is null and `declined` says which stage refused and why.
BuiltGraph buildGraph(cudnnHandle_t handle, const GraphKey& key) {
  BuiltGraph built;
  try {
    std::shared_ptr<fe::graph::Graph> g = describeGraph(key);
    auto stage = [&](fe::error_t status, const char* name) {
      if (status.is_good()) return true;
      built.declined = std::string(name) + ": " + status.get_message();
      return false;
    };
    if (!stage(g->validate(), "validate") || !stage(g->build_operation_graph(handle), "build_operation_graph") ||
        !stage(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans") ||
        !stage(g->check_support(), "check_support") ||
        !stage(g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans"))
      return built;
    int64_t workspace = 0;
    if (!stage(g->get_workspace_size(workspace), "get_workspace_size")) return built;
    built.workspace = static_cast<size_t>(workspace);
    built.graph = std::move(g);
  } catch (const std::exception& e) {
    built.graph.reset();
    built.declined = std::string("the cuDNN frontend threw: ") + e.what();
  }
  return built;
}

std::string cudnnStatusText(cudnnStatus_t status) { return cudnnGetErrorString(status); }

}  // namespace

struct CudnnAttention::Impl {
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  std::string handleError;  // why cudnnCreate failed, once it has
  std::map<GraphKey, BuiltGraph> graphs;
  std::unordered_map<int, StepRecord> steps;

  bool ensureHandle() {
    if (handle) return true;
    if (!handleError.empty()) return false;
    const cudnnStatus_t status = cudnnCreate(&handle);
    if (status != CUDNN_STATUS_SUCCESS) {
      handle = nullptr;
      handleError = "cudnnCreate failed: " + cudnnStatusText(status);
      return false;
    }
    const cudnnStatus_t bound = cudnnSetStream(handle, stream);
    if (bound != CUDNN_STATUS_SUCCESS) {
      handleError = "cudnnSetStream failed: " + cudnnStatusText(bound);
      cudnnDestroy(handle);
      handle = nullptr;
      return false;
    }
    return true;
  }

  const BuiltGraph& graphFor(const GraphKey& key) {
    auto found = graphs.find(key);
    if (found != graphs.end()) return found->second;
    return graphs.emplace(key, buildGraph(handle, key)).first->second;
  }

  // Lays out the step's copies (none when direct) for `slice` batch elements.
  void plan(StepRecord& r, int64_t slice) {
    const AttentionDims& d = r.dims;
    if (r.direct) {
      r.slice = slice;
      r.workspace = r.bytes = 0;
      return;
    }
    const size_t qBytes = static_cast<size_t>(slice * d.qHeads * d.sq * d.d) * 2;
    const size_t kvBytes = static_cast<size_t>(slice * d.kvHeads * d.skv * d.d) * 2;
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t offset = at;
      at += aligned(bytes);
      return offset;
    };
    r.slice = slice;
    r.q = take(qBytes), r.k = take(kvBytes), r.v = take(kvBytes), r.o = take(qBytes);
    if (r.backward) r.dO = take(qBytes), r.dq = take(qBytes), r.dk = take(kvBytes), r.dv = take(kvBytes);
    r.workspace = at;
    r.bytes = at;
  }
};

bool CudnnAttention::built() { return true; }

CudnnAttention::CudnnAttention(cudaStream_t stream) : impl_(std::make_unique<Impl>()) { impl_->stream = stream; }

CudnnAttention::~CudnnAttention() {
  impl_->graphs.clear();  // the plans before the handle they were built with
  if (impl_->handle) cudnnDestroy(impl_->handle);
}

void CudnnAttention::beginPlan() { impl_->steps.clear(); }

size_t CudnnAttention::prepare(const Launch& launch) {
  if (!candidate(launch)) return 0;
  const AttentionPath path = attentionPathSetting();
  if (path == AttentionPath::Gemm) return 0;
  StepRecord& r = impl_->steps[launch.step];
  r = StepRecord{};
  r.backward = std::strcmp(launch.kernel, "attention_grad") == 0;
  r.dims = r.backward ? attentionGradDims(launch) : attentionDims(launch);
  const AttentionDims& d = r.dims;
  r.direct = d.operands == DType::BF16;
  auto decline = [&](std::string why) -> size_t {
    r.built = nullptr;
    r.declined = std::move(why);
    if (path == AttentionPath::Cudnn)
      fail(launch, "cuDNN declined this step (" + r.declined +
                       "); MEGATRAIN_ATTENTION=cudnn requires it (unset it to fall back to the GEMM path)");
    if (logPaths())
      std::fprintf(stderr, "megatrain: %s (step %d): GEMM path: cuDNN declined: %s\n", launch.kernel, launch.step,
                   r.declined.c_str());
    return 0;
  };
  if (d.batch * d.qHeads * d.sq == 0 || d.batch * d.kvHeads * d.skv == 0 || d.d == 0)
    return decline("an empty operand");
  if (r.direct)
    for (const Operand* operand : {&launch.in[0], &launch.in[1], &launch.in[2], &launch.in[3], &launch.in[5],
                                   &launch.out[0], &launch.out[1], &launch.out[2]})
      if (operand->dtype == DType::BF16 && reinterpret_cast<uintptr_t>(operand->data) % 16 != 0)
        return decline(std::string("bf16 operand '") + operand->name + "' is not 16-byte aligned");
  if (!impl_->ensureHandle()) return decline(impl_->handleError);
  GraphKey key;
  key.backward = r.backward;
  key.qHeads = d.qHeads, key.kvHeads = d.kvHeads, key.sq = d.sq, key.skv = d.skv, key.d = d.d;
  key.causal = d.causal;
  key.scale = static_cast<float>(d.scale);
  key.bshd = d.bshd;
  key.deterministic = r.backward && deterministicBackward();
  // The largest slice of the batch whose copies and workspace fit the budget;
  // a slice that does not divide the batch would need a second graph, and a
  // slice's lse offset must keep cuDNN's 16-byte alignment.
  const size_t budget = attentionWorkspaceBudget();
  for (int64_t slice = d.batch; slice >= 1; --slice) {
    if (d.batch % slice != 0) continue;
    if (slice < d.batch && (d.qHeads * d.sq) % 4 != 0) continue;
    impl_->plan(r, slice);
    if (r.bytes >= budget) continue;
    key.batch = slice;
    const BuiltGraph& built = impl_->graphFor(key);
    if (!built.graph) return decline(built.declined);
    if (r.bytes + built.workspace > budget) continue;
    r.built = &built;
    r.bytes += aligned(built.workspace);
    for (int64_t uid : {kQ, kK, kV, kO, kStats}) r.pack[uid] = nullptr;
    if (r.backward)
      for (int64_t uid : {kDO, kDQ, kDK, kDV}) r.pack[uid] = nullptr;
    if (logPaths())
      std::fprintf(stderr, "megatrain: %s (step %d): cuDNN, %lld execution(s) of %lld batch element(s), %s scratch\n",
                   launch.kernel, launch.step, static_cast<long long>(d.batch / slice),
                   static_cast<long long>(slice), mib(r.bytes).c_str());
    return r.bytes;
  }
  return decline(std::string(r.direct ? "its workspace exceeds" : "its bf16 copies and workspace exceed") +
                 " the attention workspace (" + mib(budget) + ") even one batch element at a time");
}

bool CudnnAttention::takes(const Launch& launch) const {
  auto found = impl_->steps.find(launch.step);
  return found != impl_->steps.end() && found->second.built;
}

std::string CudnnAttention::declined(const Launch& launch) const {
  auto found = impl_->steps.find(launch.step);
  return found == impl_->steps.end() ? "" : found->second.declined;
}

size_t CudnnAttention::cachedGraphs() const { return impl_->graphs.size(); }

void CudnnAttention::run(const Launch& launch) const {
  auto found = impl_->steps.find(launch.step);
  if (found == impl_->steps.end() || !found->second.built) fail(launch, "not prepared for the cuDNN path");
  const StepRecord& r = found->second;
  const AttentionDims& d = r.dims;
  if (r.bytes > launch.device->scratchBytes) fail(launch, "scratch too small (prepare sized it for another shape)");
  char* base = static_cast<char*>(launch.device->scratch);
  auto at = [&](size_t offset) { return reinterpret_cast<uint16_t*>(base + offset); };
  const int64_t qSlice = r.slice * d.qHeads * d.sq * d.d, kvSlice = r.slice * d.kvHeads * d.skv * d.d;
  const int64_t lseSlice = r.slice * d.qHeads * d.sq;
  auto& pack = r.pack;
  for (int64_t b0 = 0; b0 < d.batch; b0 += r.slice) {
    const int64_t n = b0 / r.slice;
    if (r.direct) {
      // bf16 operands and results in place; lse f32.
      auto bf16 = [&](const Operand& operand, int64_t elements) {
        return static_cast<void*>(operand.as<uint16_t>() + n * elements);
      };
      pack[kQ] = bf16(launch.in[0], qSlice), pack[kK] = bf16(launch.in[1], kvSlice);
      pack[kV] = bf16(launch.in[2], kvSlice);
      if (!r.backward) {
        pack[kO] = bf16(launch.out[0], qSlice);
        pack[kStats] = launch.out[1].as<float>() + n * lseSlice;
      } else {
        pack[kO] = bf16(launch.in[3], qSlice), pack[kDO] = bf16(launch.in[5], qSlice);
        pack[kStats] = launch.in[4].as<float>() + n * lseSlice;
        pack[kDQ] = bf16(launch.out[0], qSlice), pack[kDK] = bf16(launch.out[1], kvSlice);
        pack[kDV] = bf16(launch.out[2], kvSlice);
      }
      fe::error_t status = r.built->graph->execute(impl_->handle, pack, base + r.workspace);
      if (status.is_bad()) fail(launch, "cuDNN attention failed: " + status.get_message());
      continue;
    }
    const float* q = launch.in[0].as<const float>() + n * qSlice;
    const float* k = launch.in[1].as<const float>() + n * kvSlice;
    const float* v = launch.in[2].as<const float>() + n * kvSlice;
    convertF32ToBf16(launch, q, at(r.q), qSlice);
    convertF32ToBf16(launch, k, at(r.k), kvSlice);
    convertF32ToBf16(launch, v, at(r.v), kvSlice);
    pack[kQ] = at(r.q), pack[kK] = at(r.k), pack[kV] = at(r.v), pack[kO] = at(r.o);
    if (!r.backward) {
      pack[kStats] = launch.out[1].as<float>() + n * lseSlice;
    } else {
      convertF32ToBf16(launch, launch.in[3].as<const float>() + n * qSlice, at(r.o), qSlice);
      convertF32ToBf16(launch, launch.in[5].as<const float>() + n * qSlice, at(r.dO), qSlice);
      pack[kStats] = const_cast<float*>(launch.in[4].as<const float>()) + n * lseSlice;
      pack[kDO] = at(r.dO), pack[kDQ] = at(r.dq), pack[kDK] = at(r.dk), pack[kDV] = at(r.dv);
    }
    fe::error_t status = r.built->graph->execute(impl_->handle, pack, base + r.workspace);
    if (status.is_bad()) fail(launch, "cuDNN attention failed: " + status.get_message());
    if (!r.backward) {
      convertBf16ToF32(launch, at(r.o), launch.out[0].as<float>() + n * qSlice, qSlice);
    } else {
      convertBf16ToF32(launch, at(r.dq), launch.out[0].as<float>() + n * qSlice, qSlice);
      convertBf16ToF32(launch, at(r.dk), launch.out[1].as<float>() + n * kvSlice, kvSlice);
      convertBf16ToF32(launch, at(r.dv), launch.out[2].as<float>() + n * kvSlice, kvSlice);
    }
  }
}

#else  // built without cuDNN: every step keeps the GEMM path

struct CudnnAttention::Impl {};

bool CudnnAttention::built() { return false; }
CudnnAttention::CudnnAttention(cudaStream_t) : impl_(std::make_unique<Impl>()) {}
CudnnAttention::~CudnnAttention() = default;
void CudnnAttention::beginPlan() {}

size_t CudnnAttention::prepare(const Launch& launch) {
  if (!candidate(launch)) return 0;
  const AttentionPath path = attentionPathSetting();
  if (path == AttentionPath::Cudnn)
    fail(launch, "this build has no cuDNN attention (cuDNN 9 or the nvidia-cudnn-frontend headers were not found "
                 "at configure time); unset MEGATRAIN_ATTENTION to use the GEMM path");
  if (path == AttentionPath::Auto && logPaths())
    std::fprintf(stderr, "megatrain: %s (step %d): GEMM path: built without cuDNN\n", launch.kernel, launch.step);
  return 0;
}

bool CudnnAttention::takes(const Launch&) const { return false; }
void CudnnAttention::run(const Launch& launch) const { fail(launch, "built without cuDNN"); }
std::string CudnnAttention::declined(const Launch& launch) const {
  return candidate(launch) ? "built without cuDNN" : "";
}
size_t CudnnAttention::cachedGraphs() const { return 0; }

#endif

}  // namespace megatrain::runtime::cuda
