// TokenTrie: the texts of a set of tokens (added tokens, special tokens) as a byte trie, to
// find them in text before anything else splits it. At each position the longest token text
// starting there wins, scanning left to right (Hugging Face's leftmost-longest rule for added
// tokens). The root is a 256-entry table by first byte, so text without any token's first
// byte costs one table lookup per byte.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kvdesk {

struct TokenMatch {
  int32_t id;
  size_t length;   // bytes of text the token covers
};

class TokenTrie {
 public:
  TokenTrie() { root_.fill(kNone); }

  // An empty text is ignored; a text added again keeps its first id.
  void insert(std::string_view text, int32_t id);
  bool empty() const { return nodes_.empty(); }

  // The longest token text that text[at..] starts with; nullopt when none.
  std::optional<TokenMatch> longest_at(std::string_view text, size_t at) const;
  // The id of the token whose text is exactly `text`, -1 when none.
  int32_t find(std::string_view text) const;

  // Splits text at the tokens, leftmost-longest: calls on_text for each non-empty run of text
  // between tokens and on_token for each token, in text order.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

 private:
  static constexpr int32_t kNone = -1;
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;   // byte -> node index
    int32_t id = kNone;   // the token ending here, kNone when none
  };

  int32_t child(int32_t node, unsigned char byte) const;
  int32_t add_child(int32_t node, unsigned char byte);

  std::array<int32_t, 256> root_;   // first byte -> node index
  std::vector<Node> nodes_;
};

}  // namespace kvdesk
