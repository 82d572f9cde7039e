// Python's string operations on marked Text, by code point as Python counts: strip and split
// on Python's whitespace, case mapping, indexing and slicing. Each result keeps the content
// marks of the bytes it came from.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/jinja/value.h"

namespace kvdesk::jinja {

// Byte offsets of each code point's start, and the text's size last: [code points + 1].
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);
// Decodes the code point at s[i] (a malformed byte reads as itself) and advances i.
uint32_t next_code_point(std::string_view s, size_t& i);
void append_code_point(std::string& out, uint32_t cp);

// str.isspace() of one code point, as Python defines whitespace.
bool is_python_space(uint32_t cp);

// str.strip/lstrip/rstrip: chars empty means whitespace.
Text strip(const Text& t, std::string_view chars, bool left, bool right);
// str.split(sep, maxsplit): sep empty means runs of whitespace (and no empty parts).
std::vector<Text> split(const Text& t, std::string_view sep, int64_t maxsplit);
// str.replace(old, new, count); count < 0: all.
Text replace(const Text& t, std::string_view old_text, const Text& new_text, int64_t count);

enum class Case : uint8_t { Upper, Lower };
Text change_case(const Text& t, Case to);
// str.capitalize(): the first code point upper, the rest lower.
Text capitalize(const Text& t);
// str.title(): a letter after a non-letter upper, other letters lower.
Text python_title(const Text& t);

}  // namespace kvdesk::jinja
