// Splitting follows Russ Cox's utf8-ranges: first by encoded length, then, for each
// continuation byte position from the last, cut off a partial head or tail until the low bits
// of first and last span every value (00..3F) so the range is a product of byte ranges.
#include "engine/grammar/utf8_ranges.h"

#include <algorithm>

namespace kvdesk::grammar {
namespace {

constexpr uint32_t kSurrogateFirst = 0xD800;
constexpr uint32_t kSurrogateLast = 0xDFFF;
constexpr uint32_t kLastOfLength[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};   // [encoded length - 1]

int encoded_length(uint32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

// [length]: the bytes of cp's encoding.
std::vector<uint8_t> encode(uint32_t cp) {
  std::vector<uint8_t> bytes;
  append_utf8(bytes, cp);
  return bytes;
}

void split_same_length(uint32_t first, uint32_t last, std::vector<std::vector<ByteRange>>& out) {
  const int length = encoded_length(first);
  for (int i = 1; i < length; ++i) {
    const uint32_t low = (uint32_t{1} << (6 * i)) - 1;   // the bits of the last i bytes
    if ((first & ~low) == (last & ~low)) continue;
    if ((first & low) != 0) {
      split_same_length(first, first | low, out);
      split_same_length((first | low) + 1, last, out);
      return;
    }
    if ((last & low) != low) {
      split_same_length(first, (last & ~low) - 1, out);
      split_same_length(last & ~low, last, out);
      return;
    }
  }
  const std::vector<uint8_t> a = encode(first), b = encode(last);
  std::vector<ByteRange> sequence;
  for (size_t k = 0; k < a.size(); ++k) sequence.push_back({a[k], b[k]});
  out.push_back(std::move(sequence));
}

}  // namespace

void append_utf8(std::vector<uint8_t>& out, uint32_t cp) {
  if (cp <= 0x7F) {
    out.push_back(uint8_t(cp));
  } else if (cp <= 0x7FF) {
    out.push_back(uint8_t(0xC0 | (cp >> 6)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else if (cp <= 0xFFFF) {
    out.push_back(uint8_t(0xE0 | (cp >> 12)));
    out.push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(uint8_t(0xF0 | (cp >> 18)));
    out.push_back(uint8_t(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  }
}

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges) {
  std::vector<CodePointRange> cut;
  for (CodePointRange r : ranges) {
    r.last = std::min(r.last, kMaxCodePoint);
    if (r.first > r.last) continue;
    if (r.first < kSurrogateFirst && r.last > kSurrogateLast) {
      cut.push_back({r.first, kSurrogateFirst - 1});
      cut.push_back({kSurrogateLast + 1, r.last});
    } else if (r.first >= kSurrogateFirst && r.last <= kSurrogateLast) {
      continue;
    } else if (r.first >= kSurrogateFirst && r.first <= kSurrogateLast) {
      cut.push_back({kSurrogateLast + 1, r.last});
    } else if (r.last >= kSurrogateFirst && r.last <= kSurrogateLast) {
      cut.push_back({r.first, kSurrogateFirst - 1});
    } else {
      cut.push_back(r);
    }
  }
  std::sort(cut.begin(), cut.end(), [](CodePointRange a, CodePointRange b) { return a.first < b.first; });
  std::vector<CodePointRange> merged;
  for (CodePointRange r : cut) {
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (CodePointRange r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_ranges(std::move(out));
}

std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<std::vector<ByteRange>> out;
  for (CodePointRange r : normalize_ranges(ranges)) {
    for (int length = encoded_length(r.first); length <= encoded_length(r.last); ++length) {
      const uint32_t first = length == 1 ? r.first : std::max(r.first, kLastOfLength[length - 2] + 1);
      const uint32_t last = std::min(r.last, kLastOfLength[length - 1]);
      split_same_length(first, last, out);
    }
  }
  return out;
}

}  // namespace kvdesk::grammar
