// StopScanner: finds the first stop string in text that arrives in pieces (streamed tokens).
// Text that could still be the beginning of a stop string is held back until a later piece
// decides it, so nothing past a stop string is ever handed out, even across token borders.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::server {

class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops);

  // Adds a piece; returns the text that is now safe to send. Once a stop string is found it
  // returns the text before it and stopped() turns true; later pieces return "".
  std::string feed(std::string_view piece);
  // At the end of the answer: the text still held back ("" after a stop).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  // Length of the longest tail of held_ that is a proper prefix of some stop string.
  size_t undecided_tail() const;

  std::vector<std::string> stops_;   // non-empty strings
  std::string held_;                 // text received but not yet handed out
  bool stopped_ = false;
};

}  // namespace kvdesk::server
