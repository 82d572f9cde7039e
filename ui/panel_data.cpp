// Panel data: plain computations behind the panels (see panel_data.h).
#include "ui/panel_data.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <map>

namespace kvdesk::ui {

// ---------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------
std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, value < 10 ? "%.2f %s" : value < 100 ? "%.1f %s" : "%.0f %s", value, kUnits[unit]);
  }
  return buf;
}

std::string host_tier_line(const HostTierView& t) {
  if (t.budget_bytes == 0) return "host tier: off";
  std::string line = "host tier: " + format_count(t.blocks) + " blocks, " + format_bytes(t.stored_bytes) + " of " +
                     format_bytes(t.budget_bytes);
  if (t.compression_level > 0) {
    line += " (zstd " + std::to_string(t.compression_level) + ": " + format_bytes(t.held_bytes) + " held)";
  }
  return line + "; " + format_count(int64_t(t.hits)) + " hits, " + format_count(int64_t(t.swap_ins)) + " swap-ins, " +
         format_count(int64_t(t.drops)) + " drops";
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_percent(double pct) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", pct);
  return buf;
}

// ---------------------------------------------------------------------------------------
// Block map
// ---------------------------------------------------------------------------------------
BlockStyle block_style(const KvBlockView& block) {
  switch (block.kind) {
    case BlockKind::Free: return {rgba(58, 60, 66), "free"};
    case BlockKind::Cached: return {rgba(70, 120, 200), "cached"};
    case BlockKind::Used: return {rgba(80, 180, 95), "used"};
    case BlockKind::Shared: {
      // 2 sharers: orange; 6 or more: red.
      const int32_t extra = std::clamp(block.ref_count - 2, 0, 4);
      const uint32_t green = uint32_t(165 - extra * 30);
      return {rgba(235, green, 40), "shared"};
    }
  }
  return {rgba(255, 0, 255), "?"};
}

BlockGrid block_grid(int32_t num_blocks, float width, float height, float min_cell, float max_cell) {
  BlockGrid grid;
  if (num_blocks <= 0 || width < 1) return grid;
  float cell = std::floor(std::sqrt(std::max(width, 1.0f) * std::max(height, 1.0f) / float(num_blocks)));
  // Shrink until the rows the width allows fit the height (the estimate ignores rounding).
  for (cell = std::clamp(cell, min_cell, max_cell); cell > min_cell; cell -= 1) {
    const int32_t cols = std::max(1, int32_t(width / cell));
    const int32_t rows = (num_blocks + cols - 1) / cols;
    if (float(rows) * cell <= height) break;
  }
  grid.cell = cell;
  grid.gap = cell >= 5 ? 1.0f : 0.0f;
  grid.columns = std::max(1, int32_t(width / cell));
  grid.rows = (num_blocks + grid.columns - 1) / grid.columns;
  return grid;
}

RgbaImage block_map_image(const KvView& kv, const BlockGrid& grid) {
  const int32_t pitch = int32_t(grid.cell);
  const int32_t side = pitch - int32_t(grid.gap);
  RgbaImage image;
  image.width = grid.columns * pitch;
  image.height = grid.rows * pitch;
  image.pixels.assign(size_t(image.width) * size_t(image.height), 0);
  for (size_t b = 0; b < kv.blocks.size(); ++b) {
    const uint32_t fill = block_style(kv.blocks[b]).fill;
    const int32_t x0 = int32_t(b) % grid.columns * pitch;
    const int32_t y0 = int32_t(b) / grid.columns * pitch;
    for (int32_t y = y0; y < y0 + side; ++y) {
      uint32_t* row = image.pixels.data() + size_t(y) * size_t(image.width);
      std::fill(row + x0, row + x0 + side, fill);
    }
  }
  return image;
}

uint64_t block_map_key(const KvView& kv, const BlockGrid& grid) {
  constexpr uint64_t kFnvPrime = 1099511628211ull;
  uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](uint64_t v) { h = (h ^ v) * kFnvPrime; };
  mix(uint64_t(grid.columns));
  mix(uint64_t(grid.cell));
  mix(uint64_t(grid.gap));
  mix(kv.blocks.size());
  for (const KvBlockView& b : kv.blocks) mix(block_style(b).fill);
  return h;
}

int32_t block_at(const BlockGrid& grid, int32_t num_blocks, float x, float y) {
  if (x < 0 || y < 0 || grid.cell <= 0) return -1;
  const int32_t col = int32_t(x / grid.cell);
  const int32_t row = int32_t(y / grid.cell);
  if (col >= grid.columns) return -1;
  const int32_t index = row * grid.columns + col;
  return index < num_blocks ? index : -1;
}

std::vector<int32_t> sequences_holding(const KvView& kv, int32_t block) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < kv.sequences.size(); ++i) {
    const auto& table = kv.sequences[i].block_table;
    if (std::find(table.begin(), table.end(), block) != table.end()) out.push_back(int32_t(i));
  }
  return out;
}

std::string block_tooltip(const KvView& kv, int32_t block) {
  if (block < 0 || size_t(block) >= kv.blocks.size()) return {};
  const KvBlockView& b = kv.blocks[size_t(block)];
  std::string text = "block " + std::to_string(block) + ": " + block_style(b).label;
  if (b.kind == BlockKind::Shared) text += " by " + std::to_string(b.ref_count);
  text += "\nref count " + std::to_string(b.ref_count) + ", " + std::to_string(b.filled) + "/" +
          std::to_string(kv.block_size) + " tokens";
  const std::vector<int32_t> holders = sequences_holding(kv, block);
  if (!holders.empty()) {
    text += "\nheld by: ";
    for (size_t i = 0; i < holders.size(); ++i) {
      if (i > 0) text += ", ";
      text += kv.sequences[size_t(holders[i])].label;
    }
  }
  return text;
}

std::vector<int32_t> conversation_blocks(const KvView& kv, int64_t conversation_id) {
  if (conversation_id == 0) return {};
  for (const KvSequenceView& s : kv.sequences) {
    if (s.conversation_id == conversation_id) return s.block_table;
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// Fragmentation
// ---------------------------------------------------------------------------------------
FragmentationFigures fragmentation_figures(const KvView& kv) {
  FragmentationFigures f;
  f.paged_waste_tokens = kv.internal_waste_tokens;
  f.paged_waste_bytes = kv.internal_waste_bytes;
  f.paged_waste_pct = kv.internal_waste_pct;
  f.contiguous_waste_tokens = kv.contiguous_waste_tokens;
  f.contiguous_waste_bytes = kv.contiguous_waste_bytes;
  f.contiguous_waste_pct = kv.contiguous_waste_pct;
  if (kv.slots_reserved > 0) f.reserve_ratio = double(kv.contiguous_reserved_tokens) / double(kv.slots_reserved);
  return f;
}

// ---------------------------------------------------------------------------------------
// Sharing
// ---------------------------------------------------------------------------------------
namespace {

// Groups `members` (all with a block at `start`) by that block, keeping first-seen order,
// then emits each group's common run and recurses past it.
void build_prefix_nodes(const KvView& kv, const std::vector<int32_t>& members, int32_t start, int32_t depth,
                        std::vector<PrefixNode>& out) {
  std::vector<std::pair<int32_t, std::vector<int32_t>>> groups;   // block -> members
  for (int32_t m : members) {
    const int32_t block = kv.sequences[size_t(m)].block_table[size_t(start)];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == block; });
    if (it == groups.end()) {
      groups.push_back({block, {m}});
    } else {
      it->second.push_back(m);
    }
  }
  for (const auto& [block, group] : groups) {
    // The run every member of the group holds in common from `start`.
    int32_t run = 1;
    for (;; ++run) {
      const size_t at = size_t(start + run);
      const auto& first = kv.sequences[size_t(group[0])].block_table;
      const bool all = std::all_of(group.begin(), group.end(), [&](int32_t m) {
        const auto& table = kv.sequences[size_t(m)].block_table;
        return at < table.size() && at < first.size() && table[at] == first[at];
      });
      if (!all) break;
    }
    out.push_back(PrefixNode{depth, start, run, group});
    std::vector<int32_t> rest;
    for (int32_t m : group) {
      if (kv.sequences[size_t(m)].block_table.size() > size_t(start + run)) rest.push_back(m);
    }
    if (!rest.empty()) build_prefix_nodes(kv, rest, start + run, depth + 1, out);
  }
}

}  // namespace

std::vector<PrefixNode> prefix_tree(const KvView& kv) {
  std::vector<int32_t> members;
  for (size_t i = 0; i < kv.sequences.size(); ++i) {
    if (!kv.sequences[i].block_table.empty()) members.push_back(int32_t(i));
  }
  std::vector<PrefixNode> out;
  if (!members.empty()) build_prefix_nodes(kv, members, 0, 0, out);
  return out;
}

int64_t tokens_saved_by_sharing(const KvView& kv) {
  int64_t saved = 0;
  for (const KvBlockView& b : kv.blocks) {
    if (b.ref_count > 1) saved += int64_t(b.filled) * (b.ref_count - 1);
  }
  return saved;
}

std::string retention_kept_text(const KvView& kv) {
  if (kv.retention_tokens_seen == 0) return "off";
  return format_count(kv.retention_tokens_kept) + " / " + format_count(kv.retention_tokens_seen) + " (" +
         format_percent(100.0 * double(kv.retention_tokens_kept) / double(kv.retention_tokens_seen)) + ")";
}

std::string sliding_window_text(const KvView& kv) {
  if (kv.local_layer_groups == 0) return "";
  std::string text = "Sliding windows: " + std::to_string(kv.local_layer_groups) + " of " +
                     std::to_string(kv.layer_groups) + " layer groups (blocks of " + std::to_string(kv.layers_per_block) +
                     " layers) keep only the last " + format_count(kv.sliding_window) + " tokens";
  if (kv.window_full_blocks == 0) return text + ".";
  const double saved = 100.0 * double(kv.window_full_blocks - kv.window_held_blocks) / double(kv.window_full_blocks);
  return text + "; conversations hold " + format_count(kv.window_held_blocks) + " of the " +
         format_count(kv.window_full_blocks) + " blocks full attention would take (" + format_percent(saved) + " saved).";
}

// ---------------------------------------------------------------------------------------
// KV types
// ---------------------------------------------------------------------------------------
namespace {

// What a quality cell says when there is no figure; "" when measured.
std::string kv_quality_missing(const KvQualityView& quality) {
  switch (quality.state) {
    case KvQualityState::Measuring: return "measuring...";
    case KvQualityState::Failed: return "failed";
    case KvQualityState::Unknown: return "n/a";
    case KvQualityState::Measured: break;
  }
  return "";
}

}  // namespace

std::string kv_kl_text(const KvQualityView& quality) {
  if (quality.state != KvQualityState::Measured) return kv_quality_missing(quality);
  if (quality.kl == 0) return "0 (exact)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", quality.kl);
  return buf;
}

std::string kv_top1_text(const KvQualityView& quality) {
  if (quality.state != KvQualityState::Measured) return kv_quality_missing(quality);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", quality.top1);
  return buf;
}

std::string kv_quality_line(const std::vector<KvTypeCost>& types, std::string_view type) {
  for (const KvTypeCost& t : types) {
    if (t.name != type) continue;
    const KvQualityView& q = t.quality;
    const std::string head = t.name + " vs f32 KV on this model: ";
    switch (q.state) {
      case KvQualityState::Measured: return head + "KL " + kv_kl_text(q) + " nats, top-1 " + kv_top1_text(q);
      case KvQualityState::Measuring: return head + "measuring...";
      case KvQualityState::Failed: return head + "not measured: " + q.failure;
      case KvQualityState::Unknown: return head + "not measured";
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------
// Memory budget
// ---------------------------------------------------------------------------------------
std::vector<BarSegment> memory_segments(const MemoryView& memory, const KvView& kv) {
  const uint64_t per_block = kv.bytes_per_block;
  std::vector<BarSegment> segments = {
      {"weights", memory.weight_bytes, 0, rgba(150, 110, 200)},
      {"activations", memory.activation_bytes, 0, rgba(200, 160, 90)},
      {"KV used", per_block * uint64_t(std::max(kv.blocks_used, 0)), 0, rgba(80, 180, 95)},
      {"KV cached", per_block * uint64_t(std::max(kv.blocks_cached, 0)), 0, rgba(70, 120, 200)},
      {"KV free", per_block * uint64_t(std::max(kv.blocks_free, 0)), 0, rgba(90, 94, 102)},
      {"headroom", memory.available_bytes, 0, rgba(120, 124, 132, 90)},
  };
  uint64_t total = 0;
  for (const BarSegment& s : segments) total += s.bytes;
  if (total == 0) return segments;
  for (BarSegment& s : segments) s.fraction = float(double(s.bytes) / double(total));
  return segments;
}

std::vector<BarSegment> kv_pool_segments(const KvView& kv) {
  std::vector<BarSegment> all = memory_segments(MemoryView{}, kv);
  std::vector<BarSegment> pool(all.begin() + 2, all.begin() + 5);
  uint64_t total = 0;
  for (const BarSegment& s : pool) total += s.bytes;
  for (BarSegment& s : pool) s.fraction = total ? float(double(s.bytes) / double(total)) : 0.0f;
  return pool;
}

std::vector<float> segment_widths(const std::vector<BarSegment>& segments, float width, float min_px) {
  std::vector<float> widths;
  float added = 0;
  size_t widest = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    float w = segments[i].fraction * width;
    if (segments[i].bytes > 0 && w < min_px) {
      added += min_px - w;
      w = min_px;
    }
    widths.push_back(w);
    if (w > widths[widest]) widest = i;
  }
  if (!widths.empty()) widths[widest] = std::max(0.0f, widths[widest] - added);
  return widths;
}

std::vector<FitRow> conversations_that_fit(const std::vector<KvTypeCost>& types, uint64_t pool_bytes,
                                           int32_t context_length, int32_t heads, int32_t kv_heads,
                                           std::string_view current_type) {
  std::vector<FitRow> rows;
  const double gqa = kv_heads > 0 && heads > kv_heads ? double(heads) / double(kv_heads) : 1.0;
  for (const KvTypeCost& t : types) {
    FitRow row;
    row.type = t.name;
    row.bytes_per_token = t.bytes_per_token;
    row.bytes_per_conversation = t.bytes_per_token * uint64_t(std::max(context_length, 0));
    if (row.bytes_per_conversation > 0) {
      row.fits = int64_t(pool_bytes / row.bytes_per_conversation);
      row.fits_without_gqa = int64_t(double(pool_bytes) / (double(row.bytes_per_conversation) * gqa));
    }
    row.current = t.name == current_type;
    rows.push_back(std::move(row));
  }
  return rows;
}

// ---------------------------------------------------------------------------------------
// Time plots
// ---------------------------------------------------------------------------------------
void push_sample(std::vector<float>& series, float value, size_t max_samples) {
  series.push_back(value);
  if (series.size() > max_samples) series.erase(series.begin(), series.end() - std::ptrdiff_t(max_samples));
}

float series_max(const std::vector<float>& series) {
  float m = 0;
  for (float v : series) m = std::max(m, v);
  return m;
}

// ---------------------------------------------------------------------------------------
// Chat
// ---------------------------------------------------------------------------------------
std::string sibling_label(int32_t index, int32_t count) {
  return std::to_string(index + 1) + "/" + std::to_string(count);
}

const char* role_label(MessageRole role) {
  switch (role) {
    case MessageRole::System: return "System";
    case MessageRole::User: return "You";
    case MessageRole::Assistant: return "Assistant";
    case MessageRole::Tool: return "Tool";
  }
  return "?";
}

const char* state_label(MessageState state) {
  switch (state) {
    case MessageState::Complete: return "";
    case MessageState::Streaming: return "generating...";
    case MessageState::Stopped: return "stopped";
    case MessageState::Failed: return "failed";
    case MessageState::Interrupted: return "interrupted";
  }
  return "";
}

std::string own_template_label(const ModelView& model, const std::string& chosen) {
  const bool stand_in = chosen.empty() && !model.chat_template.empty() && model.chat_template != "own";
  return stand_in ? "model's own (" + model.chat_template + ")" : "model's own";
}

std::string chat_template_notice(const ModelView& model, const std::string& chosen) {
  if (model.chat_template_warning.empty() || !chosen.empty()) return "";
  return model.chat_template_warning + "\nNo prompt can be rendered with it: choose a template from the list.";
}

std::string special_texts_line(const ModelView& model) {
  const auto shown = [](const std::string& text) { return text.empty() ? std::string("none") : text; };
  return "bos_token: " + shown(model.bos_text) + "   eos_token: " + shown(model.eos_text);
}

std::string prompt_text(const PromptView& prompt) {
  std::string text;
  for (const PromptPiece& piece : prompt.pieces) text += piece.text;
  return text;
}

std::string finish_words(const std::string& finish_reason) {
  if (finish_reason == "stop") return "finished: end of turn";
  if (finish_reason == "length") return "finished: length limit";
  if (finish_reason == "context_full") return "finished: context full";
  if (finish_reason == "user" || finish_reason == "cancelled") return "finished: stopped";
  if (finish_reason == "error") return "finished: failed";
  return "finished: " + finish_reason;
}

std::string answer_stats_text(int64_t tokens, double tok_s, double ttft_ms, const std::string& finish_reason) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lld tokens, %.1f tok/s, TTFT %.0f ms, ", static_cast<long long>(tokens), tok_s, ttft_ms);
  return buf + finish_words(finish_reason);
}

StatusBarFit fit_status_bar(const std::string& line, const std::string& message, const std::string& note,
                            float width, float gap, const MeasureText& measure) {
  StatusBarFit fit;
  const std::string full_message = message.empty() ? "" : "| " + message;
  const float line_w = measure(line);
  const float message_w = full_message.empty() ? 0 : gap + measure(full_message);
  const float note_w = note.empty() ? 0 : gap + measure(note);
  fit.show_note = !note.empty() && line_w + message_w + note_w <= width;
  fit.line = elide_to_width(line, width, measure);
  fit.width = measure(fit.line);
  if (!full_message.empty()) {
    fit.message = elide_to_width(full_message, width - fit.width - gap, measure);
    if (!fit.message.empty()) fit.width += gap + measure(fit.message);
  }
  if (fit.show_note) fit.width += note_w;
  return fit;
}

int32_t context_limit(const ViewModel& vm) {
  const int32_t own = vm.chat.conversation_id != 0 ? vm.chat.settings.values.context_length : 0;
  return own > 0 && own < vm.model.context_length ? own : vm.model.context_length;
}

std::string status_line(const ViewModel& vm) {
  const ModelView& m = vm.model;
  switch (m.state) {
    case ModelState::None: return "No model: open one (path field above, a recent model, or drop a .gguf on the window).";
    case ModelState::Loading: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f%%, %.1f s", m.load_progress * 100.0, m.loading_seconds);
      return "Loading " + m.path + " ... " + buf;
    }
    case ModelState::Failed: return "Model failed to load: " + m.error;
    case ModelState::Loaded: break;
  }
  const std::string engine =
      m.backend == "remote" ? "server " + m.path : m.backend + " x" + std::to_string(m.threads) + " threads";
  std::string line = (m.name.empty() ? m.path : m.name) + " | " + engine + " | context " + std::to_string(vm.chat.context_used) + " / " +
                     std::to_string(context_limit(vm));
  if (!vm.status.last_answer.empty()) line += " | last answer: " + vm.status.last_answer;
  return line;
}

}  // namespace kvdesk::ui
