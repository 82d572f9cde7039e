// Tests of the controller without a window: UiActions against a real engine (stories260K)
// and a scratch database, checked in the view model and in the store.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "app/store/conversation_store.h"
#include "app/store/sqlite_db.h"
#include "tests/gui/controller_session.h"

using namespace kvdesk;
using ui::ActionKind;

namespace {

using Session = test::ControllerSession;
using test::pump;

}  // namespace

TEST_CASE("chat actions drive the engine and the store", "[gui][controller]") {
  Session s;
  s.vm.sampling.max_tokens = 24;
  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  s.answer({ActionKind::Send, 0, "Once upon a time"});
  REQUIRE(s.vm.chat.messages.size() == 2);
  CHECK(s.vm.chat.title == "Once upon a time");
  CHECK(s.vm.chat.messages[1].state == ui::MessageState::Complete);
  CHECK_FALSE(s.vm.chat.messages[1].stats.empty());
  CHECK_FALSE(s.vm.status.last_answer.empty());
  const int64_t first_answer = s.vm.chat.messages[1].id;

  s.answer({ActionKind::Regenerate});
  REQUIRE(s.vm.chat.messages.size() == 2);
  CHECK(s.vm.chat.messages[1].sibling_count == 2);
  CHECK(s.vm.chat.messages[1].sibling_index == 1);
  REQUIRE(s.vm.chat.messages[1].prev_sibling == first_answer);
  REQUIRE(s.controller.apply({ActionKind::SwitchBranch, first_answer}));
  CHECK(s.vm.chat.messages[1].id == first_answer);

  s.answer({ActionKind::EditResend, s.vm.chat.messages[0].id, "There was a dog"});
  CHECK(s.vm.chat.messages[0].text == "There was a dog");
  CHECK(s.vm.chat.messages[0].sibling_count == 2);

  const int64_t id = s.vm.chat.conversation_id;
  REQUIRE(s.controller.apply({ActionKind::RenameConversation, id, "Stories"}));
  CHECK(s.vm.conversations.at(0).title == "Stories");
  s.vm.ui.search = "no such words";
  REQUIRE(s.controller.apply({ActionKind::Search, 0, s.vm.ui.search}));
  CHECK(s.vm.conversations.empty());
  s.vm.ui.search = "dog";
  REQUIRE(s.controller.apply({ActionKind::Search, 0, s.vm.ui.search}));
  CHECK(s.vm.conversations.size() == 1);

  REQUIRE(s.controller.apply({ActionKind::DeleteConversation, id}));
  CHECK(s.vm.conversations.empty());
  CHECK(s.vm.chat.conversation_id == 0);
}

TEST_CASE("stop keeps what was generated as a stopped answer", "[gui][controller]") {
  Session s;
  s.vm.sampling.max_tokens = 400;
  REQUIRE(s.controller.apply({ActionKind::Send, 0, "Once upon a time"}));
  REQUIRE(s.controller.apply({ActionKind::Stop}));
  REQUIRE(pump(s.controller, [&] { return !s.controller.streaming(); }));
  REQUIRE(s.vm.chat.messages.size() == 2);
  CHECK(s.vm.chat.messages[1].state == ui::MessageState::Stopped);
}

TEST_CASE("presets, system prompts and sampling settings are kept", "[gui][controller]") {
  Session s;
  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  REQUIRE(s.controller.apply({ActionKind::SavePreset, 0, "Pirate", "You are a pirate."}));
  REQUIRE(s.vm.presets.size() == 1);
  REQUIRE(s.controller.apply({ActionKind::ApplyPreset, s.vm.presets[0].id}));
  CHECK(s.vm.chat.system_prompt == "You are a pirate.");
  CHECK_FALSE(s.controller.apply({ActionKind::SavePreset, 0, "Pirate", "again"}));   // names are unique
  CHECK(s.vm.status.message_is_error);
  REQUIRE(s.controller.apply({ActionKind::DeletePreset, s.vm.presets[0].id}));
  CHECK(s.vm.presets.empty());
  s.vm.sampling.temperature = 0.25f;
  s.vm.sampling.top_k = 7;
  s.vm.sampling.retention = 2;   // h2o
  s.vm.sampling.kv_keep = 0.25f;
  REQUIRE(s.controller.apply({ActionKind::SetSampling}));
  s.vm.sampling.max_tokens = 40;
  s.answer({ActionKind::Send, 0, "Once upon a time"});   // an answer under h2o retention
  CHECK(s.vm.chat.messages.back().state == ui::MessageState::Complete);

  ui::ViewModel again;
  gui::Controller reopened(again, {});
  gui::AppOptions options;
  options.db_path = s.dir.file("kvdesk.db");
  reopened.start(options);
  CHECK(again.sampling.temperature == Approx(0.25f));
  CHECK(again.sampling.top_k == 7);
  CHECK(again.sampling.retention == 2);
  CHECK(again.sampling.kv_keep == Approx(0.25f));
  CHECK(again.chat.system_prompt == "You are a pirate.");
  CHECK(again.model.recent.size() == 1);
}

TEST_CASE("bad input becomes a status-line error, never an abort", "[gui][controller]") {
  Session s(false);
  CHECK(s.vm.model.state == ui::ModelState::None);
  CHECK_FALSE(s.controller.apply({ActionKind::Send, 0, "hello"}));
  CHECK(s.vm.status.message_is_error);
  CHECK(s.vm.status.message.find("no model") != std::string::npos);
  CHECK_FALSE(s.controller.apply({ActionKind::OpenModel, 0, s.dir.file("missing.gguf")}));
  CHECK_FALSE(s.controller.apply({ActionKind::SetSystemPrompt, 0, "no conversation selected"}));
  REQUIRE(s.controller.apply({ActionKind::NewChat}));
  CHECK_FALSE(s.controller.apply({ActionKind::RenameConversation, s.vm.chat.conversation_id, ""}));
  CHECK_FALSE(s.controller.apply({ActionKind::Regenerate}));
  CHECK_FALSE(s.controller.apply({ActionKind::Stop}));
  CHECK_FALSE(s.controller.apply({ActionKind::SwitchBranch, 12345}));
  s.vm.ui.kv_edit.k_type = "f12";
  CHECK_FALSE(s.controller.apply({ActionKind::ReconfigureKv}));
  CHECK(s.vm.status.message.find("unknown KV type 'f12'") != std::string::npos);
  CHECK_FALSE(s.controller.apply({ActionKind::CancelModelLoad}));
  CHECK(s.vm.status.message.find("no model is loading") != std::string::npos);
  CHECK_FALSE(s.controller.apply({ActionKind::DeleteMessage, 12345}));
  CHECK_FALSE(s.controller.apply({ActionKind::SetFontSize, 0, "huge"}));
  CHECK(s.vm.status.message.find("the font size must be 10 to 32 pixels") != std::string::npos);
  CHECK_FALSE(s.controller.apply({ActionKind::SetFontSize, 0, "99"}));
}

TEST_CASE("a conversation damaged by a loop of parents opens empty with the reason, the app starts", "[gui][controller]") {
  test::TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  {
    store::ConversationStore store = store::ConversationStore::open(db);
    const store::ConversationId id = store.create_conversation("looped");
    store.add_message({.conversation = id, .role = store::Role::User, .content = "hello"});
  }
  {
    store::Database raw(db, store::OpenMode::ReadWrite, 1000);
    raw.exec("UPDATE messages SET parent_id = id");
  }
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};
  gui::AppOptions options;
  options.db_path = db;
  controller.start(options);
  REQUIRE(vm.conversations.size() == 1);
  CHECK(vm.chat.conversation_id == vm.conversations.front().id);
  CHECK(vm.chat.messages.empty());
  CHECK(vm.status.message_is_error);
  CHECK(vm.status.message.find("is its own ancestor") != std::string::npos);
  CHECK(controller.apply({ActionKind::NewChat}));
}

TEST_CASE("the chat template choice reaches the engine, and unknown names are refused", "[gui][controller]") {
  Session s;
  CHECK(s.vm.ui.chat_templates == kvdesk::chat_template_names());
  CHECK(pump(s.controller, [&] { return s.vm.model.chat_template == "plain"; }));   // stories260K has none
  REQUIRE(s.controller.apply({ActionKind::SetChatTemplate, 0, "chatml"}));
  CHECK(s.vm.ui.chat_template == "chatml");
  CHECK(pump(s.controller, [&] { return s.vm.model.chat_template == "chatml"; }));
  CHECK_FALSE(s.controller.apply({ActionKind::SetChatTemplate, 0, "vicuna"}));
  CHECK(s.vm.status.message.find("unknown chat template 'vicuna'") != std::string::npos);
  REQUIRE(s.controller.apply({ActionKind::SetChatTemplate, 0, ""}));
  CHECK(pump(s.controller, [&] { return s.vm.model.chat_template == "plain"; }));
}

TEST_CASE("a conversation's KV is saved when its answer finishes and restored after a restart", "[gui][controller][chat]") {
  test::TempDir dir;
  gui::AppOptions options;
  options.db_path = dir.file("kvdesk.db");
  options.model_path = test::model_path("stories260K.gguf");
  int64_t conversation = 0;
  {
    ui::ViewModel vm;
    gui::Controller c{vm, {}};
    c.start(options);
    REQUIRE(pump(c, [&] { return vm.model.state == ui::ModelState::Loaded; }));
    vm.sampling.max_tokens = 16;
    REQUIRE(c.apply({ActionKind::Send, 0, "Once upon a time"}));
    REQUIRE(pump(c, [&] { return !c.streaming(); }));
    CHECK_THAT(vm.status.last_answer, Catch::Contains("KV from recomputed (no saved KV)"));
    conversation = vm.chat.conversation_id;
  }   // closing saves the export still pending, if any
  REQUIRE(store::ConversationStore::open(options.db_path).kv_info(conversation).has_value());

  ui::ViewModel vm;
  gui::Controller c{vm, {}};
  c.start(options);
  REQUIRE(pump(c, [&] { return vm.model.state == ui::ModelState::Loaded; }));
  REQUIRE(vm.chat.conversation_id == conversation);
  // Opening the conversation brings its saved KV back into the engine before anything is sent.
  CHECK(pump(c, [&] { return vm.kv.valid && vm.kv.blocks_used + vm.kv.blocks_cached > 0; }));
  vm.sampling.max_tokens = 16;
  REQUIRE(c.apply({ActionKind::Send, 0, "The dog went to the park."}));
  REQUIRE(pump(c, [&] { return !c.streaming(); }));
  CHECK_THAT(vm.status.last_answer, Catch::Contains("KV from database"));
  REQUIRE(c.apply({ActionKind::Send, 0, "Then it rained."}));
  REQUIRE(pump(c, [&] { return !c.streaming(); }));
  CHECK_THAT(vm.status.last_answer, Catch::Contains("KV from pool"));
}

TEST_CASE("the window's size, column split, open tab and theme are remembered", "[gui][controller][layout]") {
  test::TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  gui::AppOptions options;
  options.db_path = db;
  {
    ui::ViewModel vm;
    gui::Controller c{vm, {}};
    c.start(options);
    CHECK(vm.ui.layout_prefs.width == 1280);
    CHECK(vm.ui.layout_prefs.theme == ui::Theme::Dark);
    vm.ui.layout_prefs.left_share = 0.3f;
    vm.ui.layout_prefs.right_share = 0.25f;
    vm.ui.panel = ui::Panel::Memory;
    REQUIRE(c.apply({ActionKind::SetTheme, 0, "light"}));
    CHECK_FALSE(c.apply({ActionKind::SetTheme, 0, "purple"}));
    CHECK(vm.ui.layout_prefs.theme == ui::Theme::Light);
    c.remember_layout(1000, 640);
  }
  {
    ui::ViewModel vm;
    gui::Controller c{vm, {}};
    c.start(options);
    CHECK(vm.ui.layout_prefs.width == 1000);
    CHECK(vm.ui.layout_prefs.height == 640);
    CHECK(vm.ui.layout_prefs.left_share == Approx(0.3f));
    CHECK(vm.ui.layout_prefs.right_share == Approx(0.25f));
    CHECK(vm.ui.layout_prefs.theme == ui::Theme::Light);
    CHECK(vm.ui.panel == ui::Panel::Memory);
    CHECK(vm.ui.panel_requested);
  }
  {
    store::ConversationStore s = store::ConversationStore::open(db);
    s.set_setting("window.width", "-5");
    s.set_setting("window.height", "99999999999");
    s.set_setting("layout.left_share", "nan");
    s.set_setting("layout.right_share", "wide");
    s.set_setting("layout.panel", "nonsense");
    s.set_setting("ui.theme", "purple");
  }
  ui::ViewModel vm;
  gui::Controller c{vm, {}};
  c.start(options);
  const ui::WindowLayout defaults;
  CHECK(vm.ui.layout_prefs.width == defaults.width);
  CHECK(vm.ui.layout_prefs.height == defaults.height);
  CHECK(vm.ui.layout_prefs.left_share == defaults.left_share);
  CHECK(vm.ui.layout_prefs.right_share == defaults.right_share);
  CHECK(vm.ui.layout_prefs.theme == ui::Theme::Dark);
  CHECK(vm.ui.panel == ui::Panel::Settings);
  CHECK(vm.status.modal.empty());
}
