// kvdesk-cli info: what a model file is and what its KV cache costs for each KV storage type:
// bytes per token (layers x 2 x kv_heads x head_dim x bytes, plus quantized types' scales),
// what each type costs the model itself (KL divergence from f32 KV and top-1 agreement of its
// next-token distributions on the engine's built-in text, engine/quality/kv_quality.h: measured
// here, by default only for models small enough to measure in seconds), blocks in a memory
// budget and sequences of a context length that fit, beside the same model with one KV head per
// query head (MHA), so the saving of grouped-query attention shows.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "app/cli/cli_common.h"
#include "app/command_line.h"
#include "engine/chat/chat_template.h"
#include "engine/error.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/kv/recent_rows.h"
#include "engine/model/model_info.h"
#include "engine/quality/kv_quality.h"
#include "kernels/dot.h"
#include "kernels/ops.h"

namespace kvdesk::cli {
namespace {

// Weights up to this size measure KV quality by default (stories260K: well under a second; a
// 1 GiB model on a few cores: about a minute).
constexpr uint64_t kAutoQualityWeightBytes = uint64_t(1) << 30;

struct InfoArgs {
  ModelArgs model;
  int32_t context = 0;          // 0: the model's context length
  double budget_mib = 1024;
  std::string kv_quality = "auto";   // on, off, or auto: on for weights up to kAutoQualityWeightBytes
  bool json = false;
};

// Every type's KV quality, with what measuring it took; or why it was not measured.
struct QualityReport {
  std::vector<KvQuality> types;   // [types] in all_kv_types() order; empty: not measured
  double seconds = 0;
  std::string skipped;
};

QualityReport measure_quality(Session& s, const InfoArgs& a) {
  QualityReport report;
  const bool wanted = a.kv_quality == "on" || (a.kv_quality == "auto" && s.model->weights().weight_bytes <= kAutoQualityWeightBytes);
  if (!wanted) {
    report.skipped = a.kv_quality == "off" ? "--kv-quality off"
                                           : "the model is over 1 GiB: measuring runs it " +
                                                 std::to_string(all_kv_types().size() + 1) + " times over " +
                                                 std::to_string(kKvQualityTokens) + " tokens; --kv-quality on measures it";
    return report;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    report.types = measure_kv_quality(*s.model, *s.forward, all_kv_types());
  } catch (const Error& e) {
    report.skipped = std::string("it could not be measured: ") + e.what();
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

nlohmann::json quality_json(const QualityReport& q) {
  if (q.types.empty()) return {{"measured", false}, {"why", q.skipped}};
  return {{"measured", true},
          {"reference", "f32"},
          {"text", q.types.front().text_id},
          {"tokens", q.types.front().tokens},
          {"seconds", q.seconds}};
}

// One KV type's cost for one head layout: per token, per block, and what fits in the budget.
nlohmann::json capacity_json(const ModelConfig& c, KvType type, const InfoArgs& a, int32_t context) {
  const int32_t block_size = a.model.block_size;
  const size_t per_token = kv_bytes_per_token(c, type, type);
  const size_t per_block = kv_bytes_per_block(c, type, type, block_size);
  const int32_t blocks = blocks_in_budget(a.budget_mib, per_block);
  const int32_t blocks_per_sequence = kv_blocks_for_sequence(c, block_size, context, kCliLimits.step_token_budget);
  return {
      {"head_count_kv", c.head_count_kv},
      {"bytes_per_token", per_token},
      {"bytes_per_block", per_block},
      {"blocks", blocks},
      {"sequences", blocks / blocks_per_sequence},
  };
}

nlohmann::json kv_capacity_json(const ModelConfig& c, const InfoArgs& a) {
  const int32_t context = a.context > 0 ? a.context : c.context_length;
  ModelConfig mha = c;
  mha.head_count_kv = c.head_count;
  nlohmann::json types = nlohmann::json::object();
  for (KvType t : all_kv_types()) {
    types[kv_type_name(t)] = {{"gqa", capacity_json(c, t, a, context)}, {"mha", capacity_json(mha, t, a, context)}};
  }
  return {{"budget_mib", a.budget_mib}, {"context", context}, {"block_size", a.model.block_size}, {"types", types}};
}

// A mixture of experts' shape (shared_feed_forward_length 0: no shared expert), or null for a
// dense FFN.
nlohmann::json experts_json(const ModelConfig& c) {
  if (!c.has_experts()) return nullptr;
  return {{"count", c.expert_count},
          {"used", c.expert_used_count},
          {"feed_forward_length", c.expert_feed_forward_length},
          {"shared_feed_forward_length", c.expert_shared_feed_forward_length}};
}

// YaRN's settings (rope_freq_scale is 1 / its factor), or null without YaRN.
nlohmann::json yarn_json(const ModelConfig& c) {
  if (c.rope_yarn_ext_factor == 0) return nullptr;
  return {{"ext_factor", c.rope_yarn_ext_factor},
          {"original_context_length", c.rope_original_context},
          {"beta_fast", c.rope_yarn_beta_fast},
          {"beta_slow", c.rope_yarn_beta_slow},
          {"attn_factor", c.rope_attn_factor}};
}

// One sequence's KV at the context (f16 K and V) in the pool, generating one token at a time:
// with every layer keeping every token, and as the pool holds it, local layers keeping only
// the blocks their window reads (engine/kv/kv_layer_groups.h).
nlohmann::json sliding_window_json(const ModelConfig& c, int32_t context, int32_t block_size) {
  const int32_t local_layers = local_layer_count(c);
  const KvLayerGroups groups = kv_layer_groups(c);
  const uint64_t full = kv_bytes_per_token(c, KvType::F16, KvType::F16) * uint64_t(kv_blocks_for(context, block_size)) *
                        uint64_t(block_size);
  const uint64_t held = kv_bytes_per_block(c, KvType::F16, KvType::F16, block_size) *
                        uint64_t(kv_blocks_for_sequence(c, block_size, context, 1));
  return {{"sliding_window", c.sliding_window},
          {"local_layers", local_layers},
          {"layer_groups", groups.num_groups},
          {"layers_per_block", groups.layers_per_block},
          {"context", context},
          {"kv_bytes_full", full},
          {"kv_bytes_windowed", held},
          {"windowed_share", full > 0 ? double(held) / double(full) : 1.0}};
}

// What the CUDA backend holds on the device (null on the CPU): the plan's figures, and what
// remains of the budget for the KV pool.
nlohmann::json device_memory_json(const DeviceMemoryUse& d) {
  if (d.device.empty()) return nullptr;
  const uint64_t model_bytes = d.weight_bytes + d.activation_bytes;
  return {{"device", d.device},
          {"total_bytes", d.total_bytes},
          {"free_bytes", d.free_bytes},
          {"budget_bytes", d.budget_bytes},
          {"weight_bytes", d.weight_bytes},
          {"activation_bytes", d.activation_bytes},
          {"kv_pool_bytes", d.budget_bytes > model_bytes ? d.budget_bytes - model_bytes : 0}};
}

nlohmann::json info_json(const Model& m, const BackendChoice& backend, const DeviceMemoryUse& device,
                         const QualityReport& quality, const InfoArgs& a) {
  const ModelConfig& c = m.config();
  const ChatTemplate chat = chat_template_for(m.file(), "");
  const std::map<std::string, int> type_counts = tensor_type_counts(m.file());
  nlohmann::json kv = nlohmann::json::object();
  for (KvType t : all_kv_types()) kv[kv_type_name(t)] = {{"bytes_per_token", kv_bytes_per_token(c, t, t)}};
  for (const KvQuality& q : quality.types) {
    kv[kv_type_name(q.type)]["kl"] = q.kl;
    kv[kv_type_name(q.type)]["top1"] = q.top1;
  }
  const int32_t recent_rows = kKvRecentRows;   // what the engine and the quality measurement use
  return {
      {"path", m.file().path()},
      {"gguf_version", m.file().version()},
      {"architecture", c.architecture},
      {"backend", backend_name(backend.backend)},
      {"backend_note", backend.note},
      {"cpu_isa", cpu_isa_name(cpu_isa_active())},
      {"cpu_isa_detected", cpu_isa_name(cpu_isa_detected())},
      {"device_memory", device_memory_json(device)},
      {"name", c.name},
      {"context_length", c.context_length},
      {"embedding_length", c.embedding_length},
      {"block_count", c.block_count},
      {"feed_forward_length", c.feed_forward_length},
      {"experts", experts_json(c)},
      {"head_count", c.head_count},
      {"head_count_kv", c.head_count_kv},
      {"head_dim", c.head_dim},
      {"rope_dimension_count", c.rope_dimension_count},
      {"rope_freq_base", c.rope_freq_base},
      {"rope_freq_scale", c.rope_freq_scale},
      {"rope_mode", c.rope_mode == ops::RopeMode::Neox ? "neox" : "normal"},
      {"rope_freqs", m.weights().rope_freqs != nullptr},
      {"rope_yarn", yarn_json(c)},
      {"qkv_bias", m.weights().layers.front().bq != nullptr},
      {"rms_eps", c.rms_eps},
      {"vocab_size", c.vocab_size},
      {"tokenizer", tokenizer_kind(m.file(), a.model.tokenizer_path)},
      {"sliding_window_kv", sliding_window_json(c, a.context > 0 ? a.context : c.context_length, a.model.block_size)},
      {"tied_output", m.weights().tied_output},
      {"tensor_types", type_counts},
      {"parameters", m.weights().num_parameters},
      {"weight_bytes", m.weights().weight_bytes},
      {"kv_per_token", kv},
      {"kv_recent_rows", {{"rows", recent_rows},
                          {"bytes_per_sequence", recent_rows_bytes(recent_rows, c.block_count, int32_t(c.kv_dim()))}}},
      {"kv_quality", quality_json(quality)},
      {"chat_template", chat.name},
      {"chat_template_warning", chat.warning},
      {"kv_capacity", kv_capacity_json(c, a)},
  };
}

void print_capacity(const nlohmann::json& cap) {
  std::printf("  KV capacity in %g MiB, blocks of %d tokens, sequences of %d tokens:\n",
              cap["budget_mib"].get<double>(), cap["block_size"].get<int>(), cap["context"].get<int>());
  std::printf("    %-9s %-4s %8s %12s %10s %10s\n", "type", "kv", "B/token", "B/block", "blocks", "sequences");
  for (KvType type : all_kv_types()) {
    for (const char* heads : {"gqa", "mha"}) {
      const nlohmann::json& h = cap["types"][kv_type_name(type)][heads];
      std::printf("    %-9s %-4s %8lld %12lld %10lld %10lld   (%d kv heads)\n", kv_type_name(type), heads,
                  h["bytes_per_token"].get<long long>(), h["bytes_per_block"].get<long long>(),
                  h["blocks"].get<long long>(), h["sequences"].get<long long>(), h["head_count_kv"].get<int>());
    }
  }
}

void print_text(const nlohmann::json& j) {
  std::printf("%s (%s, GGUF v%d)\n", j["path"].get<std::string>().c_str(),
              j["architecture"].get<std::string>().c_str(), j["gguf_version"].get<int>());
  for (const char* key : {"backend", "cpu_isa", "cpu_isa_detected", "name", "context_length", "embedding_length", "block_count",
                          "feed_forward_length", "experts", "head_count", "head_count_kv", "head_dim",
                          "rope_dimension_count", "rope_freq_base", "rope_freq_scale", "rope_mode",
                          "rope_freqs", "rope_yarn", "qkv_bias", "rms_eps", "vocab_size", "tokenizer",
                          "tied_output", "parameters", "weight_bytes", "chat_template", "sliding_window_kv"}) {
    std::printf("  %-22s %s\n", key, j[key].dump().c_str());
  }
  if (const nlohmann::json& d = j["device_memory"]; !d.is_null()) {
    const auto mib = [&](const char* key) { return double(d[key].get<uint64_t>()) / (1024.0 * 1024.0); };
    std::printf("  %-22s %s: weights %.1f MiB, activations %.1f MiB, KV pool up to %.1f MiB of a %.1f MiB budget\n",
                "device_memory", d["device"].get<std::string>().c_str(), mib("weight_bytes"), mib("activation_bytes"),
                mib("kv_pool_bytes"), mib("budget_bytes"));
  }
  if (!j["chat_template_warning"].get<std::string>().empty()) {
    std::fprintf(stderr, "warning: %s\n", j["chat_template_warning"].get<std::string>().c_str());
  }
  std::printf("  tensor types          ");
  for (const auto& [type, count] : j["tensor_types"].items()) std::printf(" %s x%d", type.c_str(), count.get<int>());
  std::printf("\n  KV bytes per token (layers x 2 x kv_heads x row bytes, scales included), and KV quality:\n");
  const nlohmann::json& q = j["kv_quality"];
  if (q["measured"].get<bool>()) {
    std::printf("  the model's next-token distributions vs f32 KV over %d tokens of a built-in text (%s), %.2f s:\n",
                q["tokens"].get<int>(), q["text"].get<std::string>().c_str(), q["seconds"].get<double>());
    std::printf("    %-9s %8s %12s %8s\n", "type", "B/token", "KL (nats)", "top-1");
  } else {
    std::printf("  (KV quality not measured: %s)\n", q["why"].get<std::string>().c_str());
  }
  for (KvType type : all_kv_types()) {
    const nlohmann::json& v = j["kv_per_token"][kv_type_name(type)];
    std::printf("    %-9s %8lld", kv_type_name(type), v["bytes_per_token"].get<long long>());
    if (v.contains("kl")) std::printf(" %12.3g %7.1f%%", v["kl"].get<double>(), v["top1"].get<double>());
    std::printf("\n");
  }
  const nlohmann::json& recent = j["kv_recent_rows"];
  if (recent["rows"].get<int>() > 0) {
    std::printf("  fp8, int8 and int4 also keep each sequence's newest %d rows in f32, read exact: %.1f KiB a sequence\n",
                recent["rows"].get<int>(), double(recent["bytes_per_sequence"].get<long long>()) / 1024.0);
  }
  print_capacity(j["kv_capacity"]);
}

int run_info(const InfoArgs& a) {
  Session s = open_session(a.model);
  const QualityReport quality = measure_quality(s, a);
  const nlohmann::json j = info_json(*s.model, s.backend, s.forward->device_memory(), quality, a);
  if (a.json) {
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_text(j);
  }
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a model and its KV cost");
  cmd->add_option("-m,--model", args->model.model_path, "GGUF model file")->required();
  cmd->add_option("--tokenizer", args->model.tokenizer_path, "SentencePiece .model file instead");
  cmd->add_option("--ctx", args->context, "Context length of the sequences to fit (default: the model's)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--kv-budget-mib", args->budget_mib, "KV memory budget in MiB")
      ->check(positive_number())->capture_default_str();
  cmd->add_option("--block-size", args->model.block_size, "KV block size in tokens")
      ->check(block_size_check())->capture_default_str();
  add_backend_option(cmd, args->model.backend);
  cmd->add_option("--kv-quality", args->kv_quality,
                  "Measure what each KV type costs the model (KL from f32 KV, top-1 agreement): on, off, or auto "
                  "(on for weights up to 1 GiB)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->model.threads, "Threads for the KV quality measurement (0: all cores)")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print JSON");
  return Command{cmd, [args] { return run_info(*args); }};
}

}  // namespace kvdesk::cli
