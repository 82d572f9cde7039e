// Fuzz target: the Jinja chat-template engine on hostile templates and conversations, as a
// downloaded GGUF could bring them. The input is a template source, a NUL, then messages as
// NUL-separated role/content fields. Parsing and rendering may refuse with kvdesk::Error (a
// syntax error, raise_exception, a limit reached) but never crash, hang or grow without bound:
// the render runs under tight RenderLimits. The same messages also go through every built-in
// family, which must render them or refuse with an Error, and through the model-file path
// (tokenizer.chat_template in a GGUF in memory).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/chat/family_templates.h"
#include "engine/chat/jinja/template.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "tests/fuzz/memory_file.h"

namespace {

std::vector<std::string_view> split_fields(std::string_view text) {
  std::vector<std::string_view> fields;
  for (size_t at = 0;;) {
    const size_t nul = text.find('\0', at);
    fields.push_back(text.substr(at, nul == std::string_view::npos ? text.npos : nul - at));
    if (nul == std::string_view::npos) break;
    at = nul + 1;
  }
  return fields;
}

std::vector<kvdesk::ChatMessage> messages_of(const std::vector<std::string_view>& fields) {
  std::vector<kvdesk::ChatMessage> messages;
  for (size_t i = 1; i + 1 < fields.size(); i += 2) messages.push_back({std::string(fields[i]), std::string(fields[i + 1])});
  return messages;
}

kvdesk::jinja::Dict context_of(const std::vector<kvdesk::ChatMessage>& messages) {
  using kvdesk::jinja::Value;
  kvdesk::jinja::ValueList list;
  for (const kvdesk::ChatMessage& m : messages) {
    auto d = std::make_shared<kvdesk::jinja::Dict>();
    d->set(Value::string("role"), Value::string(m.role));
    d->set(Value::string("content"), Value::string(kvdesk::jinja::Text::of_content(m.content)));
    list.push_back(Value::dict(d));
  }
  kvdesk::jinja::Dict context;
  context.set(Value::string("messages"), Value::list(std::move(list)));
  context.set(Value::string("add_generation_prompt"), Value::boolean(true));
  context.set(Value::string("bos_token"), Value::string("<s>"));
  context.set(Value::string("eos_token"), Value::string("</s>"));
  context.set(Value::string("tools"), Value::none());
  return context;
}

// A fuzzed template under limits small enough for many runs a second.
void render_source(std::string_view source, const std::vector<kvdesk::ChatMessage>& messages) {
  kvdesk::jinja::RenderLimits limits;
  limits.max_steps = 100'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_items = 1 << 16;
  try {
    const kvdesk::jinja::Template program{std::string(source)};
    const kvdesk::jinja::Text out = program.render(context_of(messages), kvdesk::local_now(), limits);
    if (out.bytes.size() > limits.max_output_bytes) std::abort();
    if (!out.content.empty() && out.content.size() != out.bytes.size()) std::abort();
  } catch (const kvdesk::Error&) {
  }
}

void render_families(const std::vector<kvdesk::ChatMessage>& messages) {
  if (messages.empty()) return;
  for (const kvdesk::FamilyTemplate& family : kvdesk::family_templates()) {
    try {
      kvdesk::render_chat(kvdesk::builtin_chat_template(family.name), messages, {"<s>", "</s>"});
    } catch (const kvdesk::Error&) {
    }
  }
}

// A GGUF v3 file of no tensors and one metadata key, tokenizer.chat_template = text.
std::vector<uint8_t> template_gguf(std::string_view text) {
  std::vector<uint8_t> bytes = {'G', 'G', 'U', 'F'};
  const auto put = [&](auto value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes.insert(bytes.end(), p, p + sizeof(value));
  };
  const auto put_string = [&](std::string_view s) {
    put(uint64_t{s.size()});
    bytes.insert(bytes.end(), s.begin(), s.end());
  };
  put(uint32_t{3});
  put(uint64_t{0});
  put(uint64_t{1});
  put_string("tokenizer.chat_template");
  put(static_cast<uint32_t>(kvdesk::GgufType::STRING));
  put_string(text);
  return bytes;
}

// The model-file path: reading the template never throws (a bad one is a warning).
void load_from_file(std::string_view source) {
  static kvdesk::fuzz::MemoryFile file;
  const std::vector<uint8_t> bytes = template_gguf(source);
  file.assign(bytes.data(), bytes.size());
  const kvdesk::ChatTemplate t = kvdesk::chat_template_for(*kvdesk::GgufFile::open(file.path()), "");
  if (!t.program && t.error.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> fields = split_fields(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::vector<kvdesk::ChatMessage> messages = messages_of(fields);
  render_source(fields[0], messages);
  render_families(messages);
  if (fields[0].size() < 4096) load_from_file(fields[0]);
  return 0;
}
