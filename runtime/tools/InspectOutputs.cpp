// InspectOutputs.cpp - memory plots (SVG, text) and the Chrome trace of a plan's predictions.
#include "InspectOutputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace megatrain::runtime::tools {
namespace {

std::string number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, std::isfinite(value) ? value : 0.0);
  return text;
}

// The unit a range of bytes reads best in: name and divisor.
std::pair<const char*, double> byteUnit(double maxBytes) {
  if (maxBytes >= 1024.0 * 1024 * 1024) return {"GiB", 1024.0 * 1024 * 1024};
  if (maxBytes >= 1024.0 * 1024) return {"MiB", 1024.0 * 1024};
  if (maxBytes >= 1024.0) return {"KiB", 1024.0};
  return {"B", 1.0};
}

std::pair<const char*, double> timeUnit(double maxSeconds) {
  if (maxSeconds >= 1) return {"s", 1.0};
  if (maxSeconds >= 1e-3) return {"ms", 1e-3};
  return {"us", 1e-6};
}

// A round tick spacing (1, 2 or 5 times a power of ten) giving about `count` ticks up to `max`.
double tickStep(double max, int count) {
  if (!(max > 0)) return 1;
  const double raw = max / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0})
    if (factor * power >= raw) return factor * power;
  return 10 * power;
}

std::string xmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char code[8];
          std::snprintf(code, sizeof code, "\\u%04x", c);
          out += code;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// The value the step function holds at each column's slice of [0, end): its maximum there.
std::vector<uint64_t> columnMaxima(const PoolTimeline& memory, double end, int width) {
  std::vector<uint64_t> maxima(static_cast<size_t>(width), 0);
  const std::vector<PoolTimeline::Point>& points = memory.points;
  size_t next = 0;
  uint64_t current = 0;
  for (int c = 0; c < width; ++c) {
    const double from = end * c / width, to = end * (c + 1) / width;
    while (next < points.size() && points[next].time <= from) current = points[next++].bytes;
    uint64_t high = current;
    while (next < points.size() && points[next].time < to) {
      current = points[next++].bytes;
      high = std::max(high, current);
    }
    maxima[static_cast<size_t>(c)] = high;
  }
  return maxima;
}

double plotEnd(const PoolTimeline& memory, double stepSeconds) {
  double end = stepSeconds;
  if (!memory.points.empty()) end = std::max(end, memory.points.back().time);
  return end > 0 ? end : 1;
}

}  // namespace

std::string memoryPlotSvg(const PoolTimeline& memory, double stepSeconds, uint64_t budgetBytes,
                          const std::string& title) {
  const double width = 800, height = 420, left = 90, right = 30, top = 50, bottom = 60;
  const double plotW = width - left - right, plotH = height - top - bottom;
  const double tMax = plotEnd(memory, stepSeconds);
  const double yTop = std::max<double>({static_cast<double>(memory.peakBytes),
                                        static_cast<double>(budgetBytes), 1.0}) * 1.08;
  const auto [bytesName, bytesScale] = byteUnit(yTop);
  const auto [timeName, timeScale] = timeUnit(tMax);
  auto x = [&](double t) { return left + t / tMax * plotW; };
  auto y = [&](double b) { return top + plotH - b / yTop * plotH; };
  auto fmt = [](double v) { return number("%.2f", v); };

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt(width) + "\" height=\"" +
         fmt(height) + "\" viewBox=\"0 0 " + fmt(width) + " " + fmt(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + fmt(width) + "\" height=\"" + fmt(height) +
         "\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt(width / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
         xmlEscape(title) + "</text>\n";

  // Grid and ticks.
  const double yStep = tickStep(yTop / bytesScale, 5);
  for (double v = 0; v * bytesScale <= yTop; v += yStep) {
    const double py = y(v * bytesScale);
    svg += "<line x1=\"" + fmt(left) + "\" y1=\"" + fmt(py) + "\" x2=\"" + fmt(left + plotW) +
           "\" y2=\"" + fmt(py) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + fmt(left - 6) + "\" y=\"" + fmt(py + 4) + "\" text-anchor=\"end\">" +
           number("%g", v) + "</text>\n";
  }
  const double xStep = tickStep(tMax / timeScale, 8);
  for (double v = 0; v * timeScale <= tMax * (1 + 1e-9); v += xStep) {
    const double px = x(v * timeScale);
    svg += "<line x1=\"" + fmt(px) + "\" y1=\"" + fmt(top + plotH) + "\" x2=\"" + fmt(px) +
           "\" y2=\"" + fmt(top + plotH + 5) + "\" stroke=\"black\"/>\n";
    svg += "<text x=\"" + fmt(px) + "\" y=\"" + fmt(top + plotH + 18) +
           "\" text-anchor=\"middle\">" + number("%g", v) + "</text>\n";
  }

  // Live bytes: a step function, filled below.
  std::string path = "M " + fmt(x(0)) + " " + fmt(y(0));
  for (const PoolTimeline::Point& point : memory.points)
    path += " H " + fmt(x(point.time)) + " V " + fmt(y(static_cast<double>(point.bytes)));
  path += " H " + fmt(x(tMax));
  svg += "<path d=\"" + path + " V " + fmt(y(0)) +
         " Z\" fill=\"#9ecae1\" fill-opacity=\"0.5\" stroke=\"none\"/>\n";
  svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#08519c\" stroke-width=\"1.5\"/>\n";

  if (budgetBytes > 0) {
    const double py = y(static_cast<double>(budgetBytes));
    svg += "<line x1=\"" + fmt(left) + "\" y1=\"" + fmt(py) + "\" x2=\"" + fmt(left + plotW) +
           "\" y2=\"" + fmt(py) + "\" stroke=\"#cb181d\" stroke-dasharray=\"6 4\"/>\n";
    svg += "<text x=\"" + fmt(left + plotW - 4) + "\" y=\"" + fmt(py - 5) +
           "\" text-anchor=\"end\" fill=\"#cb181d\">budget " +
           number("%.3g", static_cast<double>(budgetBytes) / bytesScale) + " " + bytesName +
           "</text>\n";
  }
  const double peakX = x(memory.peakTime), peakY = y(static_cast<double>(memory.peakBytes));
  svg += "<circle cx=\"" + fmt(peakX) + "\" cy=\"" + fmt(peakY) + "\" r=\"3\" fill=\"#08519c\"/>\n";
  svg += "<text x=\"" + fmt(std::min(peakX + 6, left + plotW - 120)) + "\" y=\"" +
         fmt(std::max(peakY - 6, top + 12)) + "\">peak " +
         number("%.3g", static_cast<double>(memory.peakBytes) / bytesScale) + " " + bytesName +
         "</text>\n";

  // Axes and their labels.
  svg += "<line x1=\"" + fmt(left) + "\" y1=\"" + fmt(top) + "\" x2=\"" + fmt(left) + "\" y2=\"" +
         fmt(top + plotH) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + fmt(left) + "\" y1=\"" + fmt(top + plotH) + "\" x2=\"" +
         fmt(left + plotW) + "\" y2=\"" + fmt(top + plotH) + "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + fmt(left + plotW / 2) + "\" y=\"" + fmt(height - 14) +
         "\" text-anchor=\"middle\">predicted time (" + timeName + ")</text>\n";
  svg += "<text x=\"20\" y=\"" + fmt(top + plotH / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " +
         fmt(top + plotH / 2) + ")\">live device memory (" + bytesName + ")</text>\n";
  svg += "</svg>\n";
  return svg;
}

std::string memoryPlotText(const PoolTimeline& memory, double stepSeconds, uint64_t budgetBytes,
                           int width, int height) {
  const double tMax = plotEnd(memory, stepSeconds);
  const double yTop = std::max<double>({static_cast<double>(memory.peakBytes),
                                        static_cast<double>(budgetBytes), 1.0});
  const auto [bytesName, bytesScale] = byteUnit(yTop);
  const auto [timeName, timeScale] = timeUnit(tMax);
  const std::vector<uint64_t> maxima = columnMaxima(memory, tMax, width);
  const int budgetRow = budgetBytes > 0
                            ? std::min(height - 1, static_cast<int>(budgetBytes / yTop * height - 1e-9))
                            : -1;
  std::string text;
  for (int row = height - 1; row >= 0; --row) {
    std::string label;
    if (row == height - 1 || row == 0 || row == height / 2)
      label = number("%.3g", yTop * (row + 1) / height / bytesScale) + " " + bytesName;
    text += std::string(label.size() < 11 ? 11 - label.size() : 0, ' ') + label + " |";
    for (int c = 0; c < width; ++c) {
      const double bytes = static_cast<double>(maxima[static_cast<size_t>(c)]);
      const int filled = bytes > 0 ? static_cast<int>(std::ceil(bytes / yTop * height - 1e-9)) : 0;
      text += row < filled ? '#' : (row == budgetRow ? '-' : ' ');
    }
    text += '\n';
  }
  text += std::string(12, ' ') + "+" + std::string(static_cast<size_t>(width), '-') + "\n";
  const std::string end = number("%.3g", tMax / timeScale) + " " + timeName;
  std::string axis = std::string(13, ' ') + "0";
  const size_t endColumn = 13 + static_cast<size_t>(width);
  if (axis.size() + end.size() < endColumn + 1)
    axis += std::string(endColumn - axis.size() - end.size() + 1, ' ');
  text += axis + end + "\n";
  text += std::string(13, ' ') + "live device bytes over predicted time";
  if (budgetBytes > 0) text += " ('-': the budget)";
  return text + "\n";
}

std::string chromeTrace(const plan::Plan& plan, const std::vector<std::string>& names,
                        const PoolTimeline* deviceMemory, const std::vector<StepSpan>* measured) {
  std::map<std::string, int> threads;
  for (const std::string& stream : plan.streams())
    threads.emplace(stream, static_cast<int>(threads.size()) + 1);
  for (const plan::Step& step : plan.steps())
    threads.emplace(step.stream(), static_cast<int>(threads.size()) + 1);
  auto us = [](double seconds) { return number("%.3f", seconds * 1e6); };
  auto bytesOf = [&](uint32_t id) {
    return id < static_cast<uint32_t>(plan.tensors_size())
               ? plan.tensors(static_cast<int>(id)).buffer().size_bytes()
               : uint64_t{0};
  };

  std::vector<std::string> events;
  events.push_back(R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":)" +
                   jsonString(measured ? "megatrain run (measured)" : "megatrain plan (predicted)") + "}}");
  for (const auto& [stream, tid] : threads) {
    events.push_back(R"({"name":"thread_name","ph":"M","pid":1,"tid":)" + std::to_string(tid) +
                     R"(,"args":{"name":)" + jsonString(stream) + "}}");
    events.push_back(R"({"name":"thread_sort_index","ph":"M","pid":1,"tid":)" +
                     std::to_string(tid) + R"(,"args":{"sort_index":)" + std::to_string(tid) + "}}");
  }
  // A measured window of several training steps (megatrain-run --trace-steps):
  // every plan step once per training step, on the window's clock.
  const size_t planSteps = static_cast<size_t>(plan.steps_size());
  const size_t windows = measured && planSteps ? std::max<size_t>(1, measured->size() / planSteps) : 1;
  for (size_t at = 0; at < windows * planSteps; ++at) {
    const size_t w = at / planSteps;
    const int s = static_cast<int>(at % planSteps);
    const plan::Step& step = plan.steps(s);
    uint64_t bytes = 0;
    const char* category = "event";
    switch (step.op_case()) {
      case plan::Step::kKernel:
        category = "kernel";
        for (uint32_t id : step.kernel().inputs()) bytes += bytesOf(id);
        for (uint32_t id : step.kernel().outputs()) bytes += bytesOf(id);
        break;
      case plan::Step::kCopy:
        category = "copy";
        bytes = bytesOf(step.copy().src());
        break;
      case plan::Step::kHostTask:
        category = "host_task";
        for (uint32_t id : step.host_task().tensors()) bytes += bytesOf(id);
        break;
      default:
        break;
    }
    double start = step.predicted_start_s(), end = step.predicted_end_s();
    if (measured) {
      // Measured: only the steps that were timed, at their measured times.
      if (at >= measured->size()) continue;
      const StepSpan& span = (*measured)[at];
      if (!std::isfinite(span.start) || !std::isfinite(span.end)) continue;
      start = span.start;
      end = span.end;
    }
    const bool instant = step.has_record() || (step.has_wait() && !(end > start));
    std::string event = "{\"name\":" + jsonString(static_cast<size_t>(s) < names.size() ? names[static_cast<size_t>(s)] : "") +
                        ",\"cat\":\"" + category + "\",\"ph\":\"" + (instant ? "i" : "X") +
                        "\",\"pid\":1,\"tid\":" + std::to_string(threads.at(step.stream())) +
                        ",\"ts\":" + us(start);
    if (instant)
      event += ",\"s\":\"t\"";
    else
      event += ",\"dur\":" + us(std::max(0.0, end - start));
    event += ",\"args\":{\"step\":" + std::to_string(s) + ",\"bytes\":" + std::to_string(bytes);
    if (!step.source_op().empty()) event += ",\"source_op\":" + jsonString(step.source_op());
    if (step.recompute()) event += ",\"recompute\":true";
    if (measured) {
      // The prediction repeats with the predicted step time.
      const double offset = static_cast<double>(w) * plan.header().predicted_step_s();
      event += ",\"predicted_start_us\":" + us(offset + step.predicted_start_s()) +
               ",\"predicted_end_us\":" + us(offset + step.predicted_end_s());
      if (windows > 1) event += ",\"train_step\":" + std::to_string(w);
    }
    events.push_back(event + "}}");
  }
  if (deviceMemory)
    for (const PoolTimeline::Point& point : deviceMemory->points)
      events.push_back(R"({"name":"device memory","ph":"C","pid":1,"tid":0,"ts":)" + us(point.time) +
                       R"(,"args":{"bytes":)" + std::to_string(point.bytes) + "}}");

  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) json += events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  return json + "]}\n";
}

}  // namespace megatrain::runtime::tools
