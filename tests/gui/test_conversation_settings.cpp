// A conversation's own settings from the store through the view to the engine Request
// (app/gui/conversation_settings.h), and the controller generating with them against
// stories260K: max new tokens and the context length cap the answer as a user expects.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "app/gui/conversation_settings.h"
#include "tests/gui/controller_session.h"

using namespace kvdesk;
using ui::ActionKind;
using ui::SettingField;

namespace {

using test::pump;

struct Session : test::ControllerSession {
  // The selected conversation's last answer as the store has it.
  store::Message last_answer() {
    store::ConversationStore db = store::ConversationStore::open(dir.file("kvdesk.db"));
    const std::vector<store::Message> path = db.branch_path(vm.chat.conversation_id);
    REQUIRE(!path.empty());
    REQUIRE(path.back().stats.has_value());
    return path.back();
  }
  void set_own(SettingField field, int32_t value) {
    ui::SamplingView& v = vm.chat.settings.values;
    (field == SettingField::ContextLength ? v.context_length : v.max_tokens) = value;
    vm.chat.settings.set_own(field, true);
    REQUIRE(controller.apply({ActionKind::SetConversationSettings}));
  }
};

}  // namespace

TEST_CASE("a conversation's own settings win over the app defaults and the rest follow them", "[gui][settings]") {
  ui::SamplingView defaults;
  defaults.max_tokens = 100;
  defaults.temperature = 0.9f;
  const store::ConversationSettings own{.max_tokens = 5, .top_k = 3, .kv_retention = "sinks"};
  const ui::ConversationSettingsView view = gui::resolve_conversation_settings(own, defaults, 512);
  CHECK(view.values.max_tokens == 5);
  CHECK(view.values.top_k == 3);
  CHECK(view.values.retention == 1);
  CHECK(view.values.temperature == 0.9f);
  CHECK(view.is_own(SettingField::MaxTokens));
  CHECK(view.is_own(SettingField::Retention));
  CHECK_FALSE(view.is_own(SettingField::Temperature));
  CHECK(view.note.empty());
  CHECK(gui::own_settings(view) == own);
}

TEST_CASE("stored values out of range fall back to the defaults with a note", "[gui][settings]") {
  const ui::SamplingView defaults;
  const store::ConversationSettings own{.context_length = 4, .temperature = -3.0, .top_p = 1.5,
                                        .seed = int64_t(1) << 40, .kv_retention = "forget-all"};
  const ui::ConversationSettingsView view = gui::resolve_conversation_settings(own, defaults, 512);
  CHECK(view.values.context_length == defaults.context_length);
  CHECK(view.values.temperature == defaults.temperature);
  CHECK(view.values.top_p == defaults.top_p);
  CHECK(view.values.seed == defaults.seed);
  CHECK(view.values.retention == defaults.retention);
  CHECK(gui::own_settings(view).empty());
  CHECK_THAT(view.note, Catch::Contains("temperature -3 is out of range") && Catch::Contains("top-p 1.5") &&
                            Catch::Contains("context length 4") && Catch::Contains("'forget-all' is unknown"));
}

TEST_CASE("the context length used is at most the model's and reaches the request", "[gui][settings]") {
  const store::ConversationSettings own{.context_length = 4096};
  const ui::ConversationSettingsView view = gui::resolve_conversation_settings(own, ui::SamplingView{}, 512);
  CHECK(view.values.context_length == 512);
  Request r;
  gui::apply_generation_settings(view.values, 512, 77, r);
  CHECK(r.context_limit == 0);   // the model's own
  ui::SamplingView small;
  small.context_length = 64;
  small.seed = 0;
  small.slide_context = false;
  small.max_tokens = 9;
  gui::apply_generation_settings(small, 512, 77, r);
  CHECK(r.context_limit == 64);
  CHECK(r.sampling.seed == 77);
  CHECK(r.max_tokens == 9);
  CHECK(r.context_policy == ContextPolicy::Stop);
}

TEST_CASE("max new tokens and the context length cap a conversation's answers", "[gui][settings][controller]") {
  Session s;
  s.vm.sampling.max_tokens = 200;
  s.vm.sampling.slide_context = false;
  REQUIRE(s.controller.apply({ActionKind::SetSampling}));

  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  s.set_own(SettingField::MaxTokens, 5);
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  store::Message m = s.last_answer();
  CHECK(m.stats->completion_tokens == 5);
  CHECK(m.stats->finish_reason == "length");

  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  CHECK_FALSE(s.vm.chat.settings.is_own(SettingField::MaxTokens));
  CHECK(s.vm.chat.settings.values.max_tokens == 200);
  s.set_own(SettingField::ContextLength, 32);
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  m = s.last_answer();
  CHECK(m.stats->finish_reason == "context_full");
  CHECK(m.stats->prompt_tokens + m.stats->completion_tokens <= 33);
  CHECK(m.stats->completion_tokens > 5);

  // A prompt longer than the conversation's context is refused with the reason.
  s.answer({ActionKind::Send, 0, "The little dog ran to the park and played with a big red ball all day long"});
  CHECK(s.vm.chat.messages.back().state == ui::MessageState::Failed);
  CHECK_THAT(s.controller.last_failure(), Catch::Contains("context limit is 32"));
}
