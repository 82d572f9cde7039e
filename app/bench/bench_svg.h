// Plots as SVG text, written by hand: a line chart (numeric x) or a grouped bar chart, with
// axes, "nice" ticks from zero, and a legend. No plotting library: a report stays one .md
// plus a few small .svg files any browser or Markdown viewer shows.
#pragma once
#include <string>

#include "app/bench/bench_report.h"

namespace kvdesk::bench {

std::string render_svg(const Plot& plot);

}  // namespace kvdesk::bench
