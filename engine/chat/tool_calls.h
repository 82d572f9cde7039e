// Tool calls in a model's answer. The model's own chat template writes the tool definitions into
// the prompt; the model then answers with text in which each call is markup of its family's
// format. This file knows those formats: which one a template implies (from telltale markers in
// its Jinja source, as llama.cpp's common/chat.cpp recognises them), how to take the calls out of
// an answer (whole, or piece by piece as it streams), and a GBNF grammar that makes the model
// write a call (tool_choice "required" or a named function).
//
// The markers are the text the tokenizer prints for the format's control tokens ("[TOOL_CALLS]",
// "<|python_tag|>", "<｜tool▁calls▁begin｜>" with its full-width bars): the caller has the
// engine print control tokens' text whenever tools are in use.
//
// A call is taken only when it is whole and well-formed (its arguments valid JSON, its markup as
// the format writes it; the closing marker may be missing at the end of the answer, where the
// model's stop token ended it). Anything else, a broken call included, stays content. Whitespace
// between content and a call, and between calls, belongs to neither.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvdesk {

enum class ToolCallFormat {
  None,             // no tool calls: the whole answer is content
  Hermes,           // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes 2 Pro, Qwen 2.5/3, Granite 4)
  Qwen3Coder,       // <tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>
  Glm45,            // <tool_call>NAME<arg_key>KEY</arg_key><arg_value>value</arg_value></tool_call>
  Llama3Json,       // {"name": ..., "parameters": {...}} opening the answer, or after <|python_tag|>
  FunctionaryV3_1,  // <function=NAME>{...}</function>
  FunctionaryV3_2,  // >>>NAME\n{...} (the first ">>>" may be the generation prompt's)
  Mistral,          // [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}] (Nemo, Small 3/3.1, Large 2)
  MistralArgs,      // [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}, [CALL_ID] optional (Magistral, Devstral, Small 3.2)
  DeepSeekR1,       // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```... (V3, R1)
  DeepSeekV3_1,     // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
  KimiK2,           // <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}...
  Harmony,          // gpt-oss: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
  Granite,          // <|tool_call|>[{"name": ..., "arguments": {...}}] (Granite 3.x)
  CommandR,         // <|START_ACTION|>[{"tool_call_id": ..., "tool_name": ..., "parameters": {...}}]<|END_ACTION|>
};

// A short stable name ("hermes", "llama3-json", ...) for logs and settings.
const char* tool_call_format_name(ToolCallFormat format);
// The format a chat template's Jinja source makes its model write; None when the source shows
// no known tool-call markup.
ToolCallFormat tool_call_format_of(std::string_view template_source);

// One call as OpenAI's tool_calls carry it. arguments: a JSON object's compact text (nlohmann's
// dump()); id: the format's own when it carries one (Mistral, Kimi K2), else "call_" and 24
// random letters and digits.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ParsedAnswer {
  std::string content;                 // the answer without the calls' markup
  std::vector<ToolCall> tool_calls;    // in the order written
};

// The model's whole answer, reasoning already taken out by the caller, split into content and
// calls. Harmony is the exception: give it the answer as written, channels and all; the call
// messages come out and the rest (analysis and final messages) stays for split_answer. Never
// throws.
ParsedAnswer parse_tool_calls(ToolCallFormat format, std::string_view text);

// What one step of a streamed answer adds. content: text to show (index -1). A call arrives as
// two deltas with its index (0, 1, ... in the answer): first its id and name, then its
// arguments; an OpenAI client concatenates the arguments pieces per index.
struct ToolCallDelta {
  std::string content;
  int index = -1;
  std::string id;
  std::string name;
  std::string arguments;
};

// parse_tool_calls over an answer that arrives piece by piece. Content passes through as it
// comes, except text that may begin a call: that is held back (as a stop-string scanner holds a
// possible stop string) until the call is whole, or known not to be one, when it goes out as
// content after all. Over the whole answer, the content pieces join to parse_tool_calls'
// content and the calls are its calls (their random ids aside).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format);
  ~ToolCallStream();
  ToolCallStream(ToolCallStream&&) noexcept;
  ToolCallStream& operator=(ToolCallStream&&) noexcept;

  void push(std::string_view piece, std::vector<ToolCallDelta>& out);
  // The answer ended: what was held back is decided.
  void finish(std::vector<ToolCallDelta>& out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvdesk
