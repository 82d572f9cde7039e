// A conversation's KV kept in the store between runs: the engine's ConversationKv as one blob
// under its identity (the store's key), within a cap on all saved KV together. Loading never
// throws for a damaged or foreign blob: it says why it is not usable, and the turn recomputes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "app/store/conversation_store.h"
#include "engine/engine_types.h"

namespace kvdesk::chat {

// The setting that caps the saved KV of all conversations together, in bytes as stored.
inline constexpr const char* kKvCapSetting = "saved_kv_max_bytes";
inline constexpr int64_t kDefaultKvCapBytes = int64_t(1) << 30;

// The setting when it is a positive whole number, else kDefaultKvCapBytes.
int64_t saved_kv_cap(store::ConversationStore& store);

// The blob: the block bytes, the tokens (i32), then a header: "kvdeskKV", version 2 (u32),
// token count (u64), block bytes (u64); numbers in host byte order, as the block bytes
// themselves are. The header comes last so the decoded buffer becomes the blocks in place.
std::vector<uint8_t> encode_kv(const ConversationKv& kv);
// Throws kvdesk::Error when `bytes` are not exactly one blob of that layout (or of version 1,
// which had the header and tokens first).
ConversationKv decode_kv(std::string identity, std::vector<uint8_t> bytes);

// A saved KV ready to import, or why there is none (nothing saved, a damaged blob).
struct SavedKv {
  std::optional<ConversationKv> kv;
  std::string why_not;
};
SavedKv load_saved_kv(store::ConversationStore& store, store::ConversationId id);
// load_saved_kv on a thread of its own, over its own read-only connection to the database file
// (SQLite's WAL lets it read while the caller's connection writes): opening a conversation can
// bring its KV back while the user reads and types, instead of when the next turn is sent.
std::future<SavedKv> load_saved_kv_async(std::filesystem::path database, store::ConversationId id);

// Saves kv for the conversation within saved_kv_cap (store::ConversationStore::save_kv_capped).
store::KvSaveResult save_conversation_kv(store::ConversationStore& store, store::ConversationId id, const ConversationKv& kv);

}  // namespace kvdesk::chat
