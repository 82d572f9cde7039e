// TokenTrie's nodes keep their children in a short list: added-token texts share few prefixes
// past their first byte, so a node rarely has more than a handful.
#include "engine/tokenizer/token_trie.h"

namespace kvdesk {

int32_t TokenTrie::child(int32_t node, unsigned char byte) const {
  if (node == kNone) return root_[byte];
  for (const auto& [b, index] : nodes_[size_t(node)].children) {
    if (b == byte) return index;
  }
  return kNone;
}

int32_t TokenTrie::add_child(int32_t node, unsigned char byte) {
  const int32_t existing = child(node, byte);
  if (existing != kNone) return existing;
  const auto index = static_cast<int32_t>(nodes_.size());
  nodes_.emplace_back();
  if (node == kNone) {
    root_[byte] = index;
  } else {
    nodes_[size_t(node)].children.emplace_back(byte, index);
  }
  return index;
}

void TokenTrie::insert(std::string_view text, int32_t id) {
  if (text.empty()) return;
  int32_t node = kNone;
  for (const char c : text) node = add_child(node, static_cast<unsigned char>(c));
  if (nodes_[size_t(node)].id == kNone) nodes_[size_t(node)].id = id;
}

std::optional<TokenMatch> TokenTrie::longest_at(std::string_view text, size_t at) const {
  std::optional<TokenMatch> best;
  int32_t node = kNone;
  for (size_t i = at; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node == kNone) break;
    if (nodes_[size_t(node)].id != kNone) best = TokenMatch{nodes_[size_t(node)].id, i + 1 - at};
  }
  return best;
}

int32_t TokenTrie::find(std::string_view text) const {
  const std::optional<TokenMatch> match = longest_at(text, 0);
  return match && match->length == text.size() ? match->id : kNone;
}

void TokenTrie::split(std::string_view text, const std::function<void(std::string_view)>& on_text,
                      const std::function<void(int32_t)>& on_token) const {
  size_t text_begin = 0;
  for (size_t at = 0; at < text.size();) {
    const std::optional<TokenMatch> match =
        root_[static_cast<unsigned char>(text[at])] == kNone ? std::nullopt : longest_at(text, at);
    if (!match) {
      ++at;
      continue;
    }
    if (text_begin < at) on_text(text.substr(text_begin, at - text_begin));
    on_token(match->id);
    at += match->length;
    text_begin = at;
  }
  if (text_begin < text.size()) on_text(text.substr(text_begin));
}

}  // namespace kvdesk
