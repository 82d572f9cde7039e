// Panel data: the numbers, colours, labels and layouts the panels show, computed by plain
// functions over the ViewModel. No ImGui here, so the unit tests check every figure a panel
// draws without pixels. Colours are packed as ImGui's IM_COL32 (0xAABBGGRR).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ui/rgba_image.h"
#include "ui/text_layout.h"
#include "ui/view_model.h"

namespace kvdesk::ui {

constexpr uint32_t rgba(uint32_t r, uint32_t g, uint32_t b, uint32_t a = 255) {
  return (a << 24) | (b << 16) | (g << 8) | r;
}

// ----- formatting ------------------------------------------------------------------------
std::string format_bytes(uint64_t bytes);         // "512 B", "1.5 KiB", "2.00 GiB"
std::string format_count(int64_t n);              // "1,234,567"
std::string format_percent(double pct);           // "12.3%"

// ----- host tier -------------------------------------------------------------------------
// "host tier: 12 blocks, 1.50 MiB of 512 MiB (zstd 3: 1.10 MiB held); 4 hits, 5 swap-ins,
// 0 drops", or "host tier: off".
std::string host_tier_line(const HostTierView& tier);

// ----- block map -------------------------------------------------------------------------
struct BlockStyle {
  uint32_t fill = 0;
  const char* label = "";   // "free", "cached", "used", "shared"
};
// Free: dark grey; cached (evictable): blue; used by one: green; shared: orange turning red
// as more sequences share it.
BlockStyle block_style(const KvBlockView& block);

// Cells of the block map: square, one gap pixel when they are big enough to afford it.
struct BlockGrid {
  int32_t columns = 1;
  int32_t rows = 0;
  float cell = 1;    // pitch: cell + gap
  float gap = 0;
};
// Largest cell (between min_cell and max_cell) that fits num_blocks in width x height;
// when even min_cell does not fit, the map grows taller than height (it scrolls).
BlockGrid block_grid(int32_t num_blocks, float width, float height, float min_cell = 3, float max_cell = 22);
// The block under (x, y), relative to the map's top left; -1 outside any cell.
int32_t block_at(const BlockGrid& grid, int32_t num_blocks, float x, float y);

// The map as an image: block b's square of (cell - gap) pixels in its fill colour at column
// b % columns, row b / columns; gaps and cells past the last block transparent.
RgbaImage block_map_image(const KvView& kv, const BlockGrid& grid);
// Equal exactly when block_map_image would give equal pixels (grid and every block's colour).
uint64_t block_map_key(const KvView& kv, const BlockGrid& grid);

// The sequences holding a block (indices into kv.sequences).
std::vector<int32_t> sequences_holding(const KvView& kv, int32_t block);
// "block 12: shared by 3, 16/16 tokens\nconversations: Alpha, Beta"
std::string block_tooltip(const KvView& kv, int32_t block);
// The blocks of the conversation's sequences in block-table order (the first sequence
// holding the conversation; empty when it has none).
std::vector<int32_t> conversation_blocks(const KvView& kv, int64_t conversation_id);

// ----- fragmentation ---------------------------------------------------------------------
struct FragmentationFigures {
  int64_t paged_waste_tokens = 0;
  uint64_t paged_waste_bytes = 0;
  double paged_waste_pct = 0;
  int64_t contiguous_waste_tokens = 0;
  uint64_t contiguous_waste_bytes = 0;
  double contiguous_waste_pct = 0;
  // How many times more memory contiguous preallocation would reserve than paging does.
  double reserve_ratio = 0;
};
FragmentationFigures fragmentation_figures(const KvView& kv);

// ----- sharing and the prefix cache ---------------------------------------------------------
// One node of the prefix-sharing tree: a run of logical blocks [first_block, first_block +
// num_blocks) that exactly the sequences in `members` hold in common (the same physical
// blocks). Children continue after it with fewer members; a node with one member is that
// sequence's own tail.
struct PrefixNode {
  int32_t depth = 0;
  int32_t first_block = 0;
  int32_t num_blocks = 0;
  std::vector<int32_t> members;   // indices into kv.sequences
};
// Pre-order (parents before children), roots in sequence order.
std::vector<PrefixNode> prefix_tree(const KvView& kv);
// Tokens whose KV is stored once but used by several sequences: sum over shared blocks of
// filled x (ref_count - 1).
int64_t tokens_saved_by_sharing(const KvView& kv);
// KV retention's "kept / seen (share)", e.g. "120 / 480 (25.0%)"; "off" when no sequence runs a policy.
std::string retention_kept_text(const KvView& kv);
// What sliding-window layers save: "" for a model without them.
std::string sliding_window_text(const KvView& kv);

// ----- KV types --------------------------------------------------------------------------
// A KV type's quality cells: "measuring...", "failed", "n/a" unless measured; else the KL
// divergence in nats ("0 (exact)", "4.5e-05") and the top-1 agreement ("100.0%").
std::string kv_kl_text(const KvQualityView& quality);
std::string kv_top1_text(const KvQualityView& quality);
// The quantization panel's line for the pool's K type: "<type> vs f32 KV on this model: KL
// ... nats, top-1 ...",
// or why there are no figures (yet); "" when the type is not in the list.
std::string kv_quality_line(const std::vector<KvTypeCost>& types, std::string_view type);

// ----- memory budget ---------------------------------------------------------------------
struct BarSegment {
  std::string label;
  uint64_t bytes = 0;
  float fraction = 0;      // of the whole bar
  uint32_t color = 0;
};
// weights | activations | KV used | KV cached | KV free | headroom, fractions summing to 1
// (all zero when everything is zero).
std::vector<BarSegment> memory_segments(const MemoryView& memory, const KvView& kv);
// The KV pool alone: used | cached | free.
std::vector<BarSegment> kv_pool_segments(const KvView& kv);
// Pixel widths of the segments in a bar `width` wide: proportional, but every non-empty
// segment at least min_px (taken from the widest), so a 1 MiB model shows next to 20 GiB.
std::vector<float> segment_widths(const std::vector<BarSegment>& segments, float width, float min_px);

struct FitRow {
  std::string type;
  uint64_t bytes_per_token = 0;
  uint64_t bytes_per_conversation = 0;   // context_length tokens
  int64_t fits = 0;                      // in the pool
  int64_t fits_without_gqa = 0;          // if every query head had its own K/V head
  bool current = false;
};
// The KV arithmetic: a conversation of context_length tokens takes context_length x
// bytes_per_token; the pool holds floor(pool / that) of them. GQA divides bytes/token by
// heads / kv_heads, so without it the pool would hold that many times fewer.
std::vector<FitRow> conversations_that_fit(const std::vector<KvTypeCost>& types, uint64_t pool_bytes,
                                           int32_t context_length, int32_t heads, int32_t kv_heads,
                                           std::string_view current_type);

// ----- time plots ------------------------------------------------------------------------
// Appends a sample, dropping the oldest beyond max_samples.
void push_sample(std::vector<float>& series, float value, size_t max_samples);
float series_max(const std::vector<float>& series);

// ----- chat ------------------------------------------------------------------------------
std::string sibling_label(int32_t index, int32_t count);   // "1/2"
const char* role_label(MessageRole role);
const char* state_label(MessageState state);   // "" for Complete

// A finished answer's figures, then how it ended in words: "12 tokens, 45.1 tok/s, TTFT 30 ms,
// finished: end of turn". finish_reason is the stored word ("stop", "length", "context_full",
// "user", "error").
std::string answer_stats_text(int64_t tokens, double tok_s, double ttft_ms, const std::string& finish_reason);
std::string finish_words(const std::string& finish_reason);   // "finished: end of turn", ...

// ----- chat template and prompt ------------------------------------------------------------
// The template list's entry for the model's own: "model's own", with what stands in for it when
// no family is chosen and it is not the model's Jinja ("model's own (plain)": the model has none).
std::string own_template_label(const ModelView& model, const std::string& chosen);
// What the window says beside the template list when the template in use does not parse (the
// engine's message, naming the line) and what to do about it; "" when it parses or a family is chosen.
std::string chat_template_notice(const ModelView& model, const std::string& chosen);
// What the template's bos_token and eos_token are: "bos_token: <s>   eos_token: </s>" ("none" for "").
std::string special_texts_line(const ModelView& model);
// The prompt as one text (its pieces joined), what Copy takes.
std::string prompt_text(const PromptView& prompt);

// The tokens the selected conversation may hold: its context length within the model's.
int32_t context_limit(const ViewModel& vm);

// The status line: model, backend, context used / limit, the last answer's TTFT and tok/s.
std::string status_line(const ViewModel& vm);

// The status bar's three parts fitted to its width: the status line, then "| message", then the
// font note on the right. The note goes first when room runs out (it is shown on hover then),
// then the message is shortened with "...", then the status line itself.
struct StatusBarFit {
  std::string line;
  std::string message;     // "" when there is none or no room; else starts with "| "
  bool show_note = false;
  float width = 0;         // of everything shown, gaps included
};
StatusBarFit fit_status_bar(const std::string& line, const std::string& message, const std::string& note,
                            float width, float gap, const MeasureText& measure);

}  // namespace kvdesk::ui
