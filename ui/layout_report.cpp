// Layout report: a list of needed/had widths, and its text form.
#include "ui/layout_report.h"

#include <cstdio>

namespace kvdesk::ui {
namespace {

constexpr float kTolerancePx = 0.5f;

bool overflows_entry(const LayoutEntry& e) { return e.needed > e.had + kTolerancePx; }

}  // namespace

void LayoutReport::clear(float width, float height) {
  window_width = width;
  window_height = height;
  entries.clear();
}

void LayoutReport::record(std::string where, float needed, float had) {
  entries.push_back({std::move(where), needed, had});
}

std::vector<LayoutEntry> LayoutReport::overflows() const {
  std::vector<LayoutEntry> out;
  for (const LayoutEntry& e : entries) {
    if (overflows_entry(e)) out.push_back(e);
  }
  return out;
}

std::string LayoutReport::text() const {
  char line[512];
  std::snprintf(line, sizeof line, "window %.0fx%.0f\n", double(window_width), double(window_height));
  std::string out = line;
  for (const LayoutEntry& e : entries) {
    std::snprintf(line, sizeof line, "%s: needed %.1f px, had %.1f px%s\n", e.where.c_str(), double(e.needed),
                  double(e.had), overflows_entry(e) ? " OVERFLOW" : "");
    out += line;
  }
  return out;
}

}  // namespace kvdesk::ui
