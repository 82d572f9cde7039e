// Tests of ui/panel_data: the figures, colours, layouts and text the panels show.
#include <catch2/catch.hpp>

#include "ui/panel_data.h"

using namespace kvdesk::ui;

namespace {

KvSequenceView seq(int32_t id, int64_t conversation, const std::string& label, std::vector<int32_t> table) {
  KvSequenceView s;
  s.seq_id = id;
  s.conversation_id = conversation;
  s.label = label;
  s.block_table = std::move(table);
  s.num_tokens = int32_t(s.block_table.size()) * 16;
  return s;
}

// Three sequences: A and B share blocks 0-1 (a system prompt), A and C share nothing else.
KvView sharing_view() {
  KvView kv;
  kv.valid = true;
  kv.block_size = 16;
  kv.blocks.resize(8);
  kv.blocks[0] = {BlockKind::Shared, 2, 16};
  kv.blocks[1] = {BlockKind::Shared, 2, 16};
  kv.blocks[2] = {BlockKind::Used, 1, 16};
  kv.blocks[3] = {BlockKind::Used, 1, 5};
  kv.blocks[4] = {BlockKind::Used, 1, 9};
  kv.blocks[5] = {BlockKind::Cached, 0, 16};
  kv.sequences = {seq(0, 10, "Alpha", {0, 1, 2, 3}), seq(1, 11, "Beta", {0, 1, 4}), seq(2, 0, "seq 2", {6})};
  kv.blocks[6] = {BlockKind::Used, 1, 3};
  return kv;
}

}  // namespace

TEST_CASE("the host tier line tells blocks, bytes, budget, compression, hits, swap-ins and drops", "[ui][panel_data]") {
  CHECK(host_tier_line(HostTierView{}) == "host tier: off");
  HostTierView t{512ull << 20, 0, 2, 12, 3ull << 20, 3ull << 20, 4, 5, 1};
  CHECK(host_tier_line(t) == "host tier: 12 blocks, 3.00 MiB of 512 MiB; 4 hits, 5 swap-ins, 1 drops");
  t.compression_level = 3;
  t.held_bytes = 1ull << 20;
  CHECK(host_tier_line(t) == "host tier: 12 blocks, 3.00 MiB of 512 MiB (zstd 3: 1.00 MiB held); 4 hits, 5 swap-ins, 1 drops");
}

TEST_CASE("format_bytes picks a binary unit with three significant digits", "[ui][panel_data]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(uint64_t(200) << 20) == "200 MiB");
  CHECK(format_bytes(uint64_t(3) << 30) == "3.00 GiB");
}

TEST_CASE("format_count groups thousands", "[ui][panel_data]") {
  CHECK(format_count(0) == "0");
  CHECK(format_count(999) == "999");
  CHECK(format_count(1000) == "1,000");
  CHECK(format_count(1234567) == "1,234,567");
  CHECK(format_count(-4096) == "-4,096");
}

TEST_CASE("block colours tell the four states apart and redden with more sharers", "[ui][panel_data]") {
  const uint32_t free_c = block_style({BlockKind::Free, 0, 0}).fill;
  const uint32_t cached = block_style({BlockKind::Cached, 0, 16}).fill;
  const uint32_t used = block_style({BlockKind::Used, 1, 16}).fill;
  const uint32_t shared2 = block_style({BlockKind::Shared, 2, 16}).fill;
  const uint32_t shared6 = block_style({BlockKind::Shared, 6, 16}).fill;
  CHECK(free_c != cached);
  CHECK(cached != used);
  CHECK(used != shared2);
  CHECK(shared2 != shared6);
  CHECK(((shared6 >> 8) & 0xFF) < ((shared2 >> 8) & 0xFF));   // less green: redder
  CHECK(std::string(block_style({BlockKind::Shared, 3, 16}).label) == "shared");
  CHECK((free_c >> 24) == 255);
}

TEST_CASE("block_grid fits the blocks in the area with square cells", "[ui][panel_data]") {
  SECTION("a few blocks get the largest cells") {
    const BlockGrid g = block_grid(16, 400, 300);
    CHECK(g.cell == 22);
    CHECK(g.columns == 18);
    CHECK(g.rows == 1);
  }
  SECTION("4096 blocks fill a 500x400 panel without scrolling") {
    const BlockGrid g = block_grid(4096, 500, 400);
    CHECK(float(g.rows) * g.cell <= 400);
    CHECK(g.columns * g.rows >= 4096);
    CHECK(g.cell >= 6);
  }
  SECTION("10,000 blocks in a small panel use the smallest cells and scroll") {
    const BlockGrid g = block_grid(10000, 200, 100);
    CHECK(g.cell == 3);
    CHECK(g.gap == 0);
    CHECK(float(g.rows) * g.cell > 100);
  }
  SECTION("no blocks, no rows") {
    CHECK(block_grid(0, 400, 300).rows == 0);
  }
}

TEST_CASE("block_at maps a point to the block under it", "[ui][panel_data]") {
  const BlockGrid g = block_grid(100, 100, 100);   // 10 columns of 10 px
  REQUIRE(g.columns == 10);
  REQUIRE(g.cell == 10);
  CHECK(block_at(g, 100, 0, 0) == 0);
  CHECK(block_at(g, 100, 15, 0) == 1);
  CHECK(block_at(g, 100, 5, 25) == 20);
  CHECK(block_at(g, 100, 99, 99) == 99);
  CHECK(block_at(g, 100, 105, 5) == -1);
  CHECK(block_at(g, 95, 99, 99) == -1);
  CHECK(block_at(g, 100, -1, 5) == -1);
}

TEST_CASE("the block map image paints each block's square and leaves the gaps clear", "[ui][panel_data]") {
  KvView kv;
  kv.blocks = {{BlockKind::Free, 0, 0}, {BlockKind::Used, 1, 3}, {BlockKind::Shared, 2, 16}};
  BlockGrid g;
  g.columns = 2;
  g.rows = 2;
  g.cell = 5;   // 4 pixels of colour, 1 of gap
  g.gap = 1;
  const RgbaImage image = block_map_image(kv, g);
  REQUIRE(image.width == 10);
  REQUIRE(image.height == 10);
  const auto at = [&](int x, int y) { return image.pixels[size_t(y * image.width + x)]; };
  CHECK(at(0, 0) == block_style(kv.blocks[0]).fill);
  CHECK(at(3, 3) == block_style(kv.blocks[0]).fill);
  CHECK(at(4, 0) == 0);                                   // gap column
  CHECK(at(0, 4) == 0);                                   // gap row
  CHECK(at(5, 0) == block_style(kv.blocks[1]).fill);      // block 1: column 1
  CHECK(at(8, 3) == block_style(kv.blocks[1]).fill);
  CHECK(at(0, 5) == block_style(kv.blocks[2]).fill);      // block 2: row 1
  CHECK(at(5, 5) == 0);                                   // no block 3
}

TEST_CASE("the block map key changes with a colour or the grid, not with a block's fill", "[ui][panel_data]") {
  KvView kv;
  kv.blocks = {{BlockKind::Free, 0, 0}, {BlockKind::Used, 1, 3}};
  const BlockGrid g = block_grid(2, 100, 100);
  const uint64_t key = block_map_key(kv, g);
  kv.blocks[1].filled = 4;                                  // same colour
  CHECK(block_map_key(kv, g) == key);
  kv.blocks[1].kind = BlockKind::Cached;
  CHECK(block_map_key(kv, g) != key);
  kv.blocks[1].kind = BlockKind::Used;
  CHECK(block_map_key(kv, g) == key);
  CHECK(block_map_key(kv, block_grid(2, 50, 50)) != key);
}

TEST_CASE("a block's tooltip names its state, fill and holders", "[ui][panel_data]") {
  const KvView kv = sharing_view();
  CHECK(sequences_holding(kv, 0) == std::vector<int32_t>{0, 1});
  CHECK(sequences_holding(kv, 5).empty());
  const std::string tip = block_tooltip(kv, 0);
  CHECK(tip.find("block 0: shared by 2") != std::string::npos);
  CHECK(tip.find("16/16 tokens") != std::string::npos);
  CHECK(tip.find("Alpha, Beta") != std::string::npos);
  CHECK(block_tooltip(kv, 3).find("5/16 tokens") != std::string::npos);
  CHECK(block_tooltip(kv, 99).empty());
}

TEST_CASE("conversation_blocks gives the conversation's block table in order", "[ui][panel_data]") {
  const KvView kv = sharing_view();
  CHECK(conversation_blocks(kv, 10) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(conversation_blocks(kv, 11) == std::vector<int32_t>{0, 1, 4});
  CHECK(conversation_blocks(kv, 12).empty());
  CHECK(conversation_blocks(kv, 0).empty());
}

TEST_CASE("the prefix tree groups the sequences by the blocks they share", "[ui][panel_data]") {
  const KvView kv = sharing_view();
  const std::vector<PrefixNode> tree = prefix_tree(kv);
  REQUIRE(tree.size() == 4);
  // Alpha and Beta share logical blocks 0-1, then each has its own tail; seq 2 is alone.
  CHECK(tree[0].depth == 0);
  CHECK(tree[0].first_block == 0);
  CHECK(tree[0].num_blocks == 2);
  CHECK(tree[0].members == std::vector<int32_t>{0, 1});
  CHECK(tree[1].depth == 1);
  CHECK(tree[1].first_block == 2);
  CHECK(tree[1].num_blocks == 2);
  CHECK(tree[1].members == std::vector<int32_t>{0});
  CHECK(tree[2].members == std::vector<int32_t>{1});
  CHECK(tree[2].num_blocks == 1);
  CHECK(tree[3].depth == 0);
  CHECK(tree[3].members == std::vector<int32_t>{2});
  CHECK(prefix_tree(KvView{}).empty());
}

TEST_CASE("tokens saved by sharing count each extra holder of a filled block", "[ui][panel_data]") {
  KvView kv = sharing_view();
  CHECK(tokens_saved_by_sharing(kv) == 32);
  kv.blocks[0].ref_count = 4;
  CHECK(tokens_saved_by_sharing(kv) == 16 * 3 + 16);
}

TEST_CASE("the memory bar's segments add up to the whole", "[ui][panel_data]") {
  KvView kv;
  kv.bytes_per_block = 1024;
  kv.blocks_used = 10;
  kv.blocks_cached = 5;
  kv.blocks_free = 85;
  const MemoryView memory{.weight_bytes = 100 * 1024, .activation_bytes = 0, .available_bytes = 200 * 1024};
  const std::vector<BarSegment> s = memory_segments(memory, kv);
  REQUIRE(s.size() == 6);
  CHECK(s[0].label == "weights");
  CHECK(s[2].bytes == 10 * 1024);
  CHECK(s[3].bytes == 5 * 1024);
  CHECK(s[4].bytes == 85 * 1024);
  float sum = 0;
  for (const BarSegment& b : s) sum += b.fraction;
  CHECK(sum == Approx(1.0f));
  CHECK(s[5].fraction == Approx(200.0f / 400.0f));
  for (const BarSegment& b : memory_segments(MemoryView{}, KvView{})) CHECK(b.fraction == 0);
}

TEST_CASE("the KV pool bar splits the pool alone", "[ui][panel_data]") {
  KvView kv;
  kv.bytes_per_block = 100;
  kv.blocks_used = 1;
  kv.blocks_cached = 1;
  kv.blocks_free = 2;
  const std::vector<BarSegment> s = kv_pool_segments(kv);
  REQUIRE(s.size() == 3);
  CHECK(s[0].label == "KV used");
  CHECK(s[0].fraction == Approx(0.25f));
  CHECK(s[2].fraction == Approx(0.5f));
}

TEST_CASE("bar segments get a visible minimum width taken from the widest", "[ui][panel_data]") {
  std::vector<BarSegment> s(3);
  s[0].bytes = 1;
  s[0].fraction = 0.0001f;
  s[1].bytes = 0;
  s[2].bytes = 10000;
  s[2].fraction = 0.9999f;
  const std::vector<float> w = segment_widths(s, 400, 4);
  REQUIRE(w.size() == 3);
  CHECK(w[0] == 4);
  CHECK(w[1] == 0);
  CHECK(w[0] + w[1] + w[2] == Approx(400));
}

TEST_CASE("conversations that fit follow the KV arithmetic with the GQA factor", "[ui][panel_data]") {
  // A Llama-3-8B-like shape: 32 layers, 8 KV heads of 128, f16: 131,072 bytes per token;
  // a 4,096-token conversation takes 512 MiB, so 16 GiB hold 32 of them. 32 query heads:
  // GQA factor 4, so without GQA only 8 would fit.
  const uint64_t f16_per_token = uint64_t(32) * 2 * 8 * 128 * 2;
  REQUIRE(f16_per_token == 131072);
  const std::vector<KvTypeCost> types = {{"f16", f16_per_token, {}}, {"int8", f16_per_token / 2 + 2048, {}}};
  const uint64_t pool = uint64_t(16) << 30;
  const std::vector<FitRow> rows = conversations_that_fit(types, pool, 4096, 32, 8, "f16");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].bytes_per_conversation == uint64_t(512) << 20);
  CHECK(rows[0].fits == 32);
  CHECK(rows[0].fits_without_gqa == 8);
  CHECK(rows[0].current);
  CHECK_FALSE(rows[1].current);
  CHECK(rows[1].fits == 62);   // int8 with per-row scales: a little over half of f16, so < 64
  SECTION("without GQA the factor is one") {
    const std::vector<FitRow> mha = conversations_that_fit(types, pool, 4096, 8, 8, "f16");
    CHECK(mha[0].fits == mha[0].fits_without_gqa);
  }
  SECTION("no context, nothing fits and nothing divides by zero") {
    CHECK(conversations_that_fit(types, pool, 0, 32, 8, "f16")[0].fits == 0);
  }
}

TEST_CASE("push_sample keeps the newest samples", "[ui][panel_data]") {
  std::vector<float> series;
  for (int i = 0; i < 10; ++i) push_sample(series, float(i), 4);
  CHECK(series == std::vector<float>{6, 7, 8, 9});
  CHECK(series_max(series) == 9);
  CHECK(series_max({}) == 0);
}

TEST_CASE("the status line names the model, the context and the last answer", "[ui][panel_data]") {
  ViewModel vm;
  CHECK(status_line(vm).find("open") != std::string::npos);
  vm.model.state = ModelState::Loaded;
  vm.model.name = "stories260K";
  vm.model.backend = "cpu";
  vm.model.threads = 2;
  vm.model.context_length = 512;
  vm.chat.context_used = 37;
  vm.status.last_answer = "TTFT 12 ms, 300.0 tok/s";
  const std::string line = status_line(vm);
  CHECK(line.find("stories260K") != std::string::npos);
  CHECK(line.find("cpu") != std::string::npos);
  CHECK(line.find("37 / 512") != std::string::npos);
  CHECK(line.find("TTFT 12 ms") != std::string::npos);
  vm.chat.conversation_id = 3;
  vm.chat.settings.values.context_length = 64;
  CHECK(status_line(vm).find("37 / 64") != std::string::npos);
  vm.chat.settings.values.context_length = 4096;
  CHECK(status_line(vm).find("37 / 512") != std::string::npos);
  vm.model.state = ModelState::Failed;
  vm.model.error = "bad magic";
  CHECK(status_line(vm).find("bad magic") != std::string::npos);
  CHECK(sibling_label(0, 2) == "1/2");
}

TEST_CASE("a template that does not parse is named beside the list with what to do", "[ui][panel_data]") {
  ModelView m;
  m.chat_template = "own";
  CHECK(chat_template_notice(m, "").empty());
  m.chat_template_warning = "the chat template does not parse: line 4: unknown tag 'generation'";
  const std::string notice = chat_template_notice(m, "");
  CHECK(notice.find("line 4: unknown tag 'generation'") != std::string::npos);
  CHECK(notice.find("choose a template from the list") != std::string::npos);
  CHECK(chat_template_notice(m, "chatml").empty());   // a family was chosen in its place
}

TEST_CASE("the template list names what stands in for the model's own, and the BOS and EOS texts", "[ui][panel_data]") {
  ModelView m;
  m.chat_template = "own";
  CHECK(own_template_label(m, "") == "model's own");
  m.chat_template = "plain";
  CHECK(own_template_label(m, "") == "model's own (plain)");
  CHECK(own_template_label(m, "chatml") == "model's own");
  CHECK(special_texts_line(m) == "bos_token: none   eos_token: none");
  m.bos_text = "<s>";
  m.eos_text = "</s>";
  CHECK(special_texts_line(m) == "bos_token: <s>   eos_token: </s>");
}

TEST_CASE("the prompt's text is its pieces joined", "[ui][panel_data]") {
  PromptView p;
  CHECK(prompt_text(p).empty());
  p.pieces = {{"<|im_start|>user\n", true}, {"Hi", false}, {"<|im_end|>\n", true}};
  CHECK(prompt_text(p) == "<|im_start|>user\nHi<|im_end|>\n");
}

TEST_CASE("retention's kept vs seen reads as counts and a share, or off", "[ui][panel_data]") {
  KvView kv;
  CHECK(retention_kept_text(kv) == "off");
  kv.retention_tokens_seen = 480;
  kv.retention_tokens_kept = 120;
  CHECK(retention_kept_text(kv) == "120 / 480 (25.0%)");
}

TEST_CASE("the sliding-window line names the local groups and the blocks they save", "[ui][panel_data]") {
  KvView kv;
  CHECK(sliding_window_text(kv).empty());
  kv.layer_groups = 13;
  kv.local_layer_groups = 11;
  kv.layers_per_block = 2;
  kv.sliding_window = 512;
  CHECK(sliding_window_text(kv) == "Sliding windows: 11 of 13 layer groups (blocks of 2 layers) keep only the last 512 tokens.");
  kv.window_held_blocks = 1376;
  kv.window_full_blocks = 6656;
  CHECK(sliding_window_text(kv) == "Sliding windows: 11 of 13 layer groups (blocks of 2 layers) keep only the last 512 tokens; "
                                   "conversations hold 1,376 of the 6,656 blocks full attention would take (79.3% saved).");
}

TEST_CASE("an answer's statistics say how it finished in words", "[ui][panel_data]") {
  CHECK(answer_stats_text(12, 45.06, 30.4, "stop") == "12 tokens, 45.1 tok/s, TTFT 30 ms, finished: end of turn");
  CHECK(finish_words("length") == "finished: length limit");
  CHECK(finish_words("user") == "finished: stopped");
  CHECK(finish_words("context_full") == "finished: context full");
  CHECK(finish_words("error") == "finished: failed");
  CHECK(finish_words("odd") == "finished: odd");
}

TEST_CASE("the status bar drops the font note, then shortens the message, never overlapping", "[ui][panel_data]") {
  const auto ten_px = [](std::string_view t) { return float(t.size()) * 10.0f; };
  const std::string line = "model | cpu";                     // 110 px
  const std::string message = "model loaded; no CUDA device";   // "| " + 28 chars: 300 px
  const std::string note = "Korean: NanumGothic";             // 190 px
  SECTION("everything fits") {
    const StatusBarFit fit = fit_status_bar(line, message, note, 1000, 8, ten_px);
    CHECK(fit.line == line);
    CHECK(fit.message == "| " + message);
    CHECK(fit.show_note);
    CHECK(fit.width == 110 + 8 + 300 + 8 + 190);
  }
  SECTION("no room for the note: it goes, the message stays whole") {
    const StatusBarFit fit = fit_status_bar(line, message, note, 500, 8, ten_px);
    CHECK_FALSE(fit.show_note);
    CHECK(fit.message == "| " + message);
    CHECK(fit.width <= 500);
  }
  SECTION("a narrow bar shortens the message, then the line") {
    const StatusBarFit narrow = fit_status_bar(line, message, note, 250, 8, ten_px);
    CHECK(narrow.line == line);
    CHECK(narrow.message == "| model lo...");   // 250 - 110 - 8 = 132 px: 13 characters
    CHECK(narrow.width <= 250);
    const StatusBarFit tiny = fit_status_bar(line, message, note, 60, 8, ten_px);
    CHECK(tiny.line == "mod...");
    CHECK(tiny.message.empty());
    CHECK(tiny.width <= 60);
  }
}

TEST_CASE("the kv types table shows each type's KL and top-1 once measured and says measuring before", "[ui][panel_data][kv_quality]") {
  const KvQualityView measured{KvQualityState::Measured, 4.5e-5, 98.4252, ""};
  CHECK(kv_kl_text(measured) == "4.5e-05");
  CHECK(kv_top1_text(measured) == "98.4%");
  const KvQualityView exact{KvQualityState::Measured, 0, 100, ""};
  CHECK(kv_kl_text(exact) == "0 (exact)");
  CHECK(kv_top1_text(exact) == "100.0%");
  const KvQualityView measuring{KvQualityState::Measuring, 0, 0, ""};
  CHECK(kv_kl_text(measuring) == "measuring...");
  CHECK(kv_top1_text(measuring) == "measuring...");
  const KvQualityView failed{KvQualityState::Failed, 0, 0, "no room"};
  CHECK(kv_kl_text(failed) == "failed");
  CHECK(kv_top1_text(KvQualityView{}) == "n/a");
}

TEST_CASE("the k type line names the pool's type and its figures, pending or failed", "[ui][panel_data][kv_quality]") {
  const std::vector<KvTypeCost> types = {{"f32", 1280, {KvQualityState::Measured, 0, 100, ""}},
                                         {"int8", 480, {KvQualityState::Measured, 4.5e-5, 100, ""}},
                                         {"int4", 280, {KvQualityState::Measuring, 0, 0, ""}},
                                         {"fp8_e5m2", 480, {KvQualityState::Failed, 0, 0, "no KV room"}}};
  CHECK(kv_quality_line(types, "int8") == "int8 vs f32 KV on this model: KL 4.5e-05 nats, top-1 100.0%");
  CHECK(kv_quality_line(types, "int4") == "int4 vs f32 KV on this model: measuring...");
  CHECK(kv_quality_line(types, "fp8_e5m2") == "fp8_e5m2 vs f32 KV on this model: not measured: no KV room");
  CHECK(kv_quality_line(types, "bf16").empty());
}
