// write_random_model: metadata like a llama.cpp conversion, tensors streamed one at a time.
#include "engine/lab/random_model.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <variant>
#include <vector>

#include "engine/error.h"
#include "engine/lab/gguf_writer.h"
#include "engine/lab/hf_vocabulary.h"
#include "engine/tokenizer/spm_tokenizer.h"
#include "kernels/quantize.h"

namespace kvdesk {
namespace {

// splitmix64: a small, fast, well-mixed generator; one stream per tensor keeps files
// reproducible from (seed, tensor index) alone.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double((next() >> 11) + 1) * (1.0 / 9007199254740993.0); }  // (0, 1]
  // Box-Muller, both outputs used.
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * M_PI * uniform();
    spare_ = float(r * std::sin(a));
    has_spare_ = true;
    return float(r * std::cos(a));
  }

 private:
  uint64_t state_;
  float spare_ = 0;
  bool has_spare_ = false;
};

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;   // GGUF token types: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte
  int32_t bos = 1;
  int32_t eos = 2;
  int32_t unk = 0;
};

Vocabulary read_vocabulary(const std::string& path) {
  const std::unique_ptr<sentencepiece::SentencePieceProcessor> processor = load_spm_processor(path);
  const sentencepiece::SentencePieceProcessor& sp = *processor;
  Vocabulary v;
  for (int i = 0; i < sp.GetPieceSize(); ++i) {
    v.tokens.push_back(sp.IdToPiece(i));
    v.scores.push_back(sp.GetScore(i));
    v.types.push_back(sp.IsUnknown(i) ? 2 : sp.IsControl(i) ? 3 : sp.IsUnused(i) ? 5 : sp.IsByte(i) ? 6 : 1);
  }
  v.bos = sp.bos_id();
  v.eos = sp.eos_id();
  v.unk = sp.unk_id();
  return v;
}

constexpr const char* kArchitectures[] = {"llama",  "qwen2",  "qwen2moe", "qwen3",   "qwen3moe", "gemma",
                                          "gemma2", "gemma3", "phi3",     "granite", "gpt-oss", "smollm3"};


void check_spec(const RandomModelSpec& s) {
  auto fail = [](const std::string& what) { throw Error("make-model: " + what); };
  if (s.layers < 1 || s.layers > 1024) fail("--layers must be in [1, 1024]");
  if (s.embd < 2 || s.embd > 65536) fail("--embd must be in [2, 65536]");
  if (s.heads < 1 || s.embd % s.heads != 0) fail("--embd must be a multiple of --heads");
  if (s.head_dim < 0 || s.head_dim > 4096) fail("--head-dim must be in [0, 4096] (0: embd / heads)");
  if ((s.head_dim > 0 ? s.head_dim : s.embd / s.heads) % 2 != 0) fail("the head dimension must be even");
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0) fail("--heads must be a multiple of --kv-heads");
  if (s.ff < 1 || s.ff > 262144) fail("--ff must be in [1, 262144]");
  if (!is_random_model_architecture(s.arch)) fail("--arch must be one of " + random_model_architectures());
  if (s.rope_scaling != "none" && s.rope_scaling != "llama3" && s.rope_scaling != "longrope" && s.rope_scaling != "yarn") {
    fail("--rope-scaling must be none, llama3, longrope or yarn");
  }
  if (s.rope_scaling == "longrope" && s.arch != "phi3") fail("--rope-scaling longrope is Phi-3's (--arch phi3)");
  if (s.sliding_window < 0) fail("--sliding-window must not be negative");
  if (s.experts < 0 || s.experts > 512) fail("--experts must be in [0, 512]");
  const bool moe_arch = s.arch == "qwen2moe" || s.arch == "qwen3moe" || s.arch == "gpt-oss";
  if (moe_arch && s.experts == 0) fail("--arch " + s.arch + " needs --experts");
  if (s.experts != 0 && s.arch != "llama" && !moe_arch) fail("--experts is for --arch llama, qwen2moe, qwen3moe or gpt-oss");
  if (s.mix.mxfp4_experts && s.experts == 0) fail("--type mxfp4_moe needs --experts");
  if (s.mix.mxfp4_experts && (s.embd % 32 != 0 || s.expert_ff % 32 != 0 || s.ff % 32 != 0)) {
    fail("--type mxfp4_moe needs --embd, --ff and --expert-ff to be multiples of 32 (MXFP4 blocks)");
  }
  if (s.experts > 0 && (s.experts_used < 1 || s.experts_used > s.experts)) fail("--experts-used must be in [1, --experts]");
  if (s.experts > 0 && (s.expert_ff < 1 || s.expert_ff > 262144)) fail("--expert-ff must be in [1, 262144]");
  if (s.split_experts && (s.arch != "llama" || s.experts == 0)) {
    fail("--split-experts is for --arch llama with --experts");
  }
  if (!(s.weight_std > 0)) fail("the weight standard deviation must be positive");
}

class TensorMaker {
 public:
  TensorMaker(GgufWriter& writer, const RandomModelSpec& spec) : writer_(writer), spec_(spec) {}

  // A 2-D weight of `role` in layer `layer` (0 outside the layers).
  void matrix(const std::string& name, TensorRole role, int layer, int64_t rows, int64_t cols) {
    add_matrix(name, tensor_type(spec_.mix, role, layer, spec_.layers, cols, spec_.heads / spec_.kv_heads), {cols, rows});
  }

  // `count` matrices of `role` stacked as one 3-D tensor (a mixture's experts).
  void matrix_stack(const std::string& name, TensorRole role, int layer, int64_t count, int64_t rows, int64_t cols) {
    const GgmlType type = spec_.mix.mxfp4_experts
                              ? GgmlType::MXFP4
                              : tensor_type(spec_.mix, role, layer, spec_.layers, cols, spec_.heads / spec_.kv_heads);
    add_matrix(name, type, {cols, rows, count});
  }

  // An f32 matrix (a mixture's router, which llama.cpp's quantizer keeps in f32).
  void f32_matrix(const std::string& name, int64_t rows, int64_t cols) { add_matrix(name, GgmlType::F32, {cols, rows}); }

  void add_matrix(const std::string& name, GgmlType type, std::vector<int64_t> dims) {
    const int64_t cols = dims[0];
    int64_t rows = 1;
    for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
    const uint64_t seed = next_seed();
    const float std = spec_.weight_std;
    writer_.add_tensor(name, type, std::move(dims), [=](std::vector<uint8_t>& out) {
      Rng rng(seed);
      const size_t row_bytes = ggml_row_bytes(type, cols);
      out.resize(row_bytes * size_t(rows));
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (float& x : row) x = std * rng.normal();
        ref::quantize_row(type, row.data(), out.data() + size_t(r) * row_bytes, cols);
      }
    });
  }

  void ones(const std::string& name, int64_t n) {
    ++index_;
    f32_vector(name, std::vector<float>(size_t(n), 1.0f));
  }

  // A norm as trained: around 1 (Gemma's converter stores 1 + w).
  void near_ones(const std::string& name, int64_t n) {
    Rng rng(next_seed());
    std::vector<float> values(static_cast<size_t>(n));
    for (float& x : values) x = 1.0f + 0.1f * rng.normal();
    f32_vector(name, std::move(values));
  }

  // Per-pair RoPE frequency divisors in [low, high], as LongRoPE's searched factors are.
  void factors(const std::string& name, int64_t n, float low, float high) {
    Rng rng(next_seed());
    std::vector<float> values(static_cast<size_t>(n));
    for (float& x : values) x = low + (high - low) * float(rng.uniform());
    f32_vector(name, std::move(values));
  }

  // Attention sink logits of the size real ones have (gpt-oss-20b's: mostly -1 to 3), so a sink
  // takes a visible share of a short context's attention.
  void sinks(const std::string& name, int64_t n) {
    Rng rng(next_seed());
    std::vector<float> values(static_cast<size_t>(n));
    for (float& x : values) x = 1.0f + rng.normal();
    f32_vector(name, std::move(values));
  }

  void normal_vector(const std::string& name, int64_t n) {
    Rng rng(next_seed());
    std::vector<float> values(static_cast<size_t>(n));
    for (float& x : values) x = spec_.weight_std * rng.normal();
    f32_vector(name, std::move(values));
  }

  void f32_vector(const std::string& name, std::vector<float> values) {
    const int64_t n = int64_t(values.size());
    writer_.add_tensor(name, GgmlType::F32, {n}, [values = std::move(values)](std::vector<uint8_t>& out) {
      out.assign(reinterpret_cast<const uint8_t*>(values.data()),
                 reinterpret_cast<const uint8_t*>(values.data() + values.size()));
    });
  }

 private:
  uint64_t next_seed() { return spec_.seed * 1000003ull + index_++; }

  GgufWriter& writer_;
  const RandomModelSpec& spec_;
  uint64_t index_ = 0;
};

}  // namespace

std::vector<float> llama3_rope_factors(float freq_base, int n_rot) {
  constexpr double kFactor = 8.0;
  constexpr double kLowFreqFactor = 1.0;
  constexpr double kHighFreqFactor = 4.0;
  constexpr double kOriginalContext = 8192.0;
  const double low_freq_wavelen = kOriginalContext / kLowFreqFactor;
  const double high_freq_wavelen = kOriginalContext / kHighFreqFactor;
  std::vector<float> factors;
  for (int i = 0; i < n_rot; i += 2) {
    const double freq = 1.0 / std::pow(double(freq_base), double(i) / n_rot);
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(float(kFactor));
    } else {
      const double smooth = (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      factors.push_back(float(1.0 / ((1.0 - smooth) / kFactor + smooth)));
    }
  }
  return factors;
}

bool is_random_model_architecture(const std::string& arch) {
  for (const char* a : kArchitectures) {
    if (arch == a) return true;
  }
  return false;
}

std::string random_model_architectures() {
  std::string names;
  for (const char* a : kArchitectures) names += std::string(names.empty() ? "" : ", ") + a;
  return names;
}

namespace {

bool is_gemma(const std::string& arch) { return arch == "gemma" || arch == "gemma2" || arch == "gemma3"; }
// Gemma 2 and 3: sliding windows and post norms around both blocks.
bool is_windowed_gemma(const std::string& arch) { return arch == "gemma2" || arch == "gemma3"; }
bool has_qkv_bias(const std::string& arch) { return arch == "qwen2" || arch == "qwen2moe" || arch == "gpt-oss"; }

// Each family's own keys beside the common ones, with the values of a real checkpoint.
void write_family_metadata(GgufWriter& w, const RandomModelSpec& spec, int32_t head_dim) {
  const std::string a = spec.arch + ".";
  if (is_gemma(spec.arch) || spec.arch == "gpt-oss" || spec.head_dim > 0) {   // their converters write it
    w.add_uint32(a + "attention.key_length", uint32_t(head_dim));
    w.add_uint32(a + "attention.value_length", uint32_t(head_dim));
  }
  if (is_windowed_gemma(spec.arch)) {
    const int32_t window = spec.sliding_window > 0 ? spec.sliding_window : spec.arch == "gemma2" ? 4096 : 512;
    w.add_uint32(a + "attention.sliding_window", uint32_t(window));
  }
  if (spec.arch == "gemma2") {
    w.add_float32(a + "attn_logit_softcapping", 50.0f);
    w.add_float32(a + "final_logit_softcapping", 30.0f);
  }
  if (spec.experts > 0) {
    w.add_uint32(a + "expert_count", uint32_t(spec.experts));
    w.add_uint32(a + "expert_used_count", uint32_t(spec.experts_used));
    if (spec.arch != "llama") w.add_uint32(a + "expert_feed_forward_length", uint32_t(spec.expert_ff));
    if (spec.arch == "qwen2moe") w.add_uint32(a + "expert_shared_feed_forward_length", uint32_t(spec.ff));
  }
  if (spec.arch == "gpt-oss") {   // gpt-oss-20b's window
    w.add_uint32(a + "attention.sliding_window", uint32_t(spec.sliding_window > 0 ? spec.sliding_window : 128));
  }
  if (spec.arch == "granite") {   // granite-3.0-2b's multipliers
    w.add_float32(a + "embedding_scale", 12.0f);
    w.add_float32(a + "residual_scale", 0.22f);
    w.add_float32(a + "attention.scale", 0.015625f);
    w.add_float32(a + "logit_scale", 8.0f);
  }
  if (spec.rope_scaling == "longrope") {
    const int32_t original = std::max(1, spec.context_length / 4);
    const double scale = double(spec.context_length) / original;
    w.add_uint32(a + "rope.scaling.original_context_length", uint32_t(original));
    w.add_float32(a + "rope.scaling.attn_factor", float(std::sqrt(1.0 + std::log(scale) / std::log(double(original)))));
  }
  if (spec.rope_scaling == "yarn") {   // Qwen's recipe: 4x its original context
    w.add_string(a + "rope.scaling.type", "yarn");
    w.add_float32(a + "rope.scaling.factor", 4.0f);
    w.add_uint32(a + "rope.scaling.original_context_length", uint32_t(std::max(1, spec.context_length / 4)));
  }
}

// A SentencePiece .model's vocabulary, or a Hugging Face byte-level BPE tokenizer.json's as
// llama.cpp's converter writes it (hf_vocabulary.h).
using AnyVocabulary = std::variant<Vocabulary, HfBpeVocabulary>;

AnyVocabulary read_any_vocabulary(const std::string& path) {
  if (path.ends_with(".json")) return read_hf_bpe_vocabulary(path);
  return read_vocabulary(path);
}

size_t vocabulary_size(const AnyVocabulary& vocab) {
  return std::visit([](const auto& v) { return v.tokens.size(); }, vocab);
}

void write_vocabulary(GgufWriter& w, const Vocabulary& vocab) {
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_float32_array("tokenizer.ggml.scores", vocab.scores);
  w.add_int32_array("tokenizer.ggml.token_type", vocab.types);
  w.add_uint32("tokenizer.ggml.bos_token_id", uint32_t(vocab.bos));
  w.add_uint32("tokenizer.ggml.eos_token_id", uint32_t(vocab.eos));
  w.add_uint32("tokenizer.ggml.unknown_token_id", uint32_t(vocab.unk));
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
}

void write_vocabulary(GgufWriter& w, const HfBpeVocabulary& vocab) { write_hf_bpe_vocabulary(w, vocab); }

void write_attention(TensorMaker& make, const RandomModelSpec& spec, int32_t i, int32_t head_dim) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t d = spec.embd;
  const int64_t q_dim = int64_t(spec.heads) * head_dim;
  const int64_t kv_dim = int64_t(spec.kv_heads) * head_dim;
  if (spec.arch == "phi3") {
    make.matrix(p + "attn_qkv.weight", TensorRole::AttnQ, i, q_dim + 2 * kv_dim, d);
  } else {
    make.matrix(p + "attn_q.weight", TensorRole::AttnQ, i, q_dim, d);
    make.matrix(p + "attn_k.weight", TensorRole::AttnK, i, kv_dim, d);
    make.matrix(p + "attn_v.weight", TensorRole::AttnV, i, kv_dim, d);
  }
  if (has_qkv_bias(spec.arch)) {
    make.normal_vector(p + "attn_q.bias", q_dim);
    make.normal_vector(p + "attn_k.bias", kv_dim);
    make.normal_vector(p + "attn_v.bias", kv_dim);
  }
  if (spec.arch == "qwen3" || spec.arch == "qwen3moe" || spec.arch == "gemma3") {
    make.near_ones(p + "attn_q_norm.weight", head_dim);
    make.near_ones(p + "attn_k_norm.weight", head_dim);
  }
  make.matrix(p + "attn_output.weight", TensorRole::AttnOutput, i, d, q_dim);
  if (is_windowed_gemma(spec.arch)) make.near_ones(p + "post_attention_norm.weight", d);
  if (spec.arch == "gpt-oss") {
    make.normal_vector(p + "attn_output.bias", d);
    make.sinks(p + "attn_sinks.weight", spec.heads);
  }
}

// A mixture's router and experts (stacked, or a tensor per expert matrix), and Qwen2 MoE's
// shared expert.
void write_experts(TensorMaker& make, const RandomModelSpec& spec, int32_t i) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t d = spec.embd;
  // Mixtral's experts are feed_forward_length wide; the Qwen MoEs name their width apart.
  const int64_t ff = spec.arch == "llama" ? spec.ff : spec.expert_ff;
  make.f32_matrix(p + "ffn_gate_inp.weight", spec.experts, d);
  if (spec.split_experts) {
    for (int32_t e = 0; e < spec.experts; ++e) {
      const std::string x = "." + std::to_string(e) + ".weight";
      make.matrix(p + "ffn_gate" + x, TensorRole::FfnGate, i, ff, d);
      make.matrix(p + "ffn_down" + x, TensorRole::FfnDown, i, d, ff);
      make.matrix(p + "ffn_up" + x, TensorRole::FfnUp, i, ff, d);
    }
  } else {
    make.matrix_stack(p + "ffn_gate_exps.weight", TensorRole::FfnGate, i, spec.experts, ff, d);
    make.matrix_stack(p + "ffn_up_exps.weight", TensorRole::FfnUp, i, spec.experts, ff, d);
    make.matrix_stack(p + "ffn_down_exps.weight", TensorRole::FfnDown, i, spec.experts, d, ff);
  }
  if (spec.arch == "gpt-oss") {   // biases on the router and every expert matrix
    make.normal_vector(p + "ffn_gate_inp.bias", spec.experts);
    make.f32_matrix(p + "ffn_gate_exps.bias", spec.experts, ff);
    make.f32_matrix(p + "ffn_up_exps.bias", spec.experts, ff);
    make.f32_matrix(p + "ffn_down_exps.bias", spec.experts, d);
  }
  if (spec.arch == "qwen2moe") {   // the shared expert, --ff wide, and its gate's row
    make.normal_vector(p + "ffn_gate_inp_shexp.weight", d);
    make.matrix(p + "ffn_gate_shexp.weight", TensorRole::FfnGate, i, spec.ff, d);
    make.matrix(p + "ffn_up_shexp.weight", TensorRole::FfnUp, i, spec.ff, d);
    make.matrix(p + "ffn_down_shexp.weight", TensorRole::FfnDown, i, d, spec.ff);
  }
}

void write_ffn(TensorMaker& make, const RandomModelSpec& spec, int32_t i) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t d = spec.embd;
  make.ones(p + (spec.arch == "gpt-oss" ? "post_attention_norm.weight" : "ffn_norm.weight"), d);
  if (spec.experts > 0) {
    write_experts(make, spec, i);
    return;
  }
  if (spec.arch == "phi3") {
    make.matrix(p + "ffn_up.weight", TensorRole::FfnUp, i, 2 * int64_t(spec.ff), d);
  } else {
    make.matrix(p + "ffn_gate.weight", TensorRole::FfnGate, i, spec.ff, d);
    make.matrix(p + "ffn_up.weight", TensorRole::FfnUp, i, spec.ff, d);
  }
  make.matrix(p + "ffn_down.weight", TensorRole::FfnDown, i, d, spec.ff);
  if (is_windowed_gemma(spec.arch)) make.near_ones(p + "post_ffw_norm.weight", d);
}

}  // namespace

void write_random_model(const RandomModelSpec& spec, const std::string& out_path) {
  check_spec(spec);
  const AnyVocabulary vocab = read_any_vocabulary(spec.vocab_from);
  const int64_t n_vocab = int64_t(vocabulary_size(vocab));
  const int32_t head_dim = spec.head_dim > 0 ? spec.head_dim : spec.embd / spec.heads;
  const std::string a = spec.arch + ".";
  const bool eps_1e6 = spec.arch.starts_with("qwen") || is_gemma(spec.arch);

  GgufWriter w;
  w.add_string("general.architecture", spec.arch);
  w.add_string("general.name", spec.name);
  w.add_uint32("general.file_type", spec.mix.file_type);
  w.add_uint32(a + "context_length", uint32_t(spec.context_length));
  w.add_uint32(a + "embedding_length", uint32_t(spec.embd));
  w.add_uint32(a + "block_count", uint32_t(spec.layers));
  w.add_uint32(a + "feed_forward_length", uint32_t(spec.ff));
  w.add_uint32(a + "attention.head_count", uint32_t(spec.heads));
  w.add_uint32(a + "attention.head_count_kv", uint32_t(spec.kv_heads));
  w.add_uint32(a + "rope.dimension_count", uint32_t(head_dim));
  w.add_float32(a + "rope.freq_base", spec.rope_freq_base);
  w.add_float32(a + "attention.layer_norm_rms_epsilon", eps_1e6 ? 1e-6f : 1e-5f);
  w.add_uint32(a + "vocab_size", uint32_t(n_vocab));
  write_family_metadata(w, spec, head_dim);
  std::visit([&](const auto& v) { write_vocabulary(w, v); }, vocab);

  TensorMaker make(w, spec);
  const int64_t d = spec.embd;
  make.matrix("token_embd.weight", TensorRole::TokenEmbd, 0, n_vocab, d);
  make.ones("output_norm.weight", d);
  if (!spec.tied_embeddings && !is_gemma(spec.arch)) make.matrix("output.weight", TensorRole::Output, 0, n_vocab, d);
  if (spec.rope_scaling == "llama3") make.f32_vector("rope_freqs.weight", llama3_rope_factors(spec.rope_freq_base, head_dim));
  if (spec.rope_scaling == "longrope") {
    make.factors("rope_factors_long.weight", head_dim / 2, 1.0f, 4.0f);
    make.factors("rope_factors_short.weight", head_dim / 2, 1.0f, 1.2f);
  }
  for (int32_t i = 0; i < spec.layers; ++i) {
    make.ones("blk." + std::to_string(i) + ".attn_norm.weight", d);
    write_attention(make, spec, i, head_dim);
    write_ffn(make, spec, i);
  }
  w.write(out_path);
}

}  // namespace kvdesk
