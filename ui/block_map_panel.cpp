// The block map: every physical KV block a cell, coloured by state (free, cached, used,
// shared by N), drawn as one image (ui/texture_cache.h) that is made again only when a
// block's colour or the grid changes. Hover tells a block's id, ref count, owners and fill;
// the selected conversation's blocks are outlined and joined in block-table order.
#include <imgui.h>


#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void legend_item(BlockKind kind, int32_t ref_count, const char* text, int32_t count) {
  const float s = ImGui::GetTextLineHeight() * 0.8f;
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + s, p.y + 2 + s),
                                            block_style(KvBlockView{kind, ref_count, 0}).fill);
  ImGui::Dummy(ImVec2(s, s));
  ImGui::SameLine();
  ImGui::Text("%s %s", text, format_count(count).c_str());
  ImGui::SameLine(0, 14);
}

void draw_legend(const KvView& kv) {
  legend_item(BlockKind::Free, 0, "free", kv.blocks_free);
  legend_item(BlockKind::Cached, 0, "cached", kv.blocks_cached);
  legend_item(BlockKind::Used, 1, "used", kv.blocks_used - kv.blocks_shared);
  legend_item(BlockKind::Shared, 2, "shared", kv.blocks_shared);
  ImGui::NewLine();
  ImGui::TextDisabled("%s blocks x %d tokens, %s each, pool %s", format_count(kv.blocks_total).c_str(), kv.block_size,
                      format_bytes(kv.bytes_per_block).c_str(), format_bytes(kv.pool_bytes).c_str());
  if (const std::string windows = sliding_window_text(kv); !windows.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", windows.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::TextDisabled("%s", host_tier_line(kv.host_tier).c_str());
}

ImVec2 cell_min(const ImVec2& origin, const BlockGrid& grid, int32_t block) {
  return ImVec2(origin.x + float(block % grid.columns) * grid.cell, origin.y + float(block / grid.columns) * grid.cell);
}

void draw_cells(ImDrawList* dl, const KvView& kv, const BlockGrid& grid, const ImVec2& origin, TextureCache& textures) {
  const ImTextureID image = textures.texture(TextureSlot::BlockMap, block_map_key(kv, grid),
                                             [&] { return block_map_image(kv, grid); });
  const ImVec2 size(float(grid.columns) * grid.cell, float(grid.rows) * grid.cell);
  dl->AddImage(image, origin, ImVec2(origin.x + size.x, origin.y + size.y));
}

// The conversation's blocks: outlined, numbered when cells are big enough, and joined by a
// line in block-table order (scattered blocks reading as one sequence).
void draw_highlight(ImDrawList* dl, const std::vector<int32_t>& table, const BlockGrid& grid, const ImVec2& origin,
                    int32_t num_blocks) {
  if (table.empty()) return;
  const float size = grid.cell - grid.gap;
  std::vector<ImVec2> centres;
  centres.reserve(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    const int32_t b = table[i];
    if (b < 0 || b >= num_blocks) continue;
    const ImVec2 p = cell_min(origin, grid, b);
    dl->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + size + 1, p.y + size + 1), IM_COL32(255, 255, 255, 255));
    centres.emplace_back(p.x + size * 0.5f, p.y + size * 0.5f);
    if (grid.cell >= 14 && i < 1000) {
      const std::string label = std::to_string(i);
      const float font_size = size * (i < 100 ? 0.6f : 0.45f);
      dl->AddText(ImGui::GetFont(), font_size, ImVec2(p.x + 1, p.y + 1), IM_COL32(0, 0, 0, 255), label.c_str());
    }
  }
  if (centres.size() > 1) {
    dl->AddPolyline(centres.data(), int(centres.size()), IM_COL32(255, 255, 255, 150), 0, 1.5f);
  }
}

}  // namespace

void draw_block_map_panel(const ViewModel& vm, TextureCache& textures) {
  const KvView& kv = vm.kv;
  draw_server_stats(vm);
  if (!kv.valid) {
    if (!vm.remote.connected) ImGui::TextDisabled("No KV cache yet: open a model.");
    return;
  }
  draw_legend(kv);
  const std::vector<int32_t> table = conversation_blocks(kv, vm.chat.conversation_id);
  if (vm.chat.conversation_id != 0) {
    ImGui::TextDisabled(table.empty() ? "selected conversation: no blocks in the cache"
                                      : "selected conversation: %zu blocks, outlined in block-table order",
                        table.size());
  }
  ImGui::BeginChild("##block_map");
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const int32_t n = int32_t(kv.blocks.size());
  const BlockGrid grid = block_grid(n, avail.x, avail.y);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  draw_cells(dl, kv, grid, origin, textures);
  draw_highlight(dl, table, grid, origin, n);
  ImGui::Dummy(ImVec2(float(grid.columns) * grid.cell, float(grid.rows) * grid.cell));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int32_t block = block_at(grid, n, mouse.x - origin.x, mouse.y - origin.y);
    if (block >= 0) ImGui::SetTooltip("%s", block_tooltip(kv, block).c_str());
  }
  ImGui::EndChild();
}

}  // namespace kvdesk::ui
