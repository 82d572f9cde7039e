// Single messages through the controller against stories260K: an answer that stopped at its
// token limit continued in place from the parked KV (the same text a longer answer gives,
// one prompt token computed), and a message deleted with the replies under it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "tests/gui/controller_session.h"

using namespace kvdesk;
using ui::ActionKind;

namespace {

using test::pump;

// Greedy: one answer per prompt, and no penalty that depends on where a request starts.
struct Session : test::ControllerSession {
  Session() {
    vm.sampling.temperature = 0;
    vm.sampling.repeat_penalty = 1.0f;
  }
};

struct TurnFigures {
  int generated = 0, cached = 0, prompt = 0;
};

// "TTFT 3 ms, 410.0 tok/s (8 tokens, 14 of 15 prompt tokens cached; KV from pool)".
TurnFigures figures(const std::string& last_answer) {
  TurnFigures f;
  const size_t open = last_answer.find('(');
  REQUIRE(open != std::string::npos);
  REQUIRE(std::sscanf(last_answer.c_str() + open, "(%d tokens, %d of %d prompt", &f.generated, &f.cached, &f.prompt) == 3);
  return f;
}

}  // namespace

TEST_CASE("continue carries an answer that stopped at its token limit on in place, from the parked KV",
          "[gui][controller][messages]") {
  Session s;
  s.vm.sampling.max_tokens = 24;
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  const std::string whole = s.vm.chat.messages.at(1).text;

  s.vm.sampling.max_tokens = 12;
  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  REQUIRE(s.vm.chat.messages.size() == 2);
  const ui::MessageView first = s.vm.chat.messages[1];
  REQUIRE(first.can_continue);
  CHECK(whole.starts_with(first.text));
  CHECK(whole.size() > first.text.size());

  s.answer({ActionKind::ContinueAnswer, first.id});
  REQUIRE(s.vm.chat.messages.size() == 2);
  const ui::MessageView& continued = s.vm.chat.messages[1];
  CHECK(continued.id == first.id);
  CHECK(continued.text == whole);
  CHECK(continued.state == ui::MessageState::Complete);
  CHECK(continued.can_continue);   // it stopped at its limit again
  INFO(s.vm.status.last_answer);
  const TurnFigures turn = figures(s.vm.status.last_answer);
  CHECK(turn.generated == 12);
  CHECK(turn.cached == turn.prompt - 1);   // the parked turn held every token but the last one sampled
  CHECK(s.vm.status.last_answer.find("KV from pool") != std::string::npos);

  s.answer({ActionKind::Send, 0, "And then"});   // the next turn builds on the whole answer
  CHECK(s.vm.chat.messages.size() == 4);
  CHECK_FALSE(s.controller.apply({ActionKind::ContinueAnswer, first.id}));   // it has replies now
  CHECK(s.vm.status.message_is_error);
}

TEST_CASE("only an answer that stopped at its token limit can be continued", "[gui][controller][messages]") {
  Session s;
  s.vm.sampling.max_tokens = 400;
  REQUIRE(s.controller.apply({ActionKind::Send, 0, "Once upon a time"}));
  REQUIRE(s.controller.apply({ActionKind::Stop}));
  REQUIRE(pump(s.controller, [&] { return !s.controller.streaming(); }));
  REQUIRE(s.vm.chat.messages.size() == 2);
  CHECK_FALSE(s.vm.chat.messages[1].can_continue);
  CHECK_FALSE(s.controller.apply({ActionKind::ContinueAnswer, s.vm.chat.messages[1].id}));
  CHECK_THAT(s.vm.status.message, Catch::Contains("did not stop at its token limit"));
  CHECK_FALSE(s.controller.apply({ActionKind::ContinueAnswer, s.vm.chat.messages[0].id}));
  CHECK_THAT(s.vm.status.message, Catch::Contains("only an answer"));
}

TEST_CASE("deleting a message takes the replies under it, and a turn after it starts from there",
          "[gui][controller][messages]") {
  Session s;
  s.vm.sampling.max_tokens = 8;
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  s.answer({ActionKind::Send, 0, "The end"});
  REQUIRE(s.vm.chat.messages.size() == 4);
  REQUIRE(s.controller.apply({ActionKind::DeleteMessage, s.vm.chat.messages[2].id}));
  REQUIRE(s.vm.chat.messages.size() == 2);
  CHECK(s.vm.status.message == "message and 1 reply under it deleted");
  s.answer({ActionKind::Send, 0, "There was a dog"});
  REQUIRE(s.vm.chat.messages.size() == 4);
  CHECK(s.vm.chat.messages[2].text == "There was a dog");
  CHECK(s.vm.chat.messages[2].sibling_count == 1);
  REQUIRE(s.controller.apply({ActionKind::DeleteMessage, s.vm.chat.messages[3].id}));
  CHECK(s.vm.status.message == "message deleted");
  CHECK(s.vm.chat.messages.size() == 3);
}

TEST_CASE("Variants: N answers at once as sibling branches from one prefill, the first shown",
          "[gui][controller][messages]") {
  Session s;
  s.vm.sampling.max_tokens = 12;
  s.vm.sampling.temperature = 0.9f;
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  REQUIRE(s.vm.chat.messages.size() == 2);
  s.answer({ActionKind::Variants, 3});
  REQUIRE(s.vm.chat.messages.size() == 2);
  const ui::MessageView& shown = s.vm.chat.messages[1];
  CHECK(shown.sibling_count == 4);
  CHECK(shown.sibling_index == 1);   // the first variant, after the earlier answer
  CHECK_FALSE(shown.text.empty());
  // Each variant finished with its own text and statistics.
  int64_t next = shown.next_sibling;
  for (int i = 0; i < 2; ++i) {
    REQUIRE(next != 0);
    REQUIRE(s.controller.apply({ActionKind::SwitchBranch, next}));
    CHECK_FALSE(s.vm.chat.messages[1].text.empty());
    CHECK_FALSE(s.vm.chat.messages[1].stats.empty());
    next = s.vm.chat.messages[1].next_sibling;
  }
  CHECK(next == 0);
  CHECK_FALSE(s.controller.apply({ActionKind::Variants, 0}));
}
