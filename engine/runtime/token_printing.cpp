// Token printing: the tokenizer's printed bytes, with control tokens' pieces when asked.
#include "engine/runtime/token_printing.h"

#include <vector>

#include "engine/grammar/grammar_matcher.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

std::string printed_token(const Tokenizer& tokenizer, int32_t id, bool print_control_tokens) {
  if (print_control_tokens && tokenizer.kind(id) == TokenKind::Control && !tokenizer.is_end_of_generation(id)) {
    return tokenizer.piece(id);
  }
  return tokenizer.token_bytes(id);
}

std::shared_ptr<const grammar::TokenTable> grammar_token_table(const Tokenizer& tokenizer, bool print_control_tokens) {
  std::vector<std::string> bytes(size_t(tokenizer.vocab_size()));
  std::vector<int32_t> end_of_generation;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_end_of_generation(id)) {
      end_of_generation.push_back(id);
    } else {
      bytes[size_t(id)] = printed_token(tokenizer, id, print_control_tokens);
    }
  }
  return std::make_shared<const grammar::TokenTable>(std::move(bytes), std::move(end_of_generation));
}

}  // namespace kvdesk
