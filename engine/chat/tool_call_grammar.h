// Tool-call grammars (tool_call_grammar.cpp): GBNF that holds a model to writing tool calls in
// a ToolCallFormat's markup, for constrained decoding (engine/grammar/).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/chat/tool_calls.h"

namespace kvdesk {

// A grammar that makes the model write tool calls in the format's markup.
struct ToolCallGrammar {
  std::string gbnf;                    // GBNF (engine/grammar/gbnf.h); rule root
  std::vector<std::string> triggers;   // lazy: texts that start a call; the grammar applies from there
};

// root matches one call (several in a row where the format writes parallel calls and `parallel`
// allows them: OpenAI's parallel_tool_calls) of one of `tools` (OpenAI's [{"type": "function",
// "function": {"name", "parameters"}}]), or of the tool forced_name only when that is not empty.
// Tool NAME's arguments match the rule args-NAME (NAME with every character other than a letter
// or digit made '-'), built from its parameters schema by grammar::json_schema_gbnf (missing
// parameters: any object). lazy
// (tool_choice "auto"): triggers holds the texts that begin a call, and root begins with one of
// them. Throws kvdesk::Error for a format without calls, no tools, a forced name not among
// them, and what json_schema_gbnf throws for a schema.
ToolCallGrammar tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools, std::string_view forced_name,
                                  bool lazy, bool parallel = true);

}  // namespace kvdesk
