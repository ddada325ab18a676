// ToolCliTest.cpp - the tools' shared command line (ToolCli.h) and size syntax (ByteSize.h).
#include "megatrain/plan/ByteSize.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/ToolCli.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace megatrain {
namespace {

TEST(ByteSize, ParsesUnits) {
  uint64_t bytes = 0;
  ASSERT_TRUE(parseByteSize("24GiB", bytes));
  EXPECT_EQ(bytes, 24ull << 30);
  ASSERT_TRUE(parseByteSize("16000MB", bytes));
  EXPECT_EQ(bytes, 16000ull * 1000 * 1000);
  ASSERT_TRUE(parseByteSize("8GB", bytes));
  EXPECT_EQ(bytes, 8ull * 1000 * 1000 * 1000);
  ASSERT_TRUE(parseByteSize("123", bytes));
  EXPECT_EQ(bytes, 123u);
  ASSERT_TRUE(parseByteSize("1.5gib", bytes));
  EXPECT_EQ(bytes, 3ull << 29);
  ASSERT_TRUE(parseByteSize("512 MiB", bytes));
  EXPECT_EQ(bytes, 512ull << 20);
}

TEST(ByteSize, RejectsBadText) {
  uint64_t bytes = 77;
  for (const char *text : {"", "GiB", "24XB", "1.2.3GB", "-5GB", "0", "abc", "24 GiB extra"})
    EXPECT_FALSE(parseByteSize(text, bytes)) << "'" << text << "'";
  EXPECT_EQ(bytes, 77u); // untouched on failure
}

TEST(ByteSize, FlagErrorNamesFlagAndSyntax) {
  EXPECT_EQ(parseSizeFlag("1.5TiB", "--device-memory"), 3ull << 39);
  try {
    parseSizeFlag("24 gigs", "--device-memory");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "--device-memory expects a size such as 24GiB, 16000MB, 8GB, 1.5TiB or a byte count, got '24 gigs'");
  }
}

TEST(EditDistance, Levenshtein) {
  EXPECT_EQ(editDistance("", ""), 0u);
  EXPECT_EQ(editDistance("steps", "steps"), 0u);
  EXPECT_EQ(editDistance("--stpes", "--steps"), 2u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(editDistance("", "abc"), 3u);
}

// A small app as the tools build theirs; `parse` returns the one-line error, or "".
struct Fixture {
  CLI::App app;
  std::string steps;
  std::vector<std::string> data;
  Fixture() {
    setupToolApp(app, "megatrain-x", {"usage: megatrain-x [options]\n", "Does x.", "Examples:\n  megatrain-x\n"});
    addValueOption(app, "--steps", "N", "train until step N (default 10)", "Run",
                   [this](const std::string& v) { steps = v; });
    repeatable(addValueOption(app, "--data", "FILE", "token files", "Data",
                              [this](const std::string& v) { data.push_back(v); }));
  }
  std::string parse(std::vector<const char*> args) {
    args.insert(args.begin(), "megatrain-x");
    try {
      parseToolCommandLine(app, static_cast<int>(args.size()), args.data());
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }
};

TEST(ToolCli, ValuesRepeatsAndLastWins) {
  Fixture f;
  EXPECT_EQ(f.parse({"--steps", "3", "--data", "a", "--data=b", "--steps=5"}), "");
  EXPECT_EQ(f.steps, "5");
  EXPECT_EQ(f.data, (std::vector<std::string>{"a", "b"}));
}

TEST(ToolCli, UsageErrorsAreOneLine) {
  EXPECT_EQ(Fixture().parse({"--stpes", "3"}), "unknown option '--stpes' (did you mean --steps? see --help)");
  EXPECT_EQ(Fixture().parse({"--frobnicate"}), "unknown option '--frobnicate' (see --help)");
  EXPECT_EQ(Fixture().parse({"-steps", "3"}), "'-steps' has one dash; long options take two: --steps (see --help)");
  EXPECT_EQ(Fixture().parse({"--steps"}), "option '--steps' needs a value (see --help)");
  EXPECT_EQ(Fixture().parse({"stray"}), "unexpected argument 'stray' (see --help)");
}

TEST(ToolCli, NearestOptionNeedsToBeNear) {
  Fixture f;
  EXPECT_EQ(nearestOption(f.app, "--dta"), "--data");
  EXPECT_EQ(nearestOption(f.app, "--help-me-please"), "");
}

TEST(ToolCli, VersionNamesToolAndFormat) {
  const std::string version = toolVersion("megatrain-x");
  EXPECT_EQ(version.rfind("megatrain-x ", 0), 0u) << version;
  EXPECT_NE(version.find(" (git "), std::string::npos) << version;
  EXPECT_NE(version.find("), plan format "), std::string::npos) << version;
}

TEST(ToolCli, HelpHasUsageGroupsAndFooter) {
  Fixture f;
  const std::string help = f.app.help();
  EXPECT_EQ(help.rfind("usage: megatrain-x [options]\n\nDoes x.\n", 0), 0u) << help;
  EXPECT_NE(help.find("\nRun:\n  --steps N"), std::string::npos) << help;
  EXPECT_NE(help.find("train until step N (default 10)"), std::string::npos) << help;
  EXPECT_NE(help.find("--config FILE.toml"), std::string::npos) << help;
  EXPECT_NE(help.find("\nExamples:\n  megatrain-x\n"), std::string::npos) << help;
}

}  // namespace
}  // namespace megatrain
