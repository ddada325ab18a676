// matmul.cpp - batched matrix product: f32 and bf16 on cuBLASLt (MatmulPlanner), f64 on cuBLAS, with transpose flags and broadcast batch dims; matmul_add adds r in the epilogue, matmul_bias_gelu a bias and the tanh GELU, matmul_gelu_grad the GELU's slope.
//
// Host code only (cuBLAS launches the kernels), so the C++ compiler builds it
// instead of nvcc.
//
// cuBLAS is column-major; a row-major [r, c] matrix is the column-major
// [c, r] one. So row-major Y = A B is computed as column-major Y^T = B^T A^T:
// gemm(opB, opA, n, m, k, b, a, y) with each operand's own transpose flag.
// Batch dims broadcast through per-operand batch strides (0 on a stretched
// dim); after coalescing, one strided-batched call covers the common cases (a
// rank-2 operand is stride 0), and a batch that cannot be one stride is
// walked on the host, one call per outer index.
//
// Operand types and what computes them:
//   a, b F32, y F32   cuBLASLt; step attribute `precision` absent or "fp32":
//                     CUBLAS_COMPUTE_32F (plain fp32, never TF32); "tf32":
//                     CUBLAS_COMPUTE_32F_FAST_TF32; "bf16":
//                     CUBLAS_COMPUTE_32F_FAST_16BF (products of bf16-rounded
//                     operands, fp32 accumulation)
//   a, b BF16, y F32  cuBLASLt, CUDA_R_16BF A/B, CUDA_R_32F C/D,
//                     CUBLAS_COMPUTE_32F (exact products, fp32 accumulation)
//   a, b BF16, y BF16 (matmul only) the f32 result above rounded to bf16 as
//                     `cast` rounds it, bit for bit: cuBLASLt with CUDA_R_16BF
//                     C/D (its epilogue rounds the fp32 accumulator once) and
//                     an algorithm shown at prepare to write the bits of the
//                     f32-D form's algorithm followed by cast's conversion;
//                     when none is, that f32-D form into the step's scratch,
//                     then the conversion into y (MatmulPlanner::Impl::tune,
//                     MatmulPlanner::run)
//   a, b F64, y F64   cuBLAS DgemmStridedBatched (the handle runs
//                     CUBLAS_DEFAULT_MATH; see CudaBackend)
// The cuBLASLt descriptors and algorithm of each step are made at prepare
// time (MatmulPlanner.h); a launch only looks them up.
//
// matmul_add (y = A B + r) is the same call with C = r and beta = 1:
// cuBLASLt's epilogue adds C to the fp32 accumulator (alpha = 1, so the
// product is the accumulator itself) and rounds the sum once to y's type,
// as the CPU twin does (docs/ops.md "Matmul epilogues"). C has D's layout
// and type; C and D are separate buffers (the memory plan never gives an
// output the bytes of an input of the same step) except where the step adds
// a weight gradient's micro-batch part into its accumulator, r and y one
// tensor: cuBLASLt computes in place when C = D with one layout, which it
// has here (docs/tiering.md "Micro-batches"). A bias r [n] is
// cuBLASLt's BIAS epilogue instead (bias length = D's rows in column-major
// terms = our n; batch stride 0: one bias for every batch entry). f64
// copies a full r into y and runs Dgemm with beta = 1 on it; an f64 bias
// and a bias of an empty product (k = 0) are refused (the compiler fuses
// neither).
//
// matmul_bias_gelu (z = A B + bias, y = gelu_tanh(z); f32 y and z) is the
// bias form with cuBLASLt's GELU_AUX_BIAS epilogue: D = y, and z written to
// the epilogue's aux pointer (aux type = D's, leading dimension n, batch
// stride y's). cuBLASLt takes an aux leading dimension that is a multiple of
// 8 only, so a step whose n is not, or whose GELU form the heuristic offers
// no algorithm for, runs the bias form into z and then gelu's kernel from z
// into y: the unfused pair's two kernels.
//
// matmul_gelu_grad (dz = A B * gelu_tanh'(z); f32 z and dz) is the plain
// form with cuBLASLt's DGELU epilogue: D = dz, z read from the epilogue's
// aux pointer as its input (aux type = D's, leading dimension n, batch
// stride dz's); cuBLASLt multiplies the product by the tanh GELU's slope at
// the aux element. The same aux rule applies, so a step whose n is not a
// multiple of 8, or whose DGELU form the heuristic offers no algorithm for,
// runs the plain form into dz and then gelu_grad's kernel on dz in place:
// the unfused pair's two kernels.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "CudaKernel.h"
#include "EnvSetting.h"
#include "MatmulPlanner.h"
#include "MatmulTune.h"

namespace megatrain::runtime::cuda {
namespace {

// Whether the step is matmul_gelu_grad (its third input the pre-activation z, not an addend).
bool geluGradStep(const Launch& launch) { return std::string_view(launch.kernel) == "matmul_gelu_grad"; }

// The operand types matmul accepts: F32 x F32 -> F32, BF16 x BF16 -> F32 or
// BF16 (matmul_add's, matmul_bias_gelu's and matmul_gelu_grad's rules refuse
// a bf16 result, the latter two an f64 one), F64 x F64 -> F64.
void checkTypes(const Launch& launch) {
  const DType a = launch.in[0].dtype, b = launch.in[1].dtype, y = launch.out[0].dtype;
  const bool ok = (a == DType::F32 && b == DType::F32 && y == DType::F32) ||
                  (a == DType::BF16 && b == DType::BF16 && (y == DType::F32 || y == DType::BF16)) ||
                  (a == DType::F64 && b == DType::F64 && y == DType::F64);
  if (!ok)
    fail(launch, std::string("operands are ") + dtypeLabel(a) + " x " + dtypeLabel(b) + " -> " + dtypeLabel(y) +
                     "; the CUDA backend multiplies f32 x f32 -> f32, bf16 x bf16 -> f32 or bf16, or "
                     "f64 x f64 -> f64");
  if (launch.numIn == 3 && !geluGradStep(launch) && launch.in[2].dtype != y)
    fail(launch, std::string("addend r is ") + dtypeLabel(launch.in[2].dtype) + ", the output " + dtypeLabel(y) +
                     "; they must match");
}

// matmul_add's addend or matmul_bias_gelu's bias, or null for matmul and matmul_gelu_grad.
const void* addendOf(const Launch& launch) {
  return launch.numIn == 3 && !geluGradStep(launch) ? launch.in[2].data : nullptr;
}

// Whether the step is matmul_bias_gelu (y, and the pre-activation z as out[1]).
bool geluStep(const Launch& launch) { return launch.numIn == 3 && launch.numOut == 2; }

// Whether the addend is a bias [n] (cuBLASLt's BIAS epilogue): matmul_bias_gelu's always.
bool biasAddend(const Launch& launch) {
  return geluStep(launch) || (launch.numIn == 3 && !geluGradStep(launch) && matmulAddendIsBias(launch));
}

int toInt(const Launch& launch, int64_t value, const char* what) {
  if (value > INT_MAX) fail(launch, std::string(what) + " " + std::to_string(value) + " exceeds cuBLAS's int range");
  return static_cast<int>(value);
}

// One strided-batched call: `count` products of m x k by k x n.
struct Gemm {
  int m, n, k, count;
  bool transA, transB;
  int64_t strideA, strideB, strideY;  // elements between batch entries
};

// A matmul as one strided-batched call repeated over an outer batch walked on
// the host (element offsets of a, b and y per outer index).
struct GemmBatch {
  Gemm g;
  StridedSpace<3> outer;
  int64_t calls = 1;
};

GemmBatch decompose(const Launch& launch, const MatmulDims& d) {
  // Element strides of a, b and y over the batch dims of y.
  StridedSpace<3> batch;
  batch.rank = d.batch.rank;
  for (int i = 0; i < d.batch.rank; ++i) batch.dims[i] = d.batch[i];
  broadcastStrides(matmulBatchOf(launch.in[0].shape), d.batch, batch.strides[0]);
  broadcastStrides(matmulBatchOf(launch.in[1].shape), d.batch, batch.strides[1]);
  contiguousStrides(d.batch, batch.strides[2]);
  for (int i = 0; i < batch.rank; ++i) {
    batch.strides[0][i] *= d.m * d.k;
    batch.strides[1][i] *= d.k * d.n;
    batch.strides[2][i] *= d.m * d.n;
  }
  coalesce(batch);

  int64_t m = d.m, count = batch.rank ? batch.dims[batch.rank - 1] : 1;
  // A batch of row-major a against one shared b is a single taller product:
  // [count * m, k] x [k, n] (a's and y's matrices lie back to back).
  if (batch.rank == 1 && batch.strides[1][0] == 0 && !d.transA && batch.strides[0][0] == d.m * d.k) {
    m *= count;
    count = 1;
    batch.rank = 0;
  }
  GemmBatch result;
  Gemm& g = result.g;
  g.m = toInt(launch, m, "m");
  g.n = toInt(launch, d.n, "n");
  g.k = toInt(launch, d.k, "k");
  g.count = toInt(launch, count, "batch count");
  g.transA = d.transA;
  g.transB = d.transB;
  const int inner = batch.rank - 1;  // the dim one call strides over; outer dims are walked here
  g.strideA = inner >= 0 ? batch.strides[0][inner] : 0;
  g.strideB = inner >= 0 ? batch.strides[1][inner] : 0;
  g.strideY = inner >= 0 ? batch.strides[2][inner] : 0;

  result.outer = batch;
  result.outer.rank = inner > 0 ? inner : 0;
  for (int i = 0; i < result.outer.rank; ++i) result.calls *= result.outer.dims[i];
  return result;
}

// Calls f(offsetA, offsetB, offsetY) (elements) for each outer batch index.
template <typename F>
void forEachCall(const GemmBatch& batch, F&& f) {
  const StridedSpace<3>& outer = batch.outer;
  for (int64_t c = 0; c < batch.calls; ++c) {
    int64_t at[3] = {0, 0, 0};
    int64_t rest = c;
    for (int i = outer.rank - 1; i >= 0; --i) {
      const int64_t index = rest % outer.dims[i];
      rest /= outer.dims[i];
      for (int t = 0; t < 3; ++t) at[t] += index * outer.strides[t][i];
    }
    f(at[0], at[1], at[2]);
  }
}

// ---- f64: cuBLAS ----

// y = A B + beta y.
void dgemm(const Launch& launch, const Gemm& g, const double* a, const double* b, double beta, double* y) {
  const double one = 1.0;
  MT_CUBLAS_CHECK(cublasDgemmStridedBatched(
      launch.device->cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.n, g.m, g.k, &one, b, g.transB ? g.k : g.n, g.strideB, a, g.transA ? g.m : g.k, g.strideA,
      &beta, y, g.n, g.strideY, g.count));
}

void matmulF64(const Launch& launch, const MatmulDims& d) {
  const double* a = launch.in[0].as<const double>();
  const double* b = launch.in[1].as<const double>();
  double* y = launch.out[0].as<double>();
  const GemmBatch batch = decompose(launch, d);
  double beta = 0.0;
  if (biasAddend(launch)) fail(launch, "an f64 product with a bias addend has no cuBLAS epilogue");
  if (const void* r = addendOf(launch)) {  // y = r (unless r is y), then y += A B
    if (r != y)
      MT_CUDA_CHECK(cudaMemcpyAsync(y, r, static_cast<size_t>(launch.out[0].shape.elements()) * sizeof(double),
                                    cudaMemcpyDeviceToDevice, launch.device->stream));
    beta = 1.0;
  }
  forEachCall(batch, [&](int64_t oa, int64_t ob, int64_t oy) {
    dgemm(launch, batch.g, a + oa, b + ob, beta, y + oy);
  });
}

void matmul(const Launch& launch) {
  checkTypes(launch);
  const MatmulDims d = matmulDims(launch);
  const Operand& y = launch.out[0];
  if (y.shape.elements() == 0) return;
  if (d.k == 0) {  // an empty sum: cuBLAS need not write y, so write 0 (or r) here
    const size_t bytes = static_cast<size_t>(y.shape.elements()) * dtypeBytes(y.dtype);
    if (biasAddend(launch)) fail(launch, "an empty product (k = 0) with a bias addend is not supported");
    if (const void* r = addendOf(launch)) {
      if (r != y.data) MT_CUDA_CHECK(cudaMemcpyAsync(y.data, r, bytes, cudaMemcpyDeviceToDevice, launch.device->stream));
    } else
      MT_CUDA_CHECK(cudaMemsetAsync(y.data, 0, bytes, launch.device->stream));
    if (geluGradStep(launch))  // the zero product times the slope, as gelu_grad would multiply it
      launchGeluTanhGrad(launch, launch.in[2].as<const float>(), y.as<const float>(), y.as<float>(),
                         y.shape.elements());
    return;
  }
  if (y.dtype == DType::F64) {
    matmulF64(launch, d);
    return;
  }
  if (!launch.device->matmul) fail(launch, "the backend has no cuBLASLt planner (prepare() makes it)");
  launch.device->matmul->run(launch);
}

// A bf16 result's f32 form in the scratch, for a step whose bf16-D
// algorithms all wrote other bits (the planner's choice is made after the
// scratch is sized, so every bf16-result matmul reserves it): y's elements
// in f32, 256-byte aligned as every arena buffer is.
size_t matmulScratch(const Launch& launch) {
  if (launch.numIn != 2 || launch.out[0].dtype != DType::BF16) return 0;
  return static_cast<size_t>(launch.out[0].shape.elements()) * sizeof(float);
}

// ---- f32 and bf16: cuBLASLt ----

const char* ltStatusName(cublasStatus_t status) { return cublasLtGetStatusName(status); }

[[noreturn]] void ltFail(const Launch& launch, const char* call, cublasStatus_t status, const std::string& product) {
  fail(launch, std::string(call) + " failed: " + ltStatusName(status) + " (" + cublasLtGetStatusString(status) +
                   ") for " + product);
}

#define MT_LT_CHECK(call, launch, product)                                          \
  do {                                                                              \
    const cublasStatus_t mtLtStatus = (call);                                       \
    if (mtLtStatus != CUBLAS_STATUS_SUCCESS) ltFail((launch), #call, mtLtStatus, (product)); \
  } while (0)

enum class Precision { Fp32, Tf32, Bf16 };

Precision precisionOf(const Launch& launch) {
  const std::string_view p = launch.attrs.getString("precision", "fp32");
  if (p == "fp32") return Precision::Fp32;
  if (p == "tf32") return Precision::Tf32;
  if (p == "bf16") return Precision::Bf16;
  fail(launch, "attribute 'precision' is '" + std::string(p) + "', expected fp32, tf32 or bf16");
}

cublasComputeType_t computeTypeOf(DType operands, Precision precision) {
  if (operands == DType::BF16) return CUBLAS_COMPUTE_32F;  // bf16 products are exact in fp32
  switch (precision) {
    case Precision::Tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::Bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return CUBLAS_COMPUTE_32F;
  }
}

const char* computeLabel(cublasComputeType_t compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    default: return "CUBLAS_COMPUTE_32F";
  }
}

cudaDataType_t cudaTypeOf(DType dtype) { return dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two up to 256 that divides the address and every
// offset (bytes) the calls add to it: what cuBLASLt may assume of the operand.
uint32_t alignmentOf(const void* base, std::initializer_list<int64_t> offsetBytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(base) | 256u;
  for (int64_t offset : offsetBytes) bits |= static_cast<uint64_t>(offset);
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit
}

// What a product's cuBLASLt form is made of besides its Gemm.
struct Form {
  DType operands = DType::F32, result = DType::F32;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  uint32_t alignA = 0, alignB = 0, alignY = 0;
  uint32_t alignR = 0;  // matmul_add's addend; 0 marks a plain matmul
  bool bias = false;    // the addend is a bias [n]
  bool gelu = false;    // GELU_AUX_BIAS: the tanh GELU of the biased sum in D, the sum in the aux matrix
  bool dgelu = false;   // DGELU: the product times the tanh GELU's slope at the aux matrix (an input) in D
  uint32_t alignZ = 0;  // the aux matrix's (matmul_bias_gelu's or matmul_gelu_grad's z)
};

// Everything a cuBLASLt call's form depends on.
using Key = std::array<int64_t, 20>;

Key keyOf(const Form& f, const Gemm& g) {
  return {static_cast<int64_t>(f.operands),
          static_cast<int64_t>(f.result),
          static_cast<int64_t>(f.compute),
          g.m, g.n, g.k, g.count,
          g.transA, g.transB,
          g.strideA, g.strideB, g.strideY,
          f.alignA, f.alignB, f.alignY,
          f.alignR ? (f.bias ? 2 : 1) : 0, f.alignR,
          f.gelu, f.dgelu, f.alignZ};
}

// Descriptors and algorithm of one distinct product.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr, layoutD = nullptr;  // cuBLASLt's A (our b), B (our a), C = D (y)
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  std::string product;  // for error messages
  // A bf16 result that no bf16-D algorithm was shown to write as the f32-D
  // form's cast: steps of this form run viaF32 (that f32-D form, cached
  // beside this one) into the scratch, then cast's conversion into y.
  // Null for every other form.
  const LtGemm* viaF32 = nullptr;
  int candidate = 0;  // which of the heuristic's candidates algo is (for MEGATRAIN_MATMUL_LOG)
  // A GELU_AUX_BIAS or DGELU form the heuristic offered no algorithm for: its
  // steps run the bias (plain) form and gelu's (gelu_grad's) kernel.
  bool refused = false;

  ~LtGemm() {
    if (layoutD) cublasLtMatrixLayoutDestroy(layoutD);
    if (layoutB) cublasLtMatrixLayoutDestroy(layoutB);
    if (layoutA) cublasLtMatrixLayoutDestroy(layoutA);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// One planned step.
struct StepRecord {
  const LtGemm* gemm = nullptr;
  GemmBatch batch;
  const void *a = nullptr, *b = nullptr;
  const void* r = nullptr;  // matmul_add's addend (cuBLASLt's C, or its bias vector), else null
  bool bias = false;         // r is a bias [n]
  void* y = nullptr;
  // matmul_bias_gelu's pre-activation, else null. With a GELU form gemm
  // writes it as the aux matrix; with the bias form (geluAfter) gemm writes
  // it as D and gelu's kernel then writes y from it.
  void* z = nullptr;
  bool geluAfter = false;
  // matmul_gelu_grad's pre-activation (an input), else null. With a DGELU
  // form gemm reads it as the aux matrix; with the plain form (gradAfter)
  // gemm writes the product into y and gelu_grad's kernel then scales it
  // in place.
  const void* aux = nullptr;
  bool gradAfter = false;
};

std::string describeProduct(const Launch& launch, const Gemm& g, int64_t calls, const Form& f) {
  const std::string addend = f.dgelu    ? "(* gelu'(z)) "
                             : f.alignR ? (f.gelu ? "(+ bias, gelu) " : f.bias ? "(+ bias) " : "(+ r) ")
                                        : "";
  std::string text = addend + "a " + launch.in[0].shape.str() + (g.transA ? "^T" : "") + " " +
                     dtypeLabel(f.operands) + " x b " + launch.in[1].shape.str() + (g.transB ? "^T" : "") + " " +
                     dtypeLabel(f.operands) + " -> y " + launch.out[0].shape.str() + " " +
                     dtypeLabel(f.result) + " (m " + std::to_string(g.m) + ", n " + std::to_string(g.n) +
                     ", k " + std::to_string(g.k) + ", batch " + std::to_string(g.count) + " with strides a " +
                     std::to_string(g.strideA) + ", b " + std::to_string(g.strideB) + ", y " +
                     std::to_string(g.strideY) + ", " + std::to_string(calls) + " call(s); " +
                     computeLabel(f.compute) + "; alignment a " + std::to_string(f.alignA) + ", b " +
                     std::to_string(f.alignB) + ", y " + std::to_string(f.alignY) +
                     (f.alignR ? ", r " + std::to_string(f.alignR) : std::string()) +
                     (f.gelu || f.dgelu ? ", z " + std::to_string(f.alignZ) : std::string()) + " bytes)";
  return text;
}

// MEGATRAIN_MATMUL_TUNE: unset, "auto" or "1" times cuBLASLt's candidate
// algorithms at prepare (MatmulPlanner::Impl::tune); "off" or "0" takes the
// heuristic's first, as cuBLASLt ranks them (for a bf16 result: the first
// that writes the f32 form's cast, compared but not timed).
bool matmulTuning() { return envChoice("MEGATRAIN_MATMUL_TUNE", {"auto", "1", "off", "0"}) < 2; }

// MEGATRAIN_MATMUL_BF16_RESULT: unset or "auto" lets a bf16 result use a
// bf16-D algorithm shown to write the f32 product's cast; "via-f32" always
// runs the f32 product into the scratch and cast's conversion (the other
// way to the same bits, to compare the two).
bool bf16ResultDirect() { return envChoice("MEGATRAIN_MATMUL_BF16_RESULT", {"auto", "via-f32"}) < 1; }

// MEGATRAIN_MATMUL_LOG=1 prints each tuned product's candidates and choice,
// and how each bf16-result step writes y, to stderr.
bool matmulLog() { return envFlag("MEGATRAIN_MATMUL_LOG"); }

// The candidates cuBLASLt's heuristic is asked for, and the timed calls of each.
constexpr int kCandidates = 8;
constexpr int kTimedCalls = 3;
// A candidate replaces the heuristic's first (of those writing the
// reference's bits) only when it takes at most this share of the first's
// time (noise must not flip the choice between runs).
constexpr double kTuneMargin = 0.97;
// Products whose tuning operands would take more device memory keep the
// first (a bf16 result: the f32 form and cast).
constexpr size_t kTuneBytesMax = size_t{4} << 30;

// Device memory freed on every path out of tune().
struct DeviceBlock {
  void* data = nullptr;
  ~DeviceBlock() {
    if (data) cudaFree(data);
  }
};

// Two CUDA events, destroyed on every path out of tune().
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    MT_CUDA_CHECK(cudaEventCreate(&start));
    MT_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(stop);
    cudaEventDestroy(start);
  }
};

}  // namespace

struct MatmulPlanner::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<Key, std::unique_ptr<LtGemm>> cache;
  std::vector<StepRecord> steps;

  // The cached form, made (and its algorithm chosen) on first sight. A bf16
  // result needs `wide`, its f32-D form: the bits it must write are wide's
  // cast.
  // A GELU or DGELU form also needs the step's aux matrix `z` (its address
  // tells the heuristic its alignment); when the heuristic offers no
  // algorithm for it, the form comes back `refused`.
  const LtGemm& find(const Launch& launch, const Form& form, const Gemm& g, int64_t calls, const void* bias,
                     const LtGemm* wide = nullptr, const void* z = nullptr);
  int tune(const Launch& launch, const LtGemm& gemm, const Gemm& g, const Form& form,
           const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const LtGemm* wide);
  // One call of a form (cuBLASLt's A is our b, its B our a); C (read only
  // when beta is not 0) has D's layout.
  cublasStatus_t call(const LtGemm& gemm, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                      float beta, const void* c, void* d, cudaStream_t stream) const {
    const float one = 1.0f;
    return cublasLtMatmul(handle, gemm.desc, &one, b, gemm.layoutA, a, gemm.layoutB, &beta, c, gemm.layoutD, d,
                          gemm.layoutD, &algo, workspace, kWorkspaceBytes, stream);
  }
};

MatmulPlanner::MatmulPlanner() : impl_(std::make_unique<Impl>()) {
  MT_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  MT_CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
}

// Frees everything, checking nothing (a destructor must not throw).
MatmulPlanner::~MatmulPlanner() {
  impl_->cache.clear();
  if (impl_->workspace) cudaFree(impl_->workspace);
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

size_t MatmulPlanner::cachedAlgorithms() const { return impl_->cache.size(); }

void MatmulPlanner::beginPlan(int steps) {
  impl_->steps.assign(static_cast<size_t>(steps > 0 ? steps : 0), StepRecord{});
}

const LtGemm& MatmulPlanner::Impl::find(const Launch& launch, const Form& form, const Gemm& g, int64_t calls,
                                        const void* bias, const LtGemm* wide, const void* z) {
  const Key key = keyOf(form, g);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;

  auto gemm = std::make_unique<LtGemm>();
  gemm->product = describeProduct(launch, g, calls, form);
  const std::string& product = gemm->product;
  const cudaDataType_t operandType = cudaTypeOf(form.operands), resultType = cudaTypeOf(form.result);

  // Column-major Y^T [n, m] = op(b^T) [n, k] op(a^T) [k, m]: cuBLASLt's A is our b, its B our a.
  MT_LT_CHECK(cublasLtMatmulDescCreate(&gemm->desc, form.compute, CUDA_R_32F), launch, product);
  const int32_t opA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)), launch,
              product);
  MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)), launch,
              product);
  if (bias) {
    // The bias vector of D's type; the pointer (this step's, reset at each launch) lets the
    // heuristic see its alignment.
    const uint32_t epilogue = form.gelu ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
                launch, product);
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                launch, product);
  }
  if (form.dgelu) {
    const uint32_t epilogue = CUBLASLT_EPILOGUE_DGELU;
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
                launch, product);
  }
  if (form.gelu || form.dgelu) {
    // The pre-activation in the aux matrix (GELU_AUX_BIAS writes it, DGELU
    // reads it): D's type (the default aux type) and layout, column-major
    // [n, m] with leading dimension n (a multiple of 8, as cuBLASLt
    // requires; prepare() checks), y's batch stride. The pointer is reset at
    // each call, as the bias's is.
    const int64_t ld = g.n, stride = g.strideY;
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &z, sizeof(z)),
                launch, product);
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)),
                launch, product);
    if (g.count > 1)
      MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride,
                                                 sizeof(stride)),
                  launch, product);
  }
  // Stored (column-major) extents: b is [n, k] (or [k, n] transposed), a is [k, m] (or [m, k]), y is [n, m].
  const uint64_t n = static_cast<uint64_t>(g.n), m = static_cast<uint64_t>(g.m), k = static_cast<uint64_t>(g.k);
  MT_LT_CHECK(cublasLtMatrixLayoutCreate(&gemm->layoutA, operandType, g.transB ? k : n, g.transB ? n : k,
                                         g.transB ? g.k : g.n),
              launch, product);
  MT_LT_CHECK(cublasLtMatrixLayoutCreate(&gemm->layoutB, operandType, g.transA ? m : k, g.transA ? k : m,
                                         g.transA ? g.m : g.k),
              launch, product);
  MT_LT_CHECK(cublasLtMatrixLayoutCreate(&gemm->layoutD, resultType, n, m, g.n), launch, product);
  if (g.count > 1) {
    const std::pair<cublasLtMatrixLayout_t, int64_t> strided[] = {
        {gemm->layoutA, g.strideB}, {gemm->layoutB, g.strideA}, {gemm->layoutD, g.strideY}};
    for (const auto& [layout, stride] : strided) {
      const int32_t count = g.count;
      MT_LT_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                  launch, product);
      MT_LT_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof(stride)),
                  launch, product);
    }
  }

  cublasLtMatmulPreference_t preference = nullptr;
  MT_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference), launch, product);
  struct PreferenceGuard {
    cublasLtMatmulPreference_t p;
    ~PreferenceGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{preference};
  const uint64_t workspaceBytes = kWorkspaceBytes;
  MT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspaceBytes, sizeof(workspaceBytes)),
              launch, product);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, form.alignB},  // cuBLASLt's A is our b
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, form.alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, form.alignR && !form.bias ? form.alignR : form.alignY},  // C is r, or y
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, form.alignY}};
  for (const auto& [attribute, bytes] : alignments)
    MT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes)), launch, product);

  // A bf16 result always looks at every candidate: its algorithm must be shown to write wide's cast.
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(
      handle, gemm->desc, gemm->layoutA, gemm->layoutB, gemm->layoutD, gemm->layoutD, preference,
      matmulTuning() || wide ? kCandidates : 1, results, &found);
  if (heuristic != CUBLAS_STATUS_SUCCESS && (form.gelu || form.dgelu)) found = 0;  // refused below
  else if (heuristic != CUBLAS_STATUS_SUCCESS) ltFail(launch, "cublasLtMatmulAlgoGetHeuristic", heuristic, product);
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  if (wide) {
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes)
        candidates.push_back(results[i]);
    const bool direct = bf16ResultDirect();
    const int chosen = candidates.empty() || !direct ? -1 : tune(launch, *gemm, g, form, candidates, wide);
    if (chosen < 0) {
      if ((candidates.empty() || !direct) && matmulLog())
        std::fprintf(stderr, "megatrain: matmul %s: %s; the f32 product, then cast\n", product.c_str(),
                     direct ? "no bf16-D algorithm offered" : "MEGATRAIN_MATMUL_BF16_RESULT=via-f32");
      gemm->viaF32 = wide;
      gemm->candidate = -1;
    } else {
      gemm->algo = candidates[static_cast<size_t>(chosen)].algo;
      gemm->workspace = candidates[static_cast<size_t>(chosen)].workspaceSize;
      gemm->candidate = chosen;
    }
    return *cache.emplace(key, std::move(gemm)).first->second;
  }
  if ((form.gelu || form.dgelu) && (found < 1 || results[0].state != CUBLAS_STATUS_SUCCESS ||
                                    results[0].workspaceSize > kWorkspaceBytes)) {
    // No GELU epilogue for this form: its steps take the bias (plain) form and gelu's (gelu_grad's) kernel.
    if (matmulLog())
      std::fprintf(stderr, "megatrain: matmul %s: %s\n", product.c_str(),
                   form.dgelu ? "no DGELU algorithm; the plain form, then gelu_grad"
                              : "no GELU_AUX_BIAS algorithm; the bias form, then gelu");
    gemm->refused = true;
    return *cache.emplace(key, std::move(gemm)).first->second;
  }
  if (found < 1) fail(launch, "cublasLtMatmulAlgoGetHeuristic found no algorithm for " + product);
  const cublasLtMatmulHeuristicResult_t& first = results[0];
  if (first.state != CUBLAS_STATUS_SUCCESS)
    ltFail(launch, "cublasLtMatmulAlgoGetHeuristic (result state)", first.state, product);
  if (first.workspaceSize > kWorkspaceBytes)
    fail(launch, "cuBLASLt's algorithm wants " + std::to_string(first.workspaceSize) +
                     " bytes of workspace, more than the " + std::to_string(kWorkspaceBytes) + " allowed, for " +
                     product);
  candidates.push_back(first);
  for (int i = 1; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes)
      candidates.push_back(results[i]);
  const int chosen = candidates.size() > 1 ? tune(launch, *gemm, g, form, candidates, nullptr) : 0;
  gemm->algo = candidates[static_cast<size_t>(chosen)].algo;
  gemm->workspace = candidates[static_cast<size_t>(chosen)].workspaceSize;
  gemm->candidate = chosen;
  return *cache.emplace(key, std::move(gemm)).first->second;
}

// Runs each candidate algorithm on operands of the product's sizes (one call
// of its batch, random values from MatmulTune.cu), compares its output with
// a reference bit for bit, and returns the candidate to keep.
//
// The reference: for an f32 (or f32-operand) result, the heuristic's first
// candidate's output (wide is null); for a bf16 result, wide's output (the
// f32-D form, whose kept algorithm writes its heuristic's first's bits)
// rounded by cast's conversion, i.e. what the unfused matmul and cast write.
// Equal bits on random operands mean the same sums in the same order, so the
// choice, which timing noise may change between runs, never changes a result.
//
// Tuning on (MEGATRAIN_MATMUL_TUNE): each candidate is timed (a warm-up, then
// kTimedCalls) and the fastest of those writing the reference's bits is kept
// when it takes at most kTuneMargin of the time of the first (highest
// ranked) of them, else that first. Tuning off (only bf16 results get here
// then): each candidate is run once, untimed, and the first writing the
// reference's bits is kept. A bf16 result's candidates that pass are run
// again on the same operands with C = -(the reference) and beta 1, and must
// write the residual of wide's sums past it (splitF32ToBf16): the rounded
// results show another order of the sums in a few elements, the residuals
// in many. They are then compared again on
// operands with special values (plantSpecialBf16: infinities, a NaN, sums
// past bf16's range), each against the f32 form's cast of those.
// Returns -1 when no candidate writes them (only with a wide form: the step
// then runs wide and the conversion), and, when the operands find no device
// room or exceed kTuneBytesMax, 0 (a bf16 result: -1, as nothing was shown).
// The operands are allocated here and freed before returning.
int MatmulPlanner::Impl::tune(const Launch& launch, const LtGemm& gemm, const Gemm& g, const Form& form,
                              const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const LtGemm* wide) {
  const cudaStream_t stream = launch.device->stream;
  const bool timed = matmulTuning();
  const bool addend = form.alignR && !form.bias;
  const int unproven = wide ? -1 : 0;
  const char* unprovenText = wide ? "the f32 product, then cast" : "heuristic's first";
  const size_t operandBytes = dtypeBytes(form.operands), resultBytes = dtypeBytes(form.result);
  auto elements = [&](int64_t matrix, int64_t stride) {
    return static_cast<size_t>((g.count > 1 ? stride * (g.count - 1) : 0) + matrix);
  };
  auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t aElements = elements(int64_t{g.n} * g.k, g.strideB);  // cuBLASLt's A is our b
  const size_t bElements = elements(int64_t{g.m} * g.k, g.strideA);
  const size_t yElements = elements(int64_t{g.n} * g.m, g.strideY);
  const size_t aBytes = rounded(aElements * operandBytes), bBytes = rounded(bElements * operandBytes);
  const size_t yBytes = rounded(yElements * resultBytes);
  const size_t wideBytes = wide ? rounded(yElements * sizeof(float)) : 0;  // wide's f32 result
  // A GELU form's aux matrix (the step's z stays untouched), a DGELU form's (random pre-activations).
  const size_t auxBytes = form.gelu || form.dgelu ? yBytes : 0;
  // With wide: its f32 result, then -hi and the residual past it (bf16, y's size).
  const size_t residualBytes = wide ? 2 * yBytes : 0;
  // A bias form's bias [n], random: the step's own is not written yet at prepare
  // (its pool's NaN fill), and with NaN everywhere every candidate writes the same
  // bits, however it adds the bias.
  const size_t biasBytes = form.bias ? rounded(static_cast<size_t>(g.n) * resultBytes) : 0;
  const size_t total =
      aBytes + bBytes + yBytes * (addend ? 3 : 2) + wideBytes + residualBytes + auxBytes + biasBytes + 256;
  if (total > kTuneBytesMax) {
    if (matmulLog())
      std::fprintf(stderr, "megatrain: matmul %s: tuning operands exceed %zu bytes; %s\n", gemm.product.c_str(),
                   kTuneBytesMax, unprovenText);
    return unproven;
  }
  DeviceBlock block;
  if (cudaMalloc(&block.data, total) != cudaSuccess) {
    cudaGetLastError();  // clear the allocation failure
    block.data = nullptr;
    if (matmulLog())
      std::fprintf(stderr, "megatrain: matmul %s: no device room to tune; %s\n", gemm.product.c_str(), unprovenText);
    return unproven;
  }
  // a and b are cuBLASLt's A and B (our b and a): `call` takes our a, b order,
  // so the calls below pass (b, a).
  char* base = static_cast<char*>(block.data);
  void* a = base;
  void* b = base + aBytes;
  void* y = base + aBytes + bBytes;
  void* reference = base + aBytes + bBytes + yBytes;
  void* c = addend ? base + aBytes + bBytes + 2 * yBytes : y;
  void* wideY = base + aBytes + bBytes + (addend ? 3 : 2) * yBytes;
  void* negHi = static_cast<char*>(wideY) + wideBytes;
  void* residualRef = static_cast<char*>(negHi) + yBytes;
  if (form.gelu || form.dgelu) {
    void* aux = base + aBytes + bBytes + (addend ? 3 : 2) * yBytes + wideBytes + residualBytes;
    if (form.dgelu) fillTuningOperand(aux, static_cast<int64_t>(yElements), false, 4, stream);
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
                launch, gemm.product);
  }
  if (form.bias) {
    // The descriptor points at the step's bias again at each launch (MatmulPlanner::run).
    void* bias = base + aBytes + bBytes + (addend ? 3 : 2) * yBytes + wideBytes + residualBytes + auxBytes;
    fillTuningOperand(bias, g.n, form.result == DType::BF16, 5, stream);
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                launch, gemm.product);
  }
  auto* counter = reinterpret_cast<unsigned long long*>(base + total - 256);
  const bool bf16 = form.operands == DType::BF16;
  fillTuningOperand(a, static_cast<int64_t>(aElements), bf16, 1, stream);
  fillTuningOperand(b, static_cast<int64_t>(bElements), bf16, 2, stream);
  if (addend) fillTuningOperand(c, static_cast<int64_t>(yElements), false, 3, stream);
  // Compared as whole 32-bit words: the bytes past a bf16 result's last
  // element are zero in both y and the reference.
  const int64_t words = static_cast<int64_t>((yElements * resultBytes + 3) / 4);
  if (wide) {
    MT_CUDA_CHECK(cudaMemsetAsync(y, 0, yBytes, stream));
    MT_CUDA_CHECK(cudaMemsetAsync(reference, 0, yBytes, stream));
    MT_LT_CHECK(call(*wide, wide->algo, b, a, 0.0f, wideY, wideY, stream), launch, wide->product);
    convertF32ToBf16(launch, static_cast<const float*>(wideY), static_cast<uint16_t*>(reference),
                     static_cast<int64_t>(yElements));
  }

  const float beta = addend ? 1.0f : 0.0f;
  EventPair events;
  const double never = std::numeric_limits<double>::infinity();
  std::vector<double> micros(candidates.size(), never);
  std::vector<char> failed(candidates.size(), 0), same(candidates.size(), 0);
  std::vector<char> special(candidates.size(), 0);  // same bits on random operands, other on special values
  for (size_t i = 0; i < candidates.size(); ++i) {
    cublasStatus_t status = call(gemm, candidates[i].algo, b, a, beta, c, y, stream);  // warm-up, or the one call
    for (int t = 0; timed && t < kTimedCalls && status == CUBLAS_STATUS_SUCCESS; ++t) {
      if (t == 0) MT_CUDA_CHECK(cudaEventRecord(events.start, stream));
      status = call(gemm, candidates[i].algo, b, a, beta, c, y, stream);
    }
    if (status != CUBLAS_STATUS_SUCCESS) {
      if (i == 0 && !wide) ltFail(launch, "cublasLtMatmul (tuning the heuristic's first algorithm)", status, gemm.product);
      failed[i] = 1;
      continue;
    }
    if (timed) {
      MT_CUDA_CHECK(cudaEventRecord(events.stop, stream));
      MT_CUDA_CHECK(cudaEventSynchronize(events.stop));
      float ms = 0;
      MT_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
      micros[i] = 1000.0 * ms / kTimedCalls;
    }
    if (i == 0 && !wide) {
      MT_CUDA_CHECK(cudaMemcpyAsync(reference, y, yElements * resultBytes, cudaMemcpyDeviceToDevice, stream));
      same[i] = 1;
    } else {
      same[i] = countDifferentWords(static_cast<const uint32_t*>(reference), static_cast<const uint32_t*>(y), words,
                                    counter, stream) == 0;
    }
  }
  // Again on the same operands, each candidate's sums past wide's cast: run
  // with C = -hi (hi: wide's result rounded to bf16) and beta 1, it writes
  // its own sum minus hi (exact in f32) rounded to bf16, against wide's
  // residual. Two sums of the same products in other orders differ in their
  // last f32 bits, which rounding to bf16 hides in all but about one element
  // in 10^4 or 10^5 and the residual in about one in 100.
  std::vector<char> residual(candidates.size(), 0);  // same bits, other residuals
  if (wide && std::find(same.begin(), same.end(), 1) != same.end()) {
    MT_CUDA_CHECK(cudaMemsetAsync(residualRef, 0, yBytes, stream));
    splitF32ToBf16(static_cast<const float*>(wideY), negHi, residualRef, static_cast<int64_t>(yElements), stream);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!same[i]) continue;
      same[i] = call(gemm, candidates[i].algo, b, a, 1.0f, negHi, y, stream) == CUBLAS_STATUS_SUCCESS &&
                countDifferentWords(static_cast<const uint32_t*>(residualRef), static_cast<const uint32_t*>(y), words,
                                    counter, stream) == 0;
      if (!same[i]) residual[i] = 1;
    }
  }
  if (wide && std::find(same.begin(), same.end(), 1) != same.end()) {
    // Again with infinities, a NaN and sums past bf16's range in the
    // operands: the epilogue's rounding of those must be cast's too.
    plantSpecialBf16(a, static_cast<int64_t>(aElements), stream);
    MT_LT_CHECK(call(*wide, wide->algo, b, a, 0.0f, wideY, wideY, stream), launch, wide->product);
    convertF32ToBf16(launch, static_cast<const float*>(wideY), static_cast<uint16_t*>(reference),
                     static_cast<int64_t>(yElements));
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!same[i]) continue;
      same[i] = call(gemm, candidates[i].algo, b, a, beta, c, y, stream) == CUBLAS_STATUS_SUCCESS &&
                countDifferentWords(static_cast<const uint32_t*>(reference), static_cast<const uint32_t*>(y), words,
                                    counter, stream) == 0;
      if (!same[i]) special[i] = 1;
    }
  }
  MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  int first = -1;  // the highest-ranked candidate writing the reference's bits
  for (size_t i = 0; i < candidates.size() && first < 0; ++i)
    if (same[i]) first = static_cast<int>(i);
  int best = first;
  if (first >= 0) {
    for (size_t i = static_cast<size_t>(first) + 1; i < candidates.size(); ++i)
      if (same[i] && micros[i] < micros[static_cast<size_t>(best)]) best = static_cast<int>(i);
    if (micros[static_cast<size_t>(best)] > kTuneMargin * micros[static_cast<size_t>(first)]) best = first;
  }
  if (matmulLog()) {
    std::string line;
    for (size_t i = 0; i < candidates.size(); ++i) {
      char text[96];
      const char* bits = same[i]        ? ""
                         : residual[i]  ? "(other residuals)"
                         : special[i]   ? "(other bits on special values)"
                                        : "(other bits)";
      if (failed[i])
        std::snprintf(text, sizeof text, " %zu:failed", i);
      else if (timed)
        std::snprintf(text, sizeof text, " %zu:%.1fus%s", i, micros[i], bits);
      else
        std::snprintf(text, sizeof text, " %zu:%s%s", i, same[i] ? "same bits" : "", bits);
      line += text;
    }
    const char* against = wide ? " against the f32 product's cast" : "";
    if (best >= 0)
      std::fprintf(stderr, "megatrain: matmul %s: candidates%s%s; chose %d\n", gemm.product.c_str(), line.c_str(),
                   against, best);
    else
      std::fprintf(stderr, "megatrain: matmul %s: candidates%s%s; none writes its bits: %s\n",
                   gemm.product.c_str(), line.c_str(), against, unprovenText);
  }
  return best < 0 ? unproven : best;
}

void MatmulPlanner::prepare(const Launch& launch) {
  const std::string_view kernel(launch.kernel);
  const bool gelu = kernel == "matmul_bias_gelu" && launch.numIn == 3 && launch.numOut == 2;
  const bool geluGrad = kernel == "matmul_gelu_grad" && launch.numIn == 3 && launch.numOut == 1;
  if (!gelu && !geluGrad &&
      (!((kernel == "matmul" && launch.numIn == 2) || (kernel == "matmul_add" && launch.numIn == 3)) ||
       launch.numOut != 1))
    return;
  checkTypes(launch);
  const MatmulDims d = matmulDims(launch);
  if (launch.out[0].dtype == DType::F64) return;  // cuBLAS Dgemm
  const Precision precision = precisionOf(launch);
  if (launch.out[0].shape.elements() == 0 || d.k == 0) return;  // nothing for cuBLASLt to do
  if (launch.step < 0 || static_cast<size_t>(launch.step) >= impl_->steps.size())
    fail(launch, "step " + std::to_string(launch.step) + " lies outside the plan beginPlan() was given");

  StepRecord record;
  record.batch = decompose(launch, d);
  const Gemm& g = record.batch.g;
  const GemmBatch& batch = record.batch;
  record.a = launch.in[0].data;
  record.b = launch.in[1].data;
  record.r = addendOf(launch);
  record.bias = biasAddend(launch);
  record.y = launch.out[0].data;
  record.z = gelu ? launch.out[1].data : nullptr;
  record.aux = geluGrad ? launch.in[2].data : nullptr;

  const int64_t operandBytes = static_cast<int64_t>(dtypeBytes(launch.in[0].dtype));
  const int64_t resultBytes = static_cast<int64_t>(dtypeBytes(launch.out[0].dtype));
  // Offsets each call adds: the strided batch and the outer dims walked on the host.
  auto offsets = [&](int t, int64_t batchStride, int64_t bytes) {
    uint64_t bits = g.count > 1 ? static_cast<uint64_t>(batchStride * bytes) : 0;
    for (int i = 0; i < batch.outer.rank; ++i) bits |= static_cast<uint64_t>(batch.outer.strides[t][i] * bytes);
    return static_cast<int64_t>(bits);
  };
  const uint32_t alignA = alignmentOf(record.a, {offsets(0, g.strideA, operandBytes)});
  const uint32_t alignB = alignmentOf(record.b, {offsets(1, g.strideB, operandBytes)});
  const uint32_t alignY = alignmentOf(record.y, {offsets(2, g.strideY, resultBytes)});
  // r has y's layout, so y's offsets; 0 marks a plain matmul.
  const uint32_t alignR = !record.r ? 0
                          : record.bias ? alignmentOf(record.r, {})
                                        : alignmentOf(record.r, {offsets(2, g.strideY, resultBytes)});
  Form form;
  form.operands = launch.in[0].dtype;
  form.result = launch.out[0].dtype;
  form.compute = computeTypeOf(launch.in[0].dtype, precision);
  form.alignA = alignA;
  form.alignB = alignB;
  form.alignY = alignY;
  form.alignR = alignR;
  form.bias = record.bias;
  if (gelu) {
    // The GELU epilogue where cuBLASLt takes the aux matrix's leading
    // dimension (a multiple of 8) and offers an algorithm; else the bias
    // form writes z as its D and gelu's kernel follows.
    const uint32_t alignZ = alignmentOf(record.z, {offsets(2, g.strideY, resultBytes)});
    const LtGemm* fused = nullptr;
    if (g.n % 8 == 0) {
      Form geluForm = form;
      geluForm.gelu = true;
      geluForm.alignZ = alignZ;
      fused = &impl_->find(launch, geluForm, g, batch.calls, record.r, nullptr, record.z);
    }
    if (fused && !fused->refused) {
      record.gemm = fused;
    } else {
      form.alignY = alignZ;
      record.gemm = &impl_->find(launch, form, g, batch.calls, record.r);
      record.geluAfter = true;
    }
    if (matmulLog())
      std::fprintf(stderr, "megatrain: matmul step %d: bias and gelu %s by %s\n", launch.step,
                   launch.out[0].shape.str().c_str(),
                   record.geluAfter ? "the bias form, then gelu's kernel" : "cuBLASLt's GELU_AUX_BIAS epilogue");
  } else if (geluGrad) {
    // The DGELU epilogue where cuBLASLt takes the aux matrix's leading
    // dimension and offers an algorithm; else the plain form writes the
    // product into dz and gelu_grad's kernel scales it there.
    const LtGemm* fused = nullptr;
    if (g.n % 8 == 0) {
      Form gradForm = form;
      gradForm.dgelu = true;
      gradForm.alignZ = alignmentOf(record.aux, {offsets(2, g.strideY, resultBytes)});
      fused = &impl_->find(launch, gradForm, g, batch.calls, nullptr, nullptr, record.aux);
    }
    if (fused && !fused->refused) {
      record.gemm = fused;
    } else {
      record.gemm = &impl_->find(launch, form, g, batch.calls, nullptr);
      record.gradAfter = true;
    }
    if (matmulLog())
      std::fprintf(stderr, "megatrain: matmul step %d: gelu's slope %s by %s\n", launch.step,
                   launch.out[0].shape.str().c_str(),
                   record.gradAfter ? "the plain form, then gelu_grad's kernel" : "cuBLASLt's DGELU epilogue");
  } else if (form.result != DType::BF16) {
    record.gemm = &impl_->find(launch, form, g, batch.calls, record.bias ? record.r : nullptr);
  } else {
    // The f32 form the unfused matmul would run: its result in a buffer
    // aligned as every arena buffer and the scratch are (256 bytes).
    Form wideForm = form;
    wideForm.result = DType::F32;
    wideForm.alignY = alignmentOf(nullptr, {offsets(2, g.strideY, sizeof(float))});
    const LtGemm& wide = impl_->find(launch, wideForm, g, batch.calls, nullptr);
    record.gemm = &impl_->find(launch, form, g, batch.calls, nullptr, &wide);
    if (matmulLog()) {
      const std::string way = record.gemm->viaF32
                                  ? "the f32 product into the scratch, then cast's conversion"
                                  : "cuBLASLt's bf16 D (candidate " + std::to_string(record.gemm->candidate) +
                                        ", bits equal to the f32 product's cast)";
      std::fprintf(stderr, "megatrain: matmul step %d: bf16 y %s written by %s\n", launch.step,
                   launch.out[0].shape.str().c_str(), way.c_str());
    }
  }
  impl_->steps[static_cast<size_t>(launch.step)] = record;
}

void MatmulPlanner::run(const Launch& launch) const {
  const StepRecord* record = launch.step >= 0 && static_cast<size_t>(launch.step) < impl_->steps.size()
                                 ? &impl_->steps[static_cast<size_t>(launch.step)]
                                 : nullptr;
  if (!record || !record->gemm)
    fail(launch, "step " + std::to_string(launch.step) + " has no cuBLASLt plan (prepare() did not see it)");
  if (record->a != launch.in[0].data || record->b != launch.in[1].data || record->y != launch.out[0].data ||
      record->r != addendOf(launch) || record->z != (geluStep(launch) ? launch.out[1].data : nullptr) ||
      record->aux != (geluGradStep(launch) ? launch.in[2].data : nullptr))
    fail(launch, "step " + std::to_string(launch.step) + " was planned for other operand addresses");
  const LtGemm& gemm = *record->gemm;
  const auto* a = static_cast<const char*>(record->a);
  const auto* b = static_cast<const char*>(record->b);
  auto* y = static_cast<char*>(record->y);
  const int64_t operandBytes = static_cast<int64_t>(dtypeBytes(launch.in[0].dtype));
  if (const LtGemm* wide = gemm.viaF32) {
    // A bf16 result no bf16-D algorithm was shown to write: the f32 form
    // into the scratch (y's layout), then cast's conversion into y.
    const int64_t elements = launch.out[0].shape.elements();
    if (!launch.device->scratch || launch.device->scratchBytes < static_cast<size_t>(elements) * sizeof(float))
      fail(launch, "the scratch holds " + std::to_string(launch.device->scratchBytes) + " bytes, the f32 product " +
                       std::to_string(elements * 4) + " (matmulScratch sizes it)");
    auto* f32 = static_cast<float*>(launch.device->scratch);
    forEachCall(record->batch, [&](int64_t oa, int64_t ob, int64_t oy) {
      MT_LT_CHECK(impl_->call(*wide, wide->algo, a + oa * operandBytes, b + ob * operandBytes, 0.0f, f32 + oy,
                              f32 + oy, launch.device->stream),
                  launch, wide->product);
    });
    convertF32ToBf16(launch, f32, static_cast<uint16_t*>(record->y), elements);
    return;
  }
  const int64_t resultBytes = static_cast<int64_t>(dtypeBytes(launch.out[0].dtype));
  const auto* r = record->bias ? nullptr : static_cast<const char*>(record->r);
  const float beta = r ? 1.0f : 0.0f;
  if (record->bias) {
    // The descriptor is shared by every step of this form: point it at this step's bias.
    const void* bias = record->r;
    MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                launch, gemm.product);
  }
  // matmul_bias_gelu: D is y and the aux matrix z (GELU form), or D is z (the bias form, gelu after).
  auto* z = static_cast<char*>(record->z);
  char* d = record->geluAfter ? z : y;
  const bool aux = (z && !record->geluAfter) || (record->aux && !record->gradAfter);
  // matmul_gelu_grad: the aux matrix z is an input (DGELU reads it).
  const auto* zIn = static_cast<const char*>(record->aux);
  forEachCall(record->batch, [&](int64_t oa, int64_t ob, int64_t oy) {
    void* out = d + oy * resultBytes;
    if (aux) {  // the descriptor is shared by this form's steps: point it at this call's z
      const void* pre = zIn ? static_cast<const void*>(zIn + oy * resultBytes) : z + oy * resultBytes;
      MT_LT_CHECK(cublasLtMatmulDescSetAttribute(gemm.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pre,
                                                 sizeof(pre)),
                  launch, gemm.product);
    }
    // C: the addend at y's offset (matmul_add), else y itself (read with beta 0, i.e. not at all).
    const void* c = r ? static_cast<const void*>(r + oy * resultBytes) : out;
    MT_LT_CHECK(impl_->call(gemm, gemm.algo, a + oa * operandBytes, b + ob * operandBytes, beta, c, out,
                            launch.device->stream),
                launch, gemm.product);
  });
  if (record->geluAfter)
    launchGeluTanh(launch, reinterpret_cast<const float*>(z), reinterpret_cast<float*>(y),
                   launch.out[0].shape.elements());
  if (record->gradAfter)
    launchGeluTanhGrad(launch, static_cast<const float*>(record->aux), reinterpret_cast<const float*>(y),
                       reinterpret_cast<float*>(y), launch.out[0].shape.elements());
}

void addMatmulKernels(CudaKernelRegistry& registry) {
  registry.add("matmul", {matmul, matmulScratch});
  registry.add("matmul_add", {matmul});
  registry.add("matmul_bias_gelu", {matmul});
  registry.add("matmul_gelu_grad", {matmul});
}

}  // namespace megatrain::runtime::cuda
