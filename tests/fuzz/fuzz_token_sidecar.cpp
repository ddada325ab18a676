// fuzz_token_sidecar.cpp - libFuzzer target: bytes as a token file's JSON sidecar (runtime/lib/TokenData.cpp).
//
// The token file itself is fixed (40 bytes: 20 uint16 or 10 uint32 tokens, each
// below 16), so the sidecar's dtype and vocab decide what reading it does; a
// batch is read so that the vocab bound and the window arithmetic run too.
// Beside it lies tokens.mask (20 bytes of 0 and 1), a loss mask a sidecar can
// name ("mask"); a named mask is read with a window.
// megatrain::Error is an expected rejection; anything else crashes the run.
#include <cstdint>

#include "FuzzFile.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/TokenData.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string tokens = [] {
    uint8_t bytes[40] = {};
    for (int i = 0; i < 40; i += 2) bytes[i] = static_cast<uint8_t>(i % 16);
    uint8_t mask[20];
    for (int i = 0; i < 20; ++i) mask[i] = static_cast<uint8_t>(i % 3 == 0);
    megatrain::fuzz::writeFuzzFile("tokens.mask", mask, sizeof mask);
    return megatrain::fuzz::writeFuzzFile("tokens.bin", bytes, sizeof bytes);
  }();
  megatrain::fuzz::writeFuzzFile("tokens.bin.json", data, size);
  try {
    megatrain::runtime::TokenData file(tokens, megatrain::runtime::TokenDType::U16);
    int64_t out[2 * 4];
    file.reserveWindow(4);
    file.nextBatch(out, 2, 4);
    if (!file.maskPath().empty()) {
      uint8_t mask[4];
      file.read(0, 4, out, mask);
    }
  } catch (const megatrain::Error&) {
  }
  return 0;
}
