// Reading and validating Llama-family hyperparameters from GGUF metadata.
#include "engine/model_config.h"


#include "engine/error.h"
#include "engine/gguf_reader.h"

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

}  // namespace

ModelConfig read_model_config(const GgufFile& file) {
  ModelConfig c;
  c.architecture = file.get_string("general.architecture");
  if (c.architecture != "llama") {
    throw Error(file.path() + ": unsupported architecture '" + c.architecture +
                "' (kvdesk runs: llama)");
  }
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
  const std::string scaling = file.find_string(a + ".rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    const double factor = file.get_float(a + ".rope.scaling.factor");
    check(factor > 0, file, "rope.scaling.factor must be positive");
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    throw Error(file.path() + ": unsupported rope.scaling.type '" + scaling + "'");
  }
  c.rms_eps = static_cast<float>(
      file.find_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  check(c.rms_eps > 0 && c.rms_eps < 1, file, "attention.layer_norm_rms_epsilon out of range");
  c.vocab_size = read_vocab_size(file, a);
  return c;
}

}  // namespace kvdesk
