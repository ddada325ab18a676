// MetricsLogTest.cpp - megatrain-run --metrics (runtime/tools/Progress.cpp): the rows a resumed run keeps.
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "Progress.h"
#include "TestUtil.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::testing {
namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Rows as MetricsLog::write makes them.
std::string row(int step, const char* loss) {
  return "{\"step\": " + std::to_string(step) + ", \"loss\": " + loss +
         ", \"tokens_per_s\": 10.000, \"step_time_s\": 0.100000, \"tokens\": 1, \"lr\": 0.001, \"elapsed_s\": 0.1}\n";
}

TEST(MetricsLog, AResumedRunKeepsTheRowsUpToItsCheckpointVerbatim) {
  const std::string path = makeTempDir() + "/m.jsonl";
  const std::string kept = row(1, "2.5000000000000004") + row(2, "null") + row(3, "1.25");
  std::ofstream(path) << kept << row(4, "1.0") << row(5, "0.5");
  { tools::MetricsLog log(path, 3); log.close(); }
  EXPECT_EQ(readText(path), kept);
  // A new run (-1) starts the file empty.
  { tools::MetricsLog log(path, -1); log.close(); }
  EXPECT_EQ(readText(path), "");
}

// `--save runs/a --metrics runs/a/metrics.jsonl` on a first run: the metrics
// file's folder does not exist yet and is made (it was "cannot open").
TEST(MetricsLog, MakesItsFolder) {
  const std::string dir = makeTempDir();
  const std::string path = dir + "/runs/a/metrics.jsonl";
  { tools::MetricsLog log(path, -1); log.close(); }
  EXPECT_EQ(readText(path), "");
  // A folder that cannot be made is one error naming it.
  std::ofstream(dir + "/file") << "x";
  try {
    tools::MetricsLog log(dir + "/file/sub/m.jsonl", -1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the folder " + dir + "/file/sub"), std::string::npos)
        << e.what();
  }
}

TEST(MetricsLog, LinesThatAreNotRowsAreDropped) {
  // Whatever else the file holds (a row cut short when a run was killed mid-write,
  // text that is not JSON, JSON that is not a row with an integer step) is dropped,
  // as the rows past the checkpoint are; nothing throws.
  const std::string path = makeTempDir() + "/m.jsonl";
  std::ofstream(path) << row(1, "2.0")
                      << "{\"step\": 2, \"loss\": 1.\n"          // cut short (read as step 2 before)
                      << "not json\n"
                      << "\n"
                      << "[1, 2]\n"
                      << "{\"loss\": 1.0}\n"
                      << "{\"step\": \"2\", \"loss\": 1.0}\n"
                      << "{\"step\": 2.0, \"loss\": 1.0}\n"
                      << "{\"step\": 2, \"step\": 9, \"loss\": 1.0}\n"  // duplicate key
                      << "{\"step\": 2, \"loss\": 1.0} trailing\n"
                      << std::string("{\"step\": 2,\0 \"loss\": 1.0}\n", 26)
                      << "{\"step\": 18446744073709551615, \"loss\": 1.0}\n"  // not -1
                      << row(-1, "1.0") << row(2, "1.5");
  { tools::MetricsLog log(path, 2); log.close(); }
  EXPECT_EQ(readText(path), row(1, "2.0") + row(-1, "1.0") + row(2, "1.5"));
}

}  // namespace
}  // namespace megatrain::runtime::testing
