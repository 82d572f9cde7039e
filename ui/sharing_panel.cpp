// Sharing and the prefix cache: shared blocks, hits / misses / hit rate, prefill tokens the
// cache saved, evictions and copy-on-write copies, KV retention's tokens kept vs seen and the
// blocks it freed, and the prefix-sharing tree: which
// conversations hold which run of blocks in common.
#include <imgui.h>

#include "ui/kv_report.h"
#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void draw_counters(const KvView& kv) {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("##sharing_counters", 2, flags)) return;
  auto row = [](const char* name, const std::string& value) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(value.c_str());
  };
  row("prefix caching", kv.prefix_caching ? "on" : "off");
  row("shared blocks (ref count > 1)", format_count(kv.blocks_shared));
  row("tokens stored once, used by several", format_count(tokens_saved_by_sharing(kv)));
  row("prefix hits / misses (blocks)", format_count(int64_t(kv.prefix_hits)) + " / " + format_count(int64_t(kv.prefix_misses)));
  row("hit rate", format_percent(kv.prefix_hit_rate * 100.0));
  row("prefill tokens saved by hits", format_count(int64_t(kv.prefix_hit_tokens)));
  row("evictions", format_count(int64_t(kv.evictions)));
  row("forks (branches, regenerations)", format_count(int64_t(kv.forks)));
  row("copy-on-write copies", format_count(int64_t(kv.cow_copies)));
  row("retention: tokens kept / seen", retention_kept_text(kv));
  row("retention: compactions, blocks freed",
      format_count(int64_t(kv.retention_compactions)) + ", " + format_count(int64_t(kv.retention_blocks_freed)));
  ImGui::EndTable();
}

std::string member_names(const KvView& kv, const std::vector<int32_t>& members) {
  std::string names;
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0) names += ", ";
    names += kv.sequences[size_t(members[i])].label;
  }
  return names;
}

void draw_tree(const KvView& kv) {
  ImGui::TextUnformatted("Prefix-sharing tree (runs of logical blocks held in common)");
  const std::vector<PrefixNode> nodes = prefix_tree(kv);
  if (nodes.empty()) ImGui::TextDisabled("No sequences in the cache.");
  ImGui::BeginChild("##prefix_tree", ImVec2(0, 0), true);
  for (const PrefixNode& n : nodes) {
    const float indent = 16.0f * float(n.depth);
    if (indent > 0) ImGui::Indent(indent);
    const bool shared = n.members.size() > 1;
    const ImVec4 colour = shared ? ImVec4(0.95f, 0.65f, 0.2f, 1) : ImVec4(0.6f, 0.8f, 0.6f, 1);
    ImGui::TextColored(colour, "blocks %d-%d", n.first_block, n.first_block + n.num_blocks - 1);
    ImGui::SameLine();
    ImGui::TextWrapped("%s: %s", shared ? "shared by" : "own", member_names(kv, n.members).c_str());
    if (indent > 0) ImGui::Unindent(indent);
  }
  ImGui::EndChild();
}

}  // namespace

void draw_sharing_panel(const ViewModel& vm) {
  if (!vm.kv.valid) {
    ImGui::TextDisabled("%s", no_block_map_note(vm));
    return;
  }
  draw_counters(vm.kv);
  ImGui::Spacing();
  draw_tree(vm.kv);
}

}  // namespace kvdesk::ui
