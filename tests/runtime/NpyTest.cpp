// NpyTest.cpp - .npy round trips for every supported dtype and rejection of what is not supported.
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Npy.h"

namespace megatrain::runtime::testing {
namespace {

TEST(Npy, RoundTripsEveryDtypeAndRank) {
  const std::string dir = makeTempDir();
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {2, 3}, {2, 1, 4}};
  for (ElementType type : {ElementType::F32, ElementType::F64, ElementType::I32, ElementType::I64}) {
    for (const auto& shape : shapes) {
      HostArray array = HostArray::zeros(type, shape);
      for (size_t i = 0; i < array.bytes.size(); ++i) array.bytes[i] = static_cast<std::byte>(i * 37 + 5);
      const std::string path = dir + "/a.npy";
      writeNpy(path, array);
      const HostArray back = readNpy(path);
      EXPECT_EQ(back.type, type);
      EXPECT_EQ(back.shape, shape);
      EXPECT_EQ(back.bytes, array.bytes);
      // The header is padded so the data starts on a 64-byte boundary, as numpy does.
      std::ifstream in(path, std::ios::binary | std::ios::ate);
      EXPECT_EQ((static_cast<size_t>(in.tellg()) - array.bytes.size()) % 64, 0u);
    }
  }
}

// A version 2.0 file, written by hand as numpy would for a large header.
TEST(Npy, ReadsVersionTwo) {
  const std::string path = makeTempDir() + "/v2.npy";
  std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }";
  header.append(64 - (12 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x02\x00", 8);
  const uint32_t length = static_cast<uint32_t>(header.size());
  out.write(reinterpret_cast<const char*>(&length), 4);
  out << header;
  const int64_t values[2] = {-7, 1LL << 40};
  out.write(reinterpret_cast<const char*>(values), sizeof values);
  out.close();
  const HostArray array = readNpy(path);
  ASSERT_EQ(array.type, ElementType::I64);
  ASSERT_EQ(array.shape, std::vector<int64_t>{2});
  EXPECT_EQ(array.data<int64_t>()[0], -7);
  EXPECT_EQ(array.data<int64_t>()[1], 1LL << 40);
}

void writeRaw(const std::string& path, const std::string& header, size_t dataBytes) {
  std::string padded = header;
  padded.append(64 - (10 + padded.size() + 1) % 64, ' ');
  padded += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(padded.size() & 0xFF), static_cast<char>(padded.size() >> 8)};
  out.write(length, 2);
  out << padded << std::string(dataBytes, '\0');
}

std::string readError(const std::string& path) {
  try {
    readNpy(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, RejectsWhatItCannotRead) {
  const std::string dir = makeTempDir();
  writeRaw(dir + "/f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
  EXPECT_EQ(readError(dir + "/f.npy"),
            dir + "/f.npy: Fortran-order arrays are not supported (save a C-order array)");
  writeRaw(dir + "/b.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
  EXPECT_EQ(readError(dir + "/b.npy"),
            dir + "/b.npy: unsupported .npy dtype '>f4' (supported: <f4, <f8, <i4, <i8)");
  writeRaw(dir + "/t.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 16);
  EXPECT_EQ(readError(dir + "/t.npy"), dir + "/t.npy: expected 24 data bytes, found 16");
  // Dims from the file past int64, or whose product overflows: refused, never wrapped.
  writeRaw(dir + "/h.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", 8);
  EXPECT_EQ(readError(dir + "/h.npy"), dir + "/h.npy: the .npy shape holds more bytes than memory can address");
  writeRaw(dir + "/p.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8);
  EXPECT_EQ(readError(dir + "/p.npy"), dir + "/p.npy: the .npy shape holds more bytes than memory can address");
  std::ofstream(dir + "/x.npy") << "hello";
  EXPECT_EQ(readError(dir + "/x.npy"), dir + "/x.npy: not a .npy file");
}

}  // namespace
}  // namespace megatrain::runtime::testing
