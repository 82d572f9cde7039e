#include "engine/grammar/stack_sets.h"

#include <algorithm>

#include "engine/error.h"

namespace kvdesk::grammar {
namespace {

[[noreturn]] void too_ambiguous() {
  throw Error("grammar too ambiguous: more than " + std::to_string(kMaxStacksPerSet) +
              " parse stacks or " + std::to_string(kMaxExpansionWork) + " expansions for one byte");
}

}  // namespace

StackSets::StackSets(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) { reset(); }

void StackSets::reset() {
  nodes_.assign(1, Node{-1, -1});
  node_ids_.clear();
  sets_.clear();
  set_ids_.clear();
  transitions_.assign(size_t{1} << kTransitionBits, Transition{});
  interned_stack_ids_ = 0;
}

size_t StackSets::footprint_bytes() const {
  constexpr size_t kHashEntryBytes = 48;   // a node of std::unordered_map with its bucket
  return transitions_.size() * sizeof(Transition) + nodes_.size() * (sizeof(Node) + kHashEntryBytes) +
         sets_.size() * (sizeof(Set) + kHashEntryBytes) + interned_stack_ids_ * 2 * sizeof(int32_t);
}

int32_t StackSets::node(int32_t position, int32_t below) {
  const uint64_t key = (uint64_t(uint32_t(position)) << 32) | uint32_t(below);
  const auto [found, added] = node_ids_.emplace(key, int32_t(nodes_.size()));
  if (added) nodes_.push_back({position, below});
  return found->second;
}

// The stack once its top element is done: the next element of the same alternative on top,
// or, at the alternative's end, the stack below.
int32_t StackSets::rest_after(int32_t node_id) {
  const Node n = nodes_[size_t(node_id)];
  const bool last = grammar_->elements[size_t(n.position) + 1].kind == Element::Kind::End;
  return last ? n.below : node(n.position + 1, n.below);
}

void StackSets::expand(int32_t node_id, std::vector<int32_t>& out, size_t& work) {
  if (++work > kMaxExpansionWork) too_ambiguous();
  if (node_id == kEmptyStack) {
    out.push_back(node_id);
    return;
  }
  const Element& top = grammar_->elements[size_t(nodes_[size_t(node_id)].position)];
  if (top.kind == Element::Kind::Bytes) {
    out.push_back(node_id);
    return;
  }
  expand_rule(top.value, rest_after(node_id), out, work);
}

void StackSets::expand_rule(int32_t rule, int32_t rest, std::vector<int32_t>& out, size_t& work) {
  for (int32_t first : grammar_->alternatives[size_t(rule)]) {
    const bool empty = grammar_->elements[size_t(first)].kind == Element::Kind::End;
    expand(empty ? rest : node(first, rest), out, work);
  }
}

int32_t StackSets::intern(std::vector<int32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacksPerSet) too_ambiguous();
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
  const auto [found, added] = set_ids_.emplace(std::move(key), int32_t(sets_.size()));
  if (!added) return found->second;
  interned_stack_ids_ += stacks.size();
  Set set;
  for (int32_t id : stacks) {
    if (id == kEmptyStack) {
      set.can_end = true;
    } else {
      const Element& top = grammar_->elements[size_t(nodes_[size_t(id)].position)];
      set.next_bytes.add_all(grammar_->byte_sets[size_t(top.value)]);
    }
  }
  set.stacks = std::move(stacks);
  sets_.push_back(std::move(set));
  return found->second;
}

int32_t StackSets::start() {
  std::vector<int32_t> stacks;
  size_t work = 0;
  expand_rule(grammar_->root, kEmptyStack, stacks, work);
  return intern(std::move(stacks));
}

int32_t StackSets::compute_step(int32_t set, uint8_t byte) {
  scratch_.clear();
  size_t work = 0;
  for (size_t i = 0; i < sets_[size_t(set)].stacks.size(); ++i) {
    const int32_t id = sets_[size_t(set)].stacks[i];
    if (id == kEmptyStack) continue;
    const Element& top = grammar_->elements[size_t(nodes_[size_t(id)].position)];
    if (grammar_->byte_sets[size_t(top.value)].has(byte)) expand(rest_after(id), scratch_, work);
  }
  if (scratch_.empty()) return kDead;
  return intern(scratch_);
}

// Each kept stack is rebuilt node by node from its bottom, an old node's new id remembered, so
// stacks that share a tail share it again and the work is one visit per old node reached (a
// deep stack of many kept states is not copied out once per state).
std::vector<int32_t> StackSets::compact(const std::vector<int32_t>& keep) {
  const std::vector<Node> old_nodes = std::move(nodes_);
  std::vector<std::vector<int32_t>> kept_stacks;   // [keep][stacks] old node ids
  for (int32_t set : keep) kept_stacks.push_back(sets_[size_t(set)].stacks);
  reset();
  std::vector<int32_t> renamed_node(old_nodes.size(), -1);   // [old node] new id
  renamed_node[kEmptyStack] = kEmptyStack;
  std::vector<int32_t> path;   // old nodes above the first one renamed already, top first
  auto rename = [&](int32_t top) {
    for (int32_t id = top; renamed_node[size_t(id)] < 0; id = old_nodes[size_t(id)].below) path.push_back(id);
    for (; !path.empty(); path.pop_back()) {
      const Node& old = old_nodes[size_t(path.back())];
      renamed_node[size_t(path.back())] = node(old.position, renamed_node[size_t(old.below)]);
    }
    return renamed_node[size_t(top)];
  };
  std::vector<int32_t> renamed;
  for (std::vector<int32_t>& stacks : kept_stacks) {
    for (int32_t& id : stacks) id = rename(id);
    renamed.push_back(intern(std::move(stacks)));
  }
  return renamed;
}

}  // namespace kvdesk::grammar
