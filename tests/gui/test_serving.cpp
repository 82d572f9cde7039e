// The desktop app as a server and as a client. Serving: the real window, scripted under Xvfb,
// serves its own engine over HTTP while it chats, and an HTTP client gets the CLI's greedy
// answer; a taken port or an open host without a key is a message, not a crash. Remote: the
// window chats through a `kvdesk-cli serve` on loopback, its panels showing that server's KV,
// and what only the in-process engine does is refused with a note; a stand-in llama-server
// (no block map, fewer figures) shows what it does not expose as unavailable.
#include <catch2/catch.hpp>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "app/gui/controller.h"
#include "app/store/conversation_store.h"
#include "tests/app/serve_process.h"
#include "tests/gui/controller_session.h"
#include "tests/gui/app_run.h"
#include "tests/test_support.h"
#include "ui/kv_report.h"

using namespace kvdesk;
using nlohmann::json;
using test::TempDir;
using ui::ActionKind;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWaitLimit = std::chrono::seconds(120);

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The whole line of `report` starting with `prefix`, without the prefix; "" when none.
std::string report_value(const std::string& report, const std::string& prefix) {
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return "";
}

// The greedy continuation kvdesk-cli generate prints for a prompt.
std::string cli_greedy_text(const std::string& prompt, int tokens) {
  const test::CliRun run = test::run_cli({"generate", "-m", test::model_path("stories260K.gguf"), "-p", prompt, "-n",
                                          std::to_string(tokens), "--temp", "0", "-t", "2", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  return json::parse(run.out)["text"];
}

}  // namespace

TEST_CASE("the app serves its own engine over HTTP while the window chats, answering as the CLI does",
          "[gui][serving]") {
  TempDir dir;
  write_file(dir.file("script.txt"),
             "wait_model\n"
             "serve on 0 address.txt\n"
             "new_chat\n"
             "send Once upon a time\n"
             "wait_served 1\n"
             "wait_answer\n"
             "open_panel settings\n"
             "kv_report kv.txt\n"
             "screenshot serving.png\n"
             "serve off\n"
             "quit\n");
  test::ChildProcess app = test::start_kvdesk({"--model", test::model_path("stories260K.gguf"), "--db", dir.file("kvdesk.db"),
                                               "--threads", "2", "--script", dir.file("script.txt"), "--screenshot-dir",
                                               dir.path().string(), "--script-timeout", "120"});
  std::string address;
  for (const auto deadline = Clock::now() + kWaitLimit; address.empty() && Clock::now() < deadline;) {
    address = read_all(dir.file("address.txt"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (address.empty()) ::kill(app.pid(), SIGTERM);
  REQUIRE_FALSE(address.empty());
  std::smatch m;
  REQUIRE(std::regex_match(address, m, std::regex("http://127\\.0\\.0\\.1:([0-9]+)\n")));

  httplib::Client client("127.0.0.1", std::stoi(m[1]));
  client.set_read_timeout(120, 0);
  const json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"temperature", 0},
                     {"max_tokens", 64}};
  const httplib::Result res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  const test::CliRun run = test::with_kvdesk_status(app.wait());
  INFO("kvdesk stderr: " << run.err);
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json answer = json::parse(res->body);
  CHECK(answer["model"] == "stories260K.gguf");
  CHECK(answer["choices"][0]["message"]["content"] == cli_greedy_text("Once upon a time", 64));
  REQUIRE(run.exit_code == 0);
  test::check_screenshot(dir.file("serving.png"));
  const std::string report = read_all(dir.file("kv.txt"));
  INFO(report);
  CHECK(report_value(report, "engine: ") == "in-process");
  CHECK(report_value(report, "serving on ") == address.substr(0, address.size() - 1) + ": 0 running, 0 waiting, 1 served");

  store::ConversationStore s = store::ConversationStore::open(dir.file("kvdesk.db"));
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 2);   // the window's, and the served chat kept beside it
  const auto served = std::find_if(conversations.begin(), conversations.end(),
                                   [](const store::Conversation& c) { return c.title == "Served: Once upon a time"; });
  REQUIRE(served != conversations.end());
  CHECK(served->engine == address.substr(0, address.size() - 1));
  const std::vector<store::Message> kept = s.branch_path(served->id);
  REQUIRE(kept.size() == 2);
  CHECK(kept[1].content == answer["choices"][0]["message"]["content"]);
  const auto window = std::find_if(conversations.begin(), conversations.end(),
                                   [](const store::Conversation& c) { return c.engine == "in-process"; });
  CHECK(window != conversations.end());
  CHECK(s.setting("serve.on") == "0");
  CHECK(s.setting("serve.host") == "127.0.0.1");
}

TEST_CASE("served chats become conversations: a next turn adds to one, a resent question branches, tool calls kept",
          "[gui][serving][tools]") {
  test::ControllerSession s;
  s.vm.ui.serve_edit.port = 0;
  REQUIRE(s.controller.apply({ActionKind::ServeHttp, 1}));
  const std::string url = s.vm.serve.url;
  httplib::Client client("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
  client.set_read_timeout(120, 0);
  const auto chat = [&](const json& messages, bool stream) {
    const json body = {{"messages", messages}, {"temperature", 0}, {"max_tokens", 12}, {"stream", stream}};
    const httplib::Result res = client.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const uint64_t kept = s.vm.serve.kept;
    REQUIRE(test::pump(s.controller, [&] { return s.vm.serve.kept > kept; }));
    return res->body;
  };
  const json system = {{"role", "system"}, {"content", "Tell stories."}};
  const json question = {{"role", "user"}, {"content", "Once upon a time"}};
  const json first = json::parse(chat({system, question}, false))["choices"][0]["message"];
  chat({system, question, {{"role", "assistant"}, {"content", first["content"]}}, {{"role", "user"}, {"content", "Then?"}}}, true);
  chat({system, question}, false);   // the same question again: a second answer beside the first
  const json call = {{"role", "assistant"}, {"content", nullptr},
                     {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                      {"function", {{"name", "lookup"}, {"arguments", "{\"q\":\"owl\"}"}}}}}}};
  chat({{{"role", "user"}, {"content", "Find the owl"}}, call,
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"where\": \"tree\"}"}}}, false);
  CHECK(s.vm.conversations.size() == 2);
  REQUIRE(s.controller.apply({ActionKind::ServeHttp, 0}));

  store::ConversationStore db = store::ConversationStore::open(s.dir.file("kvdesk.db"));
  std::map<std::string, store::Conversation> by_title;
  for (const store::Conversation& c : db.list_conversations()) by_title[c.title] = c;
  REQUIRE(by_title.count("Served: Once upon a time") == 1);
  REQUIRE(by_title.count("Served: Find the owl") == 1);
  const store::Conversation& story = by_title["Served: Once upon a time"];
  CHECK(story.system_prompt == "Tell stories.");
  CHECK(story.engine == url);
  const std::vector<store::Message> roots = db.roots(story.id);
  REQUIRE(roots.size() == 1);
  const std::vector<store::Message> answers = db.children(roots[0].id);
  REQUIRE(answers.size() == 2);   // the first answer (continued by "Then?") and the resent question's
  CHECK(answers[0].content == first["content"]);
  const std::vector<store::Message> next = db.children(answers[0].id);
  REQUIRE(next.size() == 1);
  CHECK(next[0].content == "Then?");
  CHECK(db.children(next[0].id).size() == 1);

  const std::vector<store::Message> owl = db.branch_path(by_title["Served: Find the owl"].id);
  REQUIRE(owl.size() == 4);
  CHECK(owl[1].fields_json.find("\"lookup\"") != std::string::npos);
  CHECK(owl[2].role == store::Role::Tool);
  CHECK(owl[3].role == store::Role::Assistant);
}

TEST_CASE("serving on a taken port or an open host without a key is a message, not a crash", "[gui][serving]") {
  TempDir dir;
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};
  gui::AppOptions options;
  options.db_path = dir.file("kvdesk.db");
  controller.start(options);

  vm.ui.serve_edit.port = 0;
  REQUIRE(controller.apply({ActionKind::ServeHttp, 1}));
  REQUIRE(vm.serve.on);
  const int taken = std::stoi(vm.serve.url.substr(vm.serve.url.rfind(':') + 1));
  httplib::Client probe("127.0.0.1", taken);
  const httplib::Result health = probe.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 503);   // no model yet: it says so

  ui::ViewModel other_vm;
  gui::Controller other{other_vm, {}};
  gui::AppOptions other_options;
  other_options.db_path = dir.file("other.db");
  other.start(other_options);
  other_vm.ui.serve_edit.port = taken;
  CHECK_FALSE(other.apply({ActionKind::ServeHttp, 1}));
  CHECK_FALSE(other_vm.serve.on);
  CHECK(other_vm.serve.error.find("cannot listen on 127.0.0.1:" + std::to_string(taken)) != std::string::npos);
  CHECK(other_vm.status.message_is_error);

  other_vm.ui.serve_edit.host = "0.0.0.0";
  other_vm.ui.serve_edit.port = 0;
  CHECK_FALSE(other.apply({ActionKind::ServeHttp, 1}));
  CHECK(other_vm.serve.error.find("needs an API key") != std::string::npos);

  REQUIRE(controller.apply({ActionKind::ServeHttp, 0}));
  CHECK_FALSE(vm.serve.on);
  CHECK_FALSE(probe.Get("/health"));   // nothing listens there now
}

TEST_CASE("the app chats through a remote kvdesk serve, its KV panels showing the server's cache", "[gui][remote]") {
  test::ServeProcess server;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  TempDir dir;
  write_file(dir.file("script.txt"),
             "wait_model\n"
             "new_chat\n"
             "send Once upon a time\n"
             "wait_answer\n"
             "send Tell me more\n"
             "wait_answer\n"
             "regenerate\n"
             "wait_answer\n"
             "open_panel blocks\n"
             "kv_report kv.txt\n"
             "screenshot remote_blocks.png\n"
             "open_panel quantization\n"
             "screenshot remote_kv_types.png\n"
             "quit\n");
  const test::CliRun run = test::run_kvdesk({"--remote", url, "--db", dir.file("kvdesk.db"), "--script", dir.file("script.txt"),
                                             "--screenshot-dir", dir.path().string(), "--script-timeout", "120"});
  INFO("kvdesk stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  test::check_screenshot(dir.file("remote_blocks.png"));
  test::check_screenshot(dir.file("remote_kv_types.png"));

  const std::string report = read_all(dir.file("kv.txt"));
  INFO(report);
  CHECK(report_value(report, "engine: ") == "remote " + url);
  CHECK(report_value(report, "model: ") == "stories260K.gguf");
  CHECK(report_value(report, "server statistics: ") == "read");
  CHECK(report_value(report, "server server: ") == "kvdesk");
  CHECK(std::stoll(report_value(report, "server prompt tokens: ")) > 0);
  CHECK(std::stoll(report_value(report, "server generated tokens: ")) > 0);
  // kvdesk serve hands over its block map: the answers' full blocks stay in its prefix cache.
  std::smatch blocks;
  const std::string block_line = report_value(report, "blocks: ");
  REQUIRE(std::regex_match(block_line, blocks, std::regex("([0-9]+) total, ([0-9]+) used, ([0-9]+) cached, .*")));
  CHECK(std::stoi(blocks[1]) > 0);
  CHECK(std::stoi(blocks[3]) > 0);

  store::ConversationStore s = store::ConversationStore::open(dir.file("kvdesk.db"));
  const std::vector<store::Conversation> conversations = s.list_conversations();
  REQUIRE(conversations.size() == 1);
  CHECK(conversations[0].engine == url);
  const std::vector<store::Message> path = s.branch_path(conversations[0].id);
  REQUIRE(path.size() == 4);
  CHECK(path[2].content == "Tell me more");
  for (const store::Message& m : path) CHECK(m.status == store::MessageStatus::Complete);
  CHECK_FALSE(path[3].content.empty());
  REQUIRE(path[3].stats.has_value());
  CHECK(path[3].stats->model == "stories260K.gguf");
  CHECK(path[3].stats->completion_tokens > 0);
  CHECK(s.siblings(path[3].id).size() == 2);   // the regenerated answer beside the first
  CHECK(s.recent_models().empty());            // a server is not a model file
  CHECK(s.setting("remote.url") == url);
}

TEST_CASE("with a remote server, what only the in-process engine does is refused with a note", "[gui][remote]") {
  test::ServeProcess server;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  TempDir dir;
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};
  gui::AppOptions options;
  options.db_path = dir.file("kvdesk.db");
  options.remote_url = url;
  controller.start(options);
  REQUIRE(test::pump(controller, [&] { return vm.model.state == ui::ModelState::Loaded && !vm.remote.models.empty(); }));
  CHECK(vm.remote.connected);
  CHECK(vm.remote.models == std::vector<std::string>{"stories260K.gguf"});
  CHECK(vm.model.name == "stories260K.gguf");

  vm.sampling.max_tokens = 400;
  REQUIRE(controller.apply({ActionKind::NewChat}));
  REQUIRE(controller.apply({ActionKind::Send, 0, "Once upon a time"}));
  REQUIRE(test::pump(controller, [&] { return vm.chat.messages.size() == 2 && !vm.chat.messages[1].text.empty(); }));
  REQUIRE(controller.apply({ActionKind::Stop}));
  REQUIRE(test::pump(controller, [&] { return !controller.streaming(); }));
  CHECK(vm.chat.messages[1].state == ui::MessageState::Stopped);
  REQUIRE(vm.conversations.size() == 1);
  CHECK(vm.conversations[0].engine == url);   // the list's tooltip says where its answers come from

  CHECK_FALSE(controller.apply({ActionKind::ReconfigureKv}));
  CHECK(vm.status.message.find("the KV pool is the server's") != std::string::npos);
  CHECK(controller.apply({ActionKind::SetChatTemplate, 0, "chatml"}));
  CHECK(vm.status.message.find("the server renders prompts with its own") != std::string::npos);

  // A server that is not there: the model area says why.
  REQUIRE(controller.apply({ActionKind::ConnectRemote, 0, "http://127.0.0.1:1", ""}));
  REQUIRE(test::pump(controller, [&] { return vm.model.state == ui::ModelState::Failed && !vm.remote.models_error.empty(); }));
  CHECK(vm.model.error.find("cannot reach http://127.0.0.1:1") != std::string::npos);
  CHECK_FALSE(controller.apply({ActionKind::ConnectRemote, 0, "ftp://nowhere", ""}));

  // Back to a local model file: the in-process engine takes the chat again.
  REQUIRE(controller.apply({ActionKind::OpenModel, 0, test::model_path("stories260K.gguf")}));
  REQUIRE(test::pump(controller, [&] { return vm.model.state == ui::ModelState::Loaded; }));
  CHECK_FALSE(vm.remote.connected);
  vm.sampling.max_tokens = 8;
  REQUIRE(controller.apply({ActionKind::Send, 0, "And then?"}));
  REQUIRE(test::pump(controller, [&] { return !controller.streaming(); }));
  CHECK(vm.chat.messages.back().state == ui::MessageState::Complete);
}

namespace {

// A stand-in for llama-server on loopback: one model, its /metrics from the recorded fixture
// (usage and tokens, no prefix-cache or block figures) and a fixed streamed answer.
class FakeLlamaServer {
 public:
  FakeLlamaServer() {
    const std::string metrics = read_all(test::source_path("tests/app/fixtures/metrics/llama_server.txt"));
    REQUIRE_FALSE(metrics.empty());
    http_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object": "list", "data": [{"id": "fake-llama"}]})", "application/json");
    });
    http_.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) { res.set_content(metrics, "text/plain"); });
    http_.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      const auto chunk = [](const std::string& delta) {
        return "data: " + json{{"choices", {{{"index", 0}, {"delta", {{"content", delta}}}}}}}.dump() + "\n\n";
      };
      res.set_content(chunk("Hello") + chunk(" there") +
                          "data: " + json{{"choices", {{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}}}}.dump() +
                          "\n\ndata: " + json{{"choices", json::array()}, {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 2}}}}.dump() +
                          "\n\ndata: [DONE]\n\n",
                      "text/event-stream");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeLlamaServer() {
    http_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("a server without a block map shows its own figures, the ones it does not expose unavailable", "[gui][remote]") {
  FakeLlamaServer server;
  TempDir dir;
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};
  gui::AppOptions options;
  options.db_path = dir.file("kvdesk.db");
  options.remote_url = server.url();
  controller.start(options);
  REQUIRE(test::pump(controller, [&] { return vm.model.state == ui::ModelState::Loaded && vm.remote.stats_read; }));
  CHECK(vm.model.name == "fake-llama");
  CHECK_FALSE(vm.kv.valid);

  REQUIRE(controller.apply({ActionKind::NewChat}));
  REQUIRE(controller.apply({ActionKind::Send, 0, "Hi"}));
  REQUIRE(test::pump(controller, [&] { return !controller.streaming(); }));
  REQUIRE(vm.chat.messages.size() == 2);
  CHECK(vm.chat.messages[1].text == "Hello there");
  CHECK(vm.chat.messages[1].state == ui::MessageState::Complete);

  const std::string report = ui::kv_report_text(vm);
  INFO(report);
  CHECK(report_value(report, "blocks: ") == "unavailable");
  CHECK(report_value(report, "server server: ") == "llama-server");
  CHECK(report_value(report, "server KV cache used: ") == "63.0%");
  CHECK(report_value(report, "server KV tokens: ") == "2581");
  CHECK(report_value(report, "server prefix cache hit rate: ") == "unavailable");
  CHECK(report_value(report, "server preemptions: ") == "unavailable");
  CHECK(report_value(report, "server blocks: ") == "unavailable");
  CHECK(vm.plots.hit_rate.empty());      // not exposed: no samples, not a line at zero
  CHECK(vm.plots.blocks_used.empty());

  store::ConversationStore s = store::ConversationStore::open(dir.file("kvdesk.db"));
  CHECK(s.list_conversations().front().engine == server.url());
}
