// Chat traces: a workload as JSON lines, one turn per line. A conversation's first turn
// arrives at arrival_ms; each later turn arrives after_ms after the previous answer ended and
// carries the whole history (as a real chat does). Besides sending a new user message, a turn
// can branch as the app does: regenerate the last answer, or edit an earlier user message (by
// its 0-based number among the user messages of the conversation's current branch) and resend.
//   {"conversation": "c1", "system": "...", "user": "...", "max_tokens": 64, "temperature": 0, "arrival_ms": 0}
//   {"conversation": "c1", "user": "...", "max_tokens": 64, "after_ms": 500}
//   {"conversation": "c1", "regenerate": true, "max_tokens": 64}
//   {"conversation": "c1", "edit": 0, "user": "...", "max_tokens": 64}
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace kvdesk {

enum class TurnKind : uint8_t {
  Send,         // a new user message after the last answer
  Regenerate,   // the last answer again (its user message stays)
  Edit,         // user message number edit_user replaced by `user`; what followed it is left behind
};
const char* turn_kind_name(TurnKind kind);   // "send", "regenerate", "edit"

// Invariant (checked when parsed): a conversation's first turn is a Send; Regenerate and Edit
// follow an answer; edit_user names a user message of the branch the turn continues.
struct TraceTurn {
  TurnKind kind = TurnKind::Send;
  int32_t edit_user = -1;   // Edit: which user message of the current branch, from 0
  std::string user;         // Send, Edit: the user message
  std::string system;
  int32_t max_tokens = 64;
  float temperature = 0;
  double start_ms = 0;   // first turns: arrival_ms; later turns: after_ms
};

struct TraceConversation {
  std::string name;
  std::vector<TraceTurn> turns;
};

// Throws kvdesk::Error naming the file and line of a bad entry.
std::vector<TraceConversation> read_trace(const std::string& path);
std::vector<TraceConversation> parse_trace(std::istream& in, const std::string& name);

}  // namespace kvdesk
