// PointwiseSource.cpp - writes a pointwise program as a CUDA kernel with its registers in local variables, and compiles it with NVRTC.
//
// The source is straight-line code: input k is `x[k]`, register r is a
// `const T rN` assigned once by pointwiseOp<opcode> (PointwiseOps.cuh, the
// interpreter's own expressions), the outputs copy their registers. With
// every index constant the compiler keeps the registers in machine
// registers and drops dead ones; the interpreter's frame, indexed at run
// time, lives in local memory instead. Constants are written as their bits
// (__longlong_as_double), so a Scale or Powf factor is exactly the plan's.
//
// Two access paths (PointwiseSignature::vectorized): one 16-byte pack per
// operand per thread, V elements (16 bytes of the narrowest operand; a wider
// operand moves V x its size / 16 packs), with the last n % V elements taken
// one a thread by block 0; or one element a thread through the broadcast
// strides, in 32-bit index arithmetic below params.narrowBelow as the
// interpreter does (DeviceMath.cuh's stridedOffsets).
#include "PointwiseSource.h"

#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::cuda {
namespace {

namespace pw = megatrain::pointwise;
using kernels::DType;

const char* storageType(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::BF16: return "unsigned short";
    default: return nullptr;
  }
}

size_t storageBytes(DType dtype) { return dtype == DType::F64 ? 8 : dtype == DType::F32 ? 4 : 2; }

// The value of element `e` of storage `s` in T.
std::string loadExpr(DType dtype, const std::string& element) {
  if (dtype == DType::BF16) return "static_cast<T>(bf16BitsToFloat(" + element + "))";
  return "static_cast<T>(" + element + ")";
}

// `value` (a T) as the storage of dtype.
std::string storeExpr(DType dtype, const std::string& value) {
  if (dtype == DType::BF16) return "floatToBf16Bits(static_cast<float>(" + value + "))";
  return std::string("static_cast<") + storageType(dtype) + ">(" + value + ")";
}

std::string doubleBits(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  char text[64];
  std::snprintf(text, sizeof text, "__longlong_as_double(0x%016llxll)", static_cast<unsigned long long>(bits));
  return text;
}

// program(x, y): the registers as locals, straight-line.
void writeProgram(std::ostringstream& s, const PointwiseSignature& sig) {
  const int inputs = static_cast<int>(sig.in.size());
  const size_t count = sig.code.size() / pw::kFields;
  s << "__device__ __forceinline__ void program(const T (&x)[" << inputs << "], T (&y)[" << sig.out.size()
    << "]) {\n";
  for (int k = 0; k < inputs; ++k) s << "  const T r" << k << " = x[" << k << "];\n";
  for (size_t j = 0; j < count; ++j) {
    const int64_t* ins = &sig.code[j * pw::kFields];
    const pw::OpcodeInfo& info = *pw::opcodeInfo(ins[0]);
    std::string operands[3] = {"T(0)", "T(0)", "T(0)"};
    std::string k = "0.0";
    for (int slot = 0; slot < 3; ++slot) {
      if (info.constant && slot == 1) k = doubleBits(sig.constants[static_cast<size_t>(ins[2])]);
      else if (slot < info.registers) operands[slot] = "r" + std::to_string(ins[1 + slot]);
    }
    s << "  const T r" << inputs + static_cast<int64_t>(j) << " = pointwiseOp<" << ins[0] << ">(" << operands[0]
      << ", " << operands[1] << ", " << operands[2] << ", " << k << ");  // " << info.name << "\n";
  }
  for (size_t k = 0; k < sig.outputs.size(); ++k) {
    // A bf16 output stores the round_bf16's operand: the store rounds it to
    // the same bits (rounding to bf16 is idempotent), and the round, if
    // nothing else reads it, is dead code.
    int64_t reg = sig.outputs[k];
    while (sig.out[k] == DType::BF16 && reg >= inputs && sig.code[(reg - inputs) * pw::kFields] == pw::RoundBf16)
      reg = sig.code[(reg - inputs) * pw::kFields + 1];
    s << "  y[" << k << "] = r" << reg << ";\n";
  }
  s << "}\n\n";
}

// One element at index expression `at` for every input, the program, and
// the outputs stored at `i` (the output layout is always dense).
void writeScalarElement(std::ostringstream& s, const PointwiseSignature& sig, const char* indent,
                        const std::vector<std::string>& at) {
  const size_t inputs = sig.in.size(), outputs = sig.out.size();
  s << indent << "T x[" << inputs << "];\n";
  for (size_t k = 0; k < inputs; ++k)
    s << indent << "x[" << k << "] = "
      << loadExpr(sig.in[k], std::string("static_cast<const ") + storageType(sig.in[k]) + "*>(p.in[" +
                                 std::to_string(k) + "])[" + at[k] + "]")
      << ";\n";
  s << indent << "T y[" << outputs << "];\n" << indent << "program(x, y);\n";
  for (size_t k = 0; k < outputs; ++k)
    s << indent << "static_cast<" << storageType(sig.out[k]) << "*>(p.out[" << k << "])[i] = "
      << storeExpr(sig.out[k], "y[" + std::to_string(k) + "]") << ";\n";
}

void writeVectorized(std::ostringstream& s, const PointwiseSignature& sig) {
  const int width = pointwiseVectorWidth(sig);
  const size_t inputs = sig.in.size(), outputs = sig.out.size();
  auto packs = [&](DType dtype) { return static_cast<size_t>(width) * storageBytes(dtype) / 16; };
  s << "extern \"C\" __global__ void __launch_bounds__(" << kPointwiseJitThreads << ") " << kPointwiseEntry
    << "(const PointwiseJitParams p) {\n"
    << "  const long long groups = p.n / " << width << ";\n"
    << "  for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;\n"
    << "       g += static_cast<long long>(gridDim.x) * blockDim.x) {\n";
  for (size_t k = 0; k < inputs; ++k) {
    s << "    union { uint4 w[" << packs(sig.in[k]) << "]; " << storageType(sig.in[k]) << " e[" << width
      << "]; } in" << k << ";\n"
      << "#pragma unroll\n    for (int j = 0; j < " << packs(sig.in[k]) << "; ++j) in" << k
      << ".w[j] = static_cast<const uint4*>(p.in[" << k << "])[g * " << packs(sig.in[k]) << " + j];\n";
  }
  for (size_t k = 0; k < outputs; ++k)
    s << "    union { uint4 w[" << packs(sig.out[k]) << "]; " << storageType(sig.out[k]) << " e[" << width
      << "]; } out" << k << ";\n";
  s << "#pragma unroll\n    for (int e = 0; e < " << width << "; ++e) {\n"
    << "      T x[" << inputs << "];\n";
  for (size_t k = 0; k < inputs; ++k)
    s << "      x[" << k << "] = " << loadExpr(sig.in[k], "in" + std::to_string(k) + ".e[e]") << ";\n";
  s << "      T y[" << outputs << "];\n      program(x, y);\n";
  for (size_t k = 0; k < outputs; ++k)
    s << "      out" << k << ".e[e] = " << storeExpr(sig.out[k], "y[" + std::to_string(k) + "]") << ";\n";
  s << "    }\n";
  for (size_t k = 0; k < outputs; ++k)
    s << "#pragma unroll\n    for (int j = 0; j < " << packs(sig.out[k]) << "; ++j) static_cast<uint4*>(p.out["
      << k << "])[g * " << packs(sig.out[k]) << " + j] = out" << k << ".w[j];\n";
  s << "  }\n"
    << "  // The last n % " << width << " elements, one a thread of block 0.\n"
    << "  const long long i = groups * " << width << " + threadIdx.x;\n"
    << "  if (blockIdx.x == 0 && i < p.n) {\n";
  writeScalarElement(s, sig, "    ", std::vector<std::string>(inputs, "i"));
  s << "  }\n}\n";
}

void writeBroadcast(std::ostringstream& s, const PointwiseSignature& sig) {
  const size_t inputs = sig.in.size();
  s << "// The inputs' element offsets of output index `rest`, in index type I.\n"
    << "template <typename I>\n"
    << "__device__ __forceinline__ void offsetsIn(const PointwiseJitParams& p, I rest, long long (&at)[" << inputs
    << "]) {\n"
    << "  I sum[" << inputs << "];\n"
    << "#pragma unroll\n  for (int t = 0; t < " << inputs << "; ++t) sum[t] = 0;\n"
    << "#pragma unroll\n  for (int d = PointwiseJitParams::kRank - 1; d >= 0; --d) {\n"
    << "    if (d < p.rank) {\n"
    << "      const I dim = static_cast<I>(p.dims[d]);\n"
    << "      const I index = d == 0 ? rest : rest % dim;\n"
    << "      if (d > 0) rest /= dim;\n"
    << "#pragma unroll\n      for (int t = 0; t < " << inputs
    << "; ++t) sum[t] += index * static_cast<I>(p.strides[t][d]);\n"
    << "    }\n  }\n"
    << "#pragma unroll\n  for (int t = 0; t < " << inputs << "; ++t) at[t] = static_cast<long long>(sum[t]);\n"
    << "}\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(" << kPointwiseJitThreads << ") " << kPointwiseEntry
    << "(const PointwiseJitParams p) {\n"
    << "  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n;\n"
    << "       i += static_cast<long long>(gridDim.x) * blockDim.x) {\n"
    << "    long long at[" << inputs << "];\n"
    << "    if (i < p.narrowBelow) offsetsIn<unsigned>(p, static_cast<unsigned>(i), at);\n"
    << "    else offsetsIn<long long>(p, i, at);\n";
  std::vector<std::string> at;
  for (size_t k = 0; k < inputs; ++k) at.push_back("at[" + std::to_string(k) + "]");
  writeScalarElement(s, sig, "    ", at);
  s << "  }\n}\n";
}

void checkSignature(const PointwiseSignature& sig) {
  const std::string problem =
      pw::checkProgram(static_cast<int>(sig.in.size()), sig.code.data(), sig.code.size(), sig.constants.size(),
                       sig.outputs.data(), sig.outputs.size());
  if (!problem.empty()) throw Error("pointwise source: the program " + problem);
  if (sig.outputs.size() != sig.out.size())
    throw Error("pointwise source: 'outputs' names " + std::to_string(sig.outputs.size()) + " registers for " +
                std::to_string(sig.out.size()) + " output dtypes");
  if (sig.compute != DType::F32 && sig.compute != DType::F64)
    throw Error(std::string("pointwise source: compute type ") + kernels::dtypeLabel(sig.compute) +
                " is not f32 or f64");
  for (const std::vector<DType>* list : {&sig.in, &sig.out})
    for (DType dtype : *list)
      if (!storageType(dtype))
        throw Error(std::string("pointwise source: an operand is ") + kernels::dtypeLabel(dtype) +
                    ", not f32, f64 or bf16");
}

}  // namespace

int pointwiseVectorWidth(const PointwiseSignature& sig) {
  size_t narrowest = storageBytes(sig.compute);
  for (const std::vector<DType>* list : {&sig.in, &sig.out})
    for (DType dtype : *list) narrowest = std::min(narrowest, storageBytes(dtype));
  return static_cast<int>(16 / narrowest);
}

std::string pointwiseSource(const PointwiseSignature& sig) {
  checkSignature(sig);
  std::ostringstream s;
  s << "// A pointwise program compiled at run time (runtime/cuda/PointwiseSource.cpp).\n"
    << "#include <cstdint>\n"
    << "#include \"PointwiseOps.cuh\"\n"
    << "#include \"PointwiseJitParams.h\"\n\n"
    << "using namespace megatrain::runtime::cuda;\n"
    << "typedef " << (sig.compute == DType::F64 ? "double" : "float") << " T;  // the compute type\n\n";
  writeProgram(s, sig);
  if (sig.vectorized) writeVectorized(s, sig);
  else writeBroadcast(s, sig);
  return s.str();
}

std::vector<std::string> pointwiseNvrtcOptions(int major, int minor) {
  return {"--gpu-architecture=sm_" + std::to_string(major * 10 + minor), "--fmad=false", "--prec-div=true",
          "--prec-sqrt=true", "--ftz=false", "--std=c++17"};
}

std::string compilePointwiseCubin(const std::string& source, int major, int minor) {
  // NVRTC has no C++ library: <cstdint> is these few names.
  static const char* const kCstdint =
      "#pragma once\n"
      "namespace std { typedef signed char int8_t; typedef short int16_t; typedef int int32_t;\n"
      "  typedef long long int64_t; typedef unsigned char uint8_t; typedef unsigned short uint16_t;\n"
      "  typedef unsigned int uint32_t; typedef unsigned long long uint64_t; }\n"
      "using std::int8_t; using std::int16_t; using std::int32_t; using std::int64_t;\n"
      "using std::uint8_t; using std::uint16_t; using std::uint32_t; using std::uint64_t;\n";
  std::vector<const char*> texts = {kCstdint}, names = {"cstdint"};
  for (size_t h = 0; h < kPointwiseJitHeadersCount; ++h) {
    texts.push_back(kPointwiseJitHeaders[h].text);
    names.push_back(kPointwiseJitHeaders[h].name);
  }
  nvrtcProgram program = nullptr;
  nvrtcResult status = nvrtcCreateProgram(&program, source.c_str(), "megatrain_pointwise.cu",
                                          static_cast<int>(texts.size()), texts.data(), names.data());
  if (status != NVRTC_SUCCESS)
    throw Error(std::string("pointwise: nvrtcCreateProgram failed: ") + nvrtcGetErrorString(status));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::vector<std::string> options = pointwiseNvrtcOptions(major, minor);
  std::vector<const char*> argv;
  for (const std::string& option : options) argv.push_back(option.c_str());
  status = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  if (status != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    if (size) nvrtcGetProgramLog(program, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();  // NVRTC counts the NUL
    throw Error(std::string("pointwise: NVRTC could not compile a program for sm_") +
                std::to_string(major * 10 + minor) + " (" + nvrtcGetErrorString(status) + "): " + log +
                "\n(MEGATRAIN_POINTWISE=interp runs the interpreter instead)");
  }
  size_t size = 0;
  status = nvrtcGetCUBINSize(program, &size);
  std::string cubin(size, '\0');
  if (status == NVRTC_SUCCESS) status = nvrtcGetCUBIN(program, cubin.data());
  if (status != NVRTC_SUCCESS || size == 0)
    throw Error(std::string("pointwise: NVRTC gave no machine code for sm_") + std::to_string(major * 10 + minor) +
                " (" + nvrtcGetErrorString(status) + ")");
  return cubin;
}

}  // namespace megatrain::runtime::cuda
