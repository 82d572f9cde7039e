// BPE over one word with a priority queue of adjacent pairs and a linked list of symbols:
// pop the best-ranked pair, skip it if either side has changed since it was queued, merge,
// and queue the merged symbol's two new pairs. Ties in rank go to the leftmost pair, the
// order in which Hugging Face's and llama.cpp's BPE merge. Encoded words are cached: chat
// text repeats the same words over and over.
#include "engine/tokenizer/bpe_tokenizer.h"

#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/pretokenizer_rules.h"
#include "engine/tokenizer/token_trie.h"
#include "engine/tokenizer/unicode_nfc.h"
#include "engine/tokenizer/utf8_decode.h"
#include "engine/tokenizer/vocab_metadata.h"

namespace kvdesk {
namespace {

constexpr size_t kWordCacheLimit = 1 << 16;   // entries; the cache starts over when full

// A run of the word's byte-level text, [begin, begin + length), linked to its neighbours.
// A symbol with length 0 has been merged into the one before it.
struct Symbol {
  size_t begin;
  size_t length;
  int prev;   // -1: none
  int next;   // -1: none
};

// A pair of adjacent symbols that has a merge, as it was when queued (lengths let a stale
// pair be recognized after either side changed).
struct Candidate {
  int32_t rank;
  int left;
  int right;
  size_t left_length;
  size_t right_length;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(std::vector<std::string> pieces, std::vector<TokenKind> kinds,
               std::unordered_map<std::string, int32_t> merge_ranks, const PreTokenizerRules& rules, int32_t bos_id,
               int32_t eos_id, int32_t eot_id, bool add_bos_default)
      : merge_ranks_(std::move(merge_ranks)),
        pre_tokenizer_(rules.patterns),
        ignore_merges_(rules.ignore_merges),
        nfc_(rules.nfc) {
    pieces_ = std::move(pieces);
    kinds_ = std::move(kinds);
    vocab_size_ = static_cast<int32_t>(pieces_.size());
    bos_id_ = bos_id;
    eos_id_ = eos_id;
    add_bos_default_ = add_bos_default;
    for (int32_t id = 0; id < vocab_size_; ++id) {
      bytes_.push_back(printed_bytes(id));
      if (kinds_[id] == TokenKind::Normal || kinds_[id] == TokenKind::Byte) ids_.emplace(pieces_[id], id);
      if (kinds_[id] == TokenKind::UserDefined) user_defined_.insert(pieces_[id], id);
    }
    for (int32_t id = 0; id < vocab_size_; ++id) {
      if (pieces_[id].size() > 2 || ids_.count(pieces_[id])) continue;   // a byte's symbol is 1-2 UTF-8 bytes
      const std::optional<std::string> byte = byte_level_to_bytes(pieces_[id]);
      if (byte && byte->size() == 1) other_byte_ids_.emplace(pieces_[id], id);
    }
    index_special_tokens(eot_id);
  }

  // User-defined tokens come out of the text first; the text around them is normalized when
  // the family normalizes, split into words and merged.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> out;
    if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
    const auto encode_text = [&](std::string_view plain) {
      if (nfc_) {
        encode_words(to_nfc(plain), out);
      } else {
        encode_words(plain, out);
      }
    };
    user_defined_.split(text, encode_text, [&](int32_t id) { out.push_back(id); });
    return out;
  }

 private:
  void encode_words(std::string_view text, std::vector<int32_t>& out) const {
    for (const std::string_view word : pre_tokenizer_.split(text)) {
      const std::vector<int32_t> ids = encode_word_cached(word);
      out.insert(out.end(), ids.begin(), ids.end());
    }
  }

  // Normal tokens print the bytes their byte-level text stands for; user-defined ones their
  // text as stored (it is not byte-level text), control and unused tokens nothing.
  std::string printed_bytes(int32_t id) const {
    switch (kinds_[id]) {
      case TokenKind::Normal:
      case TokenKind::Byte: return byte_level_to_bytes(pieces_[id]).value_or(pieces_[id]);
      case TokenKind::Unknown:
      case TokenKind::UserDefined: return pieces_[id];
      case TokenKind::Control:
      case TokenKind::Unused: return {};
    }
    return {};
  }

  std::vector<int32_t> encode_word_cached(std::string_view word) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      const auto hit = cache_.find(std::string(word));
      if (hit != cache_.end()) return hit->second;
    }
    const std::string text = bytes_to_byte_level(word);
    const auto whole = ignore_merges_ ? ids_.find(text) : ids_.end();
    std::vector<int32_t> ids = whole != ids_.end() ? std::vector<int32_t>{whole->second} : encode_word(text);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kWordCacheLimit) cache_.clear();
    cache_.emplace(std::string(word), ids);
    return ids;
  }

  std::optional<int32_t> rank_of(const std::string& text, const Symbol& left, const Symbol& right) const {
    std::string key;
    key.reserve(left.length + 1 + right.length);
    key.append(text, left.begin, left.length).append(1, ' ').append(text, right.begin, right.length);
    const auto hit = merge_ranks_.find(key);
    if (hit == merge_ranks_.end()) return std::nullopt;
    return hit->second;
  }

  // `text`: one pre-token word as byte-level text.
  std::vector<int32_t> encode_word(const std::string& text) const {
    std::vector<Symbol> symbols;
    for (size_t at = 0; at < text.size();) {
      const size_t length = decode_utf8(text, at).length;
      symbols.push_back({at, length, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1});
      at += length;
    }
    if (symbols.empty()) return {};
    symbols.back().next = -1;

    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    const auto push_pair = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      if (const auto rank = rank_of(text, symbols[left], symbols[right])) {
        queue.push({*rank, left, right, symbols[left].length, symbols[right].length});
      }
    };
    for (size_t i = 0; i + 1 < symbols.size(); ++i) push_pair(static_cast<int>(i), static_cast<int>(i) + 1);

    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& left = symbols[c.left];
      Symbol& right = symbols[c.right];
      if (left.length != c.left_length || right.length != c.right_length || left.next != c.right) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = c.left;
      push_pair(left.prev, c.left);
      push_pair(c.left, left.next);
    }

    std::vector<int32_t> ids;
    for (int i = 0; i >= 0; i = symbols[i].next) append_symbol(text.substr(symbols[i].begin, symbols[i].length), ids);
    return ids;
  }

  // A final symbol's token; a symbol that is not in the vocabulary (a merge whose result the
  // vocabulary lacks) falls back to one token per byte.
  void append_symbol(const std::string& symbol, std::vector<int32_t>& ids) const {
    if (const auto hit = ids_.find(symbol); hit != ids_.end()) {
      ids.push_back(hit->second);
      return;
    }
    for (size_t at = 0; at < symbol.size();) {
      const size_t length = decode_utf8(symbol, at).length;
      append_byte(symbol.substr(at, length), ids);
      at += length;
    }
  }

  // The token of one byte's byte-level symbol: a normal one, else one of another type (DeepSeek
  // LLM types some as user-defined; llama.cpp takes those too). A byte no token stands for
  // (StarCoder's vocabulary has none for the bytes valid UTF-8 never holds) becomes U+FFFD, as
  // llama.cpp turns every invalid byte.
  void append_byte(const std::string& byte_text, std::vector<int32_t>& ids) const {
    if (const auto hit = ids_.find(byte_text); hit != ids_.end()) return ids.push_back(hit->second);
    if (const auto hit = other_byte_ids_.find(byte_text); hit != other_byte_ids_.end()) return ids.push_back(hit->second);
    static const std::string replacement = bytes_to_byte_level("\xEF\xBF\xBD");
    if (replacement.find(byte_text) != std::string::npos) {   // U+FFFD's own bytes: no way out
      throw Error("the vocabulary has no token for the byte-level symbol '" + byte_text + "'");
    }
    const std::vector<int32_t> replaced = encode_word(replacement);
    ids.insert(ids.end(), replaced.begin(), replaced.end());
  }

  // Byte-level text -> id of the normal tokens; special tokens are never produced by BPE.
  std::unordered_map<std::string, int32_t> ids_;
  // Single byte-level symbols whose tokens are not normal, only for bytes that have no normal one.
  std::unordered_map<std::string, int32_t> other_byte_ids_;
  // "left right" -> position in tokenizer.ggml.merges (lower merges first).
  std::unordered_map<std::string, int32_t> merge_ranks_;
  PreTokenizer pre_tokenizer_;
  // Hugging Face's "ignore_merges" (Llama 3): a word that is a token as a whole is that
  // token, whatever the merges would make of it.
  bool ignore_merges_;
  bool nfc_;   // text goes through NFC before it is split (PreTokenizerRules::nfc)
  // Texts of the user-defined tokens, matched in any text before it is split.
  TokenTrie user_defined_;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;   // word bytes -> ids
};

std::unordered_map<std::string, int32_t> read_merge_ranks(const GgufFile& file) {
  const std::vector<std::string>& merges = file.get_string_array("tokenizer.ggml.merges");
  std::unordered_map<std::string, int32_t> ranks;
  ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t space = merges[i].find(' ', 1);
    if (space == std::string::npos || space + 1 >= merges[i].size()) {
      throw Error(file.path() + ": tokenizer.ggml.merges[" + std::to_string(i) + "] is '" + merges[i] +
                  "', not two symbols separated by a space");
    }
    ranks.emplace(merges[i], static_cast<int32_t>(i));   // a repeated merge keeps its first rank
  }
  return ranks;
}

}  // namespace

std::unique_ptr<Tokenizer> load_bpe_tokenizer(const GgufFile& file) {
  std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) throw Error(file.path() + ": tokenizer.ggml.tokens is empty");
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw Error(file.path() + ": tokenizer.ggml.tokens has too many entries");
  }
  std::vector<TokenKind> kinds(tokens.size(), TokenKind::Normal);
  if (file.find("tokenizer.ggml.token_type")) {
    const std::vector<int> types = read_token_types(file, tokens.size());
    for (size_t i = 0; i < types.size(); ++i) kinds[i] = token_kind_of_type(types[i]);
  }
  const std::string pre_name = file.find_string("tokenizer.ggml.pre").value_or("default");
  const PreTokenizerRules& rules = [&]() -> const PreTokenizerRules& {
    try {
      return pre_tokenizer_rules(pre_name);
    } catch (const Error& e) {
      throw Error(file.path() + ": " + e.what());
    }
  }();
  const int32_t bos = read_token_id(file, "tokenizer.ggml.bos_token_id", tokens.size(), -1);
  const int32_t eos = read_token_id(file, "tokenizer.ggml.eos_token_id", tokens.size(), -1);
  const int32_t eot = read_token_id(file, "tokenizer.ggml.eot_token_id", tokens.size(), -1);
  const bool add_bos =
      file.find_bool("tokenizer.ggml.add_bos_token").value_or(rules.add_bos_default && bos >= 0);
  return std::make_unique<BpeTokenizer>(std::move(tokens), std::move(kinds), read_merge_ranks(file), rules, bos, eos,
                                        eot, add_bos);
}

}  // namespace kvdesk
