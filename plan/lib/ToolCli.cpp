// ToolCli.cpp - the command line every megatrain tool shares: CLI11 set up one way and usage errors as one line.
#include "megatrain/plan/ToolCli.h"

#include <algorithm>
#include <exception>
#include <cctype>
#include <cstdio>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "megatrain/plan/BuildInfo.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"

namespace megatrain {
namespace {

constexpr size_t kHelpWidth = 80;

// Wraps each line of `text` at `width` columns; a line's leading blanks are kept on
// the lines it wraps into, so indented lists stay indented.
std::string wrapText(const std::string& text, size_t width) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    if (!first) out += '\n';
    first = false;
    const size_t indent = std::min(line.find_first_not_of(' '), line.size());
    const std::string lead(indent, ' ');
    std::istringstream words(line.substr(indent));
    std::string word, current = lead;
    while (words >> word) {
      if (current.size() > indent && current.size() + 1 + word.size() > width) {
        out += current + '\n';
        current = lead;
      }
      current += (current.size() > indent ? " " : "") + word;
    }
    out += current;
  }
  return out;
}

// Usage lines, wrapped description, the option groups, subcommands, then the footer.
class ToolFormatter : public CLI::Formatter {
 public:
  explicit ToolFormatter(ToolHelp help) : help_(std::move(help)) { column_width(28); }

  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::string out = help_.usage;
    if (!out.empty() && out.back() != '\n') out += '\n';
    if (!help_.description.empty()) out += "\n" + wrapText(help_.description, kHelpWidth) + "\n";
    // The groups in the order their first option was added, "Other" (help, version,
    // config) last.
    std::vector<std::string> groups = app->get_groups();
    std::stable_partition(groups.begin(), groups.end(), [](const std::string& g) { return g != "Other"; });
    for (const std::string& group : groups) {
      const std::vector<const CLI::Option*> options = app->get_options(
          [&group](const CLI::Option* o) { return o->get_group() == group && o->nonpositional(); });
      if (group.empty() || options.empty()) continue;
      out += "\n" + wrapText(group + ":", kHelpWidth) + "\n";
      for (const CLI::Option* option : options) out += make_option(option, false);
    }
    out += make_subcommands(app, mode);
    if (!help_.footer.empty()) out += "\n" + help_.footer;
    if (!out.empty() && out.back() != '\n') out += '\n';
    return out;
  }

  std::string make_option_desc(const CLI::Option* option) const override {
    return wrapText(option->get_description(), kHelpWidth - column_width_);
  }

 private:
  ToolHelp help_;
};

// "--steps: 1 required TEXT missing" -> "--steps".
std::string optionOfMessage(const std::string& message) {
  const size_t colon = message.find(':');
  return colon == std::string::npos ? std::string() : message.substr(0, colon);
}

std::string withSuggestion(const std::string& suggestion) {
  return suggestion.empty() ? " (see --help)" : " (did you mean " + suggestion + "? see --help)";
}

// The argument CLI11 did not expect, as one line.
Error extraArgument(const CLI::App& app, const std::string& given) {
  if (given.size() > 1 && given[0] == '-') {
    const std::string name = given.substr(0, given.find('='));
    return Error("unknown option '" + name + "'" + withSuggestion(nearestOption(app, name)));
  }
  if (!app.get_subcommands({}).empty()) {
    std::string best;
    size_t bestDistance = std::max<size_t>(2, given.size() / 3) + 1;
    for (const CLI::App* sub : app.get_subcommands({})) {
      const size_t d = editDistance(given, sub->get_name());
      if (d < bestDistance) bestDistance = d, best = sub->get_name();
    }
    return Error("unknown command '" + given + "'" + withSuggestion(best));
  }
  return Error("unexpected argument '" + given + "' (see --help)");
}

}  // namespace

std::string toolVersion(const std::string& tool) {
  return tool + " " + kMegatrainVersion + " (git " + kMegatrainGitDescribe + "), plan format " +
         std::to_string(kPlanFormatMajor) + "." + std::to_string(kPlanFormatMinor);
}

void setToolHelp(CLI::App& app, const ToolHelp& help) { app.formatter(std::make_shared<ToolFormatter>(help)); }

void setupToolApp(CLI::App& app, const std::string& tool, const ToolHelp& help) {
  app.name(tool);
  setToolHelp(app, help);
  // Before any option is added: each copies the defaults when it is made.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag("-h,--help", "show this help")->group("Other");
  app.set_version_flag("--version", toolVersion(tool), "print the version, the git commit and the plan format")
      ->group("Other");
  app.set_config("--config", "", "read options from a TOML file: one `name = value` per long option "
                 "(steps = 100, data = [\"a.bin\", \"b.bin\"]); the command line wins")
      ->type_name("FILE.toml")
      ->group("Other");
  app.allow_config_extras(CLI::config_extras_mode::error);
}

CLI::Option* repeatable(CLI::Option* option) {
  return option->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

bool parseToolCommandLine(CLI::App& app, int argc, const char* const* argv) {
  // CLI11 would read "-shape" as "-s hape" or an unexpected argument; name the fix.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 3 || arg[0] != '-' || !std::isalpha(static_cast<unsigned char>(arg[1]))) continue;
    const std::string name = arg.substr(1, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 1);
    bool known = app.get_option_no_throw("--" + name) != nullptr;
    for (const CLI::App* sub : app.get_subcommands({}))
      known = known || sub->get_option_no_throw("--" + name) != nullptr;
    if (known)
      throw Error("'" + arg + "' has one dash; long options take two: --" + name + " (see --help)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return true;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return true;
  } catch (const CLI::CallForVersion& version) {
    std::printf("%s\n", version.what());
    return true;
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> extras = app.remaining(true);
    throw extraArgument(app, extras.empty() ? std::string("?") : extras.front());
  } catch (const CLI::ConfigError& error) {
    const std::string message = error.what();
    const std::string marker = "not able to parse ";
    const size_t at = message.find(marker);
    if (at == std::string::npos) throw Error("--config: " + message);
    const std::string key = message.substr(at + marker.size());
    std::string near = nearestOption(app, "--" + key);
    if (near.rfind("--", 0) == 0) near = near.substr(2);
    throw Error("--config: unknown key '" + key + "'" + withSuggestion(near));
  } catch (const CLI::FileError& error) {
    // The one file CLI11 opens itself.
    throw Error(std::string("--config: ") + error.what());
  } catch (const CLI::ArgumentMismatch& error) {
    const std::string message = error.what();
    std::string option = optionOfMessage(message);
    // The option as it was written ("-o" rather than CLI11's "--out").
    if (const CLI::Option* known = app.get_option_no_throw(option)) {
      for (int i = argc - 1; i >= 1; --i)
        if (known->check_name(argv[i])) {
          option = argv[i];
          break;
        }
    }
    if (!option.empty() && message.find("missing") != std::string::npos)
      throw Error("option '" + option + "' needs a value (see --help)");
    throw Error(message + " (see --help)");
  } catch (const CLI::ParseError& error) {
    throw Error(std::string(error.what()) + " (see --help)");
  }
  return false;
}

int64_t parsePositive(const std::string& text, const std::string& flag) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value <= 0)
    throw Error(flag + " needs a positive integer, got '" + text + "'");
  return value;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearestOption(const CLI::App& app, const std::string& given) {
  std::string best;
  size_t bestDistance = std::max<size_t>(2, given.size() / 3) + 1;
  // "-o" is one edit from every one-letter option: a suggestion must keep some of the
  // letters given.
  const size_t letters = given.size() - std::min(given.find_first_not_of('-'), given.size());
  auto consider = [&](const std::string& name) {
    const size_t d = editDistance(given, name);
    if (d >= letters) return;
    // Ties go to the alphabetically first name: the answer does not depend on the order.
    if (d < bestDistance || (d == bestDistance && !best.empty() && name < best)) {
      bestDistance = d;
      best = name;
    }
  };
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) consider("--" + name);
    for (const std::string& name : option->get_snames()) consider("-" + name);
  }
  // The options of the command given ("megatrain train --stpes").
  for (const CLI::App* sub : app.get_subcommands()) {
    const std::string near = nearestOption(*sub, given);
    if (!near.empty()) consider(near);
  }
  return best;
}

}  // namespace megatrain
