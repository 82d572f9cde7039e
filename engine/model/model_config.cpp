// Reading and validating Llama-family hyperparameters from GGUF metadata, with each family's
// extra keys and fixed choices as llama.cpp's llama-model reads them.
#include "engine/model/model_config.h"

#include <cmath>
#include <optional>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk {
namespace {

// Limits far above any real model; they keep a hostile file from driving huge allocations.
constexpr uint64_t kMaxDim = 1u << 20;
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxContext = 1u << 24;
constexpr uint64_t kMaxVocab = kMaxDim * 4;
constexpr uint64_t kMaxExperts = 4096;

int32_t read_dim(const GgufFile& file, const std::string& key, uint64_t max_value) {
  const uint64_t v = file.get_uint(key);
  if (v == 0 || v > max_value) {
    throw Error(file.path() + ": metadata '" + key + "' = " + std::to_string(v) +
                " is out of range [1, " + std::to_string(max_value) + "]");
  }
  return static_cast<int32_t>(v);
}

void check(bool ok, const GgufFile& file, const std::string& what) {
  if (!ok) throw Error(file.path() + ": " + what);
}

int32_t read_vocab_size(const GgufFile& file, const std::string& arch) {
  if (file.find(arch + ".vocab_size")) return read_dim(file, arch + ".vocab_size", kMaxVocab);
  if (file.find("tokenizer.ggml.tokens")) {
    const size_t n = file.get_string_array("tokenizer.ggml.tokens").size();
    check(n > 0 && n <= kMaxVocab, file, "tokenizer.ggml.tokens has " + std::to_string(n) +
          " entries, expected 1 to " + std::to_string(kMaxVocab));
    return static_cast<int32_t>(n);
  }
  throw Error(file.path() + ": no vocabulary (tokenizer.ggml.tokens is missing)");
}

// RoPE scaling as llama.cpp reads it: rope.scaling.factor (or the older rope.scale_linear)
// divides positions unless absent or 0, linearly or through YaRN (read_yarn). Llama 3's scaling
// needs no key: its per-pair factors are the rope_freqs tensor; LongRoPE's (Phi-3) are
// rope_factors_long/short with rope.scaling.attn_factor.
float read_rope_freq_scale(const GgufFile& file, const std::string& arch) {
  const std::string scaling = file.find_string(arch + ".rope.scaling.type").value_or("none");
  if (scaling != "none" && scaling != "linear" && scaling != "yarn" && scaling != "longrope") {
    throw Error(file.path() + ": rope.scaling.type '" + scaling +
                "' is not supported (kvdesk runs none, linear, yarn and longrope, and Llama 3 rope_freqs)");
  }
  if (scaling == "longrope") return 1.0f;
  std::optional<double> factor = file.find_float(arch + ".rope.scaling.factor");
  if (!factor) factor = file.find_float(arch + ".rope.scale_linear");
  check(scaling == "none" || factor.has_value(), file, "rope.scaling.type is " + scaling + " but rope.scaling.factor is missing");
  if (!factor || *factor == 0) return 1.0f;
  check(*factor > 0 && std::isfinite(*factor), file, "rope.scaling.factor must be positive");
  return static_cast<float>(1.0 / *factor);
}

float read_positive(const GgufFile& file, const std::string& key, double fallback) {
  const double v = file.find_float(key).value_or(fallback);
  check(v > 0 && std::isfinite(v), file, "metadata '" + key + "' must be a positive number");
  return static_cast<float>(v);
}

float read_required_positive(const GgufFile& file, const std::string& key) {
  if (!file.find(key)) throw Error(file.path() + ": missing metadata '" + key + "'");
  return read_positive(file, key, 1.0);
}

// Gemma scales q by 1/sqrt(query_pre_attn_scalar): the head dimension, except at 27B (Gemma 2:
// 46 layers, Gemma 3: 62) where it is d_model / heads. A file's attention.scale wins.
float read_attention_scale(const GgufFile& file, const ModelConfig& c) {
  const std::string key = c.architecture + ".attention.scale";
  if (file.find_float(key).value_or(0) != 0) return read_positive(file, key, 1.0);
  const bool gemma_27b = c.traits.gemma_attention_scale &&
                         ((c.architecture == "gemma2" && c.block_count == 46) ||
                          (c.architecture == "gemma3" && c.block_count == 62));
  const int32_t dim = gemma_27b ? c.embedding_length / c.head_count : c.head_dim;
  return 1.0f / std::sqrt(float(dim));
}

// Granite's four multipliers are part of its architecture: the converter always writes them.
void read_granite_multipliers(const GgufFile& file, ModelConfig& c) {
  const std::string& a = c.architecture;
  c.embedding_scale = read_required_positive(file, a + ".embedding_scale");
  c.residual_scale = read_required_positive(file, a + ".residual_scale");
  c.logit_scale = read_required_positive(file, a + ".logit_scale");
  c.attention_scale = read_required_positive(file, a + ".attention.scale");
}

// Gemma 2 defaults to the caps its config.json has (50 and 30) when the file lacks them.
void read_softcapping(const GgufFile& file, ModelConfig& c) {
  c.attn_logit_softcap = read_positive(file, c.architecture + ".attn_logit_softcapping", 50.0);
  c.final_logit_softcap = read_positive(file, c.architecture + ".final_logit_softcapping", 30.0);
}

// Gemma 2 must name its window; Gemma 3 without one runs every layer global.
void read_sliding_window(const GgufFile& file, ModelConfig& c) {
  const std::string key = c.architecture + ".attention.sliding_window";
  if (c.architecture == "gemma2" && !file.find(key)) throw Error(file.path() + ": missing metadata '" + key + "'");
  if (!file.find(key) || file.get_uint(key) == 0) return;
  c.sliding_window = read_dim(file, key, kMaxContext);
  c.local_rope_freq_base = c.traits.local_rope_freq_base > 0 ? c.traits.local_rope_freq_base : c.rope_freq_base;
}

// YaRN's magnitude correction (transformers' get_mscale): 1 + 0.1 m ln(factor) past factor 1.
float yarn_mscale(float factor, float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f; }

// YaRN as llama.cpp sets it up: ext factor 1 unless the file sets rope.scaling.yarn_ext_factor,
// betas 32 and 1 unless set, the correction range over rope.scaling.original_context_length (or
// the trained context). ggml's kernel multiplies cos and sin by 1 + 0.1 ln(factor) itself, so
// the attention factor passed along is the file's attn_factor times mscale(factor, 1) /
// mscale(factor, log_multiplier) / (1 + 0.1 ln(factor)): the file's attn_factor alone unless
// rope.scaling.yarn_log_multiplier is set.
void read_yarn(const GgufFile& file, ModelConfig& c) {
  const std::string& a = c.architecture;
  if (file.find_string(a + ".rope.scaling.type").value_or("none") != "yarn") return;
  const float ext = static_cast<float>(file.find_float(a + ".rope.scaling.yarn_ext_factor").value_or(-1.0));
  check(std::isfinite(ext), file, "rope.scaling.yarn_ext_factor must be a number");
  c.rope_yarn_ext_factor = ext >= 0 ? ext : 1.0f;
  c.rope_yarn_beta_fast = read_positive(file, a + ".rope.scaling.yarn_beta_fast", 32.0);
  c.rope_yarn_beta_slow = read_positive(file, a + ".rope.scaling.yarn_beta_slow", 1.0);
  if (c.rope_original_context == 0) c.rope_original_context = c.context_length;
  if (c.rope_yarn_ext_factor == 0) return;
  const float factor = 1.0f / c.rope_freq_scale;
  const float log_multiplier =
      static_cast<float>(file.find_float(a + ".rope.scaling.yarn_log_multiplier").value_or(0.0));
  check(std::isfinite(log_multiplier), file, "rope.scaling.yarn_log_multiplier must be a number");
  const float ratio = log_multiplier != 0 ? yarn_mscale(factor, 1.0f) / yarn_mscale(factor, log_multiplier)
                                          : yarn_mscale(factor, 1.0f);
  c.rope_attn_factor *= ratio / (1.0f + 0.1f * std::log(factor));
}

void read_longrope(const GgufFile& file, ModelConfig& c) {
  const std::string& a = c.architecture;
  c.rope_attn_factor = read_positive(file, a + ".rope.scaling.attn_factor", 1.0);
  if (file.find(a + ".rope.scaling.original_context_length")) {
    c.rope_original_context = read_dim(file, a + ".rope.scaling.original_context_length", kMaxContext);
  }
}

// Experts as llama.cpp reads them: expert_count and expert_used_count (at most the count), and
// each expert's FFN size, which the Qwen MoEs write apart from the dense feed_forward_length
// (without it llama.cpp takes feed_forward_length / expert_used_count) and Mixtral does not (its
// experts are feed_forward_length wide). Qwen2 MoE's shared expert is
// expert_shared_feed_forward_length wide, or feed_forward_length.
void read_experts(const GgufFile& file, ModelConfig& c) {
  if (c.traits.experts == TensorPresence::Absent) return;
  const std::string& a = c.architecture;
  if (!file.find(a + ".expert_count") || file.get_uint(a + ".expert_count") == 0) {
    check(c.traits.experts == TensorPresence::Optional, file, "missing metadata '" + a + ".expert_count'");
    return;
  }
  c.expert_count = read_dim(file, a + ".expert_count", kMaxExperts);
  c.expert_used_count = read_dim(file, a + ".expert_used_count", uint64_t(c.expert_count));
  const std::string ff_key = a + ".expert_feed_forward_length";
  const bool mixtral = c.traits.experts == TensorPresence::Optional;
  const int32_t ff_fallback = mixtral ? c.feed_forward_length : c.feed_forward_length / c.expert_used_count;
  c.expert_feed_forward_length = file.find(ff_key) ? read_dim(file, ff_key, kMaxDim) : ff_fallback;
  check(c.expert_feed_forward_length > 0, file, "missing metadata '" + ff_key + "'");
  if (!c.traits.shared_expert) return;
  const std::string shared_key = a + ".expert_shared_feed_forward_length";
  c.expert_shared_feed_forward_length =
      file.find(shared_key) ? read_dim(file, shared_key, kMaxDim) : c.feed_forward_length;
}

void read_family_settings(const GgufFile& file, ModelConfig& c) {
  c.attention_scale = read_attention_scale(file, c);
  if (c.traits.embedding_times_sqrt_dim) c.embedding_scale = std::sqrt(float(c.embedding_length));
  if (c.traits.granite_multipliers) read_granite_multipliers(file, c);
  if (c.traits.gemma2_softcapping) read_softcapping(file, c);
  if (c.traits.local_pattern > 0) read_sliding_window(file, c);
  read_longrope(file, c);
  read_yarn(file, c);
  read_experts(file, c);
}

}  // namespace

ModelConfig read_model_config(const GgufFile& file) {
  ModelConfig c;
  c.architecture = file.get_string("general.architecture");
  const Architecture* arch = find_architecture(c.architecture);
  if (!arch) {
    throw Error(file.path() + ": the model architecture '" + c.architecture +
                "' is not supported; kvdesk runs " + supported_architecture_names());
  }
  c.traits = *arch;
  c.rope_mode = arch->rope_mode;
  c.qkv_bias = arch->qkv_bias;
  const std::string& a = c.architecture;
  c.name = file.find_string("general.name").value_or("");
  c.context_length = read_dim(file, a + ".context_length", kMaxContext);
  c.embedding_length = read_dim(file, a + ".embedding_length", kMaxDim);
  c.block_count = read_dim(file, a + ".block_count", kMaxLayers);
  c.feed_forward_length = read_dim(file, a + ".feed_forward_length", kMaxDim);
  c.head_count = read_dim(file, a + ".attention.head_count", kMaxDim);
  c.head_count_kv = file.find(a + ".attention.head_count_kv")
                        ? read_dim(file, a + ".attention.head_count_kv", kMaxDim)
                        : c.head_count;
  check(c.embedding_length % c.head_count == 0, file,
        "embedding_length is not a multiple of attention.head_count");
  c.head_dim = file.find(a + ".attention.key_length")
                   ? read_dim(file, a + ".attention.key_length", kMaxDim)
                   : c.embedding_length / c.head_count;
  check(c.head_count % c.head_count_kv == 0, file,
        "attention.head_count must be a multiple of attention.head_count_kv");
  c.rope_dimension_count = file.find(a + ".rope.dimension_count")
                               ? read_dim(file, a + ".rope.dimension_count", kMaxDim)
                               : c.head_dim;
  check(c.rope_dimension_count <= c.head_dim && c.rope_dimension_count % 2 == 0, file,
        "rope.dimension_count must be even and at most the head dimension");
  c.rope_freq_base = static_cast<float>(file.find_float(a + ".rope.freq_base").value_or(10000.0));
  check(c.rope_freq_base > 0, file, "rope.freq_base must be positive");
  c.rope_freq_scale = read_rope_freq_scale(file, a);
  c.rms_eps = static_cast<float>(
      file.find_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  check(c.rms_eps > 0 && c.rms_eps < 1, file, "attention.layer_norm_rms_epsilon out of range");
  c.vocab_size = read_vocab_size(file, a);
  read_family_settings(file, c);
  return c;
}

ops::RopeParams rope_params(const ModelConfig& c, const float* freq_factors) {
  ops::RopeParams p;
  p.n_rot = c.rope_dimension_count;
  p.freq_base = c.rope_freq_base;
  p.freq_scale = c.rope_freq_scale;
  p.freq_factors = freq_factors;
  p.mode = c.rope_mode;
  p.attn_factor = c.rope_attn_factor;
  if (c.rope_yarn_ext_factor != 0) {
    const ops::YarnRange range = ops::yarn_correction_range(p.n_rot, c.rope_original_context, p.freq_base,
                                                            c.rope_yarn_beta_fast, c.rope_yarn_beta_slow);
    p.ext_factor = c.rope_yarn_ext_factor;
    p.yarn_low = range.low;
    p.yarn_high = range.high;
  }
  return p;
}

ops::RopeParams layer_rope_params(const ModelConfig& c, const float* freq_factors, int32_t l) {
  ops::RopeParams p = rope_params(c, freq_factors);
  const int32_t step = c.traits.no_rope_layer_step;
  if (step > 0 && (l + 1) % step == 0) p.n_rot = 0;   // a NoPE layer: nothing rotates
  if (c.is_local_layer(l) && c.traits.local_rope_freq_base > 0) {
    p.freq_base = c.local_rope_freq_base;
    p.freq_scale = 1.0f;
  }
  return p;
}

}  // namespace kvdesk
