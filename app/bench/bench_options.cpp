// Knob names and values (see bench_options.h).
#include "app/bench/bench_options.h"

#include <algorithm>
#include <thread>

#include "engine/error.h"

namespace kvdesk::bench {
namespace {

constexpr Knob kKnobs[] = {Knob::KvType,    Knob::BlockSize,   Knob::KvRecent, Knob::PrefixCache,
                           Knob::ChunkSize, Knob::PreemptMode, Knob::Threads,  Knob::WeightLayout};

std::string kv_type_names() {
  std::string names;
  for (KvType t : all_kv_types()) names += std::string(names.empty() ? "" : ", ") + kv_type_name(t);
  return names;
}

int32_t parse_int(const std::string& value, int32_t lo, int32_t hi, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < lo || v > hi) {
    throw Error(what + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], not '" +
                value + "'");
  }
  return int32_t(v);
}

bool parse_on_off(const std::string& value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  throw Error("prefix-cache takes on or off, not '" + value + "'");
}

}  // namespace

std::span<const Knob> all_knobs() { return kKnobs; }

const char* knob_name(Knob knob) {
  switch (knob) {
    case Knob::KvType: return "kv-type";
    case Knob::BlockSize: return "block-size";
    case Knob::KvRecent: return "kv-recent";
    case Knob::PrefixCache: return "prefix-cache";
    case Knob::ChunkSize: return "chunk-size";
    case Knob::PreemptMode: return "preempt-mode";
    case Knob::Threads: return "threads";
    case Knob::WeightLayout: return "weight-layout";
  }
  return "?";
}

std::optional<Knob> knob_from_name(std::string_view name) {
  for (Knob k : kKnobs) {
    if (name == knob_name(k)) return k;
  }
  return std::nullopt;
}

KvType parse_kv_type(const std::string& name) {
  if (const std::optional<KvType> type = kv_type_from_name(name)) return *type;
  throw Error("unknown KV type '" + name + "' (choose one of " + kv_type_names() + ")");
}

std::vector<KvType> parse_kv_types(const std::vector<std::string>& names) {
  if (names.empty() || (names.size() == 1 && names[0] == "all")) {
    return {all_kv_types().begin(), all_kv_types().end()};
  }
  std::vector<KvType> types;
  for (const std::string& n : names) types.push_back(parse_kv_type(n));
  return types;
}

void set_knob(Knobs& knobs, Knob knob, const std::string& value) {
  switch (knob) {
    case Knob::KvType: knobs.kv_type = parse_kv_type(value); return;
    case Knob::BlockSize: {
      const int32_t b = parse_int(value, 1, 1024, "block-size");
      if (b & (b - 1)) throw Error("block-size must be a power of two, not " + value);
      knobs.block_size = b;
      return;
    }
    case Knob::KvRecent: knobs.kv_recent = parse_int(value, 0, 4096, "kv-recent"); return;
    case Knob::PrefixCache: knobs.prefix_cache = parse_on_off(value); return;
    case Knob::ChunkSize: knobs.chunk_size = parse_int(value, 1, 1 << 16, "chunk-size"); return;
    case Knob::PreemptMode:
      if (value != "recompute" && value != "swap")
        throw Error("preempt-mode takes recompute or swap, not '" + value + "'");
      knobs.preempt_mode = value == "swap" ? PreemptMode::Swap : PreemptMode::Recompute;
      return;
    case Knob::Threads: knobs.threads = parse_int(value, 1, 1024, "threads"); return;
    case Knob::WeightLayout:
      if (value != "cpu" && value != "ggml") throw Error("weight-layout takes cpu or ggml, not '" + value + "'");
      knobs.cpu_layouts = value == "cpu";
      return;
  }
}

std::string knob_value(const Knobs& knobs, Knob knob) {
  switch (knob) {
    case Knob::KvType: return kv_type_name(knobs.kv_type);
    case Knob::BlockSize: return std::to_string(knobs.block_size);
    case Knob::KvRecent: return std::to_string(knobs.kv_recent);
    case Knob::PrefixCache: return knobs.prefix_cache ? "on" : "off";
    case Knob::ChunkSize: return std::to_string(knobs.chunk_size);
    case Knob::PreemptMode: return preempt_mode_name(knobs.preempt_mode);
    case Knob::Threads: return std::to_string(resolve_threads(knobs.threads));
    case Knob::WeightLayout: return knobs.cpu_layouts ? "cpu" : "ggml";
  }
  return "?";
}

nlohmann::json knobs_json(const Knobs& knobs) {
  nlohmann::json j = nlohmann::json::object();
  for (Knob k : kKnobs) j[knob_name(k)] = knob_value(knobs, k);
  return j;
}

int32_t resolve_threads(int32_t requested) {
  if (requested > 0) return requested;
  return std::max(1, int32_t(std::thread::hardware_concurrency()));
}

}  // namespace kvdesk::bench
