// split_answer: harmony channels first (their markers cannot occur in plain text the model
// prints, the vocabulary's structure tokens being the only way to write them), then <think>.
#include "engine/chat/answer_parts.h"

namespace kvdesk {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r";

std::string_view trim_start(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  return begin == std::string_view::npos ? std::string_view() : s.substr(begin);
}

std::string_view trim(std::string_view s) {
  s = trim_start(s);
  const size_t end = s.find_last_not_of(kWhitespace);
  return end == std::string_view::npos ? std::string_view() : s.substr(0, end + 1);
}

// The text of each harmony message in turn: after its "<|message|>", up to its "<|end|>" (or the
// end of the text while it streams). Analysis messages join the reasoning; the final one is the
// answer.
AnswerParts split_harmony(std::string_view text) {
  constexpr std::string_view kChannel = "<|channel|>";
  constexpr std::string_view kMessage = "<|message|>";
  constexpr std::string_view kEnd = "<|end|>";
  AnswerParts out;
  size_t at = text.find(kChannel);
  while (at != std::string_view::npos) {
    const size_t name_begin = at + kChannel.size();
    const size_t body = text.find(kMessage, name_begin);
    if (body == std::string_view::npos) {   // a channel's name still streaming in
      out.reasoning_open = out.answer.empty();
      break;
    }
    const std::string_view channel = text.substr(name_begin, body - name_begin);
    const size_t end = text.find(kEnd, body);
    const std::string_view message =
        text.substr(body + kMessage.size(), end == std::string_view::npos ? std::string_view::npos
                                                                           : end - body - kMessage.size());
    if (channel.starts_with("final")) {
      out.answer = std::string(message);
    } else {
      if (!out.reasoning.empty()) out.reasoning += "\n\n";
      out.reasoning += trim(message);
      out.reasoning_open = end == std::string_view::npos;
    }
    at = end == std::string_view::npos ? end : text.find(kChannel, end);
  }
  return out;
}

// <think> ... </think> answer, the opener optional (a generation prompt may have written it;
// opened_in_reasoning says it did).
AnswerParts split_think(std::string_view text, bool opened_in_reasoning) {
  constexpr std::string_view kOpen = "<think>";
  constexpr std::string_view kClose = "</think>";
  std::string_view rest = trim_start(text);
  const bool opened = rest.starts_with(kOpen) || opened_in_reasoning;
  if (rest.starts_with(kOpen)) rest.remove_prefix(kOpen.size());
  const size_t close = rest.find(kClose);
  if (close == std::string_view::npos) {
    if (!opened) return {"", std::string(text), false};
    return {std::string(trim(rest)), "", true};
  }
  return {std::string(trim(rest.substr(0, close))), std::string(trim_start(rest.substr(close + kClose.size()))), false};
}

}  // namespace

AnswerParts split_answer(std::string_view text, bool opened_in_reasoning) {
  if (text.find("<|channel|>") != std::string_view::npos) return split_harmony(text);
  return split_think(text, opened_in_reasoning);
}

// The parts grow at their ends as the text does (their trims only ever hold back whitespace that
// more text then follows); a part that would shrink or change sends nothing more.
AnswerParts AnswerStream::feed(std::string_view piece) {
  text_ += piece;
  const AnswerParts now = split_answer(text_, opened_in_reasoning_);
  AnswerParts delta;
  delta.reasoning_open = now.reasoning_open;
  if (now.reasoning.size() > sent_.reasoning.size() && now.reasoning.starts_with(sent_.reasoning)) {
    delta.reasoning = now.reasoning.substr(sent_.reasoning.size());
    sent_.reasoning = now.reasoning;
  }
  if (now.answer.size() > sent_.answer.size() && now.answer.starts_with(sent_.answer)) {
    delta.answer = now.answer.substr(sent_.answer.size());
    sent_.answer = now.answer;
  }
  return delta;
}

}  // namespace kvdesk
