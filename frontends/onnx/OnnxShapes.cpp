//===- OnnxShapes.cpp - ONNX shape rules shared by the importers and folder -===//
#include "OnnxShapes.h"

#include <algorithm>
#include <limits>

namespace megatrain::onnx_import {

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

bool checkShapeLimits(llvm::ArrayRef<int64_t> shape, std::string &error) {
  if (shape.size() > kMaxRank) {
    error = "has rank " + std::to_string(shape.size()) + "; at most " +
            std::to_string(kMaxRank) + " dims are supported";
    return false;
  }
  int64_t bytes = 8;
  for (int64_t d : shape) {
    if (d < 0) {
      error = "has a negative dim in " + shapeStr(shape);
      return false;
    }
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      error = "has shape " + shapeStr(shape) + ", whose size overflows 64 bits";
      return false;
    }
  }
  return true;
}

std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = (int)shape.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

bool normalizeAxis(int64_t &axis, int64_t rank, std::string &error) {
  if (axis < -rank || axis >= rank) {
    error = "axis " + std::to_string(axis) + " is out of range for rank " +
            std::to_string(rank);
    return false;
  }
  if (axis < 0)
    axis += rank;
  return true;
}

bool reshapeTarget(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> target,
                   bool allowZero, std::vector<int64_t> &out, std::string &error) {
  out.clear();
  int inferred = -1;
  int64_t known = 1;
  for (size_t k = 0; k < target.size(); ++k) {
    int64_t d = target[k];
    if (d == 0 && !allowZero) {
      if (k >= in.size()) {
        error = "shape " + shapeStr(target) + " copies dim " + std::to_string(k) +
                " of a rank-" + std::to_string(in.size()) + " input";
        return false;
      }
      d = in[k];
    } else if (d == -1) {
      if (inferred >= 0) {
        error = "shape " + shapeStr(target) + " has more than one -1";
        return false;
      }
      inferred = (int)k;
      d = 1;
    } else if (d <= 0) {
      error = "shape " + shapeStr(target) +
              " has a zero or negative dim (zero-sized tensors are not supported)";
      return false;
    }
    out.push_back(d);
    // A product past int64 cannot match the input's element count.
    if ((int)k != inferred && __builtin_mul_overflow(known, d, &known)) {
      error = "cannot reshape " + shapeStr(in) + " to " + shapeStr(target);
      return false;
    }
  }
  int64_t total = numElements(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) {
      error = "cannot reshape " + shapeStr(in) + " to " + shapeStr(target);
      return false;
    }
    out[inferred] = total / known;
  }
  if (numElements(out) != total) {
    error = "cannot reshape " + shapeStr(in) + " to " + shapeStr(target) + " (" +
            shapeStr(out) + ")";
    return false;
  }
  return true;
}

bool unsqueezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                    std::vector<int64_t> &out, std::string &error) {
  int64_t rank = in.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    // Axes count in the output, so the message names the output rank.
    if (a < -rank || a >= rank) {
      error = "axis " + std::to_string(a) + " is out of range for output rank " +
              std::to_string(rank);
      return false;
    }
    if (a < 0)
      a += rank;
    if (inserted[a]) {
      error = "axes repeat a dim";
      return false;
    }
    inserted[a] = true;
  }
  out.clear();
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    out.push_back(inserted[d] ? 1 : in[next++]);
  return true;
}

bool squeezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                  std::vector<int64_t> &out, std::string &error) {
  int64_t rank = in.size();
  std::vector<bool> dropped(rank, false);
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d)
      dropped[d] = in[d] == 1;
  }
  for (int64_t a : axes) {
    if (!normalizeAxis(a, rank, error))
      return false;
    if (in[a] != 1) {
      error = "cannot squeeze dim " + std::to_string(a) + " of " + shapeStr(in) +
              ": its size is not 1";
      return false;
    }
    dropped[a] = true;
  }
  out.clear();
  for (int64_t d = 0; d < rank; ++d)
    if (!dropped[d])
      out.push_back(in[d]);
  return true;
}

bool flattenShape(llvm::ArrayRef<int64_t> in, int64_t axis, std::vector<int64_t> &out,
                  std::string &error) {
  int64_t rank = in.size();
  if (axis < -rank || axis > rank) {
    error = "axis " + std::to_string(axis) + " is out of range for rank " +
            std::to_string(rank);
    return false;
  }
  if (axis < 0)
    axis += rank;
  out = {numElements(in.take_front(axis)), numElements(in.drop_front(axis))};
  return true;
}

bool transposePerm(int64_t rank, std::optional<std::vector<int64_t>> given,
                   std::vector<int64_t> &perm, std::string &error) {
  perm.clear();
  if (given)
    perm = std::move(*given);
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  std::vector<bool> seen(rank, false);
  bool valid = (int64_t)perm.size() == rank;
  for (size_t k = 0; valid && k < perm.size(); ++k) {
    valid = perm[k] >= 0 && perm[k] < rank && !seen[perm[k]];
    if (valid)
      seen[perm[k]] = true;
  }
  if (!valid) {
    error = "perm " + shapeStr(perm) + " is not a permutation of the " +
            std::to_string(rank) + " dims";
    return false;
  }
  return true;
}

std::vector<int64_t> permuteShape(llvm::ArrayRef<int64_t> shape,
                                  llvm::ArrayRef<int64_t> perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(shape[p]);
  return out;
}

bool concatCompatible(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> first,
                      int64_t axis) {
  if (shape.size() != first.size())
    return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if ((int64_t)d != axis && shape[d] != first[d])
      return false;
  return true;
}

std::vector<int64_t> gatherShape(llvm::ArrayRef<int64_t> data,
                                 llvm::ArrayRef<int64_t> indices, int64_t axis) {
  std::vector<int64_t> out(data.begin(), data.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  return out;
}

bool sliceDims(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
               llvm::ArrayRef<int64_t> ends, std::optional<std::vector<int64_t>> axes,
               std::optional<std::vector<int64_t>> steps, std::vector<SliceDim> &out,
               std::string &error) {
  int64_t rank = shape.size();
  if (starts.size() != ends.size()) {
    error = "starts and ends have different lengths";
    return false;
  }
  size_t n = starts.size();
  if (!axes) {
    axes.emplace();
    for (size_t k = 0; k < n; ++k)
      axes->push_back(k);
  }
  if (!steps)
    steps.emplace(n, 1);
  if (axes->size() != n || steps->size() != n) {
    error = "starts, ends, axes and steps must have one length";
    return false;
  }
  out.assign(rank, SliceDim());
  std::vector<bool> seen(rank, false);
  for (int64_t d = 0; d < rank; ++d)
    out[d] = {0, 1, shape[d]};
  for (size_t k = 0; k < n; ++k) {
    int64_t axis = (*axes)[k];
    if (!normalizeAxis(axis, rank, error))
      return false;
    if (seen[axis]) {
      error = "axes repeat a dim";
      return false;
    }
    seen[axis] = true;
    int64_t dim = shape[axis], step = (*steps)[k];
    if (step == 0) {
      error = "a step is 0";
      return false;
    }
    // Bounds are clamped as the spec says: to [0, dim] for positive steps,
    // [-1, dim - 1] for negative ones. Huge values (INT64_MAX) mean "to the end".
    auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < -dim ? -dim - 1 : v;
      if (v < 0)
        v += dim;
      return std::clamp(v, lo, hi);
    };
    int64_t s, e;
    if (step > 0) {
      s = clampIndex(starts[k], 0, dim);
      e = clampIndex(ends[k], 0, dim);
    } else {
      s = clampIndex(starts[k], -1, dim - 1);
      e = clampIndex(ends[k], -1, dim - 1);
    }
    int64_t count =
        step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    out[axis] = {s, step, std::max<int64_t>(count, 0)};
  }
  return true;
}

bool splitSizes(int64_t dim, std::optional<std::vector<int64_t>> sizes, int64_t parts,
                std::vector<int64_t> &out, std::string &error) {
  if (sizes) {
    int64_t total = 0;
    for (int64_t s : *sizes) {
      if (s < 0) {
        error = "split sizes must not be negative";
        return false;
      }
      total += s;
    }
    if (total != dim) {
      error = "split sizes " + shapeStr(*sizes) + " do not sum to the dim " +
              std::to_string(dim);
      return false;
    }
    out = *sizes;
    return true;
  }
  if (parts <= 0) {
    error = "the number of outputs must be positive";
    return false;
  }
  int64_t chunk = (dim + parts - 1) / parts;
  out.clear();
  for (int64_t k = 0, left = dim; k < parts; ++k) {
    out.push_back(std::min(chunk, left));
    left -= out.back();
  }
  if (out.back() <= 0) {
    error = "cannot split a dim of " + std::to_string(dim) + " into " +
            std::to_string(parts) + " non-empty parts";
    return false;
  }
  return true;
}

std::vector<std::vector<SliceDim>>
splitSlices(llvm::ArrayRef<int64_t> shape, int64_t axis, llvm::ArrayRef<int64_t> sizes) {
  std::vector<std::vector<SliceDim>> pieces;
  int64_t start = 0;
  for (int64_t size : sizes) {
    std::vector<SliceDim> &dims = pieces.emplace_back();
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
      dims.push_back(d == axis ? SliceDim{start, 1, size} : SliceDim{0, 1, shape[d]});
    start += size;
  }
  return pieces;
}

BroadcastWalk::BroadcastWalk(llvm::ArrayRef<int64_t> outShape,
                             std::initializer_list<llvm::ArrayRef<int64_t>> inShapes)
    : shape_(outShape.begin(), outShape.end()), counter_(outShape.size(), 0),
      offsets_(inShapes.size(), 0) {
  size_t rank = outShape.size();
  for (llvm::ArrayRef<int64_t> in : inShapes) {
    // A broadcast dim has stride 0: the walk reads the same element again.
    std::vector<int64_t> strides(rank, 0), own = stridesOf(in);
    for (size_t k = 0; k < in.size(); ++k)
      strides[rank - in.size() + k] = in[k] == 1 ? 0 : own[k];
    strides_.push_back(std::move(strides));
  }
}

void BroadcastWalk::next() {
  for (int d = (int)shape_.size() - 1; d >= 0; --d) {
    if (++counter_[d] < shape_[d]) {
      for (size_t k = 0; k < offsets_.size(); ++k)
        offsets_[k] += strides_[k][d];
      return;
    }
    for (size_t k = 0; k < offsets_.size(); ++k)
      offsets_[k] -= strides_[k][d] * (shape_[d] - 1);
    counter_[d] = 0;
  }
}

} // namespace megatrain::onnx_import
