// split_answer: a reasoning model's answer split into its reasoning and the answer shown, for
// <think> (closed, opened by the generation prompt, still streaming) and harmony channels
// (analysis then final, several analysis messages, still streaming), and plain answers intact;
// AnswerStream hands out the same parts piece by piece.
#include <catch2/catch.hpp>

#include "engine/chat/answer_parts.h"

using kvdesk::AnswerParts;
using kvdesk::AnswerStream;
using kvdesk::split_answer;

TEST_CASE("<think> reasoning is split from the answer, the opener optional", "[engine][chat][answer]") {
  const AnswerParts closed = split_answer("<think>\nAdd them.\n</think>\n\n4");
  CHECK(closed.reasoning == "Add them.");
  CHECK(closed.answer == "4");
  CHECK_FALSE(closed.reasoning_open);
  // DeepSeek R1's generation prompt wrote "<think>\n": the answer starts inside it.
  const AnswerParts prompted = split_answer("Add them.\n</think>\n\n4");
  CHECK(prompted.reasoning == "Add them.");
  CHECK(prompted.answer == "4");
  const AnswerParts streaming = split_answer("<think>\nAdd th");
  CHECK(streaming.reasoning == "Add th");
  CHECK(streaming.answer.empty());
  CHECK(streaming.reasoning_open);
  // Before its </think> arrives, only the caller knows the prompt opened the reasoning.
  CHECK(split_answer("Add th").answer == "Add th");
  const AnswerParts opened = split_answer("Add th", true);
  CHECK(opened.reasoning == "Add th");
  CHECK(opened.answer.empty());
  CHECK(opened.reasoning_open);
  const AnswerParts opened_done = split_answer("Add them.\n</think>\n\n4", true);
  CHECK(opened_done.reasoning == prompted.reasoning);
  CHECK(opened_done.answer == prompted.answer);
}

TEST_CASE("harmony's analysis channels are the reasoning, the final channel the answer", "[engine][chat][answer]") {
  const AnswerParts done = split_answer(
      "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>analysis<|message|>It is 4."
      "<|end|><|start|>assistant<|channel|>final<|message|>**4**");
  CHECK(done.reasoning == "Add them.\n\nIt is 4.");
  CHECK(done.answer == "**4**");
  CHECK_FALSE(done.reasoning_open);
  const AnswerParts thinking = split_answer("<|channel|>analysis<|message|>Add th");
  CHECK(thinking.reasoning == "Add th");
  CHECK(thinking.answer.empty());
  CHECK(thinking.reasoning_open);
  const AnswerParts opening = split_answer("<|channel|>analy");
  CHECK(opening.reasoning.empty());
  CHECK(opening.reasoning_open);
  const AnswerParts direct = split_answer("<|channel|>final<|message|>Hi");
  CHECK(direct.reasoning.empty());
  CHECK(direct.answer == "Hi");
}

TEST_CASE("an answer without reasoning is all answer, as written", "[engine][chat][answer]") {
  for (const char* text : {"Hello!", "  spaced  ", "", "a </b> tag", "<thinking> is a word"}) {
    const AnswerParts parts = split_answer(text);
    CHECK(parts.answer == text);
    CHECK(parts.reasoning.empty());
    CHECK_FALSE(parts.reasoning_open);
  }
}

namespace {

// The reasoning and answer an AnswerStream hands out over pieces, joined.
AnswerParts streamed(AnswerStream stream, std::initializer_list<const char*> pieces) {
  AnswerParts joined;
  for (const char* piece : pieces) {
    const AnswerParts delta = stream.feed(piece);
    joined.reasoning += delta.reasoning;
    joined.answer += delta.answer;
  }
  return joined;
}

}  // namespace

TEST_CASE("streamed pieces hand out the reasoning and the answer split_answer gives the whole", "[engine][chat][answer]") {
  const AnswerParts harmony = streamed(AnswerStream(), {"<|channel|>", "analysis", "<|message|>", "Add", " them.", "<|end|>",
                                                        "<|start|>", "assistant", "<|channel|>", "final", "<|message|>",
                                                        "**4", "**"});
  CHECK(harmony.reasoning == "Add them.");
  CHECK(harmony.answer == "**4**");
  // DeepSeek R1: the prompt opened <think>, so the first pieces are reasoning before any </think>.
  const AnswerParts opened = streamed(AnswerStream(true), {"Add", " them", ".\n", "</think>", "\n\n", "4", " it is"});
  CHECK(opened.reasoning == "Add them.");
  CHECK(opened.answer == "4 it is");
  const AnswerParts plain = streamed(AnswerStream(), {"Once", " upon", " a time"});
  CHECK(plain.reasoning.empty());
  CHECK(plain.answer == "Once upon a time");
}
