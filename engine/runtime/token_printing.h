// What a generated token prints, in one place for the two that must agree: the text a Token
// event carries, and the bytes a grammar (engine/grammar/) believes each token writes. A
// control token prints nothing in an ordinary answer and its own text ("[TOOL_CALLS]") when the
// request parses tool-call markup; an end-of-generation token never prints.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kvdesk {

class Tokenizer;
namespace grammar {
class TokenTable;
}

std::string printed_token(const Tokenizer& tokenizer, int32_t id, bool print_control_tokens);

// Every token's printed bytes and the end-of-generation ids, as a grammar masks them.
std::shared_ptr<const grammar::TokenTable> grammar_token_table(const Tokenizer& tokenizer, bool print_control_tokens);

}  // namespace kvdesk
