// TokenTrie: finding token texts in text, leftmost and longest first, as Hugging Face finds
// added tokens; the split hands back the text between tokens untouched.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/token_trie.h"

using kvdesk::TokenTrie;

namespace {

// The split as a list: text runs as themselves, tokens as "#<id>".
std::vector<std::string> split(const TokenTrie& trie, std::string_view text) {
  std::vector<std::string> parts;
  trie.split(
      text, [&](std::string_view run) { parts.emplace_back(run); },
      [&](int32_t id) { parts.push_back("#" + std::to_string(id)); });
  return parts;
}

TokenTrie spaces_and_tags() {
  TokenTrie trie;
  trie.insert("  ", 2);
  trie.insert("   ", 3);
  trie.insert("    ", 4);
  trie.insert("<think>", 10);
  trie.insert("</think>", 11);
  trie.insert("<think", 12);
  return trie;
}

}  // namespace

TEST_CASE("An empty trie leaves text whole", "[engine][tokenizer][token_trie]") {
  const TokenTrie trie;
  CHECK(trie.empty());
  CHECK(split(trie, "any text <think>") == std::vector<std::string>{"any text <think>"});
  CHECK(split(trie, "").empty());
  CHECK(trie.find("x") == -1);
}

TEST_CASE("The longest token at a position wins, scanning left to right", "[engine][tokenizer][token_trie]") {
  const TokenTrie trie = spaces_and_tags();
  CHECK(split(trie, "a     b") == std::vector<std::string>{"a", "#4", " b"});   // 5 spaces: 4, then 1 left as text
  CHECK(split(trie, "  x") == std::vector<std::string>{"#2", "x"});
  CHECK(split(trie, "<think>x</think>") == std::vector<std::string>{"#10", "x", "#11"});
  CHECK(split(trie, "<thinking>") == std::vector<std::string>{"#12", "ing>"});
  CHECK(split(trie, "<thin") == std::vector<std::string>{"<thin"});
  CHECK(split(trie, " ") == std::vector<std::string>{" "});
}

TEST_CASE("longest_at and find see whole token texts only", "[engine][tokenizer][token_trie]") {
  const TokenTrie trie = spaces_and_tags();
  CHECK(trie.longest_at("ab   ", 2)->id == 3);
  CHECK(trie.longest_at("ab   ", 2)->length == 3);
  CHECK_FALSE(trie.longest_at("ab   ", 4));
  CHECK(trie.find("<think>") == 10);
  CHECK(trie.find("<thin") == -1);
  CHECK(trie.find("<think>!") == -1);
}

TEST_CASE("A text added twice keeps its first id, and empty texts and bytes past ASCII are fine",
          "[engine][tokenizer][token_trie]") {
  TokenTrie trie;
  trie.insert("\xC3\xB8", 7);   // DeepSeek LLM's user-defined "ø"
  trie.insert("\xC3\xB8", 8);
  trie.insert("", 9);
  CHECK(trie.find("\xC3\xB8") == 7);
  CHECK(split(trie, "x\xC3\xB8y\xC3") == std::vector<std::string>{"x", "#7", "y\xC3"});
}
