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

}  // namespace kvdesk
