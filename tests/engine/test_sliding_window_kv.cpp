// Sliding-window layers on the paged cache (engine/kv/kv_layer_groups.h): layers grouped into
// equal blocks, local groups letting go of the blocks no query still reads, the saving at a
// Gemma 3 shape, and prefix hits, branches, swapping and saved KV staying exact with windows;
// a windowed model continues a conversation with the tokens of a fresh run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "engine/kv/kv_layer_groups.h"
#include "engine/lab/random_model.h"
#include "engine/lab/weight_mix.h"
#include "tests/engine/kv_test_support.h"
#include "tests/engine/model_run.h"
#include "tests/test_support.h"

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

// The tiny test shape with layer 0 local (Gemma 2's pattern) and a window of `window` tokens.
ModelConfig windowed_tiny(int32_t window) {
  ModelConfig c = tiny_model();
  c.traits.local_pattern = 2;
  c.sliding_window = window;
  return c;
}

// Gemma 3 1B's KV shape: 26 layers, five local to one global, 1 KV head of 256, window 512.
ModelConfig gemma3_1b_shape() {
  ModelConfig c;
  c.block_count = 26;
  c.head_count = 4;
  c.head_count_kv = 1;
  c.head_dim = 256;
  c.embedding_length = 1152;
  c.context_length = 32768;
  c.traits.local_pattern = 6;
  c.sliding_window = 512;
  return c;
}

// Logical blocks of a sequence that a local group still holds.
int32_t held_local_blocks(const KvCache& kv, SeqId seq, int32_t local_layer) {
  const PagedSeq view = kv.view(seq, kv.num_tokens(seq), local_layer);
  const int32_t blocks = kv_blocks_for(kv.num_tokens(seq), kv.block_size());
  return int32_t(std::count_if(view.block_table, view.block_table + blocks, [](int32_t b) { return b >= 0; }));
}

}  // namespace

TEST_CASE("layers share blocks in one group without windows and in gcd-sized groups with them", "[kv][sliding_window]") {
  const KvLayerGroups plain = kv_layer_groups(tiny_model());
  CHECK_FALSE(plain.windowed());
  CHECK(plain.num_groups == 1);
  CHECK(plain.layers_per_block == kTinyLayers);

  const KvLayerGroups g3 = kv_layer_groups(gemma3_1b_shape());   // 4 global, 22 local layers
  CHECK(g3.windowed());
  CHECK(g3.layers_per_block == 2);
  CHECK(g3.num_global_groups == 2);
  CHECK(g3.num_groups == 13);
  std::vector<int32_t> per_group(size_t(g3.num_groups), 0);
  for (int32_t l = 0; l < 26; ++l) {
    ++per_group[size_t(g3.group_of_layer[size_t(l)])];
    CHECK(g3.is_local(g3.group_of_layer[size_t(l)]) == gemma3_1b_shape().is_local_layer(l));
  }
  for (int32_t n : per_group) CHECK(n == 2);

  ModelConfig long_window = gemma3_1b_shape();
  long_window.sliding_window = long_window.context_length;
  CHECK_FALSE(kv_layer_groups(long_window).windowed());
  CHECK(kv_bytes_per_block(gemma3_1b_shape(), KvType::F16, KvType::F16, 16) == 2u * 2 * 256 * 2 * 16);
}

TEST_CASE("a Gemma 3 shaped sequence at 8K context holds under a quarter of full attention's KV", "[kv][sliding_window]") {
  const ModelConfig c = gemma3_1b_shape();
  KvCacheConfig config = tiny_cache_config(kv_blocks_for_sequence(c, 16, 8192, 512), 16);
  config.layout.k_type = config.layout.v_type = KvType::F16;
  KvCache kv(c, config);
  const SeqId seq = kv.create_sequence();
  for (int32_t begin = 0; begin < 8192; begin += 512) {
    REQUIRE(kv.append(seq, token_range(begin, 512)));
    kv.mark_computed(seq, begin + 512);
  }
  kv.check_invariants();
  const double held = double(kv.held_blocks(seq)) * double(kv.bytes_per_block());
  const double full = double(kv.bytes_per_token()) * 8192.0;
  INFO("held " << held / (1 << 20) << " MiB of " << full / (1 << 20) << " MiB");
  CHECK(held <= 0.25 * full);
  CHECK(held > 0.15 * full);   // the global layers' 4/26 of it, and the windows
  const KvSnapshot snap = kv.snapshot();
  CHECK(snap.layer_groups == 13);
  CHECK(snap.sequences[0].held_blocks == kv.held_blocks(seq));
  CHECK(snap.sequences[0].full_attention_blocks == 512 * 13);
  CHECK(snap.blocks_used == kv.held_blocks(seq));
}

TEST_CASE("local groups let go of blocks before the window and read every other row exactly", "[kv][sliding_window]") {
  KvCache kv(windowed_tiny(8), tiny_cache_config(64, 4));
  const SeqId seq = kv.create_sequence();
  for (int32_t n = 0; n < 40; ++n) {
    REQUIRE(append_and_compute(kv, seq, {n + 7}));
    REQUIRE(first_wrong_position(kv, seq) == -1);
    const int32_t window_first = std::max(0, n + 1 + 1 - 8) / 4;
    CHECK(held_local_blocks(kv, seq, 0) == kv_blocks_for(n + 1, 4) - window_first);
    CHECK(held_local_blocks(kv, seq, 1) == kv_blocks_for(n + 1, 4));
  }
  CHECK(kv.held_blocks(seq) == 10 + 2);   // every global block, the local ones of positions 32..39
  CHECK(kv.num_available_blocks() == 64 - 12);
}

TEST_CASE("a prefix-cache hit needs the window's blocks: the first ones let go are evicted first", "[kv][sliding_window]") {
  KvCache kv(windowed_tiny(8), tiny_cache_config(22, 4));
  const std::vector<int32_t> prompt = token_range(100, 30);
  const SeqId a = kv.create_sequence();
  for (int32_t t : prompt) REQUIRE(append_and_compute(kv, a, {t}));
  kv.free_sequence(a);
  // 8 global + 8 local blocks were written, 14 full ones stay cached. The filler's 10 blocks
  // take the 8 free ones and evict the two local blocks the window let go of first.
  const SeqId filler = kv.create_sequence();
  REQUIRE(kv.append(filler, token_range(900, 20)));
  CHECK(kv.snapshot().evictions == 2);

  const SeqId b = kv.create_sequence();
  CHECK(kv.attach_cached_prefix(b, concat(prompt, {1, 2})) == 28);
  CHECK(first_wrong_position(kv, b) == -1);
  REQUIRE(append_and_compute(kv, b, {prompt[28], prompt[29], 1, 2}));
  CHECK(first_wrong_position(kv, b) == -1);

  // A shorter prompt would need local blocks that are gone: no hit rather than a torn one.
  const SeqId c = kv.create_sequence();
  CHECK(kv.attach_cached_prefix(c, concat(token_range(100, 12), {5})) == 0);
  kv.check_invariants();
}

TEST_CASE("a branch forks only where its window is still held, and copies each group's last block once", "[kv][sliding_window]") {
  KvCache kv(windowed_tiny(8), tiny_cache_config(64, 4));
  const SeqId a = kv.create_sequence();
  for (int32_t n = 0; n < 30; ++n) REQUIRE(append_and_compute(kv, a, {n + 40}));
  CHECK_FALSE(kv.can_fork_prefix(a, 10));
  REQUIRE(kv.can_fork_prefix(a, 29));
  const SeqId branch = kv.fork_prefix(a, 29);
  kv.check_invariants();
  const uint64_t copies = kv.snapshot().cow_copies;
  REQUIRE(append_and_compute(kv, branch, {7, 8, 9}));
  CHECK(kv.snapshot().cow_copies == copies + 2);   // the shared last block, in each of the two groups
  CHECK(first_wrong_position(kv, branch) == -1);
  CHECK(first_wrong_position(kv, a) == -1);
}

TEST_CASE("a windowed sequence swaps out and in and saves and restores exactly, without the blocks it let go", "[kv][sliding_window]") {
  KvCache kv(windowed_tiny(8), tiny_cache_config(64, 4));
  const SeqId a = kv.create_sequence();
  for (int32_t n = 0; n < 30; ++n) REQUIRE(append_and_compute(kv, a, {n + 40}));
  const size_t held = size_t(kv.held_blocks(a));
  const std::vector<uint8_t> swapped = kv.swap_out(a);
  CHECK(swapped.size() == held * kv.bytes_per_block());
  CHECK(kv.blocks_to_swap_in(a) == int32_t(held));
  kv.check_invariants();
  REQUIRE(kv.swap_in(a, swapped));
  kv.check_invariants();
  CHECK(first_wrong_position(kv, a) == -1);

  const std::vector<uint8_t> bytes = kv.export_blocks(a);
  CHECK(bytes.size() == held * kv.bytes_per_block());
  const std::vector<int32_t> tokens = kv.tokens(a);
  kv.free_sequence(a);
  const std::optional<SeqId> restored = kv.import_sequence(tokens, bytes);
  REQUIRE(restored.has_value());
  kv.check_invariants();
  CHECK(first_wrong_position(kv, *restored) == -1);
  REQUIRE(append_and_compute(kv, *restored, {1, 2, 3}));
  CHECK(first_wrong_position(kv, *restored) == -1);
  CHECK_FALSE(kv.import_sequence(tokens, std::span<const uint8_t>(bytes).first(bytes.size() - 1)).has_value());
}

TEST_CASE("retention is refused with sliding-window groups", "[kv][sliding_window]") {
  KvCache kv(windowed_tiny(8), tiny_cache_config(16, 4));
  const SeqId a = kv.create_sequence();
  RetentionOptions options;
  options.policy = RetentionPolicy::H2O;
  options.budget.tokens = 8;
  CHECK_THROWS_WITH(kv.set_retention(a, options, 1), Catch::Contains("sliding-window"));
}

TEST_CASE("a windowed model continues a conversation past its window with the tokens of a fresh run", "[kv][sliding_window][engine]") {
  const std::string arch = GENERATE(as<std::string>{}, "gemma2", "gemma3");
  TempDir dir;
  RandomModelSpec spec;
  spec.arch = arch;
  spec.layers = arch == "gemma3" ? 6 : 2;
  spec.embd = 32;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ff = 48;
  spec.context_length = 256;
  spec.sliding_window = 8;
  spec.vocab_from = model_path("tokenizer.model");
  spec.mix = *find_weight_mix("f32");
  spec.weight_std = 0.5f;
  write_random_model(spec, dir.file("m.gguf"));
  KvCacheConfig config;
  config.layout.block_size = 4;
  ModelRun chat(Model::load(dir.file("m.gguf")), config, 1, 3);
  std::vector<int32_t> history = token_range(300, 20);
  const Completion first = chat.greedy(history, 12, 7);
  history.insert(history.end(), first.tokens.begin(), first.tokens.end());
  history.insert(history.end(), {400, 401, 402});
  const Completion second = chat.greedy(history, 12, 7);
  CHECK(second.metrics.cached_tokens >= int32_t(history.size()) - 4);
  chat.kv->check_invariants();

  ModelRun fresh(Model::load(dir.file("m.gguf")), config, 1, 512);
  CHECK(fresh.greedy(history, 12).tokens == second.tokens);
}
