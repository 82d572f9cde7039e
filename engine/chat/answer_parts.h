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

// opened_in_reasoning: the prompt ended inside a <think> the model will close (DeepSeek R1,
// Qwen3 thinking), so the text is reasoning until its </think>, even before that arrives.
AnswerParts split_answer(std::string_view text, bool opened_in_reasoning = false);

// split_answer over a text that grows piece by piece (a streaming answer): each feed() returns
// what the piece added to the reasoning and to the answer, so a client can be sent them apart.
class AnswerStream {
 public:
  explicit AnswerStream(bool opened_in_reasoning = false) : opened_in_reasoning_(opened_in_reasoning) {}
  AnswerParts feed(std::string_view piece);

 private:
  bool opened_in_reasoning_;
  std::string text_;
  AnswerParts sent_;
};

}  // namespace kvdesk
