#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "engine/error.h"
#include "engine/grammar/stack_sets.h"

namespace kvdesk::grammar {
namespace {

constexpr size_t kCompactEveryBytes = 1024;   // how often a long feed checks the budget

// The bytes for an error message: printable ASCII as it is, the rest as \xHH, cut at 40.
std::string printable(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < 40; ++i) {
    const uint8_t b = uint8_t(bytes[i]);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      out += char(b);
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return bytes.size() > 40 ? out + "..." : out;
}

void set_bit(std::vector<uint64_t>& bits, int32_t i) { bits[size_t(i) >> 6] |= uint64_t{1} << (i & 63); }

}  // namespace

TokenTable::TokenTable(std::vector<std::string> token_bytes, std::vector<int32_t> end_of_generation_ids)
    : bytes_(std::move(token_bytes)), end_of_generation_(bytes_.size(), false) {
  for (int32_t id : end_of_generation_ids) {
    if (id < 0 || size_t(id) >= bytes_.size()) throw Error("end-of-generation token " + std::to_string(id) + " is not in the vocabulary");
    if (!end_of_generation_[size_t(id)]) end_of_generation_ids_.push_back(id);
    end_of_generation_[size_t(id)] = true;
  }
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].size() > UINT16_MAX) throw Error("token " + std::to_string(id) + " is over 65535 bytes");
  }
  build_trie();
}

// Tokens sorted by their bytes come in trie preorder: each one shares its longest common
// prefix with the one before, so only the nodes past that prefix are new, and a node's
// subtree ends when a later token leaves its path.
void TokenTable::build_trie() {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id].empty()) order.push_back(int32_t(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  trie_.push_back({0, 0, 0});
  std::vector<int32_t> path = {0};   // [depth]: the node on the current token's path
  std::vector<std::pair<int32_t, int32_t>> ends;   // (node, token), node order
  std::string_view previous;
  for (int32_t id : order) {
    const std::string& bytes = bytes_[size_t(id)];
    const size_t common = size_t(std::mismatch(previous.begin(), previous.end(), bytes.begin(), bytes.end()).first - previous.begin());
    while (path.size() > common + 1) {
      trie_[size_t(path.back())].subtree_end = int32_t(trie_.size());
      path.pop_back();
    }
    for (size_t depth = common; depth < bytes.size(); ++depth) {
      path.push_back(int32_t(trie_.size()));
      trie_.push_back({0, uint16_t(depth + 1), uint8_t(bytes[depth])});
    }
    ends.emplace_back(path.back(), id);
    max_depth_ = std::max(max_depth_, int(bytes.size()));
    previous = bytes;
  }
  for (int32_t node : path) trie_[size_t(node)].subtree_end = int32_t(trie_.size());
  root_children_.fill(-1);
  for (int32_t child = 1; child < int32_t(trie_.size()); child = trie_[size_t(child)].subtree_end) {
    root_children_[trie_[size_t(child)].byte] = child;
  }
  trie_token_begin_.assign(trie_.size() + 1, 0);
  for (const auto& [node, token] : ends) ++trie_token_begin_[size_t(node) + 1];
  std::partial_sum(trie_token_begin_.begin(), trie_token_begin_.end(), trie_token_begin_.begin());
  for (const auto& end : ends) trie_tokens_.push_back(end.second);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> tokens)
    : grammar_(std::move(grammar)), tokens_(std::move(tokens)) {
  start_grammar();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> tokens,
                               std::vector<std::string> triggers)
    : grammar_(std::move(grammar)), tokens_(std::move(tokens)), triggered_(false) {
  for (std::string& trigger : triggers) {
    if (!trigger.empty()) triggers_.push_back(std::move(trigger));
  }
}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::start_grammar() {
  if (inherited_.sets) {
    sets_ = std::move(inherited_.sets);
    masks_ = std::move(inherited_.masks);
  } else {
    sets_ = std::make_unique<StackSets>(grammar_);
    masks_ = MaskCache{};
  }
  inherited_ = Tables{};
  masked_here_.clear();
  state_ = sets_->start();
  walk_states_.assign(size_t(tokens_->max_depth()) + 1, 0);
}

void GrammarMatcher::reuse_tables(Tables tables) {
  if (!tables.sets || !tables.grammar || tables.tokens != tokens_ || !same_rules(*tables.grammar, *grammar_) || fed_) {
    return;
  }
  inherited_ = std::move(tables);
  if (triggered_) start_grammar();
}

GrammarMatcher::Tables GrammarMatcher::take_tables() {
  Tables tables{grammar_, tokens_, std::move(sets_), std::move(masks_)};
  if (!tables.sets) tables = std::move(inherited_);
  return tables;
}

size_t GrammarMatcher::Tables::footprint_bytes() const {
  size_t bytes = sets ? sets->footprint_bytes() : 0;
  for (const MaskCache::Entry& entry : masks.entries) bytes += sizeof(entry) + entry.allowed.size() * sizeof(uint64_t);
  return bytes;
}

void GrammarMatcher::compact_if_needed() const {
  if (sets_->over_budget()) compact({&state_});
}

// Keeps *states, this matcher's masked states and the cached masks' states. Should those alone
// still be over budget (a hostile grammar's huge sets), the cached masks go, being a cache, and
// then the masked states: only such a grammar's answers then differ from a fresh engine's.
void GrammarMatcher::compact(std::vector<int32_t*> states) const {
  compact_keeping(states);
  if (!sets_->over_budget()) return;
  masks_ = MaskCache{};
  compact_keeping(states);
  if (!sets_->over_budget()) return;
  masked_here_.clear();
  compact_keeping(states);
}

void GrammarMatcher::compact_keeping(const std::vector<int32_t*>& states) const {
  std::vector<int32_t> keep;
  for (const int32_t* state : states) keep.push_back(*state);
  const std::vector<int32_t> masked(masked_here_.begin(), masked_here_.end());
  keep.insert(keep.end(), masked.begin(), masked.end());
  for (const MaskCache::Entry& entry : masks_.entries) keep.push_back(entry.state);
  const std::vector<int32_t> renamed = sets_->compact(keep);
  size_t next = 0;
  for (int32_t* state : states) *state = renamed[next++];
  masked_here_.clear();
  for (size_t i = 0; i < masked.size(); ++i) masked_here_.insert(renamed[next++]);
  masks_.by_state.clear();
  for (size_t i = 0; i < masks_.entries.size(); ++i) {
    masks_.entries[i].state = renamed[next++];
    masks_.by_state[masks_.entries[i].state] = i;
  }
}

void GrammarMatcher::apply_mask(float* logits) const {
  const uint64_t* allowed = allowed_bits();
  if (!allowed) return;
  const int32_t vocab = tokens_->vocab_size();
  for (int32_t word = 0; word * 64 < vocab; ++word) {
    const uint64_t bits = allowed[size_t(word)];
    if (bits == ~uint64_t{0}) continue;
    for (int32_t t = word * 64; t < std::min(vocab, word * 64 + 64); ++t) {
      if (!((bits >> (t & 63)) & 1)) logits[t] = -INFINITY;
    }
  }
}

const uint64_t* GrammarMatcher::allowed_bits() const { return triggered_ ? allowed_tokens().data() : nullptr; }

bool GrammarMatcher::mask_known() const {
  if (!triggered_) return true;
  compact_if_needed();
  return memoize_ && masked_here_.count(state_) > 0;
}

// The set is this matcher's own history, so where it is cleared does not depend on the tables
// it inherited.
void GrammarMatcher::note_masked_here() const {
  if (masked_here_.size() >= kMaxMaskedStates) masked_here_.clear();
  masked_here_.insert(state_);
}

size_t GrammarMatcher::mask_capacity() const {
  const size_t mask_bytes = (size_t(tokens_->vocab_size()) + 63) / 64 * sizeof(uint64_t);
  return std::clamp(kMaskCacheBytes / std::max<size_t>(mask_bytes, 1), kMinMasks, kMaxMasks);
}

const std::vector<uint64_t>& GrammarMatcher::allowed_tokens() const {
  compact_if_needed();
  if (!memoize_) {
    walk_trie(scratch_allowed_);
    return scratch_allowed_;
  }
  const uint64_t now = ++masks_.clock;
  if (const auto found = masks_.by_state.find(state_); found != masks_.by_state.end()) {
    note_masked_here();
    MaskCache::Entry& entry = masks_.entries[found->second];
    entry.last_used = now;
    return entry.allowed;
  }
  walk_trie(scratch_allowed_);
  note_masked_here();
  size_t slot = masks_.entries.size();
  if (slot < mask_capacity()) {
    masks_.entries.emplace_back();
  } else {
    slot = size_t(std::min_element(masks_.entries.begin(), masks_.entries.end(), [](const auto& a, const auto& b) {
                    return a.last_used < b.last_used;
                  }) - masks_.entries.begin());
    masks_.by_state.erase(masks_.entries[slot].state);
  }
  MaskCache::Entry& entry = masks_.entries[slot];
  entry.allowed.swap(scratch_allowed_);
  entry.state = state_;
  entry.last_used = now;
  masks_.by_state[state_] = slot;
  return entry.allowed;
}

// Preorder over the trie with the state at each depth: a node's state is its parent's
// stepped by the node's byte; a dead step skips the node's whole subtree. The root's children
// (one per first byte, some 256 of them) are entered only for the bytes the state can read
// next, so a state that allows a few tokens is a few short walks.
void GrammarMatcher::walk_trie(std::vector<uint64_t>& allowed) const {
  allowed.assign((size_t(tokens_->vocab_size()) + 63) / 64, 0);
  walk_states_[0] = state_;
  const ByteSet first_bytes = sets_->next_bytes(state_);   // a copy: the walk adds sets
  for (size_t word = 0; word < first_bytes.words.size(); ++word) {
    for (uint64_t bits = first_bytes.words[word]; bits != 0; bits &= bits - 1) {
      const int32_t child = tokens_->root_child(uint8_t(word * 64 + size_t(std::countr_zero(bits))));
      if (child >= 0) walk_subtree(child, allowed);
    }
  }
  if (sets_->can_end(state_)) {
    for (int32_t id : tokens_->end_of_generation_ids()) set_bit(allowed, id);
  }
}

void GrammarMatcher::walk_subtree(int32_t top, std::vector<uint64_t>& allowed) const {
  const std::vector<TokenTable::TrieNode>& trie = tokens_->trie();
  const std::vector<int32_t>& trie_tokens = tokens_->trie_tokens();
  for (int32_t i = top; i < trie[size_t(top)].subtree_end;) {
    const TokenTable::TrieNode node = trie[size_t(i)];
    const int32_t from = walk_states_[node.depth - 1];
    const int32_t to = memoize_ ? sets_->step(from, node.byte) : sets_->step_uncached(from, node.byte);
    if (to == StackSets::kDead) {
      i = node.subtree_end;
      continue;
    }
    walk_states_[node.depth] = to;
    for (int32_t k = tokens_->token_begin(i); k < tokens_->token_begin(i + 1); ++k) set_bit(allowed, trie_tokens[size_t(k)]);
    ++i;
  }
}

int32_t GrammarMatcher::state_after(int32_t state, std::string_view bytes) const {
  for (size_t i = 0; i < bytes.size() && state != StackSets::kDead; ++i) state = sets_->step(state, uint8_t(bytes[i]));
  return state;
}

bool GrammarMatcher::allows(int32_t token) const {
  if (token < 0 || token >= tokens_->vocab_size()) return false;
  if (!triggered_) return true;
  if (tokens_->is_end_of_generation(token)) return sets_->can_end(state_);
  const std::string& bytes = tokens_->bytes(token);
  if (bytes.empty()) return false;
  compact_if_needed();
  return state_after(state_, bytes) != StackSets::kDead;
}

void GrammarMatcher::accept(int32_t token) {
  fed_ = true;
  if (token < 0 || token >= tokens_->vocab_size()) throw Error("token " + std::to_string(token) + " is not in the vocabulary");
  if (!triggered_) {
    watch_for_trigger(tokens_->bytes(token));
    return;
  }
  if (tokens_->is_end_of_generation(token)) {
    if (!sets_->can_end(state_)) throw Error("the grammar does not allow the text to end here");
    return;
  }
  if (tokens_->bytes(token).empty()) throw Error("token " + std::to_string(token) + " prints nothing, which a grammar never allows");
  feed(tokens_->bytes(token));
}

void GrammarMatcher::accept_bytes(std::string_view bytes) {
  fed_ = true;
  if (triggered_) {
    feed(bytes);
  } else {
    watch_for_trigger(bytes);
  }
}

// Steps through `bytes`, compacting the tables on the way when a long text grows them, and
// keeping the state it started from so that a rejected byte leaves the matcher unchanged.
void GrammarMatcher::feed(std::string_view bytes) {
  compact_if_needed();
  int32_t original = state_, state = state_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i % kCompactEveryBytes == kCompactEveryBytes - 1 && sets_->over_budget()) {
      compact({&original, &state});
      state_ = original;
    }
    state = sets_->step(state, uint8_t(bytes[i]));
    if (state == StackSets::kDead) {
      throw Error("the grammar does not allow \"" + printable(bytes.substr(i)) + "\" after \"" + printable(bytes.substr(0, i)) + "\"");
    }
  }
  state_ = state;
}

// The earliest trigger in the recent output plus `bytes` starts the grammar there; otherwise
// only the tail a trigger could still begin in is kept.
void GrammarMatcher::watch_for_trigger(std::string_view bytes) {
  if (triggers_.empty()) return;
  std::string text = recent_ + std::string(bytes);
  size_t first = std::string::npos, longest = 0;
  for (const std::string& trigger : triggers_) {
    first = std::min(first, text.find(trigger));
    longest = std::max(longest, trigger.size());
  }
  if (first == std::string::npos) {
    recent_ = text.substr(text.size() - std::min(text.size(), longest - 1));
    return;
  }
  triggered_ = true;
  start_grammar();
  try {
    feed(std::string_view(text).substr(first));
  } catch (const Error&) {
    triggered_ = false;
    sets_.reset();
    throw;
  }
  recent_.clear();
}

bool GrammarMatcher::can_end() const { return !triggered_ || sets_->can_end(state_); }

bool GrammarMatcher::must_end() const { return triggered_ && sets_->next_bytes(state_).empty(); }

}  // namespace kvdesk::grammar
