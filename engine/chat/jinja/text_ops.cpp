// Python string operations over UTF-8 with content marks; case mapping by ICU's simple
// per-code-point mappings (Python's full mappings differ only for a few letters such as ß).
#include "engine/chat/jinja/text_ops.h"

#include <unicode/uchar.h>

namespace kvdesk::jinja {

uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const int extra = b0 < 0x80 ? 0 : (b0 >> 5) == 6 ? 1 : (b0 >> 4) == 14 ? 2 : (b0 >> 3) == 30 ? 3 : -1;
  if (extra <= 0 || i + size_t(extra) >= s.size()) {
    ++i;
    return b0;
  }
  uint32_t cp = b0 & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    const auto b = static_cast<unsigned char>(s[i + size_t(k)]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += size_t(extra) + 1;
  return cp;
}

void append_code_point(std::string& out, uint32_t cp) {
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

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    next_code_point(s, i);
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_python_space(uint32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
  if (cp < 0x80) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

// Whether code point cp is stripped: one of chars, or whitespace when chars is empty.
bool strippable(uint32_t cp, std::string_view chars) {
  if (chars.empty()) return is_python_space(cp);
  for (size_t i = 0; i < chars.size();) {
    if (next_code_point(chars, i) == cp) return true;
  }
  return false;
}

}  // namespace

Text strip(const Text& t, std::string_view chars, bool left, bool right) {
  const std::vector<size_t> at = code_point_offsets(t.bytes);
  size_t begin = 0;
  size_t end = at.size() - 1;
  const auto cp_at = [&](size_t k) {
    size_t i = at[k];
    return next_code_point(t.bytes, i);
  };
  while (left && begin < end && strippable(cp_at(begin), chars)) ++begin;
  while (right && end > begin && strippable(cp_at(end - 1), chars)) --end;
  return t.substr(at[begin], at[end] - at[begin]);
}

std::vector<Text> split(const Text& t, std::string_view sep, int64_t maxsplit) {
  std::vector<Text> parts;
  const std::string& s = t.bytes;
  if (!sep.empty()) {
    size_t from = 0;
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      const size_t at = s.find(sep, from);
      if (at == std::string::npos) break;
      parts.push_back(t.substr(from, at - from));
      from = at + sep.size();
    }
    parts.push_back(t.substr(from, s.size() - from));
    return parts;
  }
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size()) {  // skip whitespace
      size_t k = j;
      if (!is_python_space(next_code_point(s, k))) break;
      j = k;
    }
    if (j >= s.size()) break;
    if (maxsplit >= 0 && int64_t(parts.size()) >= maxsplit) {
      Text rest = strip(t.substr(j, s.size() - j), "", false, true);
      parts.push_back(std::move(rest));
      return parts;
    }
    size_t end = j;
    while (end < s.size()) {
      size_t k = end;
      if (is_python_space(next_code_point(s, k))) break;
      end = k;
    }
    parts.push_back(t.substr(j, end - j));
    i = end;
  }
  return parts;
}

Text replace(const Text& t, std::string_view old_text, const Text& new_text, int64_t count) {
  Text out;
  const std::string& s = t.bytes;
  if (old_text.empty()) {
    // Python inserts the new text before every code point and at the end.
    const std::vector<size_t> at = code_point_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < at.size(); ++k) {
      if (count < 0 || done < count) {
        out.append(new_text);
        ++done;
      }
      out.append(t.substr(at[k], at[k + 1] - at[k]));
    }
    if (count < 0 || done < count) out.append(new_text);
    return out;
  }
  size_t from = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old_text, from);
    if (at == std::string::npos) break;
    out.append(t.substr(from, at - from));
    out.append(new_text);
    from = at + old_text.size();
    ++done;
  }
  out.append(t.substr(from, s.size() - from));
  return out;
}

namespace {

// Maps each code point with f, each output keeping the marks of the code point it came from.
template <typename F>
Text map_code_points(const Text& t, F&& f) {
  Text out;
  size_t index = 0;
  for (size_t i = 0; i < t.bytes.size();) {
    const size_t start = i;
    const uint32_t cp = next_code_point(t.bytes, i);
    std::string piece;
    append_code_point(piece, f(cp, index++));
    out.append_marked(piece, t.is_content(start));
  }
  return out;
}

uint32_t upper(uint32_t cp) { return uint32_t(u_toupper(UChar32(cp))); }
uint32_t lower(uint32_t cp) { return uint32_t(u_tolower(UChar32(cp))); }

}  // namespace

Text change_case(const Text& t, Case to) {
  return map_code_points(t, [to](uint32_t cp, size_t) { return to == Case::Upper ? upper(cp) : lower(cp); });
}

Text capitalize(const Text& t) {
  return map_code_points(t, [](uint32_t cp, size_t index) { return index == 0 ? upper(cp) : lower(cp); });
}

Text python_title(const Text& t) {
  bool previous_cased = false;
  return map_code_points(t, [&previous_cased](uint32_t cp, size_t) {
    const bool cased = u_isUAlphabetic(UChar32(cp)) != 0;
    const uint32_t out = cased ? (previous_cased ? lower(cp) : upper(cp)) : cp;
    previous_cased = cased;
    return out;
  });
}

}  // namespace kvdesk::jinja
