// Tests of ui/text_layout: wrapping styled spans to a width and eliding a line with "...",
// with every byte 10 px wide (code 12 px) so the expected places are easy to read.
#include <catch2/catch.hpp>

#include "ui/layout_report.h"
#include "ui/text_layout.h"

using namespace kvdesk::ui;

namespace {

float fixed_width(std::string_view text, const MdSpan& span) {
  return float(text.size()) * (span.style & kSpanCode ? 12.0f : 10.0f);
}

float plain_width(std::string_view text) { return float(text.size()) * 10.0f; }

std::string joined(const TextLayout& layout) {
  std::string out;
  for (const PlacedRun& r : layout.runs) out += r.text;
  return out;
}

}  // namespace

TEST_CASE("short text stays on one line", "[ui][text_layout]") {
  const TextLayout l = layout_spans({{"hello world"}}, 200, fixed_width);
  REQUIRE(l.runs.size() == 1);
  CHECK(l.lines == 1);
  CHECK(l.widest == 110);
  CHECK(l.runs[0].x == 0);
}

TEST_CASE("lines break after spaces and keep every byte", "[ui][text_layout]") {
  const MdSpans spans = {{"aaa bbb "}, {"ccc", kSpanCode}, {" ddd"}};
  const TextLayout l = layout_spans(spans, 80, fixed_width);
  CHECK(joined(l) == "aaa bbb ccc ddd");
  CHECK(l.lines == 2);
  for (const PlacedRun& r : l.runs) {
    INFO(r.text << " at " << r.x << " line " << r.line);
    CHECK(r.x + r.width <= 80 + 10);   // at most a trailing space past the edge
  }
  CHECK(l.widest <= 80);
  // "ccc" (36 px) does not fit after "aaa bbb " (80 px): it starts line 1.
  const PlacedRun& code = l.runs[1];
  CHECK(code.text == "ccc");
  CHECK(code.line == 1);
  CHECK(code.x == 0);
  CHECK(code.width == 36);
}

TEST_CASE("a newline breaks the line", "[ui][text_layout]") {
  const TextLayout l = layout_spans({{"one\ntwo"}}, 500, fixed_width);
  CHECK(l.lines == 2);
  CHECK(l.runs.back().line == 1);
  CHECK(l.runs.back().x == 0);
}

TEST_CASE("a word wider than the line is split between characters", "[ui][text_layout]") {
  const TextLayout l = layout_spans({{"abcdefghij"}}, 35, fixed_width);
  CHECK(joined(l) == "abcdefghij");
  CHECK(l.lines == 4);   // abc def ghi j
  CHECK(l.widest <= 35);
  const TextLayout korean = layout_spans({{"가나다라"}}, 65, fixed_width);   // 3 bytes each: 30 px
  REQUIRE(korean.runs.size() == 2);
  CHECK(korean.runs[0].text == "가나");
  CHECK(korean.runs[1].text == "다라");
}

TEST_CASE("a width too small for one character still places every character", "[ui][text_layout]") {
  const TextLayout l = layout_spans({{"abc"}}, 1, fixed_width);
  CHECK(joined(l) == "abc");
  CHECK(l.lines == 3);
}

TEST_CASE("empty spans take no lines", "[ui][text_layout]") {
  CHECK(layout_spans({}, 100, fixed_width).lines == 0);
  CHECK(layout_spans({{""}}, 100, fixed_width).lines == 0);
}

TEST_CASE("elide_to_width keeps what fits and adds dots", "[ui][text_layout]") {
  CHECK(elide_to_width("short", 100, plain_width) == "short");
  CHECK(elide_to_width("model loaded; no CUDA", 100, plain_width) == "model l...");
  CHECK(elide_to_width("abc", 20, plain_width).empty());
  CHECK(elide_to_width("한국어", 70, plain_width) == "한...");   // cut between characters, never inside one
}

TEST_CASE("the layout report flags only what did not fit", "[ui][layout_report]") {
  LayoutReport report;
  report.clear(1024, 700);
  report.record("status line", 900, 1000);
  report.record("waste table: waste", 60, 40);
  report.record("exact", 100.3f, 100);
  const auto over = report.overflows();
  REQUIRE(over.size() == 1);
  CHECK(over[0].where == "waste table: waste");
  const std::string text = report.text();
  CHECK(text.rfind("window 1024x700\n", 0) == 0);
  CHECK(text.find("waste table: waste: needed 60.0 px, had 40.0 px OVERFLOW") != std::string::npos);
  CHECK(text.find("status line: needed 900.0 px, had 1000.0 px\n") != std::string::npos);
}
