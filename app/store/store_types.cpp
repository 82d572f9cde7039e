// Names of roles and message statuses, as stored in the database and written in exported JSON,
// the stored form of a message's token ids, and a new conversation's title.
#include "app/store/store_types.h"

#include <array>
#include <chrono>
#include <cstring>
#include <utility>

#include "engine/error.h"

namespace kvdesk::store {
namespace {

constexpr size_t kTitleBytes = 40;

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The code point starting at `at` (a lead byte of valid UTF-8, as text cut at lead bytes has);
// 0 for anything else, which joins nothing.
char32_t code_point_at(const std::string& text, size_t at) {
  const auto byte = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0u; };
  const unsigned lead = byte(at);
  if (lead < 0x80) return lead;
  if ((lead & 0xE0) == 0xC0) return char32_t((lead & 0x1F) << 6 | (byte(at + 1) & 0x3F));
  if ((lead & 0xF0) == 0xE0) return char32_t((lead & 0x0F) << 12 | (byte(at + 1) & 0x3F) << 6 | (byte(at + 2) & 0x3F));
  if ((lead & 0xF8) == 0xF0) {
    return char32_t((lead & 0x07) << 18 | (byte(at + 1) & 0x3F) << 12 | (byte(at + 2) & 0x3F) << 6 | (byte(at + 3) & 0x3F));
  }
  return 0;
}

size_t previous_start(const std::string& text, size_t at) {
  do --at;
  while (at > 0 && is_continuation_byte(text[at]));
  return at;
}

// What continues the emoji before it: a zero-width joiner or what follows one, a variation
// selector, a skin tone, a keycap mark, a tag character.
bool joins_previous(char32_t c) {
  return c == 0x200D || c == 0xFE0F || c == 0xFE0E || c == 0x20E3 || (c >= 0x1F3FB && c <= 0x1F3FF) ||
         (c >= 0xE0020 && c <= 0xE007F);
}

bool is_regional_indicator(char32_t c) { return c >= 0x1F1E6 && c <= 0x1F1FF; }

// The longest prefix of `text` up to `limit` bytes that ends on a UTF-8 character boundary and
// splits no emoji sequence: not after a joiner, not before what joins the emoji before it, not
// inside a flag's pair of regional indicators.
size_t title_cut(const std::string& text, size_t limit) {
  size_t cut = limit;
  while (cut > 0 && is_continuation_byte(text[cut])) --cut;
  while (cut > 0) {
    const size_t before = previous_start(text, cut);
    const char32_t previous = code_point_at(text, before);
    if (previous == 0x200D || joins_previous(code_point_at(text, cut))) {
      cut = before;
      continue;
    }
    size_t indicators = 0;
    for (size_t at = cut; at > 0 && is_regional_indicator(code_point_at(text, previous_start(text, at)));) {
      at = previous_start(text, at);
      ++indicators;
    }
    if (indicators % 2 == 1 && is_regional_indicator(code_point_at(text, cut))) {
      cut = before;
      continue;
    }
    break;
  }
  return cut;
}

constexpr std::array<std::pair<Role, std::string_view>, 4> kRoles = {{
    {Role::System, "system"},
    {Role::User, "user"},
    {Role::Assistant, "assistant"},
    {Role::Tool, "tool"},
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

namespace {

constexpr char kIdsMagic[4] = {'k', 'v', 'T', '1'};
constexpr size_t kIdsOverhead = sizeof kIdsMagic + 2 * sizeof(uint32_t);

uint32_t fnv1a(const uint8_t* bytes, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 16777619u;
  return h;
}

}  // namespace

std::vector<uint8_t> encode_token_ids(const std::vector<int32_t>& ids) {
  const auto count = uint32_t(ids.size());
  const size_t id_bytes = ids.size() * sizeof(int32_t);
  std::vector<uint8_t> out(kIdsOverhead + id_bytes);
  std::memcpy(out.data(), kIdsMagic, sizeof kIdsMagic);
  std::memcpy(out.data() + sizeof kIdsMagic, &count, sizeof count);
  if (id_bytes > 0) std::memcpy(out.data() + sizeof kIdsMagic + sizeof count, ids.data(), id_bytes);
  const uint32_t hash = fnv1a(out.data() + sizeof kIdsMagic + sizeof count, id_bytes);
  std::memcpy(out.data() + out.size() - sizeof hash, &hash, sizeof hash);
  return out;
}

std::vector<int32_t> decode_token_ids(std::span<const uint8_t> bytes) {
  if (bytes.size() < kIdsOverhead || std::memcmp(bytes.data(), kIdsMagic, sizeof kIdsMagic) != 0) {
    throw Error("not a token id blob");
  }
  uint32_t count = 0;
  uint32_t hash = 0;
  std::memcpy(&count, bytes.data() + sizeof kIdsMagic, sizeof count);
  std::memcpy(&hash, bytes.data() + bytes.size() - sizeof hash, sizeof hash);
  const size_t id_bytes = bytes.size() - kIdsOverhead;
  if (id_bytes != size_t(count) * sizeof(int32_t)) throw Error("truncated or wrong size");
  const uint8_t* first = bytes.data() + sizeof kIdsMagic + sizeof count;
  if (fnv1a(first, id_bytes) != hash) throw Error("checksum mismatch");
  std::vector<int32_t> ids(count);
  if (id_bytes > 0) std::memcpy(ids.data(), first, id_bytes);
  return ids;
}

int64_t unix_time_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string title_from(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > kTitleBytes) line = line.substr(0, title_cut(line, kTitleBytes)) + "...";
  return line.empty() ? kNewChatTitle : line;
}

}  // namespace kvdesk::store
