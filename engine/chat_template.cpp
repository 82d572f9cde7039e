// render_chat: one small function per template family, exactly as each family's reference
// template prints it (BOS left to the tokenizer).
#include "engine/chat_template.h"

#include "engine/error.h"
#include "engine/gguf_reader.h"

namespace kvdesk {
namespace {

void check_roles(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw Error("a chat request needs at least one message");
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      throw Error("unknown chat role '" + m.role + "' (use system, user or assistant)");
    }
  }
}

// Plain: messages joined by newlines, except that an assistant message continues the text
// before it directly (the model's answer was a continuation of it).
std::string render_plain(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0 && messages[i].role != "assistant") out += "\n";
    out += messages[i].content;
  }
  return out;
}

std::string render_chatml(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

std::string render_llama3(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string render_zephyr(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
  return out + "<|assistant|>\n";
}

// Llama 2: the system prompt goes inside the first [INST] block; each answer ends with </s>
// and the next turn starts with <s> (the first <s> is the tokenizer's BOS).
std::string render_llama2(const std::vector<ChatMessage>& messages) {
  std::string out;
  std::string system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system = "<<SYS>>\n" + m.content + "\n<</SYS>>\n\n";
    } else if (m.role == "user") {
      out += (first_user ? "" : "<s>") + std::string("[INST] ") + (first_user ? system : "") + m.content + " [/INST]";
      first_user = false;
    } else {
      out += " " + m.content + " </s>";
    }
  }
  return out;
}

}  // namespace

const char* chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::Plain: return "plain";
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Zephyr: return "zephyr";
  }
  return "?";
}

ChatFormat detect_chat_format(const GgufFile& file) {
  const std::optional<std::string> t = file.find_string("tokenizer.chat_template");
  if (!t) return ChatFormat::Plain;
  if (t->find("<|im_start|>") != std::string::npos) return ChatFormat::ChatML;
  if (t->find("<|start_header_id|>") != std::string::npos) return ChatFormat::Llama3;
  if (t->find("<|user|>") != std::string::npos) return ChatFormat::Zephyr;
  if (t->find("[INST]") != std::string::npos) return ChatFormat::Llama2;
  return ChatFormat::ChatML;
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages) {
  check_roles(messages);
  switch (format) {
    case ChatFormat::Plain: return render_plain(messages);
    case ChatFormat::ChatML: return render_chatml(messages);
    case ChatFormat::Llama2: return render_llama2(messages);
    case ChatFormat::Llama3: return render_llama3(messages);
    case ChatFormat::Zephyr: return render_zephyr(messages);
  }
  return render_plain(messages);
}

}  // namespace kvdesk
