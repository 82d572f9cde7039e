// A stored message's tool blocks as the chat shows them (app/gui/tool_views.h): stored calls
// and results, JSON indented, and calls an answer wrote in its model's markup.
#include <catch2/catch.hpp>

#include "app/gui/tool_views.h"

using namespace kvdesk;

namespace {

ui::MessageView view_of(const store::Message& m, ToolCallFormat format) {
  ui::MessageView v;
  v.text = m.content;
  add_tool_views(m, format, v);
  return v;
}

}  // namespace

TEST_CASE("stored tool calls and a JSON tool result become indented blocks", "[gui][tools]") {
  store::Message call{.role = store::Role::Assistant, .content = ""};
  call.fields_json = R"({"reasoning_content":"Two calls.","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"a\":1}"}},)"
                     R"({"function":{"name":"g","arguments":"not json"}}]})";
  const ui::MessageView v = view_of(call, ToolCallFormat::Hermes);
  CHECK(v.reasoning == "Two calls.");
  REQUIRE(v.tool_calls.size() == 2);
  CHECK(v.tool_calls[0].id == "c1");
  CHECK(v.tool_calls[0].arguments == "{\n  \"a\": 1\n}");
  CHECK(v.tool_calls[1].arguments == "not json");

  store::Message result{.role = store::Role::Tool, .content = R"({"temp":3,"sky":"clear"})"};
  result.fields_json = R"({"tool_call_id":"c1","name":"f"})";
  const ui::MessageView r = view_of(result, ToolCallFormat::None);
  CHECK(r.tool_name == "f");
  CHECK(r.tool_call_id == "c1");
  CHECK(r.text_is_json);
  CHECK(r.text == "{\n  \"temp\": 3,\n  \"sky\": \"clear\"\n}");   // the tool's key order

  store::Message plain{.role = store::Role::Tool, .content = "sunny"};
  CHECK_FALSE(view_of(plain, ToolCallFormat::None).text_is_json);
  CHECK(view_of(plain, ToolCallFormat::None).text == "sunny");
}

TEST_CASE("a tool result nested too deep to indent is shown as written", "[gui][tools]") {
  const store::Message deep{.role = store::Role::Tool, .content = std::string(200000, '[') + std::string(200000, ']')};
  const ui::MessageView v = view_of(deep, ToolCallFormat::None);
  CHECK_FALSE(v.text_is_json);
  CHECK(v.text == deep.content);
}

TEST_CASE("an answer's calls written in its model's markup leave the text and become blocks", "[gui][tools]") {
  const store::Message answer{.role = store::Role::Assistant,
                              .content = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Seoul\"}}\n</tool_call>"};
  const ui::MessageView v = view_of(answer, ToolCallFormat::Hermes);
  REQUIRE(v.tool_calls.size() == 1);
  CHECK(v.tool_calls[0].name == "get_weather");
  CHECK(v.tool_calls[0].arguments == "{\n  \"city\": \"Seoul\"\n}");
  CHECK(v.text.find("<tool_call>") == std::string::npos);
  CHECK(v.text.find("Let me look.") != std::string::npos);
  // An answer showing code may be quoting the markup: it stays text.
  store::Message quoting = answer;
  quoting.content = "Write it like this:\n```\n" + answer.content + "\n```";
  CHECK(view_of(quoting, ToolCallFormat::Hermes).tool_calls.empty());
  // Without a format, or while the answer streams, the text stays as written.
  CHECK(view_of(answer, ToolCallFormat::None).tool_calls.empty());
  store::Message streaming = answer;
  streaming.status = store::MessageStatus::Streaming;
  CHECK(view_of(streaming, ToolCallFormat::Hermes).text == answer.content);
}
