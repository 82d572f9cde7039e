// Code-point ranges as UTF-8 byte-range sequences, so a matcher that reads one byte at a time
// can test characters (the technique of RE2 and Rust's utf8-ranges). A range is split where
// the encoded length changes (7F, 7FF, FFFF) and where a continuation byte stops spanning its
// whole 80-BF range, until every piece is a product of byte ranges: [가-힣] (AC00-D7A3) becomes
//   EA [B0-BF] [80-BF] | [EB-EC] [80-BF] [80-BF] | ED [80-9D] [80-BF] | ED 9E [80-A3].
// Surrogates (D800-DFFF) are not characters and never encoded.
#pragma once
#include <cstdint>
#include <vector>

namespace kvdesk::grammar {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t first;
  uint32_t last;   // inclusive
};

struct ByteRange {
  uint8_t first;
  uint8_t last;    // inclusive
};

// Sorted, merged and without surrogates; ranges past kMaxCodePoint are cut there.
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges);
// Every scalar value (0-10FFFF, no surrogates) not in the normalized `ranges`.
std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges);

// The byte sequences [sequences][1..4 byte ranges] whose union is exactly the UTF-8 encodings
// of the code points in `ranges` (normalized first). Distinct sequences match distinct bytes.
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodePointRange>& ranges);

// The UTF-8 encoding of one scalar value.
void append_utf8(std::vector<uint8_t>& out, uint32_t code_point);

}  // namespace kvdesk::grammar
