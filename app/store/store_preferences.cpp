// ConversationStore, the parts beside conversations: system-prompt presets, key/value settings,
// the bounded recent-models list and a conversation's saved KV cache (zstd-compressed when
// that makes it smaller, raw otherwise).
#include "app/store/conversation_store.h"

#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>

#include "engine/error.h"

namespace kvdesk::store {
namespace {

// Fast over strong: KV caches are large and compress modestly whatever the level.
constexpr int kZstdLevel = 1;

// The zstd frame of `bytes` (with a checksum, so damage is found on load), or nothing when
// compressing does not make them smaller.
std::optional<std::vector<uint8_t>> compress(std::span<const uint8_t> bytes) {
  const std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx) return std::nullopt;
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  std::vector<uint8_t> out(ZSTD_compressBound(bytes.size()));
  const size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(), bytes.data(), bytes.size());
  if (ZSTD_isError(n) || n >= bytes.size()) return std::nullopt;
  out.resize(n);
  return out;
}

Error damaged_kv(const std::string& where, const std::string& what) {
  return Error(where + ": the saved KV cache is damaged (" + what + "); clear it and save it again");
}

// The decoded size the zstd frame in `blob` records in its header (compress writes it), or
// UINT64_MAX when the header is missing or damaged: checked against the row's num_bytes before
// anything that large is allocated.
uint64_t frame_content_size(BlobReader& blob) {
  constexpr size_t kFrameHeaderMax = 18;   // zstd's largest frame header (zstd.h's static-only section)
  uint8_t header[kFrameHeaderMax];
  const size_t n = std::min(blob.size(), sizeof(header));
  blob.read(0, {header, n});
  const unsigned long long size = ZSTD_getFrameContentSize(header, n);
  return size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR ? UINT64_MAX : uint64_t(size);
}

// Pieces in which a stored frame is read from the database: small enough to stay in cache,
// large enough that SQLite's per-call cost does not show.
constexpr size_t kBlobPieceBytes = size_t(1) << 20;

// Decodes the zstd frame in `blob` into `out`, which must be exactly the decoded size; the frame
// is read a piece at a time, so the compressed value never sits in memory whole.
void decompress_blob(BlobReader& blob, std::span<uint8_t> out, const std::string& where) {
  const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) throw Error(where + ": out of memory while reading the saved KV cache");
  std::vector<uint8_t> piece(std::min(blob.size(), kBlobPieceBytes));
  ZSTD_outBuffer output{out.data(), out.size(), 0};
  size_t frame_left = 1;   // ZSTD_decompressStream's hint; 0 once the frame is complete
  for (size_t offset = 0; offset < blob.size();) {
    const size_t n = std::min(piece.size(), blob.size() - offset);
    blob.read(offset, {piece.data(), n});
    offset += n;
    ZSTD_inBuffer input{piece.data(), n, 0};
    while (input.pos < input.size) {
      if (frame_left == 0) throw damaged_kv(where, "bytes after the end of its frame");
      const size_t in_before = input.pos;
      const size_t out_before = output.pos;
      frame_left = ZSTD_decompressStream(dctx.get(), &output, &input);
      if (ZSTD_isError(frame_left)) throw damaged_kv(where, ZSTD_getErrorName(frame_left));
      if (input.pos == in_before && output.pos == out_before) throw damaged_kv(where, "wrong size");
    }
  }
  if (frame_left != 0 || output.pos != out.size()) throw damaged_kv(where, "wrong size");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Presets
// ---------------------------------------------------------------------------------------------

PresetId ConversationStore::create_preset(std::string_view name, std::string_view system_prompt) {
  Transaction tx(*db_);
  {
    Statement taken = db_->prepare("SELECT 1 FROM presets WHERE name = ?1");
    taken.bind(1, name);
    if (taken.step()) throw Error("a preset named '" + std::string(name) + "' already exists; choose another name");
  }
  db_->prepare("INSERT INTO presets (name, system_prompt) VALUES (?1, ?2)").bind(1, name).bind(2, system_prompt).run();
  const PresetId id = db_->last_insert_id();
  tx.commit();
  return id;
}

void ConversationStore::update_preset(PresetId id, std::string_view name, std::string_view system_prompt) {
  Transaction tx(*db_);
  {
    Statement taken = db_->prepare("SELECT 1 FROM presets WHERE name = ?1 AND id != ?2");
    taken.bind(1, name).bind(2, id);
    if (taken.step()) throw Error("a preset named '" + std::string(name) + "' already exists; choose another name");
  }
  db_->prepare("UPDATE presets SET name = ?2, system_prompt = ?3 WHERE id = ?1")
      .bind(1, id)
      .bind(2, name)
      .bind(3, system_prompt)
      .run();
  if (db_->changes() == 0) throw Error(path() + ": preset " + std::to_string(id) + " does not exist (deleted?)");
  tx.commit();
}

void ConversationStore::delete_preset(PresetId id) { db_->prepare("DELETE FROM presets WHERE id = ?1").bind(1, id).run(); }

std::vector<Preset> ConversationStore::list_presets() {
  Statement s = db_->prepare("SELECT id, name, system_prompt FROM presets ORDER BY name, id");
  std::vector<Preset> out;
  while (s.step()) out.push_back(Preset{.id = s.column_int(0), .name = s.column_text(1), .system_prompt = s.column_text(2)});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

std::optional<std::string> ConversationStore::setting(std::string_view key) {
  Statement s = db_->prepare("SELECT value FROM settings WHERE key = ?1");
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return s.column_text(0);
}

void ConversationStore::set_setting(std::string_view key, std::string_view value) {
  db_->prepare("INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
      .bind(1, key)
      .bind(2, value)
      .run();
}

void ConversationStore::erase_setting(std::string_view key) {
  db_->prepare("DELETE FROM settings WHERE key = ?1").bind(1, key).run();
}

// ---------------------------------------------------------------------------------------------
// Recent models. seq orders them (larger: opened later); last_opened is for display, and two
// models opened in the same millisecond would tie on it.
// ---------------------------------------------------------------------------------------------

void ConversationStore::note_model_opened(std::string_view path) {
  Transaction tx(*db_);
  db_->prepare("INSERT INTO recent_models (path, last_opened, seq) "
               "VALUES (?1, ?2, (SELECT coalesce(max(seq), 0) + 1 FROM recent_models)) "
               "ON CONFLICT(path) DO UPDATE SET last_opened = excluded.last_opened, seq = excluded.seq")
      .bind(1, path)
      .bind(2, unix_time_ms())
      .run();
  db_->prepare("DELETE FROM recent_models WHERE path NOT IN (SELECT path FROM recent_models ORDER BY seq DESC LIMIT ?1)")
      .bind(1, kMaxRecentModels)
      .run();
  tx.commit();
}

std::vector<RecentModel> ConversationStore::recent_models() {
  Statement s = db_->prepare("SELECT path, last_opened FROM recent_models ORDER BY seq DESC");
  std::vector<RecentModel> out;
  while (s.step()) out.push_back(RecentModel{.path = s.column_text(0), .last_opened_ms = s.column_int(1)});
  return out;
}

void ConversationStore::forget_recent_model(std::string_view path) {
  db_->prepare("DELETE FROM recent_models WHERE path = ?1").bind(1, path).run();
}

// ---------------------------------------------------------------------------------------------
// Saved KV cache
// ---------------------------------------------------------------------------------------------

void ConversationStore::save_kv(ConversationId id, std::string_view key, std::span<const uint8_t> bytes) {
  save_kv_capped(id, key, bytes, std::numeric_limits<int64_t>::max());
}

KvSaveResult ConversationStore::save_kv_capped(ConversationId id, std::string_view key,
                                               std::span<const uint8_t> bytes, int64_t max_total_bytes) {
  const std::optional<std::vector<uint8_t>> frame = compress(bytes);
  const std::span<const uint8_t> stored = frame ? std::span<const uint8_t>(*frame) : bytes;
  KvSaveResult result{.stored_bytes = int64_t(stored.size())};
  if (result.stored_bytes > max_total_bytes) return result;
  Transaction tx(*db_);
  require_conversation(id);
  std::vector<ConversationId> to_drop;
  {
    Statement others = db_->prepare("SELECT conversation_id, length(data) FROM conversation_kv "
                                    "WHERE conversation_id != ?1 ORDER BY saved_at, conversation_id");
    others.bind(1, id);
    std::vector<std::pair<ConversationId, int64_t>> oldest_first;
    int64_t others_bytes = 0;
    while (others.step()) {
      oldest_first.emplace_back(others.column_int(0), others.column_int(1));
      others_bytes += oldest_first.back().second;
    }
    for (const auto& [victim, victim_bytes] : oldest_first) {
      if (others_bytes <= max_total_bytes - result.stored_bytes) break;
      to_drop.push_back(victim);
      others_bytes -= victim_bytes;
    }
  }
  for (const ConversationId victim : to_drop) clear_kv(victim);
  db_->prepare("INSERT INTO conversation_kv (conversation_id, key, codec, num_bytes, saved_at, data) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(conversation_id) DO UPDATE SET key = excluded.key, "
               "codec = excluded.codec, num_bytes = excluded.num_bytes, saved_at = excluded.saved_at, data = excluded.data")
      .bind(1, id)
      .bind(2, key)
      .bind(3, frame ? "zstd" : "raw")
      .bind(4, int64_t(bytes.size()))
      .bind(5, unix_time_ms())
      .bind_blob_borrowed(6, stored)
      .run();
  tx.commit();
  result.saved = true;
  result.dropped = int64_t(to_drop.size());
  return result;
}

int64_t ConversationStore::total_kv_bytes() {
  return db_->query_int("SELECT coalesce(sum(length(data)), 0) FROM conversation_kv");
}

std::optional<std::vector<uint8_t>> ConversationStore::load_kv(ConversationId id, std::string_view key) {
  std::string codec;
  int64_t num_bytes = 0;
  {
    Statement s = db_->prepare("SELECT codec, num_bytes FROM conversation_kv WHERE conversation_id = ?1 AND key = ?2");
    s.bind(1, id).bind(2, key);
    if (!s.step()) return std::nullopt;
    codec = s.column_text(0);
    num_bytes = s.column_int(1);
  }
  const std::string where = path() + ": conversation " + std::to_string(id);
  BlobReader blob(*db_, "conversation_kv", "data", id);
  const bool zstd = codec == "zstd";
  if (num_bytes < 0 || uint64_t(num_bytes) != (zstd ? frame_content_size(blob) : blob.size())) {
    throw damaged_kv(where, "wrong size");
  }
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(size_t(num_bytes));
  } catch (const std::bad_alloc&) {
    throw Error(where + ": not enough memory to load its saved KV cache (" + std::to_string(num_bytes) + " bytes)");
  }
  if (zstd) {
    decompress_blob(blob, bytes, where);
  } else {
    blob.read(0, bytes);
  }
  return bytes;
}

std::optional<KvBlobInfo> ConversationStore::kv_info(ConversationId id) {
  Statement s = db_->prepare("SELECT key, num_bytes, length(data), saved_at FROM conversation_kv WHERE conversation_id = ?1");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return KvBlobInfo{
      .key = s.column_text(0),
      .num_bytes = s.column_int(1),
      .stored_bytes = s.column_int(2),
      .saved_at_ms = s.column_int(3),
  };
}

void ConversationStore::clear_kv(ConversationId id) {
  db_->prepare("DELETE FROM conversation_kv WHERE conversation_id = ?1").bind(1, id).run();
}

}  // namespace kvdesk::store
