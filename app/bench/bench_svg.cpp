// SVG line and bar charts (see bench_svg.h). Canvas: kWidth x kHeight pixels; the plot area
// sits inside fixed margins, the legend to its right.
#include "app/bench/bench_svg.h"

#include <algorithm>
#include <cmath>

#include "app/bench/bench_stats.h"

namespace kvdesk::bench {
namespace {

constexpr double kWidth = 720, kHeight = 400;
constexpr double kLeft = 70, kRight = 170, kTop = 40, kBottom = 55;
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string color(size_t i) { return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))]; }

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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

std::string num(double v) { return format_number(v, 1); }

// A step of 1, 2 or 5 x 10^k giving about five intervals over [0, max].
double nice_step(double max) {
  if (max <= 0) return 1;
  const double raw = max / 5;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

std::string tick_label(double v) {
  const double a = std::abs(v);
  if (a >= 1e6) return format_number(v / 1e6, a >= 1e7 ? 0 : 1) + "M";
  if (a >= 1e4) return format_number(v / 1e3, 0) + "k";
  return format_number(v, a >= 10 || v == std::floor(v) ? 0 : (a >= 1 ? 1 : 3));
}

std::string text(double x, double y, const std::string& s, const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + extra + ">" + xml_escape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\" " + style +
         "/>\n";
}

struct Frame {
  double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  double y_max = 1;
  double y(double v) const { return y0 - (y0 - y1) * v / y_max; }
};

// Title, axis labels, y grid and ticks; returns the frame the data is drawn in.
std::string axes(const Plot& plot, Frame& f) {
  double max = 0;
  for (const Series& s : plot.series) {
    for (double v : s.y) max = std::max(max, std::isfinite(v) ? v : 0.0);
  }
  const double step = nice_step(max);
  f.y_max = std::max(step, std::ceil(max / step) * step);
  std::string svg = text(kWidth / 2 - kRight / 2 + kLeft / 2, 22, plot.title,
                         "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  for (double v = 0; v <= f.y_max + step / 2; v += step) {
    svg += line(f.x0, f.y(v), f.x1, f.y(v), "stroke=\"#ddd\"");
    svg += text(f.x0 - 6, f.y(v) + 4, tick_label(v), "text-anchor=\"end\" font-size=\"11\"");
  }
  svg += line(f.x0, f.y0, f.x1, f.y0, "stroke=\"#333\"") + line(f.x0, f.y0, f.x0, f.y1, "stroke=\"#333\"");
  svg += text((f.x0 + f.x1) / 2, kHeight - 12, plot.x_label, "text-anchor=\"middle\" font-size=\"12\"");
  svg += text(16, (f.y0 + f.y1) / 2, plot.y_label,
              "text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 16 " + num((f.y0 + f.y1) / 2) + ")\"");
  return svg;
}

std::string legend(const Plot& plot) {
  std::string svg;
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const double y = kTop + 10 + double(i) * 18;
    svg += "<rect x=\"" + num(kWidth - kRight + 15) + "\" y=\"" + num(y - 9) + "\" width=\"12\" height=\"12\" fill=\"" +
           color(i) + "\"/>\n";
    svg += text(kWidth - kRight + 33, y + 1, plot.series[i].name, "font-size=\"11\"");
  }
  return svg;
}

std::string line_chart(const Plot& plot, const Frame& f) {
  double x_min = INFINITY, x_max = -INFINITY;
  for (const Series& s : plot.series) {
    for (double x : s.x) x_min = std::min(x_min, x), x_max = std::max(x_max, x);
  }
  if (!std::isfinite(x_min)) return "";
  const double span = x_max > x_min ? x_max - x_min : 1;
  const auto px = [&](double x) { return f.x0 + (f.x1 - f.x0) * (x - x_min) / span; };
  std::string svg;
  std::vector<double> ticks;
  for (const Series& s : plot.series) ticks.insert(ticks.end(), s.x.begin(), s.x.end());
  std::sort(ticks.begin(), ticks.end());
  ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
  for (double x : ticks) svg += text(px(x), f.y0 + 16, tick_label(x), "text-anchor=\"middle\" font-size=\"11\"");
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const Series& s = plot.series[i];
    std::string points;
    for (size_t j = 0; j < s.x.size() && j < s.y.size(); ++j) {
      points += num(px(s.x[j])) + "," + num(f.y(s.y[j])) + " ";
      svg += "<circle cx=\"" + num(px(s.x[j])) + "\" cy=\"" + num(f.y(s.y[j])) + "\" r=\"3\" fill=\"" + color(i) +
             "\"/>\n";
    }
    svg += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + color(i) + "\" points=\"" + points + "\"/>\n";
  }
  return svg;
}

std::string bar_chart(const Plot& plot, const Frame& f) {
  const size_t groups = plot.categories.size();
  if (groups == 0 || plot.series.empty()) return "";
  const double group_w = (f.x1 - f.x0) / double(groups);
  const double bar_w = group_w * 0.8 / double(plot.series.size());
  std::string svg;
  for (size_t g = 0; g < groups; ++g) {
    const double gx = f.x0 + group_w * double(g);
    svg += text(gx + group_w / 2, f.y0 + 16, plot.categories[g], "text-anchor=\"middle\" font-size=\"11\"");
    for (size_t i = 0; i < plot.series.size(); ++i) {
      if (g >= plot.series[i].y.size()) continue;
      const double v = plot.series[i].y[g];
      const double x = gx + group_w * 0.1 + bar_w * double(i);
      svg += "<rect x=\"" + num(x) + "\" y=\"" + num(f.y(v)) + "\" width=\"" + num(bar_w * 0.92) + "\" height=\"" +
             num(f.y0 - f.y(v)) + "\" fill=\"" + color(i) + "\"><title>" + xml_escape(plot.series[i].name) + ": " +
             format_number(v, 3) + "</title></rect>\n";
    }
  }
  return svg;
}

}  // namespace

std::string render_svg(const Plot& plot) {
  Frame f;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
                    "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
                    "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += axes(plot, f);
  svg += plot.categories.empty() ? line_chart(plot, f) : bar_chart(plot, f);
  svg += legend(plot);
  return svg + "</svg>\n";
}

}  // namespace kvdesk::bench
