// Fuzz target: the chat-template renderer with arbitrary roles and contents in every format,
// and format detection from an arbitrary tokenizer.chat_template string. Unknown roles and
// empty conversations must be refused with a kvdesk::Error; a valid conversation renders to
// text that contains every message's content. Detection reads the template from a GGUF in memory.
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "tests/fuzz/memory_file.h"

namespace {

constexpr kvdesk::ChatFormat kFormats[] = {kvdesk::ChatFormat::Plain,  kvdesk::ChatFormat::ChatML,
                                           kvdesk::ChatFormat::Llama2, kvdesk::ChatFormat::Llama3,
                                           kvdesk::ChatFormat::Zephyr, kvdesk::ChatFormat::Mistral,
                                           kvdesk::ChatFormat::Gemma,  kvdesk::ChatFormat::Phi3};

// The input as messages: fields separated by NUL bytes, alternating role and content.
std::vector<kvdesk::ChatMessage> split_messages(std::string_view text) {
  std::vector<std::string_view> fields;
  for (size_t at = 0;;) {
    const size_t nul = text.find('\0', at);
    fields.push_back(text.substr(at, nul == std::string_view::npos ? text.npos : nul - at));
    if (nul == std::string_view::npos) break;
    at = nul + 1;
  }
  std::vector<kvdesk::ChatMessage> messages;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    messages.push_back({std::string(fields[i]), std::string(fields[i + 1])});
  }
  return messages;
}

bool valid_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant";
}

// Whether the format always prints this message. User and assistant turns always show. Llama
// 2, Mistral and Gemma print a system prompt only inside a user turn, as their reference
// templates do: a system message with no user message to carry it is not in the text (found
// by this fuzzer).
bool shown_by(kvdesk::ChatFormat format, const kvdesk::ChatMessage& m) {
  if (m.role != "system") return true;
  return format != kvdesk::ChatFormat::Llama2 && format != kvdesk::ChatFormat::Mistral &&
         format != kvdesk::ChatFormat::Gemma;
}

// The templates trim message contents (Jinja's |trim) as their references do.
std::string_view trimmed(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

void render(kvdesk::ChatFormat format, const std::vector<kvdesk::ChatMessage>& messages) {
  bool valid = !messages.empty();
  for (const kvdesk::ChatMessage& m : messages) valid = valid && valid_role(m.role);
  try {
    kvdesk::ChatTemplate chat_template;
    chat_template.format = format;
    const std::string text = kvdesk::joined_text(kvdesk::render_chat(chat_template, messages, {"<s>", "</s>"}));
    if (!valid) std::abort();
    for (const kvdesk::ChatMessage& m : messages) {
      if (!shown_by(format, m)) continue;
      if (text.find(trimmed(m.content)) == std::string::npos) std::abort();
    }
  } catch (const kvdesk::Error&) {
    if (valid) std::abort();
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

void detect(std::string_view chat_template) {
  static kvdesk::fuzz::MemoryFile file;
  const std::vector<uint8_t> bytes = template_gguf(chat_template);
  file.assign(bytes.data(), bytes.size());
  kvdesk::chat_format_name(kvdesk::chat_template_for(*kvdesk::GgufFile::open(file.path()), "").format);
  kvdesk::chat_format_name(kvdesk::detect_chat_template(chat_template).format);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const kvdesk::ChatFormat format = kFormats[data[0] % std::size(kFormats)];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  render(format, split_messages(rest));
  detect(rest);
  return 0;
}
