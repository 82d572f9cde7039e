// A reasoning model's answer split for display: the reasoning it wrote before answering and the
// answer itself. Two forms are recognized from the text alone, so an answer stored with any
// conversation (or streaming in) splits the same way:
//   - <think> ... </think> then the answer (DeepSeek R1 and its distills, Qwen3, QwQ; their
//     generation prompt may have written the opening <think>, so the text can start inside it);
//   - harmony channels (gpt-oss): "<|channel|>analysis<|message|>...<|end|><|start|>assistant
//     <|channel|>final<|message|>..." (any number of analysis messages before the final one).
// Anything else is all answer.
#pragma once
#include <string>
#include <string_view>

namespace kvdesk {

struct AnswerParts {
  std::string reasoning;   // "" when the text has none
  std::string answer;      // "" while the model is still reasoning
  bool reasoning_open = false;   // the reasoning has not ended yet (a streaming answer)
};

AnswerParts split_answer(std::string_view text);

// split_answer over a text that grows piece by piece (a streaming answer): each feed() returns
// what the piece added to the reasoning and to the answer, so a client can be sent them apart.
// opened_in_reasoning: the prompt ended inside a <think> the model will close (DeepSeek R1,
// Qwen3 thinking), so the text starts as reasoning before any </think> arrives.
class AnswerStream {
 public:
  explicit AnswerStream(bool opened_in_reasoning = false) : text_(opened_in_reasoning ? "<think>" : "") {}
  AnswerParts feed(std::string_view piece);

 private:
  std::string text_;
  AnswerParts sent_;
};

}  // namespace kvdesk
