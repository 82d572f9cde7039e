// Markdown parsing with md4c's callbacks: a small state machine that keeps the lists and
// quotes it is inside, the styles of the open spans and the block that text goes to, and
// appends leaf blocks in reading order.
#include "ui/markdown_document.h"

#include <md4c.h>

#include <cstdlib>

namespace kvdesk::ui {
namespace {

struct ListLevel {
  bool ordered = false;
  unsigned next_number = 1;
  char delimiter = '.';
};

void append_utf8(std::string& out, uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// "&amp;", "&#233;", "&#xE9;" and the few named entities chat answers use; any other entity
// stays as it was written.
std::string decode_entity(std::string_view entity) {
  if (entity.size() > 3 && entity[1] == '#') {
    const bool hex = entity[2] == 'x' || entity[2] == 'X';
    const std::string digits(entity.substr(hex ? 3 : 2, entity.size() - (hex ? 4 : 3)));
    std::string out;
    append_utf8(out, uint32_t(std::strtoul(digits.c_str(), nullptr, hex ? 16 : 10)));
    return out;
  }
  static constexpr std::pair<std::string_view, std::string_view> kNamed[] = {
      {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&nbsp;", "\u00A0"}};
  for (const auto& [name, text] : kNamed) {
    if (entity == name) return std::string(text);
  }
  return std::string(entity);
}

std::string attribute_text(const MD_ATTRIBUTE& attribute) { return std::string(attribute.text, attribute.size); }

class Builder {
 public:
  MdDocument document;

  int enter_block(MD_BLOCKTYPE type, void* detail) {
    switch (type) {
      case MD_BLOCK_DOC: break;
      case MD_BLOCK_QUOTE: leaf_ = -1; ++quote_depth_; break;
      case MD_BLOCK_UL: leaf_ = -1; lists_.push_back({}); break;
      case MD_BLOCK_OL: {
        leaf_ = -1;
        const auto* ol = static_cast<const MD_BLOCK_OL_DETAIL*>(detail);
        lists_.push_back({true, ol->start, ol->mark_delimiter});
        break;
      }
      case MD_BLOCK_LI: leaf_ = -1; pending_bullet_ = next_bullet(); break;
      case MD_BLOCK_HR: open_leaf(MdBlockKind::Rule); leaf_ = -1; break;
      case MD_BLOCK_H:
        open_leaf(MdBlockKind::Heading).heading_level = int32_t(static_cast<const MD_BLOCK_H_DETAIL*>(detail)->level);
        break;
      case MD_BLOCK_CODE:
        open_leaf(MdBlockKind::Code).language = attribute_text(static_cast<const MD_BLOCK_CODE_DETAIL*>(detail)->lang);
        break;
      case MD_BLOCK_HTML:
      case MD_BLOCK_P:
        if (table_ < 0) open_leaf(MdBlockKind::Paragraph);
        break;
      case MD_BLOCK_TABLE: open_leaf(MdBlockKind::Table); table_ = leaf_; break;
      case MD_BLOCK_THEAD: in_head_ = true; break;
      case MD_BLOCK_TBODY: in_head_ = false; break;
      case MD_BLOCK_TR:
        table().rows.emplace_back();
        if (in_head_) ++table().header_rows;
        break;
      case MD_BLOCK_TH:
      case MD_BLOCK_TD: table().rows.back().emplace_back(); break;
    }
    return 0;
  }

  int leave_block(MD_BLOCKTYPE type) {
    switch (type) {
      case MD_BLOCK_QUOTE: leaf_ = -1; --quote_depth_; break;
      case MD_BLOCK_UL:
      case MD_BLOCK_OL: leaf_ = -1; lists_.pop_back(); break;
      case MD_BLOCK_LI: leaf_ = -1; pending_bullet_.clear(); break;
      case MD_BLOCK_H:
      case MD_BLOCK_P:
      case MD_BLOCK_HTML:
        if (table_ < 0) leaf_ = -1;
        break;
      case MD_BLOCK_CODE: trim_code(); leaf_ = -1; break;
      case MD_BLOCK_TABLE: table_ = leaf_ = -1; break;
      default: break;
    }
    return 0;
  }

  int enter_span(MD_SPANTYPE type, void* detail) {
    style_ |= span_style(type);
    if (type == MD_SPAN_A) href_ = attribute_text(static_cast<const MD_SPAN_A_DETAIL*>(detail)->href);
    if (type == MD_SPAN_IMG) href_ = attribute_text(static_cast<const MD_SPAN_IMG_DETAIL*>(detail)->src);
    return 0;
  }

  int leave_span(MD_SPANTYPE type) {
    style_ &= uint8_t(~span_style(type));
    if (!(style_ & kSpanLink)) href_.clear();
    return 0;
  }

  int text(MD_TEXTTYPE type, std::string_view text) {
    if (leaf_ >= 0 && document.blocks[size_t(leaf_)].kind == MdBlockKind::Code) {
      document.blocks[size_t(leaf_)].code += text;
      return 0;
    }
    switch (type) {
      case MD_TEXT_BR: append("\n", style_); break;
      case MD_TEXT_SOFTBR: append(" ", style_); break;
      case MD_TEXT_NULLCHAR: append("\uFFFD", style_); break;
      case MD_TEXT_ENTITY: append(decode_entity(text), style_); break;
      default: append(text, style_); break;
    }
    return 0;
  }

 private:
  static uint8_t span_style(MD_SPANTYPE type) {
    switch (type) {
      case MD_SPAN_EM: return kSpanEmphasis;
      case MD_SPAN_STRONG: return kSpanStrong;
      case MD_SPAN_A:
      case MD_SPAN_IMG: return kSpanLink;
      case MD_SPAN_CODE: return kSpanCode;
      case MD_SPAN_DEL: return kSpanStrike;
      default: return kSpanPlain;
    }
  }

  std::string next_bullet() {
    if (lists_.empty()) return "•";
    ListLevel& list = lists_.back();
    if (!list.ordered) return "•";
    return std::to_string(list.next_number++) + list.delimiter;
  }

  MdBlock& open_leaf(MdBlockKind kind) {
    MdBlock& b = document.blocks.emplace_back();
    b.kind = kind;
    b.list_depth = int32_t(lists_.size());
    b.quote_depth = quote_depth_;
    b.bullet = std::move(pending_bullet_);
    pending_bullet_.clear();
    leaf_ = int32_t(document.blocks.size() - 1);
    return b;
  }

  MdBlock& table() { return document.blocks[size_t(table_)]; }

  // Where text goes: the open table cell, the open leaf, or (text straight inside a tight
  // list item) a paragraph opened for it.
  MdSpans& target() {
    if (table_ >= 0) {
      MdBlock& t = table();
      if (t.rows.empty()) t.rows.emplace_back();
      if (t.rows.back().empty()) t.rows.back().emplace_back();
      return t.rows.back().back();
    }
    if (leaf_ < 0) open_leaf(MdBlockKind::Paragraph);
    return document.blocks[size_t(leaf_)].spans;
  }

  void append(std::string_view text, uint8_t style) {
    MdSpans& spans = target();
    if (!spans.empty() && spans.back().style == style && spans.back().href == href_) {
      spans.back().text += text;
    } else {
      spans.push_back({std::string(text), style, style & kSpanLink ? href_ : std::string()});
    }
  }

  void trim_code() {
    std::string& code = document.blocks[size_t(leaf_)].code;
    if (!code.empty() && code.back() == '\n') code.pop_back();
  }

  std::vector<ListLevel> lists_;
  int32_t quote_depth_ = 0;
  std::string pending_bullet_;
  int32_t leaf_ = -1;
  int32_t table_ = -1;
  bool in_head_ = false;
  uint8_t style_ = kSpanPlain;
  std::string href_;
};

Builder& builder(void* userdata) { return *static_cast<Builder*>(userdata); }

}  // namespace

MdDocument parse_markdown(std::string_view text) {
  MD_PARSER parser{};
  parser.flags = MD_DIALECT_GITHUB | MD_FLAG_NOHTML;
  parser.enter_block = [](MD_BLOCKTYPE t, void* d, void* u) { return builder(u).enter_block(t, d); };
  parser.leave_block = [](MD_BLOCKTYPE t, void*, void* u) { return builder(u).leave_block(t); };
  parser.enter_span = [](MD_SPANTYPE t, void* d, void* u) { return builder(u).enter_span(t, d); };
  parser.leave_span = [](MD_SPANTYPE t, void*, void* u) { return builder(u).leave_span(t); };
  parser.text = [](MD_TEXTTYPE t, const MD_CHAR* s, MD_SIZE n, void* u) { return builder(u).text(t, {s, n}); };
  Builder b;
  if (md_parse(text.data(), MD_SIZE(text.size()), &parser, &b) != 0) {
    // md4c failed (out of memory): the text as one plain paragraph rather than nothing.
    MdDocument plain;
    plain.blocks.emplace_back().spans.emplace_back(std::string(text));
    return plain;
  }
  return std::move(b.document);
}

std::string plain_text(const MdSpans& spans) {
  std::string out;
  for (const MdSpan& s : spans) out += s.text;
  return out;
}

}  // namespace kvdesk::ui
