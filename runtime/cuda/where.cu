// where.cu - where: cond ? x : y on the GPU, numpy broadcasting of all three operands.
//
// One grid-stride loop over the output reads cond, x and y through a
// coalesced StridedSpace<3> (stride 0 on stretched dims), on the elements'
// bytes, so every dtype moves.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// ---- kernel ----

// out[i] = cond[oc] ? x[ox] : y[oy]; out [n] row-major over space (tables: cond, x, y).
template <typename E>
__global__ void whereKernel(const uint8_t* cond, const E* x, const E* y, E* out, int64_t n,
                            StridedSpace<3> space) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[3];
    stridedOffsets(space, i, at);
    out[i] = cond[at[0]] ? x[at[1]] : y[at[2]];
  }
}

// ---- launcher ----

// cond [bool], x, y (one dtype, any) -> out (x's dtype, the broadcast shape).
void where(const Launch& launch) {
  const Operand &cond = launch.in[0], &x = launch.in[1], &y = launch.in[2], &out = launch.out[0];
  requireDType(launch, cond, DType::Bool, "condition");
  requireDType(launch, y, x.dtype, "input");
  requireDType(launch, out, x.dtype, "output");
  if (dtypeBytes(x.dtype) == 0) fail(launch, "input dtype is unspecified");
  const int64_t n = out.shape.elements();
  if (n == 0) return;
  StridedSpace<3> space;
  space.rank = out.shape.rank;
  for (int d = 0; d < out.shape.rank; ++d) space.dims[d] = out.shape[d];
  broadcastStrides(cond.shape, out.shape, space.strides[0]);
  broadcastStrides(x.shape, out.shape, space.strides[1]);
  broadcastStrides(y.shape, out.shape, space.strides[2]);
  coalesce(space);
  const unsigned blocks = gridFor(launch, n, kThreads);
  const cudaStream_t stream = launch.device->stream;
  const uint8_t* c = cond.as<const uint8_t>();
  switch (dtypeBytes(x.dtype)) {
    case 1: whereKernel<<<blocks, kThreads, 0, stream>>>(c, x.as<const uint8_t>(), y.as<const uint8_t>(), out.as<uint8_t>(), n, space); break;
    case 2: whereKernel<<<blocks, kThreads, 0, stream>>>(c, x.as<const uint16_t>(), y.as<const uint16_t>(), out.as<uint16_t>(), n, space); break;
    case 4: whereKernel<<<blocks, kThreads, 0, stream>>>(c, x.as<const uint32_t>(), y.as<const uint32_t>(), out.as<uint32_t>(), n, space); break;
    default: whereKernel<<<blocks, kThreads, 0, stream>>>(c, x.as<const uint64_t>(), y.as<const uint64_t>(), out.as<uint64_t>(), n, space); break;
  }
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addWhereKernels(CudaKernelRegistry& registry) { registry.add("where", {where}); }

}  // namespace megatrain::runtime::cuda
