// Time plots: generated tokens per second, KV blocks in use and the prefix-cache hit rate
// over the last minutes, one sample a second (PlotLines over the view model's series).
#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void plot(const char* label, const std::vector<float>& series, float scale_max, const char* unit) {
  char overlay[64];
  std::snprintf(overlay, sizeof overlay, "%s: %.1f%s", label, series.empty() ? 0.0f : series.back(), unit);
  const float top = scale_max > 0 ? scale_max : 1.0f;
  ImGui::PlotLines((std::string("##") + label).c_str(), series.empty() ? nullptr : series.data(), int(series.size()), 0,
                   overlay, 0.0f, top,
                   ImVec2(ImGui::GetContentRegionAvail().x, ImGui::GetTextLineHeight() * 6));
}

}  // namespace

void draw_time_plots_panel(const ViewModel& vm) {
  const TimeSeriesView& t = vm.plots;
  ImGui::TextDisabled("Last %.0f s, one sample every %.0f s", float(t.tokens_per_s.size()) * t.sample_seconds,
                      t.sample_seconds);
  plot("tok/s", t.tokens_per_s, series_max(t.tokens_per_s) * 1.15f, "");
  const float blocks = std::max(float(vm.kv.blocks_total), float(vm.remote.stats.num_blocks.value_or(0)));
  plot("blocks in use", t.blocks_used, std::max(blocks, 1.0f), "");
  plot("prefix hit rate", t.hit_rate, 100.0f, "%");
  ImGui::Text("running %d, waiting %d, swapped %d, parked %d, preemptions %llu", vm.engine.running, vm.engine.waiting,
              vm.engine.swapped, vm.engine.parked, static_cast<unsigned long long>(vm.engine.preemptions));
}

}  // namespace kvdesk::ui
