// Server-sent events; see sse_reader.h.
#include "app/remote/sse_reader.h"

namespace kvdesk::remote {

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  std::vector<std::string> events;
  pending_.append(bytes);
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(pending_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    take_line(line, events);
  }
  pending_.erase(0, start);
  return events;
}

void SseReader::take_line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.rfind("data:", 0) != 0) return;
  line.remove_prefix(5);
  if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(line);
  has_data_ = true;
}

}  // namespace kvdesk::remote
