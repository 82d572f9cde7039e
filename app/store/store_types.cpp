// Names of roles and message statuses, as stored in the database and written in exported JSON.
#include "app/store/store_types.h"

#include <array>
#include <chrono>
#include <utility>

namespace kvdesk::store {
namespace {

constexpr std::array<std::pair<Role, std::string_view>, 3> kRoles = {{
    {Role::System, "system"},
    {Role::User, "user"},
    {Role::Assistant, "assistant"},
}};

constexpr std::array<std::pair<MessageStatus, std::string_view>, 5> kStatuses = {{
    {MessageStatus::Complete, "complete"},
    {MessageStatus::Streaming, "streaming"},
    {MessageStatus::Stopped, "stopped"},
    {MessageStatus::Failed, "failed"},
    {MessageStatus::Interrupted, "interrupted"},
}};

template <class Enum, size_t N>
std::string_view name_of(const std::array<std::pair<Enum, std::string_view>, N>& table, Enum value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return "?";
}

template <class Enum, size_t N>
std::optional<Enum> parse(const std::array<std::pair<Enum, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [e, n] : table) {
    if (n == name) return e;
  }
  return std::nullopt;
}

}  // namespace

std::string_view role_name(Role role) { return name_of(kRoles, role); }
std::optional<Role> parse_role(std::string_view name) { return parse(kRoles, name); }
std::string_view status_name(MessageStatus status) { return name_of(kStatuses, status); }
std::optional<MessageStatus> parse_status(std::string_view name) { return parse(kStatuses, name); }

int64_t unix_time_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace kvdesk::store
