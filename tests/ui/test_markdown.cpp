// Tests of ui/markdown_document and ui/markdown_cache: Markdown text to the flat blocks and
// styled spans the chat draws, and the per-message cache that parses only changed text.
#include <catch2/catch.hpp>

#include "ui/markdown_cache.h"
#include "ui/markdown_document.h"

using namespace kvdesk::ui;

namespace {

MdBlock only_block(const MdDocument& d) {
  REQUIRE(d.blocks.size() == 1);
  return d.blocks[0];
}

}  // namespace

TEST_CASE("headings and paragraphs become blocks in reading order", "[ui][markdown]") {
  const MdDocument d = parse_markdown("# Title\n\nFirst line\nsame paragraph.\n\n### Small\n\nLast.");
  REQUIRE(d.blocks.size() == 4);
  CHECK(d.blocks[0].kind == MdBlockKind::Heading);
  CHECK(d.blocks[0].heading_level == 1);
  CHECK(plain_text(d.blocks[0].spans) == "Title");
  CHECK(d.blocks[1].kind == MdBlockKind::Paragraph);
  CHECK(plain_text(d.blocks[1].spans) == "First line same paragraph.");   // a soft break reads as a space
  CHECK(d.blocks[2].heading_level == 3);
  CHECK(plain_text(d.blocks[3].spans) == "Last.");
}

TEST_CASE("emphasis, strong, strikethrough, inline code and links are styled spans", "[ui][markdown]") {
  const MdBlock b = only_block(parse_markdown("a *em* **strong** ~~gone~~ `x = 1` [site](https://example.org) end"));
  const MdSpans expected = {
      {"a ", kSpanPlain, ""},       {"em", kSpanEmphasis, ""}, {" ", kSpanPlain, ""},
      {"strong", kSpanStrong, ""},  {" ", kSpanPlain, ""},     {"gone", kSpanStrike, ""},
      {" ", kSpanPlain, ""},        {"x = 1", kSpanCode, ""},  {" ", kSpanPlain, ""},
      {"site", kSpanLink, "https://example.org"}, {" end", kSpanPlain, ""},
  };
  CHECK(b.spans == expected);
}

TEST_CASE("nested styles combine and bare addresses become links", "[ui][markdown]") {
  const MdBlock b = only_block(parse_markdown("***both*** see https://kvdesk.example/x"));
  REQUIRE(b.spans.size() == 3);
  CHECK(b.spans[0].style == (kSpanStrong | kSpanEmphasis));
  CHECK(b.spans[2].style == kSpanLink);
  CHECK(b.spans[2].href == "https://kvdesk.example/x");
}

TEST_CASE("a hard line break stays a line break", "[ui][markdown]") {
  CHECK(plain_text(only_block(parse_markdown("one  \ntwo")).spans) == "one\ntwo");
}

TEST_CASE("lists flatten into blocks with their depth and bullets", "[ui][markdown]") {
  const MdDocument d = parse_markdown("- apple\n- pear\n  1. inner\n  2. second\n\n3. three\n4. four\n");
  REQUIRE(d.blocks.size() == 6);
  CHECK(plain_text(d.blocks[0].spans) == "apple");
  CHECK(d.blocks[0].bullet == "•");
  CHECK(d.blocks[0].list_depth == 1);
  CHECK(plain_text(d.blocks[1].spans) == "pear");
  CHECK(d.blocks[2].bullet == "1.");
  CHECK(d.blocks[2].list_depth == 2);
  CHECK(plain_text(d.blocks[3].spans) == "second");
  CHECK(d.blocks[3].bullet == "2.");
  CHECK(d.blocks[4].bullet == "3.");   // an ordered list keeps its start number
  CHECK(d.blocks[5].bullet == "4.");
  CHECK(d.blocks[5].list_depth == 1);
}

TEST_CASE("a loose list item's second paragraph has no bullet of its own", "[ui][markdown]") {
  const MdDocument d = parse_markdown("- first\n\n  more of it\n\n- second\n");
  REQUIRE(d.blocks.size() == 3);
  CHECK(d.blocks[0].bullet == "•");
  CHECK(d.blocks[1].bullet.empty());
  CHECK(d.blocks[1].list_depth == 1);
  CHECK(d.blocks[2].bullet == "•");
}

TEST_CASE("block quotes give their depth to the blocks inside", "[ui][markdown]") {
  const MdDocument d = parse_markdown("> quoted\n>\n> > deeper\n\nafter");
  REQUIRE(d.blocks.size() == 3);
  CHECK(d.blocks[0].quote_depth == 1);
  CHECK(d.blocks[1].quote_depth == 2);
  CHECK(plain_text(d.blocks[1].spans) == "deeper");
  CHECK(d.blocks[2].quote_depth == 0);
}

TEST_CASE("fenced code keeps its text and language, and an unclosed fence runs to the end", "[ui][markdown]") {
  const MdDocument d = parse_markdown("Try:\n```cpp\nint x = 1;\n  *not emphasis*\n```\nDone.");
  REQUIRE(d.blocks.size() == 3);
  CHECK(d.blocks[1].kind == MdBlockKind::Code);
  CHECK(d.blocks[1].language == "cpp");
  CHECK(d.blocks[1].code == "int x = 1;\n  *not emphasis*");
  CHECK(plain_text(d.blocks[2].spans) == "Done.");

  const MdDocument streaming = parse_markdown("```py\nfor i in range(3):\n    print(i");
  const MdBlock code = only_block(streaming);
  CHECK(code.kind == MdBlockKind::Code);
  CHECK(code.language == "py");
  CHECK(code.code == "for i in range(3):\n    print(i");
}

TEST_CASE("tables keep their header row and cells with styles", "[ui][markdown]") {
  const MdBlock t = only_block(parse_markdown("| type | bytes |\n|---|--:|\n| **f16** | 2 |\n| int8 | 1 |\n"));
  CHECK(t.kind == MdBlockKind::Table);
  CHECK(t.header_rows == 1);
  REQUIRE(t.rows.size() == 3);
  REQUIRE(t.rows[0].size() == 2);
  CHECK(plain_text(t.rows[0][1]) == "bytes");
  REQUIRE(t.rows[1][0].size() == 1);
  CHECK(t.rows[1][0][0] == MdSpan{"f16", kSpanStrong, ""});
  CHECK(plain_text(t.rows[2][1]) == "1");
}

TEST_CASE("a rule, entities and raw HTML as text", "[ui][markdown]") {
  const MdDocument d = parse_markdown("a &amp; b &#233; &#x1F600; &bogus;\n\n---\n\n<b>not bold</b>");
  REQUIRE(d.blocks.size() == 3);
  CHECK(plain_text(d.blocks[0].spans) == "a & b \u00E9 \U0001F600 &bogus;");
  CHECK(d.blocks[1].kind == MdBlockKind::Rule);
  CHECK(plain_text(d.blocks[2].spans) == "<b>not bold</b>");
}

TEST_CASE("Korean text and odd input parse without loss", "[ui][markdown]") {
  CHECK(plain_text(only_block(parse_markdown("안녕하세요 **세계**")).spans) == "안녕하세요 세계");
  CHECK(parse_markdown("").blocks.empty());
  const std::string nul("a\0b", 3);
  CHECK(plain_text(only_block(parse_markdown(nul)).spans) == "a\uFFFDb");
  CHECK_NOTHROW(parse_markdown("*[`]*|\n|-\n>>>>>>>>>> - - - ```"));
}

TEST_CASE("the cache parses a message again only when its text changed", "[ui][markdown]") {
  MarkdownCache cache;
  const std::string question = "What is **KV**?";
  const std::string old_answer = "It is a *cache*.";
  std::string streaming = "Keys and";
  auto frame = [&] {
    cache.document(1, question);
    cache.document(2, old_answer);
    return cache.document(3, streaming).blocks.size();
  };
  frame();
  CHECK(cache.parses() == 3);
  frame();
  CHECK(cache.parses() == 3);   // nothing changed: nothing parsed
  streaming += " values\n\n```";
  CHECK(frame() == 2);          // the streaming answer grew a code block
  CHECK(cache.parses() == 4);   // and only it was parsed again
  CHECK(plain_text(cache.document(1, question).blocks[0].spans) == "What is KV?");

  cache.keep_only({3});
  CHECK(cache.size() == 1);
  cache.document(1, question);
  CHECK(cache.parses() == 5);   // forgotten, so parsed again when shown again
}
