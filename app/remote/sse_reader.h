// Server-sent events, read incrementally: bytes arrive in arbitrary pieces; each event's
// `data:` lines (joined by newlines) come out once its blank line has arrived. Comment lines
// (`:` first, e.g. keep-alives) and other fields are ignored.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::remote {

class SseReader {
 public:
  // Appends bytes; returns the data of every event completed by them.
  std::vector<std::string> feed(std::string_view bytes);

 private:
  void take_line(std::string_view line, std::vector<std::string>& events);

  std::string pending_;   // bytes after the last complete line
  std::string data_;      // the current event's data so far
  bool has_data_ = false;
};

}  // namespace kvdesk::remote
