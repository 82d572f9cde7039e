// kvdesk-cli template and serve's POST /apply-template: the prompt a chat template renders for
// an OpenAI-shaped conversation, byte for byte, from a template file or a model's own, with the
// template's error and exit 1 when it refuses the conversation.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/app/serve_process.h"
#include "tests/test_support.h"

using Catch::Matchers::Contains;
using kvdesk::test::model_path;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A conversation with a system message, tool definitions, an assistant tool call (arguments as a
// JSON string) and the tool's result.
constexpr const char* kToolConversation = R"({
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18 C"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}}}}]
})";

constexpr const char* kToolTemplate =
    "{{ bos_token }}{% for t in tools %}[tool {{ t.function.name }} {{ t.function.parameters | tojson }}]{% endfor %}\n"
    "{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}{% for c in m.tool_calls %}call {{ c.function.name }}"
    "({{ c.function.arguments }}){% endfor %}{% else %}{{ m.content }}{% endif %}{% if m.tool_call_id %} #{{ m.tool_call_id }}"
    "{% endif %}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";

}  // namespace

TEST_CASE("template prints the rendered prompt byte for byte: tools, tool calls, tool results", "[app][cli][template]") {
  const TempDir dir;
  write(dir.file("t.jinja"), kToolTemplate);
  write(dir.file("conv.json"), kToolConversation);
  const auto run = run_cli({"template", "--template", dir.file("t.jinja"), "--messages", dir.file("conv.json"),
                            "--bos-token", "<s>"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  // trim_blocks: the line break after each {% ... %} goes.
  CHECK(run.out ==
        "<s>[tool get_weather {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}]"
        "<system>Be brief.<user>Weather in Paris?<assistant>call get_weather({\"city\": \"Paris\"})"
        "<tool>18 C #c1<assistant>");
  const auto no_prompt = run_cli({"template", "--template", dir.file("t.jinja"), "--messages", dir.file("conv.json"),
                                  "--no-generation-prompt"});
  REQUIRE(no_prompt.exit_code == 0);
  CHECK(no_prompt.out.ends_with("<tool>18 C #c1"));
}

TEST_CASE("template: --date, --kwargs and --tools reach the template", "[app][cli][template]") {
  const TempDir dir;
  write(dir.file("t.jinja"), "{{ strftime_now('%d %b %Y') }} {{ enable_thinking }} {{ tools | length }}");
  write(dir.file("conv.json"), R"({"messages": [{"role": "user", "content": "Hi"}]})");
  write(dir.file("tools.json"), R"([{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}])");
  const auto run = run_cli({"template", "--template", dir.file("t.jinja"), "--messages", dir.file("conv.json"), "--date",
                            "2025-04-05", "--kwargs", R"({"enable_thinking": false})", "--tools", dir.file("tools.json")});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out == "05 Apr 2025 False 2");
}

TEST_CASE("template exits 1 with the template's own error, and 2 for wrong arguments", "[app][cli][template]") {
  const TempDir dir;
  write(dir.file("gemma.jinja"),
        "{% if messages[0]['role'] == 'system' %}\n{{ raise_exception('System role not supported') }}\n{% endif %}x");
  write(dir.file("broken.jinja"), "{% for m in messages %}\n{{ m.content }");
  write(dir.file("conv.json"), kToolConversation);
  write(dir.file("bad.json"), "{\"messages\": 3}");
  const auto raised = run_cli({"template", "--template", dir.file("gemma.jinja"), "--messages", dir.file("conv.json")});
  CHECK(raised.exit_code == 1);
  CHECK_THAT(raised.err, Contains("System role not supported") && Contains("line 2"));
  CHECK(raised.out.empty());
  const auto broken = run_cli({"template", "--template", dir.file("broken.jinja"), "--messages", dir.file("conv.json")});
  CHECK(broken.exit_code == 1);
  CHECK_THAT(broken.err, Contains("line 2"));
  CHECK(run_cli({"template", "--template", dir.file("gemma.jinja"), "--messages", dir.file("bad.json")}).exit_code == 1);
  CHECK(run_cli({"template", "--messages", dir.file("conv.json")}).exit_code == 2);
  CHECK(run_cli({"template", "--template", dir.file("gemma.jinja"), "--messages", dir.file("conv.json"), "--date",
                 "2025-02-30"}).exit_code == 2);
}

TEST_CASE("template -m renders the model's own template with its BOS and EOS", "[app][cli][template]") {
  const TempDir dir;
  write(dir.file("conv.json"), R"({"messages": [{"role": "user", "content": "Once upon"}, {"role": "assistant", "content": " a time"}]})");
  // stories260K has no template: plain joins the messages.
  const auto run = run_cli({"template", "-m", model_path("stories260K.gguf"), "--messages", dir.file("conv.json")});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out == "Once upon a time");
}

TEST_CASE("The --chat-template-file flag renders chat requests with that file's template", "[app][cli][template]") {
  const TempDir dir;
  write(dir.file("t.jinja"), "{% for m in messages %}{{ m.content }}{% endfor %} and then");
  kvdesk::test::ServeProcess server({"--chat-template-file", dir.file("t.jinja")});
  httplib::Client c = server.client();
  const nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}};
  const auto applied = c.Post("/apply-template", body.dump(), "application/json");
  REQUIRE(applied);
  REQUIRE(applied->status == 200);
  CHECK(nlohmann::json::parse(applied->body) == nlohmann::json{{"prompt", "Once upon a time and then"}});
  const auto refused = c.Post("/apply-template", "{\"messages\": 1}", "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 400);
}

TEST_CASE("serve's /apply-template renders the model's template as chat requests are", "[app][serve][template]") {
  kvdesk::test::ServeProcess server;
  httplib::Client c = server.client();
  const nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "Once upon"}}, {{"role", "assistant"}, {"content", " a time"}}}}};
  const auto applied = c.Post("/apply-template", body.dump(), "application/json");
  REQUIRE(applied);
  REQUIRE(applied->status == 200);
  CHECK(nlohmann::json::parse(applied->body)["prompt"] == "Once upon a time");
}
