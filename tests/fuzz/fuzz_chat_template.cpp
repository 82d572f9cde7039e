// Fuzz target: the chat-template renderer with arbitrary roles and contents in every format,
// and format detection from an arbitrary tokenizer.chat_template string. Unknown roles and
// empty conversations must be refused with a kvdesk::Error; a valid conversation renders to
// text that contains every message's content and ends where the assistant's answer begins.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat_template.h"
#include "engine/error.h"
#include "engine/gguf_reader.h"
#include "engine/gguf_writer.h"

namespace {

constexpr kvdesk::ChatFormat kFormats[] = {kvdesk::ChatFormat::Plain, kvdesk::ChatFormat::ChatML,
                                           kvdesk::ChatFormat::Llama2, kvdesk::ChatFormat::Llama3,
                                           kvdesk::ChatFormat::Zephyr};

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

void render(kvdesk::ChatFormat format, const std::vector<kvdesk::ChatMessage>& messages) {
  bool valid = !messages.empty();
  for (const kvdesk::ChatMessage& m : messages) valid = valid && valid_role(m.role);
  try {
    const std::string text = kvdesk::render_chat(format, messages);
    if (!valid) std::abort();
    for (const kvdesk::ChatMessage& m : messages) {
      if (text.find(m.content) == std::string::npos) std::abort();
    }
  } catch (const kvdesk::Error&) {
    if (valid) std::abort();
  }
}

// GgufWriter writes a temporary file and renames it, so this is a real file, removed at exit.
const std::string& template_path() {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("kvdesk-fuzz-chat-" + std::to_string(::getpid()) + ".gguf")).string();
    std::atexit([] { std::filesystem::remove(template_path()); });
    return p;
  }();
  return path;
}

void detect(std::string_view chat_template) {
  kvdesk::GgufWriter writer;
  writer.add_string("tokenizer.chat_template", std::string(chat_template));
  const std::string& path = template_path();
  writer.write(path);
  kvdesk::chat_format_name(kvdesk::detect_chat_format(*kvdesk::GgufFile::open(path)));
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
