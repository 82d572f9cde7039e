// Prometheus text format, one line at a time; see prometheus_text.h.
#include "app/remote/prometheus_text.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace kvdesk::remote {
namespace {

bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// A quoted label value at text[pos] (the opening quote); pos ends past the closing quote.
std::optional<std::string> quoted(std::string_view text, size_t& pos) {
  if (pos >= text.size() || text[pos] != '"') return std::nullopt;
  std::string out;
  for (++pos; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c == '"') {
      ++pos;
      return out;
    }
    if (c == '\\' && pos + 1 < text.size()) {
      const char e = text[++pos];
      out += e == 'n' ? '\n' : e;
    } else {
      out += c;
    }
  }
  return std::nullopt;
}

// `{a="x",b="y"}` at text[pos]; pos ends past the closing brace.
bool read_labels(std::string_view text, size_t& pos, std::map<std::string, std::string>& labels) {
  ++pos;
  while (pos < text.size() && text[pos] != '}') {
    const size_t start = pos;
    while (pos < text.size() && name_char(text[pos], pos == start)) ++pos;
    if (pos == start || pos >= text.size() || text[pos] != '=') return false;
    const std::string key(text.substr(start, pos - start));
    ++pos;
    std::optional<std::string> value = quoted(text, pos);
    if (!value) return false;
    labels[key] = std::move(*value);
    if (pos < text.size() && text[pos] == ',') ++pos;
  }
  if (pos >= text.size()) return false;
  ++pos;
  return true;
}

std::optional<double> number(std::string_view text) {
  const std::string s(text);
  if (s == "+Inf" || s == "Inf") return INFINITY;
  if (s == "-Inf") return -INFINITY;
  if (s == "NaN") return NAN;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

std::optional<MetricSample> parse_line(std::string_view line) {
  MetricSample sample;
  size_t pos = 0;
  while (pos < line.size() && name_char(line[pos], pos == 0)) ++pos;
  if (pos == 0) return std::nullopt;
  sample.name = std::string(line.substr(0, pos));
  if (pos < line.size() && line[pos] == '{' && !read_labels(line, pos, sample.labels)) return std::nullopt;
  while (pos < line.size() && line[pos] == ' ') ++pos;
  const size_t end = line.find(' ', pos);   // a timestamp may follow
  const std::optional<double> value = number(line.substr(pos, end == std::string_view::npos ? end : end - pos));
  if (!value) return std::nullopt;
  sample.value = *value;
  return sample;
}

}  // namespace

std::vector<MetricSample> parse_prometheus_text(std::string_view text) {
  std::vector<MetricSample> samples;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty() && line[0] != '#') {
      if (std::optional<MetricSample> s = parse_line(line)) samples.push_back(std::move(*s));
    }
    start = end + 1;
  }
  return samples;
}

}  // namespace kvdesk::remote
