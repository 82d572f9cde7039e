// Scripted sessions of the real kvdesk window under Xvfb with stories260K: a two-turn chat,
// a regenerate, panels opened, screenshots checked non-blank, the database holding the
// conversation, and a second run restoring and continuing it. Also: failures end the run
// with the failing line, and a bad database or model gives a message, not a crash.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/store/conversation_store.h"
#include "tests/gui/app_run.h"
#include "tests/test_support.h"

namespace {

using kvdesk::test::TempDir;
using kvdesk::test::check_screenshot;
using kvdesk::test::run_kvdesk;
namespace store = kvdesk::store;

using AppRun = kvdesk::test::CliRun;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("a scripted chat is saved and a second run restores and continues it", "[gui][session]") {
  TempDir dir;
  const std::string model = kvdesk::test::model_path("stories260K.gguf");
  const std::string db = dir.file("kvdesk.db");
  write_file(dir.file("first.txt"),
             "new_chat\n"
             "system You tell short stories.\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "send Tell me more\n"
             "wait_answer\n"
             "regenerate\n"
             "wait_answer\n"
             "screenshot chat.png\n"
             "open_panel blocks\n"
             "screenshot blocks.png\n"
             "open_panel sharing\n"
             "screenshot sharing.png\n"
             "open_panel memory\n"
             "screenshot memory.png\n"
             "open_panel fragmentation\n"
             "open_panel quantization\n"
             "open_panel plots\n"
             "screenshot plots.png\n"
             "quit\n");
  const AppRun first = run_kvdesk({"--model", model, "--db", db, "--script", dir.file("first.txt"),
                                        "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << first.err);
  REQUIRE(first.exit_code == 0);
  for (const char* name : {"chat.png", "blocks.png", "sharing.png", "memory.png", "plots.png"}) {
    check_screenshot(dir.file(name));
  }

  store::MessageId regenerated = 0;
  {
    store::ConversationStore s = store::ConversationStore::open(db);
    const std::vector<store::Conversation> conversations = s.list_conversations();
    REQUIRE(conversations.size() == 1);
    CHECK(conversations[0].title == "Once upon a time");
    CHECK(conversations[0].system_prompt == "You tell short stories.");
    const std::vector<store::Message> path = s.branch_path(conversations[0].id);
    REQUIRE(path.size() == 4);
    CHECK(path[0].content == "Once upon a time");
    CHECK(path[2].content == "Tell me more");
    for (const store::Message& m : path) CHECK(m.status == store::MessageStatus::Complete);
    CHECK(path[3].role == store::Role::Assistant);
    REQUIRE(path[3].stats.has_value());
    CHECK(path[3].stats->completion_tokens > 0);
    CHECK(s.siblings(path[3].id).size() == 2);   // the first answer and the regenerated one
    regenerated = path[3].id;
    REQUIRE(s.recent_models().size() == 1);
    CHECK(s.recent_models()[0].path == model);
  }

  // No --model: the last one used opens again; the conversation is there to continue.
  write_file(dir.file("second.txt"),
             "select_conversation 1\n"
             "send And then?\n"
             "wait_answer\n"
             "open_panel blocks\n"
             "screenshot restored.png\n"
             "quit\n");
  const AppRun second = run_kvdesk({"--db", db, "--script", dir.file("second.txt"), "--screenshot-dir",
                                         dir.path().string()});
  INFO("stderr: " << second.err);
  REQUIRE(second.exit_code == 0);
  check_screenshot(dir.file("restored.png"));
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 1);
  const std::vector<store::Message> path = s.branch_path(conversations[0].id);
  REQUIRE(path.size() == 6);
  CHECK(path[3].id == regenerated);
  CHECK(path[4].content == "And then?");
  CHECK(path[5].status == store::MessageStatus::Complete);
}

// Greedy sampling and short answers, written into the database before the app starts.
void use_greedy_settings(const std::string& db) {
  store::ConversationStore s = store::ConversationStore::open(db);
  s.set_setting("sampling.temperature", "0");
  s.set_setting("sampling.max_tokens", "24");
}

std::string last_answer(const std::string& db) {
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Message> path = s.branch_path(s.list_conversations().at(0).id);
  REQUIRE(path.size() == 4);
  return path[3].content;
}

TEST_CASE("a conversation continued after a restart answers as an uninterrupted session does", "[gui][session]") {
  TempDir dir;
  const std::string model = kvdesk::test::model_path("stories260K.gguf");
  const std::string whole_db = dir.file("whole.db");
  const std::string split_db = dir.file("split.db");
  use_greedy_settings(whole_db);
  use_greedy_settings(split_db);
  write_file(dir.file("whole.txt"), "new_chat\nsend Once upon a time\nwait_answer\nsend The dog\nwait_answer\nquit\n");
  write_file(dir.file("first.txt"), "new_chat\nsend Once upon a time\nwait_answer\nquit\n");
  write_file(dir.file("second.txt"), "select_conversation 1\nsend The dog\nwait_answer\nquit\n");
  const AppRun whole = run_kvdesk({"--model", model, "--db", whole_db, "--script", dir.file("whole.txt")});
  REQUIRE(whole.exit_code == 0);
  const AppRun first = run_kvdesk({"--model", model, "--db", split_db, "--script", dir.file("first.txt")});
  REQUIRE(first.exit_code == 0);
  const AppRun second = run_kvdesk({"--model", model, "--db", split_db, "--script", dir.file("second.txt")});
  INFO("stderr: " << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_FALSE(last_answer(whole_db).empty());
  CHECK(last_answer(split_db) == last_answer(whole_db));
}

TEST_CASE("an edited message becomes a branch next to the original", "[gui][session]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  write_file(dir.file("edit.txt"),
             "new_chat\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "edit_last There was a cat\n"
             "wait_answer\n"
             "screenshot edited.png\n"
             "quit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                      dir.file("edit.txt"), "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  store::ConversationStore s = store::ConversationStore::open(db);
  const store::ConversationId id = s.list_conversations().at(0).id;
  const std::vector<store::Message> path = s.branch_path(id);
  REQUIRE(path.size() == 2);
  CHECK(path[0].content == "There was a cat");
  CHECK(s.siblings(path[0].id).size() == 2);
  CHECK(s.roots(id).size() == 2);
}

TEST_CASE("a conversation carries on after the KV pool changes type", "[gui][session]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  write_file(dir.file("kv.txt"),
             "new_chat\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "kv_type int8\n"
             "send Then what?\n"
             "wait_answer\n"
             "open_panel quantization\n"
             "screenshot int8.png\n"
             "quit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                      dir.file("kv.txt"), "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  check_screenshot(dir.file("int8.png"));
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Message> path = s.branch_path(s.list_conversations().at(0).id);
  REQUIRE(path.size() == 4);
  CHECK(path[3].status == store::MessageStatus::Complete);
  CHECK(s.setting("kv.k_type") == std::optional<std::string>("int8"));
}

TEST_CASE("a script fails on its first bad line, naming it", "[gui][script]") {
  TempDir dir;
  SECTION("an unknown command fails before the window opens") {
    write_file(dir.file("bad.txt"), "new_chat\n\nfly away\n");
    const AppRun run = run_kvdesk({"--db", dir.file("db"), "--script", dir.file("bad.txt")});
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("bad.txt:3: unknown command 'fly'") != std::string::npos);
  }
  SECTION("an action that fails ends the run with its line on stderr") {
    write_file(dir.file("fail.txt"), "new_chat\nselect_conversation 7\nquit\n");
    const AppRun run = run_kvdesk({"--db", dir.file("db"), "--script", dir.file("fail.txt")});
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("fail.txt:2: select_conversation 7: there are 1 conversations") != std::string::npos);
  }
  SECTION("a wait that never ends times out") {
    write_file(dir.file("wait.txt"), "sleep 30\n");
    const AppRun run = run_kvdesk({"--db", dir.file("db"), "--script", dir.file("wait.txt"), "--script-timeout", "1"});
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("wait.txt:1: sleep 30: timed out") != std::string::npos);
  }
}

TEST_CASE("a bad database or model gives a message in the window, never a crash", "[gui][script]") {
  TempDir dir;
  SECTION("a database that is not one: a temporary database, the file left as it was") {
    const std::string junk = "this is not an SQLite database, and kvdesk must not touch it\n";
    write_file(dir.file("junk.db"), junk);
    write_file(dir.file("s.txt"), "new_chat\nscreenshot notice.png\nquit\n");
    const AppRun run = run_kvdesk({"--db", dir.file("junk.db"), "--script", dir.file("s.txt"), "--screenshot-dir",
                                        dir.path().string()});
    INFO("stderr: " << run.err);
    CHECK(run.exit_code == 0);
    CHECK(read_all(dir.file("junk.db")) == junk);
    check_screenshot(dir.file("notice.png"));
  }
  SECTION("a model file that is not a model: the load fails, the app goes on") {
    write_file(dir.file("junk.gguf"), "GGUF? no.");
    write_file(dir.file("s.txt"), "wait_model\nquit\n");
    const AppRun run = run_kvdesk({"--model", dir.file("junk.gguf"), "--db", dir.file("db"), "--script",
                                        dir.file("s.txt")});
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("wait_model: the model failed to load") != std::string::npos);
  }
}

TEST_CASE("nothing overlaps or clips from 1024x700 to 2560x1440", "[gui][layout]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  use_greedy_settings(db);
  write_file(dir.file("layout.txt"),
             "new_chat\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "layout_report chat.txt\n"
             "open_panel fragmentation\n"
             "layout_report waste.txt\n"
             "screenshot waste.png\n"
             "quit\n");
  for (const auto& [w, h] : {std::pair{1024, 700}, std::pair{1280, 800}, std::pair{2560, 1440}}) {
    const std::string size = std::to_string(w) + "x" + std::to_string(h);
    DYNAMIC_SECTION("at " << size) {
      const std::string first_display = std::to_string(100 + ::getpid() % 800);
      const AppRun run = kvdesk::test::run_program(
          "xvfb-run", {"-a", "-n", first_display, "-s", "-screen 0 2560x1440x24", KVDESK_APP_PATH, "--model",
                       kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--width", std::to_string(w), "--height",
                       std::to_string(h), "--script", dir.file("layout.txt"), "--screenshot-dir", dir.path().string()});
      INFO("stderr: " << run.err);
      REQUIRE(run.exit_code == 0);
      for (const char* name : {"chat.txt", "waste.txt"}) {
        const std::string report = read_all(dir.file(name));
        INFO(name << ":\n" << report);
        CHECK(report.rfind("window " + size + "\n", 0) == 0);
        CHECK(report.find("status line: ") != std::string::npos);
        CHECK(report.find("model bar: ") != std::string::npos);
        CHECK(report.find("OVERFLOW") == std::string::npos);
      }
      const std::string waste = read_all(dir.file("waste.txt"));
      CHECK(waste.find("waste table: waste: ") != std::string::npos);
      CHECK(waste.find("what-if table: wasted bytes: ") != std::string::npos);
      CHECK(read_all(dir.file("chat.txt")).find("chat: paragraph: ") != std::string::npos);
    }
  }
}

TEST_CASE("a conversation exported to JSON imports back the same, with its branches", "[gui][files]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  use_greedy_settings(db);
  write_file(dir.file("files.txt"),
             "new_chat\n"
             "system Be brief.\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "regenerate\n"
             "wait_answer\n"
             "export json " + dir.file("chat.json") + "\n"
             "export md " + dir.file("chat.md") + "\n"
             "import " + dir.file("chat.json") + "\n"
             "screenshot imported.png\n"
             "quit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                 dir.file("files.txt"), "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(read_all(dir.file("chat.md")).find("Once upon a time") != std::string::npos);
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 2);
  const store::ConversationId original_id = std::min(conversations[0].id, conversations[1].id);
  const store::ConversationId imported_id = std::max(conversations[0].id, conversations[1].id);
  const store::ConversationTree imported = s.load_tree(imported_id);
  const store::ConversationTree original = s.load_tree(original_id);
  CHECK(imported.conversation.title == original.conversation.title);
  CHECK(imported.conversation.system_prompt == "Be brief.");
  REQUIRE(imported.messages.size() == 3);   // the question and both answers
  REQUIRE(original.messages.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(imported.messages[i].role == original.messages[i].role);
    CHECK(imported.messages[i].content == original.messages[i].content);
    CHECK(imported.messages[i].status == original.messages[i].status);
  }
  const std::vector<store::Message> path = s.branch_path(imported_id);
  REQUIRE(path.size() == 2);
  CHECK(s.siblings(path[1].id).size() == 2);
}

TEST_CASE("an OpenAI transcript imports with its tool calls and results drawn as blocks, and the chat goes on",
          "[gui][files][tools]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  use_greedy_settings(db);
  write_file(dir.file("agent.json"), R"({"messages": [
    {"role": "system", "content": "You can call get_weather."},
    {"role": "user", "content": "Weather in Seoul?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_7", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Seoul\", \"unit\": \"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_7", "name": "get_weather", "content": "{\"temp\": 3, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "It is 3 degrees and clear."}]})");
  write_file(dir.file("tools.txt"),
             "import " + dir.file("agent.json") + "\n"
             "layout_report tools.txt\n"
             "screenshot tools.png\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "quit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                 dir.file("tools.txt"), "--screenshot-dir", dir.path().string()});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  const std::string report = read_all(dir.file("tools.txt"));
  INFO(report);
  CHECK(report.find("chat: tool call: get_weather:") != std::string::npos);
  CHECK(report.find("chat: tool result: get_weather:") != std::string::npos);
  CHECK(report.find("OVERFLOW") == std::string::npos);
  check_screenshot(dir.file("tools.png"));
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 1);
  const std::vector<store::Message> path = s.branch_path(conversations[0].id);
  REQUIRE(path.size() == 6);   // the transcript's four, the new question and its answer
  CHECK(path[2].role == store::Role::Tool);
  CHECK(path[1].fields_json.find("get_weather") != std::string::npos);
  CHECK(path[4].content == "Once upon a time");
  CHECK(path[5].role == store::Role::Assistant);
  CHECK_FALSE(path[5].content.empty());
}

TEST_CASE("a bad import is a message and changes nothing", "[gui][files]") {
  TempDir dir;
  write_file(dir.file("junk.json"), "{\"format\": \"something else\"}");
  write_file(dir.file("import.txt"), "new_chat\nimport " + dir.file("junk.json") + "\nquit\n");
  const AppRun run = run_kvdesk({"--db", dir.file("db"), "--script", dir.file("import.txt")});
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("import.txt:2: import " + dir.file("junk.json") + ": import conversation: cannot import") != std::string::npos);
  CHECK(run.err.find("is not kvdesk.conversation") != std::string::npos);
  store::ConversationStore s = store::ConversationStore::open(dir.file("db"));
  CHECK(s.list_conversations().size() == 1);
}

TEST_CASE("keyboard shortcuts work in the real window", "[gui][keyboard]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  use_greedy_settings(db);
  write_file(dir.file("keys.txt"),
             "key ctrl+n\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "key ctrl+r\n"
             "wait_answer\n"
             "key ctrl+n\n"
             "quit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                 dir.file("keys.txt")});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 2);   // Ctrl+N twice
  const std::vector<store::Message> path = s.branch_path(std::min(conversations[0].id, conversations[1].id));
  REQUIRE(path.size() == 2);
  CHECK(s.siblings(path[1].id).size() == 2);   // Ctrl+R: a second answer
}

TEST_CASE("scripts set a conversation's context and max tokens, show the model and resize the window",
          "[gui][script][settings]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  {
    store::ConversationStore s = store::ConversationStore::open(db);
    s.set_setting("sampling.max_tokens", "200");
    s.set_setting("sampling.slide_context", "0");
  }
  write_file(dir.file("s.txt"),
             "wait_model\n"
             "new_chat\nset_max_tokens 4\nsend Once upon a time\nwait_answer\n"
             "new_chat\nset_context 32\nsend Once upon a time\nwait_answer\n"
             "model_info model.txt\nresize 1024 700\nscreenshot small.png\nquit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                 dir.file("s.txt"), "--screenshot-dir", dir.path().string()});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);

  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 2);
  const store::Conversation& capped_context = conversations[0];
  const store::Conversation& capped_length = conversations[1];
  CHECK(s.conversation_settings(capped_length.id).max_tokens == 4);
  CHECK_FALSE(s.conversation_settings(capped_length.id).context_length.has_value());
  CHECK(s.conversation_settings(capped_context.id).context_length == 32);
  const store::Message short_answer = s.branch_path(capped_length.id).back();
  REQUIRE(short_answer.stats.has_value());
  CHECK(short_answer.stats->completion_tokens == 4);
  const store::Message full_answer = s.branch_path(capped_context.id).back();
  REQUIRE(full_answer.stats.has_value());
  CHECK(full_answer.stats->finish_reason == "context_full");
  CHECK(full_answer.stats->prompt_tokens + full_answer.stats->completion_tokens <= 33);

  const std::string info = read_all(dir.file("model.txt"));
  CHECK(run.out.find(info) != std::string::npos);
  CHECK(info.find("architecture: llama") != std::string::npos);
  CHECK(info.find("vocabulary: 512") != std::string::npos);
  CHECK(info.find("tokenizer: SentencePiece") != std::string::npos);
  CHECK(info.find("Weight types\n  attn_k: ") != std::string::npos);
  CHECK(info.find("KV bytes per token (K + V, all layers)\n  f32: ") != std::string::npos);

  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load(dir.file("small.png").c_str(), &w, &h, &channels, 3);
  REQUIRE(pixels != nullptr);
  stbi_image_free(pixels);
  CHECK(w == 1024);
  CHECK(h == 700);
}

TEST_CASE("bad numbers in settings and resize lines fail before the window opens", "[gui][script][settings]") {
  TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"set_context 0\n", "'set_context' needs a whole number above 0, not '0'"},
      {"set_max_tokens lots\n", "'set_max_tokens' needs a whole number above 0, not 'lots'"},
      {"resize 10 10\n", "resize needs a width and a height in pixels"},
      {"resize 800\n", "resize needs a width and a height in pixels"},
  };
  for (const auto& [script, message] : cases) {
    write_file(dir.file("bad.txt"), script);
    const AppRun run = run_kvdesk({"--db", dir.file("db"), "--script", dir.file("bad.txt")});
    INFO(script << run.err);
    CHECK(run.exit_code == 1);
    CHECK(run.err.find(std::string("bad.txt:1: ") + message) != std::string::npos);
  }
}

namespace {

struct Picture {
  int width = 0;
  int height = 0;
  double mean = 0;   // of every channel of every pixel, 0..255
};

Picture read_picture(const std::string& path) {
  Picture p;
  int channels = 0;
  unsigned char* pixels = stbi_load(path.c_str(), &p.width, &p.height, &channels, 3);
  REQUIRE(pixels != nullptr);
  const size_t n = size_t(p.width) * size_t(p.height) * 3;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += pixels[i];
  stbi_image_free(pixels);
  p.mean = sum / double(n);
  return p;
}

}  // namespace

TEST_CASE("the window's size, open tab and theme come back after a restart", "[gui][session][layout]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  write_file(dir.file("first.txt"), "resize 1000 700\nopen_panel memory\nscreenshot dark.png\nquit\n");
  const AppRun first = run_kvdesk({"--db", db, "--script", dir.file("first.txt"), "--screenshot-dir", dir.path().string()});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  {
    store::ConversationStore s = store::ConversationStore::open(db);
    CHECK(s.setting("window.width") == "1000");
    CHECK(s.setting("window.height") == "700");
    CHECK(s.setting("layout.panel") == "memory");
    s.set_setting("ui.theme", "light");
  }
  write_file(dir.file("second.txt"), "screenshot light.png\nquit\n");
  const AppRun second =
      run_kvdesk({"--db", db, "--script", dir.file("second.txt"), "--screenshot-dir", dir.path().string()});
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  const Picture dark = read_picture(dir.file("dark.png"));
  const Picture light = read_picture(dir.file("light.png"));
  CHECK(dark.width == 1000);
  CHECK(light.width == 1000);
  CHECK(light.height == 700);
  CHECK(dark.mean < 100);
  CHECK(light.mean > 150);
  store::ConversationStore s = store::ConversationStore::open(db);
  CHECK(s.setting("layout.panel") == "memory");
  CHECK(s.setting("ui.theme") == "light");
}

TEST_CASE("a file dropped on the window opens as a model, and anything else is explained", "[gui][drop]") {
  TempDir dir;
  write_file(dir.file("notes.txt"), "not a model\n");
  write_file(dir.file("empty.gguf"), "");
  write_file(dir.file("broken.gguf"), "GGUF\x03\x00\x00\x00 and then nothing a GGUF needs");
  const std::string model = kvdesk::test::model_path("stories260K.gguf");
  write_file(dir.file("drop.txt"), "drop " + dir.file("notes.txt") + "\n"
                                   "expect_status 'notes.txt' is not a model\n"
                                   "drop " + dir.file("empty.gguf") + "\n"
                                   "expect_status 'empty.gguf' is not a GGUF model\n"
                                   "drop " + dir.path().string() + "\n"
                                   "expect_status is a folder\n"
                                   "drop " + dir.file("broken.gguf") + "\n"
                                   "expect_status " + dir.file("broken.gguf") + "\n"
                                   "screenshot broken.png\n"
                                   "drop " + model + "\n"
                                   "wait_model\n"
                                   "send Once upon a time\n"
                                   "wait_answer\n"
                                   "quit\n");
  const AppRun run = run_kvdesk({"--db", dir.file("db"), "--script", dir.file("drop.txt"), "--screenshot-dir",
                                 dir.path().string(), "--script-timeout", "60"});
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 0);
  check_screenshot(dir.file("broken.png"));
  store::ConversationStore s = store::ConversationStore::open(dir.file("db"));
  const std::vector<store::RecentModel> recent = s.recent_models();
  REQUIRE(recent.size() == 1);
  CHECK(recent[0].path == model);
}

TEST_CASE("scripts continue an answer, delete messages and change the font size in the real window",
          "[gui][script][messages]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  write_file(dir.file("s.txt"),
             "wait_model\n"
             "new_chat\nset_max_tokens 6\nsend Once upon a time\nwait_answer\n"
             "continue_last\nwait_answer\n"
             "send The end\nwait_answer\n"
             "delete_message 3\nexpect_status message and 1 reply under it deleted\n"
             "font_size 26\nscreenshot big_font.png\nquit\n");
  const AppRun run = run_kvdesk({"--model", kvdesk::test::model_path("stories260K.gguf"), "--db", db, "--script",
                                 dir.file("s.txt"), "--screenshot-dir", dir.path().string()});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  check_screenshot(dir.file("big_font.png"));

  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 1);
  const std::vector<store::Message> shown = s.branch_path(conversations[0].id);
  REQUIRE(shown.size() == 2);
  REQUIRE(shown[1].stats.has_value());
  CHECK(shown[1].stats->completion_tokens == 12);   // 6, then 6 more in the same message
  REQUIRE(shown[1].tokens.has_value());
  CHECK(shown[1].tokens->ids.size() == 12);
  CHECK(s.load_tree(conversations[0].id).messages.size() == 2);
  CHECK(s.setting("ui.font_size") == "26.000000");
}
