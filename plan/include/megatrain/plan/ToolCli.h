// ToolCli.h - the command line every megatrain tool shares: CLI11 set up one way (help layout, --version, --config FILE.toml) and usage errors as one line with a "did you mean".
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatrain {

// What a tool's help shows besides its options: the usage lines first, then the
// description (paragraphs separated by blank lines are kept, each one wrapped), and the
// footer (examples, notes) last, as written.
struct ToolHelp {
  std::string usage;
  std::string description;
  std::string footer;
};

// Sets `app` up the megatrain way: -h/--help and --version (toolVersion) in the group
// "Other", --config FILE.toml (CLI11's TOML reader; keys are the long option names, an
// unknown key is an error), help wrapped to 80 columns, and a repeated single-value
// option keeps its last value (as every tool did before).
void setupToolApp(CLI::App& app, const std::string& tool, const ToolHelp& help);

// The help layout of setupToolApp for a subcommand ("megatrain train") of its own.
void setToolHelp(CLI::App& app, const ToolHelp& help);

// "megatrain-run 0.1.0 (git v0.1-123-gabcdef0), plan format 1.4": the project
// version, the commit `git describe` gave when the build was configured, and the plan
// format this build writes and reads.
std::string toolVersion(const std::string& tool);

// An option that takes one value, handed as text to `handle` when it is parsed (from
// argv or from --config), so each tool keeps its own checks and messages; shown in the
// help as `names METAVAR` under `group`.
// A repeatable option (see repeatable) hands each of its values to `handle` in order.
template <typename Handle>
CLI::Option* addValueOption(CLI::App& app, const std::string& names, const std::string& metavar,
                            const std::string& help, const std::string& group, Handle handle) {
  CLI::callback_t each = [handle](const CLI::results_t& values) {
    for (const std::string& value : values) handle(value);
    return true;
  };
  return app.add_option(names, each, help)->type_size(1)->expected(1)->type_name(metavar)->group(group);
}

// A flag without a value that runs `handle` when given.
template <typename Handle>
CLI::Option* addFlagOption(CLI::App& app, const std::string& names, const std::string& help,
                           const std::string& group, Handle handle) {
  return app.add_flag_callback(names, handle, help)->group(group);
}

// Marks a vector option repeatable: each occurrence takes exactly one value and all of
// them are kept ("--data a --data b"); a following positional is never swallowed.
CLI::Option* repeatable(CLI::Option* option);

// Parses argv into `app`. True when the tool has nothing more to do: --help or
// --version printed to standard output. Every usage error is thrown as an Error whose
// message is one line: an unknown option names the nearest known one ("did you mean
// --steps?"), a long option written with one dash (-shape) names its two-dash form, a
// missing value names the option. Errors the options' own callbacks throw pass through.
bool parseToolCommandLine(CLI::App& app, int argc, const char* const* argv);

// A positive integer for `flag` ("--steps needs a positive integer, got 'x'" otherwise).
int64_t parsePositive(const std::string& text, const std::string& flag);

// Levenshtein distance (insertions, deletions and replacements cost 1).
size_t editDistance(const std::string& a, const std::string& b);

// The long (or short) option name of `app` nearest to `given` ("--stpes" -> "--steps"),
// with its dashes; "" when nothing is within max(2, length / 3) edits, or when the edits
// would replace every letter given ("-o" is not near "-h").
std::string nearestOption(const CLI::App& app, const std::string& given);

}  // namespace megatrain
