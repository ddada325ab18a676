// Progress.cpp - megatrain-run's report of a training run: the progress line, --metrics rows, memory in use.
#include "Progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/Json.h"
#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime::tools {
namespace {

// formatBytes without the std::string: "1.50 GiB" into out.
void formatBytesInto(uint64_t bytes, char* out, size_t size) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0)
    std::snprintf(out, size, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(out, size, value < 10 ? "%.2f %s" : value < 100 ? "%.1f %s" : "%.0f %s", value, kUnits[unit]);
}

// JSON has no NaN or infinity: those are null.
void formatJsonNumber(double value, char* out, size_t size) {
  if (std::isfinite(value))
    std::snprintf(out, size, "%.17g", value);
  else
    std::snprintf(out, size, "null");
}

}  // namespace

uint64_t processRssBytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return 0;
  text[got] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(text, "%llu %llu", &size, &resident) != 2) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

void formatDuration(double seconds, char* out, size_t size) {
  const long long total = seconds > 0 ? static_cast<long long>(seconds + 0.5) : 0;
  std::snprintf(out, size, "%lld:%02lld:%02lld", total / 3600, total / 60 % 60, total % 60);
}

ProgressReporter::ProgressReporter(const Setup& setup, const Backend& backend)
    : setup_(setup), backend_(backend), terminal_(::isatty(STDOUT_FILENO) == 1) {
  width_ = static_cast<int>(std::to_string(setup.totalSteps).size());
}

void ProgressReporter::step(int64_t step, const StepResult& result, double seconds, double elapsed,
                            const EvalResult* eval) {
  if (stepsRun_ == 0) firstLoss_ = result.loss;
  lastLoss_ = result.loss;
  stepSeconds_ += seconds;
  ++stepsRun_;
  if (setup_.quiet) return;
  const bool last = step == setup_.totalSteps;
  if (!terminal_ && !last && !eval && step % setup_.logEvery != 0) return;

  char line[512];
  int n = std::snprintf(line, sizeof line, "step %*lld/%lld  loss %.6f  lr %.3e", width_, static_cast<long long>(step),
                        static_cast<long long>(setup_.totalSteps), result.loss, result.lr);
  auto append = [&](const char* format, auto... values) {
    if (n >= 0 && static_cast<size_t>(n) < sizeof line)
      n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), format, values...);
  };
  if (setup_.clipping) append("  grad norm %.4g", result.gradNorm);
  if (eval) append("  eval loss %.6f  ppl %.4g", eval->loss, eval->perplexity);
  if (setup_.tokensPerStep > 0 && seconds > 0) {
    const double tokensPerSecond = static_cast<double>(setup_.tokensPerStep) / seconds;
    // The model's arithmetic, not the hardware's: recompute is not counted.
    const double tflops = 6.0 * static_cast<double>(setup_.trainableParameters) * tokensPerSecond / 1e12;
    append("  tokens/s %.0f  model TFLOP/s %.3g", tokensPerSecond, tflops);
  }
  char device[32], pinned[32], rss[32], spent[32], eta[32];
  const std::optional<DeviceMemory> memory = backend_.deviceMemory();
  formatBytesInto(memory ? memory->total - memory->free : setup_.arenaBytes, device, sizeof device);
  formatBytesInto(setup_.hostPinnedBytes, pinned, sizeof pinned);
  formatBytesInto(processRssBytes(), rss, sizeof rss);
  formatDuration(elapsed, spent, sizeof spent);
  formatDuration(stepSeconds_ / static_cast<double>(stepsRun_) * static_cast<double>(setup_.totalSteps - step), eta,
                 sizeof eta);
  append("  dev %s  host %s pinned + %s rss  elapsed %s  eta %s  (%.3f s)", device, pinned, rss, spent, eta, seconds);

  if (terminal_) {
    // \033[K clears what a longer previous line left on the right.
    std::printf("\r%s\033[K", line);
    lineOpen_ = true;
    // An evaluated step's line stays on screen; the next step starts a new one.
    if (last || eval) endInPlaceLine();
  } else {
    std::printf("%s\n", line);
  }
  std::fflush(stdout);
}

void ProgressReporter::endInPlaceLine() {
  if (!lineOpen_) return;
  std::printf("\n");
  lineOpen_ = false;
}

void ProgressReporter::note(const std::string& text) {
  if (setup_.quiet) return;
  important(text);
}

void ProgressReporter::important(const std::string& text) {
  endInPlaceLine();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void ProgressReporter::warning(const std::string& text) {
  endInPlaceLine();
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", text.c_str());
}

void ProgressReporter::summary(int64_t lastStep, double elapsed) {
  endInPlaceLine();
  std::printf("done      %lld steps, loss %.6f -> %.6f", static_cast<long long>(lastStep), firstLoss_, lastLoss_);
  if (stepsRun_ > 0 && stepSeconds_ > 0) {
    const double tokensPerSecond =
        static_cast<double>(setup_.tokensPerStep) * static_cast<double>(stepsRun_) / stepSeconds_;
    if (setup_.tokensPerStep > 0) std::printf(", mean %.0f tokens/s", tokensPerSecond);
    std::printf(", mean step %.3f s", stepSeconds_ / static_cast<double>(stepsRun_));
    if (setup_.tokensPerStep > 0)
      std::printf(", model %.3g TFLOP/s",
                  6.0 * static_cast<double>(setup_.trainableParameters) * tokensPerSecond / 1e12);
  }
  char spent[32];
  formatDuration(elapsed, spent, sizeof spent);
  std::printf(", elapsed %s", spent);
  if (setup_.firstStep > 1)
    std::printf(" (resumed at step %lld, %lld steps in this run)", static_cast<long long>(setup_.firstStep - 1),
                static_cast<long long>(stepsRun_));
  std::printf("\n");
  std::fflush(stdout);
}

MetricsLog::MetricsLog(const std::string& path, int64_t keepThroughStep) : path_(path) {
  std::string kept;
  if (keepThroughStep >= 0) {
    // Rows are JSON objects, one per line, as write() makes them; a row is kept,
    // as it was written, when its "step" is an integer up to keepThroughStep.
    // Any other line (one cut short when a run was killed mid-write, or not a
    // row at all) is dropped like the rows past the checkpoint.
    std::ifstream old(path);
    std::string line;
    for (int64_t number = 1; std::getline(old, line); ++number) {
      nlohmann::json row;
      try {
        row = parseJson(line, path + ":" + std::to_string(number));
      } catch (const Error&) {
        continue;
      }
      if (!row.is_object()) continue;
      const auto step = row.find("step");
      if (step == row.end() || !step->is_number_integer()) continue;
      // (An unsigned step past INT64_MAX is past any checkpoint, not negative.)
      const bool upToCheckpoint = step->is_number_unsigned()
                                      ? step->get<uint64_t>() <= static_cast<uint64_t>(keepThroughStep)
                                      : step->get<int64_t>() <= keepThroughStep;
      if (upToCheckpoint) kept += line + "\n";
    }
  }
  // The folder is made as --save makes its own, so `--save runs/a --metrics
  // runs/a/metrics.jsonl` works on the first run, before any checkpoint.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code made;
  if (!parent.empty()) std::filesystem::create_directories(parent, made);
  if (made) throw Error(path + ": cannot create the folder " + parent.string() + " (" + made.message() + ")");
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw Error(path + ": cannot open for writing (" + std::strerror(errno) + ")");
  if (!kept.empty()) std::fputs(kept.c_str(), file_);
  check("write");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::check(const char* what) {
  // The error flag is sticky: a short fprintf earlier is seen here too.
  const bool failed = std::fflush(file_) != 0 || std::ferror(file_);
  if (failed) throw Error(path_ + ": " + what + " failed: " + std::strerror(errno ? errno : EIO));
}

void MetricsLog::close() {
  if (!file_) return;
  check("write");
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0) throw Error(path_ + ": close failed: " + std::strerror(errno));
}

void MetricsLog::write(int64_t step, const StepResult& result, uint64_t tokens, double seconds, double elapsed,
                       bool clipping, const EvalResult* eval) {
  char loss[32], lr[32], norm[32];
  formatJsonNumber(result.loss, loss, sizeof loss);
  formatJsonNumber(result.lr, lr, sizeof lr);
  formatJsonNumber(result.gradNorm, norm, sizeof norm);
  const double tokensPerSecond = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
  std::fprintf(file_,
               "{\"step\": %lld, \"loss\": %s, \"tokens_per_s\": %.3f, \"step_time_s\": %.6f, \"tokens\": %llu, "
               "\"lr\": %s",
               static_cast<long long>(step), loss, tokensPerSecond, seconds, static_cast<unsigned long long>(tokens),
               lr);
  if (clipping) std::fprintf(file_, ", \"grad_norm\": %s", norm);
  if (eval) {
    char evalLoss[32], evalPpl[32];
    formatJsonNumber(eval->loss, evalLoss, sizeof evalLoss);
    formatJsonNumber(eval->perplexity, evalPpl, sizeof evalPpl);
    std::fprintf(file_, ", \"eval_loss\": %s, \"eval_ppl\": %s, \"eval_time_s\": %.6f", evalLoss, evalPpl,
                 eval->seconds);
  }
  std::fprintf(file_, ", \"elapsed_s\": %.6f}\n", elapsed);
  check("write");
}

}  // namespace megatrain::runtime::tools
