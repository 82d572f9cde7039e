// Parsing chat traces (see trace.h).
#include "app/replay/trace.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

#include "engine/error.h"

namespace kvdesk {

std::vector<TraceConversation> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the trace file");
  return parse_trace(in, path);
}

std::vector<TraceConversation> parse_trace(std::istream& in, const std::string& name) {
  std::vector<TraceConversation> conversations;
  std::map<std::string, size_t> index;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = name + ":" + std::to_string(number) + ": ";
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      TraceTurn t;
      const std::string conversation = j.at("conversation").get<std::string>();
      t.user = j.at("user").get<std::string>();
      t.system = j.value("system", "");
      t.max_tokens = j.value("max_tokens", 64);
      t.temperature = j.value("temperature", 0.0f);
      const bool first = index.find(conversation) == index.end();
      t.start_ms = first ? j.value("arrival_ms", 0.0) : j.value("after_ms", 0.0);
      if (t.max_tokens < 1 || t.temperature < 0 || t.start_ms < 0) {
        throw Error("max_tokens, temperature or a time is out of range");
      }
      if (first) {
        index[conversation] = conversations.size();
        conversations.push_back(TraceConversation{conversation, {}});
      }
      conversations[index[conversation]].turns.push_back(t);
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + "bad trace line: " + e.what());
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
  }
  if (conversations.empty()) throw Error(name + ": the trace has no turns");
  return conversations;
}

}  // namespace kvdesk
