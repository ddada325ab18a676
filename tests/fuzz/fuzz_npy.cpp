// fuzz_npy.cpp - libFuzzer target: bytes as a .npy file through readNpy (runtime/lib/Npy.cpp).
// megatrain::Error is an expected rejection; anything else crashes the run.
#include "FuzzFile.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = megatrain::fuzz::writeFuzzFile("input.npy", data, size);
  try {
    (void)megatrain::runtime::readNpy(path);
  } catch (const megatrain::Error&) {
  }
  return 0;
}
