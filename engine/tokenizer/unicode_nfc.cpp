// NFC through ICU, one valid UTF-8 run at a time. Text below U+0300 (lead bytes under 0xCC:
// ASCII, Latin-1, Latin Extended) is always in NFC and never combines with what follows, so
// such runs are copied without asking ICU.
#include "engine/tokenizer/unicode_nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>

#include "engine/error.h"
#include "engine/tokenizer/utf8_decode.h"

namespace kvdesk {
namespace {

constexpr unsigned char kFirstLeadByteOfCombiningMarks = 0xCC;   // U+0300 is CC 80

bool below_combining_marks(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < kFirstLeadByteOfCombiningMarks; });
}

void append_nfc(std::string_view valid_utf8, std::string& out) {
  if (below_combining_marks(valid_utf8)) {
    out.append(valid_utf8);
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  icu::StringByteSink<std::string> sink(&out);
  if (U_SUCCESS(status)) {
    nfc->normalizeUTF8(0, icu::StringPiece(valid_utf8.data(), static_cast<int32_t>(valid_utf8.size())), sink, nullptr,
                       status);
  }
  if (U_FAILURE(status)) throw Error(std::string("NFC normalization failed: ") + u_errorName(status));
}

}  // namespace

std::string to_nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t run_begin = 0;
  for (size_t at = 0; at < text.size();) {
    const DecodedChar c = decode_utf8(text, at);
    if (c.valid) {
      at += c.length;
      continue;
    }
    append_nfc(text.substr(run_begin, at - run_begin), out);
    out.push_back(text[at]);
    run_begin = ++at;
  }
  append_nfc(text.substr(run_begin), out);
  return out;
}

}  // namespace kvdesk
