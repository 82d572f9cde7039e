// Runs the stages of a PreTokenizer over valid UTF-8 runs of the text, through ICU.
#include "engine/tokenizer/pretokenizer.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "engine/error.h"
#include "engine/tokenizer/pretokenizer_rules.h"
#include "engine/tokenizer/utf8_decode.h"

namespace kvdesk {
namespace {

// A byte range of the text; `valid` ranges are UTF-8 and go through the regexes, the others
// are single invalid bytes that stay as they are.
struct Piece {
  size_t begin;
  size_t end;
  bool valid;
};

// Maximal valid UTF-8 runs and single invalid bytes, in order.
std::vector<Piece> utf8_runs(std::string_view text) {
  std::vector<Piece> pieces;
  size_t run_begin = 0;
  for (size_t at = 0; at < text.size();) {
    const DecodedChar c = decode_utf8(text, at);
    if (c.valid) {
      at += c.length;
      continue;
    }
    if (run_begin < at) pieces.push_back({run_begin, at, true});
    pieces.push_back({at, at + 1, false});
    run_begin = ++at;
  }
  if (run_begin < text.size()) pieces.push_back({run_begin, text.size(), true});
  return pieces;
}

// A valid UTF-8 range as UTF-16 for ICU, and where each UTF-16 index starts in the text.
struct Utf16Range {
  icu::UnicodeString text;
  std::vector<size_t> byte_at;   // [UTF-16 length + 1] byte offset in the original text
};

Utf16Range to_utf16(std::string_view text, const Piece& piece) {
  Utf16Range out;
  for (size_t at = piece.begin; at < piece.end;) {
    const DecodedChar c = decode_utf8(text, at);
    const int32_t before = out.text.length();
    out.text.append(static_cast<UChar32>(c.code_point));
    for (int32_t i = before; i < out.text.length(); ++i) out.byte_at.push_back(at);
    at += c.length;
  }
  out.byte_at.push_back(piece.end);
  return out;
}

}  // namespace

struct PreTokenizer::Stages {
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
};

PreTokenizer PreTokenizer::for_name(std::string_view pre) { return PreTokenizer(pre_tokenizer_rules(pre).patterns); }

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
  auto stages = std::make_unique<Stages>();
  for (const std::string& pattern : patterns) {
    UErrorCode status = U_ZERO_ERROR;
    UParseError parse_error;
    std::unique_ptr<icu::RegexPattern> compiled(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, parse_error, status));
    if (U_FAILURE(status)) {
      throw Error("bad pre-tokenizer pattern '" + pattern + "': " + u_errorName(status) + " at offset " +
                  std::to_string(parse_error.offset));
    }
    stages->patterns.push_back(std::move(compiled));
  }
  stages_ = std::move(stages);
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<Piece> pieces = utf8_runs(text);
  for (const auto& pattern : stages_->patterns) {
    std::vector<Piece> next;
    for (const Piece& piece : pieces) {
      if (!piece.valid) {
        next.push_back(piece);
        continue;
      }
      const Utf16Range range = to_utf16(text, piece);
      UErrorCode status = U_ZERO_ERROR;
      std::unique_ptr<icu::RegexMatcher> matcher(pattern->matcher(range.text, status));
      if (U_FAILURE(status)) throw Error(std::string("pre-tokenizer regex failed: ") + u_errorName(status));
      size_t done = piece.begin;
      while (matcher->find(status) && U_SUCCESS(status)) {
        const size_t begin = range.byte_at[matcher->start(status)];
        const size_t end = range.byte_at[matcher->end(status)];
        if (done < begin) next.push_back({done, begin, true});
        if (begin < end) next.push_back({begin, end, true});
        done = end;
      }
      if (U_FAILURE(status)) throw Error(std::string("pre-tokenizer regex failed: ") + u_errorName(status));
      if (done < piece.end) next.push_back({done, piece.end, true});
    }
    pieces = std::move(next);
  }
  std::vector<std::string_view> words;
  words.reserve(pieces.size());
  for (const Piece& piece : pieces) words.push_back(text.substr(piece.begin, piece.end - piece.begin));
  return words;
}

}  // namespace kvdesk
