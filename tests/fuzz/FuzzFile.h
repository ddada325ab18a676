// FuzzFile.h - the file a fuzz target hands to a reader that only takes a path.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace megatrain::fuzz {

// A directory of this process's own under $TMPDIR, made once and removed when the
// process exits normally (a crash leaves it, with the input that crashed); libFuzzer's
// -fork/-jobs workers are separate processes and so never share a file.
inline const std::string& fuzzDir() {
  struct Dir {
    std::string path;
    Dir() {
      const char* tmp = std::getenv("TMPDIR");
      path = std::string(tmp && *tmp ? tmp : "/tmp") + "/megatrain-fuzz-XXXXXX";
      if (!mkdtemp(path.data())) std::abort();
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Writes `size` bytes to `fuzzDir()/name`, replacing what was there; returns the path.
inline std::string writeFuzzFile(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = fuzzDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out.flush()) std::abort();  // the harness's own failure, not the reader's
  return path;
}

}  // namespace megatrain::fuzz
