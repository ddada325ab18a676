// cross_entropy.cu - softmax cross-entropy losses (softmax_ce, next_token_ce) and their gradients on the GPU.
//
// Both score rows of C logits against an integer label: loss = logsumexp(row)
// - row[label], averaged (or summed) over the rows whose label is not
// ignore_index; a row's gradient is scale * (softmax(row) - onehot(label))
// with scale = dloss / count (mean) or dloss (sum). One description (CeRows)
// covers both kernels:
//   softmax_ce    logits [N, C, D...], labels [N, D...]: row r = (n, q) has its
//                 C logits D apart, label labels[r];
//   next_token_ce logits [B, T, V], tokens [B, T]: row r = (b, t) is
//                 contiguous, label tokens[r + 1], none at t = T - 1.
// The loss is two launches: a group per row (a block for long contiguous rows,
// a warp for shorter ones, a thread for interleaved ones) writes its loss and
// weight to scratch, then one block adds them in a fixed order. Max, exp, log and sums run in double. A
// label outside [0, C) that is not ignore_index flags bad data (reported by
// the backend at the next synchronization) and makes that row NaN.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

constexpr int kTotalThreads = 1024;

struct CeRows {
  int64_t count = 0;    // rows
  int64_t classes = 0;  // logits per row
  int64_t inner = 1;    // distance between a row's logits
  int64_t shift = 0;    // label of row r: labels[r + shift]
  int64_t period = 0;   // > 0: rows r with r % period == period - 1 have no label
  bool hasIgnore = false;
  int64_t ignore = 0;
  bool mean = true;

  __device__ int64_t base(int64_t r) const { return (r / inner) * classes * inner + r % inner; }
};

enum class RowKind { Skipped, Counted, Bad };

__device__ __forceinline__ RowKind rowKind(const CeRows& rows, const int64_t* labels, int64_t r, int64_t& label) {
  if (rows.period > 0 && r % rows.period == rows.period - 1) return RowKind::Skipped;
  label = labels[r + rows.shift];
  if (rows.hasIgnore && label == rows.ignore) return RowKind::Skipped;
  return label >= 0 && label < rows.classes ? RowKind::Counted : RowKind::Bad;
}

// logsumexp of row r across the group; every member gets it.
template <typename T, int G>
__device__ double rowLogSumExp(const T* logits, const CeRows& rows, int64_t base, int member) {
  double max = -INFINITY;
  for (int64_t i = member; i < rows.classes; i += G) max = fmax(max, static_cast<double>(logits[base + i * rows.inner]));
  max = groupMax<G>(max);
  double sum = 0;
  for (int64_t i = member; i < rows.classes; i += G) sum += exp(static_cast<double>(logits[base + i * rows.inner]) - max);
  return max + log(groupSum<G>(sum));
}

// ---- kernels ----

// loss [count], weight [count] per row: (lse - logit[label], 1), (0, 0) when skipped.
template <typename T, int G>
__global__ void rowLossKernel(const T* __restrict__ logits, const int64_t* __restrict__ labels, CeRows rows,
                              double* __restrict__ loss, double* __restrict__ weight, int* badData, int step) {
  const int member = groupMember<G>();
  for (int64_t r = firstGroup<G>(); r < rows.count; r += groupCount<G>()) {
    int64_t label = 0;
    const RowKind kind = rowKind(rows, labels, r, label);
    double value = 0;
    if (kind == RowKind::Bad) {
      if (member == 0) flagBadData(badData, step);
      value = NAN;
    } else if (kind == RowKind::Counted) {
      const int64_t base = rows.base(r);
      value = rowLogSumExp<T, G>(logits, rows, base, member) - static_cast<double>(logits[base + label * rows.inner]);
    }
    if (member == 0) {
      loss[r] = value;
      weight[r] = kind == RowKind::Skipped ? 0.0 : 1.0;
    }
  }
}

// out [1] = sum(loss) / sum(weight) (0 when no row counts) or sum(loss); one block.
template <typename T>
__global__ void __launch_bounds__(kTotalThreads) totalLossKernel(const double* __restrict__ loss,
                                                                 const double* __restrict__ weight, int64_t count,
                                                                 bool mean, T* out) {
  __shared__ double shared[32];
  double total = 0, counted = 0;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    total += loss[r];
    counted += weight[r];
  }
  total = blockSum(total, shared);
  counted = blockSum(counted, shared);
  if (threadIdx.x == 0) out[0] = static_cast<T>(mean ? (counted > 0 ? total / counted : 0.0) : total);
}

// counted [1] = the number of rows that are not skipped; one block.
__global__ void __launch_bounds__(kTotalThreads) countRowsKernel(const int64_t* __restrict__ labels, CeRows rows,
                                                                 double* counted) {
  __shared__ double shared[32];
  double own = 0;
  for (int64_t r = threadIdx.x; r < rows.count; r += blockDim.x) {
    int64_t label = 0;
    own += rowKind(rows, labels, r, label) == RowKind::Skipped ? 0.0 : 1.0;
  }
  own = blockSum(own, shared);
  if (threadIdx.x == 0) counted[0] = own;
}

// dlogits row r = scale * (softmax(row) - onehot(label)); zero when skipped.
// logits, dlogits as the rows describe; dloss [1], counted [1].
template <typename T, int G>
__global__ void rowGradKernel(const T* __restrict__ logits, const int64_t* __restrict__ labels, CeRows rows,
                              const T* __restrict__ dloss, const double* __restrict__ counted, T* __restrict__ dlogits,
                              int* badData, int step) {
  const double d = static_cast<double>(dloss[0]);
  const double scale = rows.mean ? (counted[0] > 0 ? d / counted[0] : 0.0) : d;
  const int member = groupMember<G>();
  for (int64_t r = firstGroup<G>(); r < rows.count; r += groupCount<G>()) {
    int64_t label = 0;
    const RowKind kind = rowKind(rows, labels, r, label);
    const int64_t base = rows.base(r);
    if (kind == RowKind::Counted) {
      const double lse = rowLogSumExp<T, G>(logits, rows, base, member);
      for (int64_t i = member; i < rows.classes; i += G) {
        const int64_t at = base + i * rows.inner;
        const double p = exp(static_cast<double>(logits[at]) - lse);
        dlogits[at] = static_cast<T>(scale * (p - (i == label ? 1.0 : 0.0)));
      }
    } else {
      if (kind == RowKind::Bad && member == 0) flagBadData(badData, step);
      const T fill = kind == RowKind::Bad ? quietNaN<T>() : T(0);
      for (int64_t i = member; i < rows.classes; i += G) dlogits[base + i * rows.inner] = fill;
    }
  }
}

// ---- launchers ----

// The device view of a loss's rows, from the kernel layer's geometry.
CeRows softmaxCeRows(const Launch& launch) {
  const SoftmaxCeDims d = softmaxCeDims(launch);
  CeRows rows;
  rows.inner = d.inner;
  rows.count = d.n * d.inner;
  rows.classes = d.c;
  rows.mean = d.mean;
  rows.hasIgnore = d.ignore.has_value();
  if (d.ignore) rows.ignore = *d.ignore;
  return rows;
}

CeRows nextTokenRows(const Launch& launch) {
  const NextTokenDims d = nextTokenDims(launch);
  CeRows rows;
  rows.count = d.b * d.t;
  rows.classes = d.v;
  rows.shift = 1;
  rows.period = d.t;
  rows.hasIgnore = d.ignore.has_value();
  if (d.ignore) rows.ignore = *d.ignore;
  return rows;
}

void launchLoss(const Launch& launch, const CeRows& rows) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | outMask(0));
  const DeviceContext& device = *launch.device;
  if (2 * static_cast<size_t>(rows.count) * sizeof(double) > device.scratchBytes)
    fail(launch, "scratch too small (prepare sized it for another shape)");
  double* loss = static_cast<double*>(device.scratch);  // [count]
  double* weight = loss + rows.count;                   // [count]
  const int64_t* labels = launch.in[1].as<const int64_t>();
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* logits = launch.in[0].as<const T>();
    if (rows.count > 0) {
      dispatchRowGroup(rows.classes, rows.inner, [&](auto group) {
        constexpr int G = decltype(group)::value;
        rowLossKernel<T, G><<<gridFor(launch, rows.count * G, kThreads), kThreads, 0, device.stream>>>(
            logits, labels, rows, loss, weight, device.badData, launch.step);
      });
      MT_CHECK_LAUNCH(launch);
    }
    totalLossKernel<T><<<1, kTotalThreads, 0, device.stream>>>(loss, weight, rows.count, rows.mean,
                                                               launch.out[0].as<T>());
  });
  MT_CHECK_LAUNCH(launch);
}

void launchGrad(const Launch& launch, const CeRows& rows) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(2) | outMask(0));
  const DeviceContext& device = *launch.device;
  if (sizeof(double) > device.scratchBytes) fail(launch, "scratch too small (prepare sized it for another shape)");
  double* counted = static_cast<double*>(device.scratch);  // [1]
  const int64_t* labels = launch.in[1].as<const int64_t>();
  if (rows.count == 0 || rows.classes == 0) return;
  countRowsKernel<<<1, kTotalThreads, 0, device.stream>>>(labels, rows, counted);
  MT_CHECK_LAUNCH(launch);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* logits = launch.in[0].as<const T>();
    const T* dloss = launch.in[2].as<const T>();
    T* dlogits = launch.out[0].as<T>();
    dispatchRowGroup(rows.classes, rows.inner, [&](auto group) {
      constexpr int G = decltype(group)::value;
      rowGradKernel<T, G><<<gridFor(launch, rows.count * G, kThreads), kThreads, 0, device.stream>>>(
          logits, labels, rows, dloss, counted, dlogits, device.badData, launch.step);
    });
  });
  MT_CHECK_LAUNCH(launch);
}

void softmaxCe(const Launch& launch) { launchLoss(launch, softmaxCeRows(launch)); }
void softmaxCeGrad(const Launch& launch) { launchGrad(launch, softmaxCeRows(launch)); }
void nextTokenCe(const Launch& launch) { launchLoss(launch, nextTokenRows(launch)); }
void nextTokenCeGrad(const Launch& launch) { launchGrad(launch, nextTokenRows(launch)); }

size_t softmaxCeScratch(const Launch& launch) { return 2 * static_cast<size_t>(softmaxCeRows(launch).count) * sizeof(double); }
size_t nextTokenScratch(const Launch& launch) { return 2 * static_cast<size_t>(nextTokenRows(launch).count) * sizeof(double); }
size_t gradScratch(const Launch&) { return sizeof(double); }

constexpr const char* kBadLabel = "a label lies outside [0, C) and is not ignore_index";

}  // namespace

void addCrossEntropyKernels(CudaKernelRegistry& registry) {
  registry.add("softmax_ce", {softmaxCe, softmaxCeScratch, kBadLabel});
  registry.add("softmax_ce_grad", {softmaxCeGrad, gradScratch, kBadLabel});
  registry.add("next_token_ce", {nextTokenCe, nextTokenScratch, kBadLabel});
  registry.add("next_token_ce_grad", {nextTokenCeGrad, gradScratch, kBadLabel});
}

}  // namespace megatrain::runtime::cuda
