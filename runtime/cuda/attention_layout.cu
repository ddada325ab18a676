// attention_layout.cu - [B, H, S, D] copies of attention's [B, S, H, D] operands (AttentionLayout.h).
#include <cstring>
#include <vector>

#include "AttentionLayout.h"
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// dst [B, C, A, D] = src [B, A, C, D] with dims 1 and 2 swapped; a thread per element of dst.
template <typename T>
__global__ void swapMiddleKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n, int64_t a, int64_t c,
                                 int64_t d) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    const int64_t e = i % d;
    int64_t rest = i / d;
    const int64_t x = rest % a;  // dst dim 2 (src dim 1)
    rest /= a;
    const int64_t y = rest % c;  // dst dim 1 (src dim 2)
    const int64_t b = rest / c;
    dst[i] = src[((b * a + x) * c + y) * d + e];
  }
}

void swapMiddle(const Launch& launch, const Operand& from, const void* src, void* dst) {
  const Shape& s = from.shape;  // src's [B, A, C, D]
  const int64_t n = s.elements();
  if (n == 0) return;
  dispatchFloating(from.dtype, [&](auto tag) {
    using T = decltype(tag);
    swapMiddleKernel<T><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        static_cast<const T*>(src), static_cast<T*>(dst), n, s[1], s[2], s[3]);
  });
  MT_CHECK_LAUNCH(launch);
}

bool backward(const Launch& launch) { return std::strcmp(launch.kernel, "attention_grad") == 0; }

// An operand a `bshd` bit moves: an input (out = -1) or an output (in = -1),
// each with its own copy.
struct Moved {
  int in, out;
  int64_t bit;
};

std::vector<Moved> movedOperands(const Launch& launch) {
  const int64_t bits = launch.attrs.getInt("bshd", 0);
  std::vector<Moved> moved;
  auto add = [&](int in, int out, int64_t bit) {
    if (bits & bit) moved.push_back({in, out, bit});
  };
  if (backward(launch)) {
    add(0, -1, kRoleQ), add(1, -1, kRoleK), add(2, -1, kRoleV), add(3, -1, kRoleY), add(5, -1, kRoleDy);
    add(-1, 0, kRoleQ), add(-1, 1, kRoleK), add(-1, 2, kRoleV);
  } else {
    add(0, -1, kRoleQ), add(1, -1, kRoleK), add(2, -1, kRoleV), add(-1, 0, kRoleY);
  }
  return moved;
}

Shape swapped(const Shape& s) {
  Shape out = s;
  if (out.rank == 4) std::swap(out.dims[1], out.dims[2]);
  return out;
}

}  // namespace

Launch headMajorView(const Launch& launch) {
  Launch view = launch;
  std::vector<Attribute> attrs;
  for (const Attribute& a : launch.attrs.list())
    if (a.name != "bshd") attrs.push_back(a);
  view.attrs = Attributes(std::move(attrs), launch.kernel);
  for (const Moved& m : movedOperands(launch)) {
    if (m.in >= 0) view.in[m.in].shape = swapped(launch.in[m.in].shape);
    if (m.out >= 0) view.out[m.out].shape = swapped(launch.out[m.out].shape);
  }
  return view;
}

size_t headMajorCopyBytes(const Launch& launch) {
  size_t bytes = 0;
  for (const Moved& m : movedOperands(launch)) {
    const Operand& operand = m.in >= 0 ? launch.in[m.in] : launch.out[m.out];
    bytes += aligned(static_cast<size_t>(operand.shape.elements()) * dtypeBytes(operand.dtype));
  }
  return bytes;
}

void runHeadMajor(const Launch& launch, void (*run)(const Launch&)) {
  const size_t copies = headMajorCopyBytes(launch);
  if (copies > launch.device->scratchBytes) fail(launch, "scratch too small (prepare sized it for another shape)");
  Launch inner = headMajorView(launch);
  DeviceContext device = *launch.device;
  char* base = static_cast<char*>(device.scratch);
  size_t at = 0;
  const std::vector<Moved> moved = movedOperands(launch);
  for (const Moved& m : moved) {
    const Operand& operand = m.in >= 0 ? launch.in[m.in] : launch.out[m.out];
    void* copy = base + at;
    at += aligned(static_cast<size_t>(operand.shape.elements()) * dtypeBytes(operand.dtype));
    if (m.in >= 0) {
      swapMiddle(launch, launch.in[m.in], launch.in[m.in].data, copy);
      inner.in[m.in].data = copy;
    } else {
      inner.out[m.out].data = copy;
    }
  }
  device.scratch = base + at;
  device.scratchBytes -= at;
  inner.device = &device;
  run(inner);
  for (const Moved& m : moved)
    if (m.out >= 0) swapMiddle(launch, inner.out[m.out], inner.out[m.out].data, launch.out[m.out].data);
}

}  // namespace megatrain::runtime::cuda
