// Saved conversation KV: the blob layout, and loading and saving it through the store.
#include "app/chat/saved_kv.h"

#include <charconv>
#include <cstring>

#include "engine/error.h"

namespace kvdesk::chat {
namespace {

constexpr char kMagic[8] = {'k', 'v', 'd', 'e', 's', 'k', 'K', 'V'};
// Version 1 put the header and tokens first; version 2 puts the block bytes first and the
// header last, so loading keeps the decoded buffer as the blocks (no copy of megabytes).
constexpr uint32_t kHeaderFirstVersion = 1;
constexpr uint32_t kVersion = 2;
constexpr size_t kHeaderBytes = sizeof kMagic + sizeof(uint32_t) + 2 * sizeof(uint64_t);

// Copies n bytes to out at offset and returns the offset after them.
size_t put(std::vector<uint8_t>& out, size_t offset, const void* bytes, size_t n) {
  if (n > 0) std::memcpy(out.data() + offset, bytes, n);
  return offset + n;
}

template <typename T>
T read_at(std::span<const uint8_t> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

// The counts a header at `at` declares, checked against the body they describe.
struct Counts {
  uint64_t num_tokens = 0;
  uint64_t num_block_bytes = 0;
};
Counts read_counts(std::span<const uint8_t> bytes, size_t at) {
  const Counts c{read_at<uint64_t>(bytes, at + sizeof kMagic + sizeof(uint32_t)),
                 read_at<uint64_t>(bytes, at + sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t))};
  const size_t body = bytes.size() - kHeaderBytes;
  if (c.num_tokens > body / sizeof(int32_t) || c.num_tokens * sizeof(int32_t) + c.num_block_bytes != body) {
    throw Error("the saved KV is truncated or has a wrong size");
  }
  return c;
}

bool has_header_at(std::span<const uint8_t> bytes, size_t at, uint32_t version) {
  return std::memcmp(bytes.data() + at, kMagic, sizeof kMagic) == 0 &&
         read_at<uint32_t>(bytes, at + sizeof kMagic) == version;
}

std::vector<int32_t> read_tokens(std::span<const uint8_t> bytes, size_t at, uint64_t num_tokens) {
  std::vector<int32_t> tokens(num_tokens);
  std::memcpy(tokens.data(), bytes.data() + at, num_tokens * sizeof(int32_t));
  return tokens;
}

}  // namespace

int64_t saved_kv_cap(store::ConversationStore& store) {
  const std::optional<std::string> text = store.setting(kKvCapSetting);
  int64_t cap = 0;
  if (!text || std::from_chars(text->data(), text->data() + text->size(), cap).ec != std::errc() || cap <= 0) {
    return kDefaultKvCapBytes;
  }
  return cap;
}

std::vector<uint8_t> encode_kv(const ConversationKv& kv) {
  const uint64_t num_tokens = kv.tokens.size();
  const uint64_t num_block_bytes = kv.blocks.size();
  std::vector<uint8_t> out(num_block_bytes + num_tokens * sizeof(int32_t) + kHeaderBytes);
  size_t at = put(out, 0, kv.blocks.data(), num_block_bytes);
  at = put(out, at, kv.tokens.data(), num_tokens * sizeof(int32_t));
  at = put(out, at, kMagic, sizeof kMagic);
  at = put(out, at, &kVersion, sizeof kVersion);
  at = put(out, at, &num_tokens, sizeof num_tokens);
  put(out, at, &num_block_bytes, sizeof num_block_bytes);
  return out;
}

ConversationKv decode_kv(std::string identity, std::vector<uint8_t> bytes) {
  const std::span<const uint8_t> view(bytes);
  ConversationKv kv;
  kv.identity = std::move(identity);
  if (bytes.size() >= kHeaderBytes && has_header_at(view, bytes.size() - kHeaderBytes, kVersion)) {
    const Counts c = read_counts(view, bytes.size() - kHeaderBytes);
    kv.tokens = read_tokens(view, c.num_block_bytes, c.num_tokens);
    bytes.resize(c.num_block_bytes);   // shrinking keeps the buffer: the blocks stay where they were decoded
    kv.blocks = std::move(bytes);
    return kv;
  }
  if (bytes.size() >= kHeaderBytes && has_header_at(view, 0, kHeaderFirstVersion)) {
    const Counts c = read_counts(view, 0);
    kv.tokens = read_tokens(view, kHeaderBytes, c.num_tokens);
    kv.blocks.assign(bytes.begin() + ptrdiff_t(kHeaderBytes + c.num_tokens * sizeof(int32_t)), bytes.end());
    return kv;
  }
  if (bytes.size() >= kHeaderBytes && (std::memcmp(view.data(), kMagic, sizeof kMagic) == 0 ||
                                       std::memcmp(view.data() + bytes.size() - kHeaderBytes, kMagic, sizeof kMagic) == 0)) {
    throw Error("the saved KV has an unknown layout version");
  }
  throw Error("the saved KV is not a kvdesk KV blob");
}

SavedKv load_saved_kv(store::ConversationStore& store, store::ConversationId id) {
  try {
    const std::optional<store::KvBlobInfo> info = store.kv_info(id);
    if (!info) return {std::nullopt, "no saved KV"};
    const std::optional<std::vector<uint8_t>> bytes = store.load_kv(id, info->key);
    if (!bytes) return {std::nullopt, "no saved KV"};
    return {decode_kv(info->key, std::move(*bytes)), ""};
  } catch (const std::exception& e) {   // a damaged blob: kvdesk::Error, or a size too big to allocate
    return {std::nullopt, e.what()};
  }
}

std::future<SavedKv> load_saved_kv_async(std::filesystem::path database, store::ConversationId id) {
  return std::async(std::launch::async, [database = std::move(database), id]() -> SavedKv {
    try {
      store::ConversationStore reader = store::ConversationStore::open_read_only(database, {.verify_on_open = false});
      return load_saved_kv(reader, id);
    } catch (const std::exception& e) {   // the file went away or is locked: the turn recomputes
      return {std::nullopt, e.what()};
    }
  });
}

store::KvSaveResult save_conversation_kv(store::ConversationStore& store, store::ConversationId id, const ConversationKv& kv) {
  return store.save_kv_capped(id, kv.identity, encode_kv(kv), saved_kv_cap(store));
}

}  // namespace kvdesk::chat
