// Saved conversation KV: the blob layout, and loading and saving it through the store.
#include "app/chat/saved_kv.h"

#include <charconv>
#include <cstring>

#include "engine/error.h"

namespace kvdesk::chat {
namespace {

constexpr char kMagic[8] = {'k', 'v', 'd', 'e', 's', 'k', 'K', 'V'};
constexpr uint32_t kVersion = 1;
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
  std::vector<uint8_t> out(kHeaderBytes + num_tokens * sizeof(int32_t) + num_block_bytes);
  size_t at = put(out, 0, kMagic, sizeof kMagic);
  at = put(out, at, &kVersion, sizeof kVersion);
  at = put(out, at, &num_tokens, sizeof num_tokens);
  at = put(out, at, &num_block_bytes, sizeof num_block_bytes);
  at = put(out, at, kv.tokens.data(), num_tokens * sizeof(int32_t));
  put(out, at, kv.blocks.data(), num_block_bytes);
  return out;
}

ConversationKv decode_kv(std::string identity, std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    throw Error("the saved KV is not a kvdesk KV blob");
  }
  if (read_at<uint32_t>(bytes, sizeof kMagic) != kVersion) throw Error("the saved KV has an unknown layout version");
  const auto num_tokens = read_at<uint64_t>(bytes, sizeof kMagic + sizeof(uint32_t));
  const auto num_block_bytes = read_at<uint64_t>(bytes, sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t));
  const size_t body = bytes.size() - kHeaderBytes;
  if (num_tokens > body / sizeof(int32_t) || num_tokens * sizeof(int32_t) + num_block_bytes != body) {
    throw Error("the saved KV is truncated or has a wrong size");
  }
  ConversationKv kv;
  kv.identity = std::move(identity);
  kv.tokens.resize(num_tokens);
  std::memcpy(kv.tokens.data(), bytes.data() + kHeaderBytes, num_tokens * sizeof(int32_t));
  const size_t blocks_at = kHeaderBytes + num_tokens * sizeof(int32_t);
  kv.blocks.assign(bytes.begin() + ptrdiff_t(blocks_at), bytes.end());
  return kv;
}

SavedKv load_saved_kv(store::ConversationStore& store, store::ConversationId id) {
  try {
    const std::optional<store::KvBlobInfo> info = store.kv_info(id);
    if (!info) return {std::nullopt, "no saved KV"};
    const std::optional<std::vector<uint8_t>> bytes = store.load_kv(id, info->key);
    if (!bytes) return {std::nullopt, "no saved KV"};
    return {decode_kv(info->key, *bytes), ""};
  } catch (const std::exception& e) {   // a damaged blob: kvdesk::Error, or a size too big to allocate
    return {std::nullopt, e.what()};
  }
}

store::KvSaveResult save_conversation_kv(store::ConversationStore& store, store::ConversationId id, const ConversationKv& kv) {
  return store.save_kv_capped(id, kv.identity, encode_kv(kv), saved_kv_cap(store));
}

}  // namespace kvdesk::chat
