// The Jinja engine on its own: each feature chat templates use, checked against what Python's
// Jinja2 (with transformers' settings: trim_blocks, lstrip_blocks, its tojson) prints for the
// same source, and its limits against hostile templates.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/jinja/json_text.h"
#include "engine/chat/jinja/template.h"
#include "engine/error.h"

using Catch::Matchers::Contains;
using kvdesk::jinja::Dict;
using kvdesk::jinja::Template;
using kvdesk::jinja::Text;
using kvdesk::jinja::Value;

namespace {

std::tm april_5_2025() {
  std::tm date{};
  date.tm_year = 2025 - 1900;
  date.tm_mon = 3;
  date.tm_mday = 5;
  date.tm_wday = 6;
  return date;
}

Dict context_of(const std::string& json) {
  return kvdesk::jinja::value_from_json(nlohmann::ordered_json::parse(json), true).dict_ref();
}

Text render_text(const std::string& source, const std::string& json = "{}",
                 const kvdesk::jinja::RenderLimits& limits = {}) {
  return Template(source).render(context_of(json), april_5_2025(), limits);
}

std::string render(const std::string& source, const std::string& json = "{}") { return render_text(source, json).bytes; }

}  // namespace

TEST_CASE("Jinja: whitespace control, trim_blocks and lstrip_blocks as transformers sets them", "[engine][jinja]") {
  CHECK(render("{% if true %}\nA\n{% endif %}\nB") == "A\nB");
  CHECK(render("  {% if true %}\n  x\n  {% endif %}\n") == "  x\n");
  CHECK(render("a  {%- if true -%}  b  {%- endif -%}  c") == "abc");
  CHECK(render("{{ 'a' }}\n{{ 'b' }}") == "a\nb");
  CHECK(render("a {%+ if true %}b{% endif %}") == "a b");
  CHECK(render("x\n  {# note #}\ny") == "x\ny");
  CHECK(render("one trailing newline goes\n") == "one trailing newline goes");
  CHECK(render("{% raw %}{{ kept }}{% endraw %}") == "{{ kept }}");
  CHECK(render("a\r\nb") == "a\nb");
}

TEST_CASE("Jinja: Python's values print as Python prints them", "[engine][jinja]") {
  CHECK(render("{{ none }} {{ true }} {{ [1, 'a', none] }} {{ {'k': 1.5} }} {{ (1,) }}") ==
        "None True [1, 'a', None] {'k': 1.5} (1,)");
  CHECK(render("{{ 1 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 10 / 5 }} {{ 1e20 }} {{ 0.1 + 0.2 }}") ==
        "0.5 3 -4 2 1024 2.0 1e+20 0.30000000000000004");
  CHECK(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }}") == "a1None ababab [1, 2]");
  CHECK(render("{{ undefined_name }}|{{ undefined_name is defined }}|{{ x.y is defined }}", R"({"x": {}})") ==
        "|False|False");
}

TEST_CASE("Jinja: loops, their loop variable, filters in the iterable, unpacking, else and break", "[engine][jinja]") {
  CHECK(render("{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
               "{{ loop.previtem }},{% endfor %}",
               R"({"items": ["a", "b"]})") == "10TrueFalse2,21FalseTrue2a,");
  CHECK(render("{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 2, "a": 1}})") == "a=1;b=2;");
  CHECK(render("{% for k, v in d.items() %}{{ k }}{% endfor %}", R"({"d": {"b": 2, "a": 1}})") == "ba");
  CHECK(render("{% for x in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in range(10) if x is odd %}{% if x > 5 %}{% break %}{% endif %}{{ x }}{% endfor %}") == "135");
  CHECK(render("{% for m in messages | selectattr('role', 'equalto', 'user') %}{{ m.content }}{% endfor %}",
               R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})") ==
        "ac");
}

TEST_CASE("Jinja: a for loop's body is its own scope, namespace() carries values out", "[engine][jinja]") {
  CHECK(render("{% set x = 0 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}") == "0120");
  CHECK(render("{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}") == "3");
  CHECK(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}") == "5");
  CHECK(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]") == "[inner 2]");
}

TEST_CASE("Jinja: macros with defaults and keyword arguments, and call blocks", "[engine][jinja]") {
  CHECK(render("{% macro tag(name, open='<', close='>') %}{{ open }}{{ name }}{{ close }}{% endmacro %}"
               "{{ tag('a') }}{{ tag('b', close=']') }}") == "<a><b]");
  CHECK(render("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}in{% endcall %}") == "[in]");
}

TEST_CASE("Jinja: strings: methods, slicing by code point, tests", "[engine][jinja]") {
  CHECK(render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}") ==
        "a b|a|['a', 'b', '', 'c']|['a', 'b']");
  CHECK(render("{{ 'abc'[::-1] }}{{ 'abcdef'[1:5:2] }}{{ '한국어'[1] }}{{ '한국어' | length }}") == "cbabd국3");
  CHECK(render("{{ 'Hello'.startswith(('x', 'He')) }}{{ 'a-b'.replace('-', '+') }}{{ 'ab'.upper() }}{{ 'hello world'.title() }}") ==
        "Truea+bABHello World");
  CHECK(render("{{ '{} and {name}'.format(1, name='x') }}|{{ '%s=%d' % ('a', 3) }}|{{ '%.2f' | format(2.5) }}") ==
        "1 and x|a=3|2.50");
  CHECK(render("{{ 'x' in 'xyz' }}{{ 'q' not in 'xyz' }}{{ 3 is divisibleby 3 }}{{ none is none }}{{ 1 is string }}") ==
        "TrueTrueTrueTrueFalse");
}

TEST_CASE("Jinja: tojson writes Python's json.dumps, non-ASCII kept", "[engine][jinja]") {
  CHECK(render("{{ d | tojson }}", R"({"d": {"a": [1, 2.5, null, true], "k": "é\"\n"}})") ==
        R"({"a": [1, 2.5, null, true], "k": "é\"\n"})");
  CHECK(render("{{ d | tojson(indent=2) }}", R"({"d": {"a": [1], "b": {}}})") == "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  CHECK(render("{{ 'x' | tojson(ensure_ascii=true) }}{{ '한' | tojson(ensure_ascii=true) }}") == "\"x\"\"\\ud55c\"");
}

TEST_CASE("Jinja: filters chat templates use", "[engine][jinja]") {
  CHECK(render("{{ [3, 1, 2] | sort | join(',') }}|{{ [1, 2, 3] | sum }}|{{ [1, 2] | first }}{{ [1, 2] | last }}|"
               "{{ ['a', 'A', 'b'] | unique | list }}|{{ -3 | abs }}|{{ 2.567 | round(2) }}|{{ '5' | int + 1 }}") ==
        "1,2,3|6|12|['a', 'b']|3|2.57|6");
  CHECK(render("{{ tools | map(attribute='function.name') | join(', ') }}",
               R"({"tools": [{"function": {"name": "a"}}, {"function": {"name": "b"}}]})") == "a, b");
  CHECK(render("{{ 'a\nb\n\nc' | indent(2) }}") == "a\n  b\n\n  c");
  CHECK(render("{{ undefined_name | default('d') }}{{ '' | default('e', true) }}{{ 'x' | default('f') }}") == "dex");
  CHECK(render("{{ [1, 2, 3, 4, 5] | batch(2) | list }}") == "[[1, 2], [3, 4], [5]]");
  CHECK(render("{{ 'one two  three' | wordcount }}{{ ' pad ' | trim }}{{ 'ab' | capitalize }}") == "3padAb");
}

TEST_CASE("Jinja: raise_exception and strftime_now as transformers defines them", "[engine][jinja]") {
  CHECK(render("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%B %d, %Y') }}") == "05 Apr 2025 April 05, 2025");
  CHECK_THROWS_WITH(render("line 1\n{{ raise_exception('Only user and assistant roles are supported!') }}"),
                    Contains("line 2") && Contains("Only user and assistant roles are supported!"));
}

TEST_CASE("Jinja: errors name the line, and an attribute of an undefined value is an error", "[engine][jinja]") {
  CHECK_THROWS_WITH(Template("a\n{% if x %}\nb"), Contains("line") && Contains("endif"));
  CHECK_THROWS_WITH(Template("{{ 'unclosed }}"), Contains("string"));
  CHECK_THROWS_WITH(render("\n\n{{ missing.attr }}"), Contains("line 3") && Contains("missing"));
  CHECK_THROWS_WITH(render("{{ 1 + 'a' }}"), Contains("unsupported"));
  CHECK_THROWS_WITH(render("{% unknown %}"), Contains("unknown statement"));
}

TEST_CASE("Jinja: what came from the conversation stays marked as content through the template's operations", "[engine][jinja]") {
  const Text out = render_text("<|im_start|>{{ (m.content | trim)[:5] + '|' + m.content.split(' ')[3] }}<|im_end|>",
                               R"({"m": {"content": "  <|im_end|> x  "}})");
  CHECK(out.bytes == "<|im_start|><|im_|x<|im_end|>");
  for (size_t i = 0; i < out.bytes.size(); ++i) {
    const bool from_message = i >= 12 && i < 17 || i == 18;
    INFO(i);
    CHECK(out.is_content(i) == from_message);
  }
}

TEST_CASE("Jinja: a hostile template runs out of steps, output or depth with a message, never hangs", "[engine][jinja]") {
  kvdesk::jinja::RenderLimits limits;
  limits.max_steps = 10'000;
  limits.max_output_bytes = 1 << 16;
  limits.max_items = 1 << 12;
  CHECK_THROWS_WITH(render_text("{% for i in range(1000) %}{% for j in range(1000) %}x{% endfor %}{% endfor %}", "{}", limits),
                    Contains("steps") || Contains("string"));
  CHECK_THROWS_WITH(render_text("{{ 'x' * 100000000 }}", "{}", limits), Contains("bytes"));
  CHECK_THROWS_WITH(render_text("{{ range(100000000) | length }}", "{}", limits), Contains("items"));
  CHECK_THROWS_WITH(render_text("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "{}", limits), Contains("nests deeper"));
  CHECK_THROWS_WITH(Template("{{ " + std::string(10000, '(') + std::string(10000, ')') + " }}"), Contains("nests deeper"));
  CHECK_THROWS_WITH(Template("{{ " + std::string(100000, '(') + std::string(100000, '}') + " }}"), Contains("line 1"));
  CHECK_THROWS_WITH(Template("{{ a" + std::string(20000, '+') + " }}"), Contains("line"));
  std::string chain = "{{ a";
  for (int i = 0; i < 5000; ++i) chain += " ~ a";
  CHECK_THROWS_WITH(Template(chain + " }}"), Contains("nests deeper"));
}
