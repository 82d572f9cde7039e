// The pushdown recognizer's states (llama.cpp's idea): where a parse can be is a stack of
// grammar positions (the innermost alternative's next element on top, the places to return
// to below it), and since the grammar is ambiguous the state is a SET of such stacks. Reading
// a byte maps a set to a new set: every stack whose top accepts the byte moves on, and a top
// that is a rule reference is replaced by one stack per alternative of the rule (expansion),
// until every top reads a byte again or the stack is empty (the text may end there).
//
// Stacks are interned, persistent linked lists (a node is a position on top of the node below
// it), so a stack is one id and equal stacks are equal ids; a set is the sorted list of its
// stack ids, interned too, so a state is one id and "the same state again" is an integer
// compare. step() caches transitions (set, byte) -> set in a direct-mapped table, which makes
// the mask's trie walk mostly table look-ups. Everything grows with the states seen; the
// owner calls compact() between uses once over_budget() says so.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/gbnf.h"

namespace kvdesk::grammar {

// Bounds that keep a pathological grammar from blowing up a step.
constexpr size_t kMaxStacksPerSet = 4096;
constexpr size_t kMaxExpansionWork = 100'000;   // stack expansions in one step

class StackSets {
 public:
  static constexpr int32_t kDead = -1;   // no stack accepts the byte

  explicit StackSets(std::shared_ptr<const Grammar> grammar);

  // The set before any byte. Throws kvdesk::Error "grammar too ambiguous" past the bounds.
  int32_t start();
  // The set after `byte`, or kDead. Cached: the first step from (set, byte) computes it.
  int32_t step(int32_t set, uint8_t byte) {
    if (!sets_[size_t(set)].next_bytes.has(byte)) return kDead;
    const uint32_t key = (uint32_t(set) << 8) | byte;
    Transition& slot = transitions_[(key * 0x9E3779B1u) >> (32 - kTransitionBits)];
    if (slot.key != key) slot = {key, compute_step(set, byte)};
    return slot.next;
  }
  // The same, computed every time.
  int32_t step_uncached(int32_t set, uint8_t byte) {
    return sets_[size_t(set)].next_bytes.has(byte) ? compute_step(set, byte) : kDead;
  }

  bool can_end(int32_t set) const { return sets_[size_t(set)].can_end; }
  const ByteSet& next_bytes(int32_t set) const { return sets_[size_t(set)].next_bytes; }

  bool over_budget() const { return nodes_.size() > kNodeBudget || sets_.size() > kSetBudget; }
  // About how many bytes the tables hold (vectors and hash entries), for whoever keeps them.
  size_t footprint_bytes() const;
  // Forgets every set but those in `keep` (and the transition cache); returns their new ids,
  // in order. Ids handed out before are invalid afterwards.
  std::vector<int32_t> compact(const std::vector<int32_t>& keep);

 private:
  static constexpr int32_t kEmptyStack = 0;   // node id of the empty stack
  static constexpr int kTransitionBits = 15;
  static constexpr size_t kNodeBudget = 1 << 20;
  static constexpr size_t kSetBudget = 1 << 18;   // ids stay below 2^24, as step's key needs

  struct Node {
    int32_t position;   // index in Grammar::elements: a Bytes or Rule element, never End
    int32_t below;      // the node under it; kEmptyStack at the bottom
  };
  struct Set {
    std::vector<int32_t> stacks;   // sorted node ids, distinct; every top is a Bytes element
    ByteSet next_bytes;            // union of the tops' byte sets
    bool can_end = false;          // holds the empty stack
  };
  struct Transition {
    uint32_t key = UINT32_MAX;     // set << 8 | byte
    int32_t next = kDead;
  };

  void reset();
  int32_t node(int32_t position, int32_t below);
  int32_t rest_after(int32_t node_id);
  void expand(int32_t node_id, std::vector<int32_t>& out, size_t& work);
  void expand_rule(int32_t rule, int32_t rest, std::vector<int32_t>& out, size_t& work);
  int32_t intern(std::vector<int32_t> stacks);
  int32_t compute_step(int32_t set, uint8_t byte);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;   // position << 32 | below -> node
  std::vector<Set> sets_;
  std::unordered_map<std::string, int32_t> set_ids_;   // stacks as bytes -> set
  std::vector<Transition> transitions_;   // [1 << kTransitionBits]
  std::vector<int32_t> scratch_;
  size_t interned_stack_ids_ = 0;   // stack ids over all sets (each held twice: set and key)
};

}  // namespace kvdesk::grammar
