// Property test of the KV cache: thousands of random create / attach / append / compute /
// fork / free / swap steps against a plain model (each sequence's expected tokens), with
// every invariant and every sequence's KV bytes checked after each step.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "engine/kv/kv_cache.h"
#include "tests/engine/kv_test_support.h"

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

constexpr int32_t kMaxSequences = 10;
constexpr int32_t kMaxTokens = 120;
constexpr int32_t kVocab = 3;   // few distinct tokens: prompts share prefixes often

struct Expected {
  std::vector<int32_t> tokens;
  int32_t computed = 0;
  bool swapped = false;
  std::vector<uint8_t> host;   // [blocks][bytes per block] swap_out's bytes while swapped
};

class Harness {
 public:
  Harness(int32_t block_size, int32_t num_blocks, uint32_t seed)
      : kv_(tiny_model(kMaxTokens), tiny_cache_config(num_blocks, block_size)), rng_(seed) {}

  void step() {
    switch (pick(8)) {
      case 0: create(); break;
      case 1: case 2: append(); break;
      case 3: compute_some(); break;
      case 4: fork(); break;
      case 5: free_one(); break;
      case 6: swap_out(); break;
      case 7: swap_in(); break;
    }
    check();
  }

  void free_all() {
    for (const auto& [id, e] : model_) kv_.free_sequence(id);
    model_.clear();
    check();
    const KvSnapshot s = kv_.snapshot();
    CHECK(s.blocks_used == 0);
    CHECK(s.blocks_free + s.blocks_cached == s.blocks_total);
  }

  const KvCache& kv() const { return kv_; }

 private:
  int32_t pick(int32_t n) { return int32_t(rng_() % uint32_t(n)); }

  std::vector<int32_t> random_tokens(int32_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = pick(kVocab);
    return t;
  }

  // A live, not swapped sequence (swapped == false) or a swapped one, if any.
  std::optional<SeqId> any_sequence(bool swapped) {
    std::vector<SeqId> ids;
    for (const auto& [id, e] : model_) {
      if (e.swapped == swapped) ids.push_back(id);
    }
    if (ids.empty()) return std::nullopt;
    return ids[size_t(pick(int32_t(ids.size())))];
  }

  // A new sequence whose prompt often repeats an earlier one's prefix.
  void create() {
    if (int32_t(model_.size()) >= kMaxSequences) return;
    std::vector<int32_t> prompt;
    if (!history_.empty() && pick(3) > 0) {
      const std::vector<int32_t>& old = history_[size_t(pick(int32_t(history_.size())))];
      prompt.assign(old.begin(), old.begin() + pick(int32_t(old.size()) + 1));
    }
    const std::vector<int32_t> extra = random_tokens(1 + pick(8));
    prompt.insert(prompt.end(), extra.begin(), extra.end());
    if (int32_t(prompt.size()) > kMaxTokens) prompt.resize(size_t(kMaxTokens));
    const SeqId s = kv_.create_sequence();
    const int32_t attached = kv_.attach_cached_prefix(s, prompt);
    REQUIRE(attached % kv_.block_size() == 0);
    REQUIRE(attached <= int32_t(prompt.size() - 1) / kv_.block_size() * kv_.block_size());
    model_[s] = Expected{std::vector<int32_t>(prompt.begin(), prompt.begin() + attached), attached, false};
    try_append(s, std::vector<int32_t>(prompt.begin() + attached, prompt.end()));
  }

  void try_append(SeqId s, const std::vector<int32_t>& tokens) {
    Expected& e = model_.at(s);
    if (int32_t(e.tokens.size() + tokens.size()) > kMaxTokens) return;
    const bool fits = kv_.blocks_needed(s, int32_t(tokens.size())) <= kv_.num_available_blocks();
    const std::vector<int32_t> table_before = kv_.block_table(s);
    REQUIRE(kv_.append(s, tokens) == fits);
    if (fits) {
      e.tokens.insert(e.tokens.end(), tokens.begin(), tokens.end());
    } else {
      REQUIRE(kv_.block_table(s) == table_before);
    }
  }

  void append() {
    if (const std::optional<SeqId> s = any_sequence(false)) try_append(*s, random_tokens(1 + pick(6)));
  }

  void compute_some() {
    const std::optional<SeqId> s = any_sequence(false);
    if (!s) return;
    Expected& e = model_.at(*s);
    const int32_t upto = e.computed + pick(int32_t(e.tokens.size()) - e.computed + 1);
    compute(kv_, *s, upto);
    e.computed = upto;
    history_.push_back(std::vector<int32_t>(e.tokens.begin(), e.tokens.begin() + upto));
    if (history_.size() > 16) history_.erase(history_.begin());
  }

  void fork() {
    const std::optional<SeqId> s = any_sequence(false);
    if (!s || int32_t(model_.size()) >= kMaxSequences) return;
    const SeqId child = kv_.fork(*s);
    model_[child] = model_.at(*s);
  }

  void free_one() {
    std::optional<SeqId> s = any_sequence(pick(4) == 0);
    if (!s) return;
    kv_.free_sequence(*s);
    model_.erase(*s);
  }

  void swap_out() {
    const std::optional<SeqId> s = any_sequence(false);
    if (!s) return;
    std::vector<uint8_t> bytes = kv_.swap_out(*s);
    REQUIRE(bytes.size() == kv_.bytes_per_block() * size_t((model_.at(*s).tokens.size() + size_t(kv_.block_size()) - 1) / size_t(kv_.block_size())));
    model_.at(*s).swapped = true;
    model_.at(*s).host = std::move(bytes);
  }

  void swap_in() {
    const std::optional<SeqId> s = any_sequence(true);
    if (!s) return;
    const bool fits = kv_.blocks_to_swap_in(*s) <= kv_.num_available_blocks();
    REQUIRE(kv_.swap_in(*s, model_.at(*s).host) == fits);
    model_.at(*s).swapped = !fits;
    if (fits) model_.at(*s).host.clear();
  }

  // The cache agrees with the model; every held block's ref count is its holders; every
  // live sequence reads back exactly its own prefix's KV (so no held block was evicted,
  // overwritten or shared with another prefix).
  void check() {
    kv_.check_invariants();
    const KvSnapshot snap = kv_.snapshot();
    std::vector<int32_t> holders(size_t(snap.blocks_total), 0);
    REQUIRE(snap.sequences.size() == model_.size());
    for (const KvSequenceInfo& info : snap.sequences) {
      for (int32_t b : info.block_table) ++holders[size_t(b)];
    }
    for (int32_t b = 0; b < snap.blocks_total; ++b) REQUIRE(snap.blocks[size_t(b)].ref_count == holders[size_t(b)]);
    for (const auto& [id, e] : model_) {
      REQUIRE(kv_.tokens(id) == e.tokens);
      REQUIRE(kv_.num_computed(id) == e.computed);
      REQUIRE(kv_.is_swapped(id) == e.swapped);
      if (!e.swapped) REQUIRE(first_wrong_position(kv_, id) == -1);
    }
  }

  KvCache kv_;
  std::mt19937 rng_;
  std::map<SeqId, Expected> model_;
  std::vector<std::vector<int32_t>> history_;   // computed prefixes, for prompts to repeat
};

}  // namespace

TEST_CASE("random KV cache operations keep every invariant and every sequence's KV", "[engine][kv_cache][property]") {
  const int32_t block_size = GENERATE(4, 16);
  const uint32_t seed = GENERATE(1u, 2u);
  INFO("block size " << block_size << ", seed " << seed);
  Harness h(block_size, 4 * kMaxTokens / block_size, seed);
  for (int32_t i = 0; i < 3000; ++i) {
    INFO("step " << i);
    h.step();
  }
  const KvSnapshot s = h.kv().snapshot();
  CHECK(s.prefix_hits > 0);
  CHECK(s.evictions > 0);
  CHECK(s.cow_copies > 0);
  h.free_all();
}
