// Reading and validating Llama-family hyperparameters from GGUF metadata.
#include "engine/model/model_config.h"

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

// Linear RoPE scaling as llama.cpp reads it: rope.scaling.factor (or the older
// rope.scale_linear) divides positions unless absent or 0. Llama 3's scaling needs no key: its
// per-pair factors are the rope_freqs tensor. YaRN and LongRoPE are not implemented.
float read_rope_freq_scale(const GgufFile& file, const std::string& arch) {
  const std::string scaling = file.find_string(arch + ".rope.scaling.type").value_or("none");
  if (scaling != "none" && scaling != "linear") {
    throw Error(file.path() + ": rope.scaling.type '" + scaling +
                "' is not supported (kvdesk runs none and linear, and Llama 3 rope_freqs)");
  }
  std::optional<double> factor = file.find_float(arch + ".rope.scaling.factor");
  if (!factor) factor = file.find_float(arch + ".rope.scale_linear");
  check(scaling == "none" || factor.has_value(), file, "rope.scaling.type is linear but rope.scaling.factor is missing");
  if (!factor || *factor == 0) return 1.0f;
  check(*factor > 0, file, "rope.scaling.factor must be positive");
  return static_cast<float>(1.0 / *factor);
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
  return c;
}

ops::RopeParams rope_params(const ModelConfig& c, const float* freq_factors) {
  ops::RopeParams p;
  p.n_rot = c.rope_dimension_count;
  p.freq_base = c.rope_freq_base;
  p.freq_scale = c.rope_freq_scale;
  p.freq_factors = freq_factors;
  p.mode = c.rope_mode;
  return p;
}

}  // namespace kvdesk
