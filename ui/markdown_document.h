// Markdown document: a message's text parsed (md4c, GitHub dialect without raw HTML) into a
// flat list of plain blocks the chat panel draws. Nesting is flattened into each block's
// context: how deep it sits in lists and block quotes, and the bullet ("•", "3.") of the list
// item it opens. No ImGui here, so the structure is tested headless.
//
// Invariants: every block is a leaf (paragraph, heading, code, table or rule); text reaches
// the spans exactly once, soft line breaks as spaces and hard breaks as '\n'; an unclosed
// code fence (an answer still streaming) is a code block running to the end of the text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvdesk::ui {

enum SpanStyle : uint8_t {
  kSpanPlain = 0,
  kSpanStrong = 1,
  kSpanEmphasis = 2,
  kSpanCode = 4,
  kSpanStrike = 8,
  kSpanLink = 16,
};

struct MdSpan {
  MdSpan() = default;
  MdSpan(std::string text_, uint8_t style_ = kSpanPlain, std::string href_ = {})
      : text(std::move(text_)), style(style_), href(std::move(href_)) {}

  std::string text;
  uint8_t style = kSpanPlain;   // SpanStyle bits
  std::string href;             // for kSpanLink

  bool operator==(const MdSpan&) const = default;
};

using MdSpans = std::vector<MdSpan>;

enum class MdBlockKind : uint8_t { Paragraph, Heading, Code, Table, Rule };

struct MdBlock {
  MdBlockKind kind = MdBlockKind::Paragraph;
  int32_t heading_level = 0;     // 1..6 for headings
  int32_t list_depth = 0;        // lists around the block
  int32_t quote_depth = 0;       // block quotes around the block
  std::string bullet;            // the first block of a list item: "•" or "3."
  MdSpans spans;                 // paragraphs and headings
  std::string code;              // code blocks: the text without fences
  std::string language;          // code blocks: the fence's info word
  std::vector<std::vector<MdSpans>> rows;   // tables: rows of cells, the header row first
  int32_t header_rows = 0;
};

struct MdDocument {
  std::vector<MdBlock> blocks;
};

MdDocument parse_markdown(std::string_view text);

// The span texts joined: what a block reads as without its styles.
std::string plain_text(const MdSpans& spans);

}  // namespace kvdesk::ui
