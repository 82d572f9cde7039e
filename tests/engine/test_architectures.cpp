// Architectures: tiny random models of every supported family (llama, Llama 3 rope_freqs, qwen2
// (with YaRN too), qwen3, qwen2moe, qwen3moe and Mixtral-style experts, gemma, gemma2, gemma3,
// phi3 with LongRoPE, granite, gpt-oss with MXFP4 experts) give the logits of the plain-loop
// reference forward (tests/engine/reference_forward.h), and generate deterministically.
// Unsupported architectures, RoPE scalings, missing tensors and keys and wrong shapes get clear
// errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/error.h"
#include "engine/lab/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/lab/random_model.h"
#include "kernels/dot.h"
#include "kernels/quantize.h"
#include "kernels/weight_repack.h"
#include "tests/engine/model_run.h"
#include "tests/engine/reference_forward.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::reference_logits;
using kvdesk::test::ReferenceOptions;
using kvdesk::test::Vec;
using kvdesk::test::TempDir;

namespace {

// ---------------------------------------------------------------------------------------------
// Tiny random models through the engine.
// ---------------------------------------------------------------------------------------------

// 2 layers, d_model 32, 4 heads over 2 KV heads (head dim 8), F32 weights. A weight spread of
// 0.5 (not 0.02) makes attention sharp, so RoPE, biases and factors visibly move the logits.
RandomModelSpec tiny_spec(const std::string& arch) {
  RandomModelSpec s;
  s.layers = 2;
  s.embd = 32;
  s.heads = 4;
  s.kv_heads = 2;
  s.ff = 48;
  s.context_length = 256;
  s.vocab_from = model_path("tokenizer.model");
  s.mix = *find_weight_mix("f32");
  s.arch = arch;
  s.weight_std = 0.5f;
  return s;
}

// A llama of one llama.cpp weight mix, wide enough (256) for every block size of its types.
RandomModelSpec weight_mix_spec(const std::string& mix) {
  RandomModelSpec spec = tiny_spec("llama");
  spec.mix = *find_weight_mix(mix);
  spec.embd = 256;
  spec.heads = 8;
  spec.kv_heads = 2;
  spec.ff = 512;
  spec.weight_std = 0.1f;
  return spec;
}

test::ModelRun open_model(const std::string& path, int threads = 1, int32_t prefill_chunk = 512) {
  return test::ModelRun(Model::load(path), KvCacheConfig{}, threads, prefill_chunk);
}

std::vector<int32_t> some_tokens(int n) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(int32_t((i * 97 + 13) % 500 + 3));
  return tokens;
}

// The largest |engine - reference| over all positions and the vocabulary.
double worst_logit_difference(const std::vector<float>& engine, const std::vector<Vec>& reference) {
  double worst = 0;
  const size_t vocab = reference[0].size();
  for (size_t t = 0; t < reference.size(); ++t) {
    for (size_t i = 0; i < vocab; ++i) worst = std::max(worst, std::fabs(engine[t * vocab + i] - reference[t][i]));
  }
  return worst;
}

// Quantized weights against the reference over the same weights dequantized: what is left is the
// engine's 8-bit activation rounding, under 5% of the largest logit (which must be far from 0).
void check_within_activation_rounding(const std::vector<float>& logits, const std::vector<Vec>& reference,
                                      const std::string& what) {
  double spread = 0;
  for (const Vec& row : reference) {
    for (double v : row) spread = std::max(spread, std::fabs(v));
  }
  const double worst = worst_logit_difference(logits, reference);
  INFO(what << ": largest logit " << spread << ", largest difference " << worst);
  CHECK(spread > 1.0);
  CHECK(worst < 0.05 * spread);
}

// The largest |logit| of want and the largest |got - want|, over all positions.
struct LogitGap {
  double spread = 0;
  double worst = 0;
};
LogitGap logit_gap(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  LogitGap gap;
  for (size_t i = 0; i < want.size(); ++i) {
    gap.spread = std::max(gap.spread, double(std::fabs(want[i])));
    gap.worst = std::max(gap.worst, double(std::fabs(got[i] - want[i])));
  }
  return gap;
}

struct Variant {
  std::string arch;
  std::string rope_scaling;
  bool tied;
};

}  // namespace

TEST_CASE("tiny qwen2 (with YaRN too) and Llama 3 models give the logits of a plain-loop reference forward", "[engine][architectures]") {
  const Variant variant = GENERATE(Variant{"qwen2", "none", true}, Variant{"qwen2", "none", false},
                                   Variant{"llama", "llama3", false}, Variant{"llama", "llama3", true},
                                   Variant{"llama", "none", false}, Variant{"qwen2", "yarn", false});
  const int32_t prefill_chunk = GENERATE(1, 512);   // token-by-token decode, or one batch
  TempDir dir;
  RandomModelSpec spec = tiny_spec(variant.arch);
  spec.rope_scaling = variant.rope_scaling;
  spec.tied_embeddings = variant.tied;
  spec.rope_freq_base = variant.rope_scaling == "llama3" ? 500000.0f : 10000.0f;
  write_random_model(spec, dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"), 1, prefill_chunk);
  REQUIRE(r.model->weights().tied_output == variant.tied);
  const std::vector<int32_t> tokens = some_tokens(40);
  const std::vector<float> logits = r.logits(tokens);
  const double worst = worst_logit_difference(logits, reference_logits(r.model->file(), tokens));
  INFO(variant.arch << " rope scaling " << variant.rope_scaling << " tied " << variant.tied
                    << ", prefill chunk " << prefill_chunk << ": largest logit difference " << worst);
  CHECK(worst < 1e-4);
}

namespace {

// Each newer family as make-model writes it: Gemma 2 with a window of 8 over 2 layers (layer 0
// local), Gemma 3 over 6 layers (five local, one global at base 1e6), Phi-3 with LongRoPE past
// its original context (256 > 64: the long factors).
RandomModelSpec family_spec(const std::string& arch) {
  RandomModelSpec s = tiny_spec(arch);
  if (arch == "gemma2" || arch == "gemma3") s.sliding_window = 8;
  if (arch == "gemma3") {
    s.layers = 6;
    s.rope_freq_base = 1000000.0f;
  }
  if (arch == "phi3") s.rope_scaling = "longrope";
  if (arch == "smollm3") s.layers = 4;   // layer 3 without RoPE
  return s;
}

}  // namespace

TEST_CASE("qwen3, gemma, gemma2, gemma3, phi3, granite and smollm3 give the logits of the reference forward",
          "[engine][architectures]") {
  const std::string arch = GENERATE(as<std::string>{}, "qwen3", "gemma", "gemma2", "gemma3", "phi3", "granite", "smollm3");
  const int32_t prefill_chunk = GENERATE(1, 512);
  TempDir dir;
  write_random_model(family_spec(arch), dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"), 2, prefill_chunk);
  const std::vector<int32_t> tokens = some_tokens(40);
  const std::vector<float> logits = r.logits(tokens);
  const double worst = worst_logit_difference(logits, reference_logits(r.model->file(), tokens));
  INFO(arch << ", prefill chunk " << prefill_chunk << ": largest logit difference " << worst);
  CHECK(worst < 1e-3);
}

TEST_CASE("qwen3moe, qwen2moe, gpt-oss and a Mixtral-style llama route each token to its experts as the reference forward does", "[engine][architectures][experts]") {
  const std::string arch = GENERATE(as<std::string>{}, "qwen3moe", "qwen2moe", "llama", "gpt-oss");
  const int32_t prefill_chunk = GENERATE(1, 512);   // one token a step (a decode step's k experts in one loop), or one batch
  TempDir dir;
  RandomModelSpec spec = tiny_spec(arch);
  spec.experts = 8;
  spec.experts_used = arch == "qwen3moe" ? 3 : 2;
  spec.expert_ff = 24;   // qwen2moe's shared expert is ff (48) wide
  if (arch == "gpt-oss") {   // as gpt-oss-20b: YaRN, a window on even layers (8 of 40 tokens here), sinks,
    spec.rope_scaling = "yarn";   // and heads apart from d_model: 4 x 16 queries over 32
    spec.sliding_window = 8;
    spec.head_dim = 16;
  }
  write_random_model(spec, dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"), 2, prefill_chunk);
  const ModelConfig& c = r.model->config();
  CHECK(c.expert_count == 8);
  CHECK(c.expert_used_count == spec.experts_used);
  CHECK(c.expert_feed_forward_length == (arch == "llama" ? spec.ff : 24));
  CHECK(c.expert_shared_feed_forward_length == (arch == "qwen2moe" ? spec.ff : 0));
  CHECK(c.traits.expert_weights_renormalized == (arch != "qwen2moe"));
  if (arch == "gpt-oss") CHECK(c.q_dim() == 2 * c.embedding_length);
  const std::vector<int32_t> tokens = some_tokens(40);
  const std::vector<float> logits = r.logits(tokens);
  const double worst = worst_logit_difference(logits, reference_logits(r.model->file(), tokens));
  INFO(arch << ", prefill chunk " << prefill_chunk << ": largest logit difference " << worst);
  CHECK(worst < 1e-3);
}

TEST_CASE("each family's features move the logits: the engine is not matching a weaker reference", "[engine][architectures]") {
  TempDir dir;
  // Without the window, Gemma's local layers would see all 40 tokens instead of the last 8.
  for (const char* arch : {"gemma2", "gemma3"}) {
    write_random_model(family_spec(arch), dir.file(std::string(arch) + ".gguf"));
    test::ModelRun r = open_model(dir.file(std::string(arch) + ".gguf"));
    const std::vector<int32_t> tokens = some_tokens(40);
    INFO(arch);
    CHECK(r.model->config().sliding_window == 8);
    CHECK(worst_logit_difference(r.logits(tokens), reference_logits(r.model->file(), tokens, {.use_sliding_window = false})) > 0.1);
  }
  // Phi-3 picks the long factors past its original context: the short ones give other logits.
  write_random_model(family_spec("phi3"), dir.file("phi3.gguf"));
  test::ModelRun phi = open_model(dir.file("phi3.gguf"));
  const float* long_factors = reinterpret_cast<const float*>(phi.model->file().tensor_data(*phi.model->file().find_tensor("rope_factors_long.weight")));
  CHECK(phi.model->weights().rope_freqs == long_factors);
  CHECK(phi.model->config().rope_attn_factor > 1.0f);
  // Qwen2 MoE's shared expert runs beside the routed ones.
  RandomModelSpec moe = tiny_spec("qwen2moe");
  moe.experts = 6;
  write_random_model(moe, dir.file("qwen2moe.gguf"));
  test::ModelRun qwen2moe = open_model(dir.file("qwen2moe.gguf"));
  const std::vector<int32_t> tokens = some_tokens(12);
  CHECK(worst_logit_difference(qwen2moe.logits(tokens), reference_logits(qwen2moe.model->file(), tokens, {.use_shared_expert = false})) > 0.1);
}

TEST_CASE("the newer families read their own keys and tensors", "[engine][architectures]") {
  TempDir dir;
  auto load = [&](const std::string& arch) {
    write_random_model(family_spec(arch), dir.file(arch + ".gguf"));
    return Model::load(dir.file(arch + ".gguf"));
  };
  const auto gemma = load("gemma");
  const ModelConfig& g1 = gemma->config();
  CHECK(g1.embedding_scale == Approx(std::sqrt(32.0)));
  CHECK(g1.attention_scale == Approx(1.0 / std::sqrt(double(g1.head_dim))));
  CHECK(g1.sliding_window == 0);
  CHECK(g1.attn_logit_softcap == 0.0f);
  CHECK(g1.traits.ffn_activation == FfnActivation::GeluTanh);
  CHECK(gemma->weights().tied_output);
  CHECK(gemma->weights().layers[0].attn_post_norm == nullptr);
  CHECK(gemma->weights().layers[0].ffn_post_norm == nullptr);

  const auto gemma2 = load("gemma2");
  const ModelConfig& g2 = gemma2->config();
  CHECK(g2.attn_logit_softcap == 50.0f);
  CHECK(g2.final_logit_softcap == 30.0f);
  CHECK(g2.embedding_scale == Approx(std::sqrt(32.0)));
  CHECK(g2.is_local_layer(0));
  CHECK_FALSE(g2.is_local_layer(1));
  CHECK(gemma2->weights().tied_output);
  CHECK(gemma2->weights().layers[1].ffn_post_norm != nullptr);

  const auto gemma3 = load("gemma3");
  const ModelConfig& g3 = gemma3->config();
  for (int32_t l = 0; l < 5; ++l) CHECK(g3.is_local_layer(l));
  CHECK_FALSE(g3.is_local_layer(5));
  CHECK(layer_rope_params(g3, nullptr, 0).freq_base == 10000.0f);
  CHECK(layer_rope_params(g3, nullptr, 5).freq_base == 1000000.0f);
  CHECK(g3.attn_logit_softcap == 0.0f);
  CHECK(gemma3->weights().layers[0].q_norm != nullptr);

  const auto qwen3 = load("qwen3");
  CHECK(qwen3->config().rope_mode == ops::RopeMode::Neox);
  CHECK(qwen3->weights().layers[0].k_norm != nullptr);
  CHECK(qwen3->weights().layers[0].bq == nullptr);

  const auto phi3 = load("phi3");
  const LayerWeights& p = phi3->weights().layers[0];
  CHECK(phi3->file().find_tensor("blk.0.attn_qkv.weight") != nullptr);
  CHECK(static_cast<const uint8_t*>(p.wk.data) == static_cast<const uint8_t*>(p.wq.data) + p.wq.rows * p.wq.row_bytes);
  CHECK(p.w_up.rows == 48);
  CHECK(phi3->config().rope_original_context == 64);

  const auto granite = load("granite");
  const ModelConfig& gr = granite->config();
  CHECK(gr.embedding_scale == 12.0f);
  CHECK(gr.residual_scale == 0.22f);
  CHECK(gr.attention_scale == 0.015625f);
  CHECK(gr.logit_scale == 8.0f);
  CHECK(gr.rope_mode == ops::RopeMode::Normal);
}

TEST_CASE("every newer family generates the same tokens every time, each the reference's argmax", "[engine][architectures]") {
  const std::string arch = GENERATE(as<std::string>{}, "qwen3", "gemma", "gemma2", "gemma3", "phi3", "granite");
  TempDir dir;
  write_random_model(family_spec(arch), dir.file("m.gguf"));
  const std::vector<int32_t> prompt = some_tokens(6);
  std::vector<int32_t> first;
  for (int threads : {1, 2}) {
    test::ModelRun r = open_model(dir.file("m.gguf"), threads);
    const Completion result = r.greedy(prompt, 16);
    REQUIRE(result.tokens.size() == 16);
    if (first.empty()) first = result.tokens;
    CHECK(result.tokens == first);
  }
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), first.begin(), first.end() - 1);
  const std::vector<Vec> logits = reference_logits(*GgufFile::open(dir.file("m.gguf")), sequence);
  for (size_t i = 0; i < first.size(); ++i) {
    const Vec& row = logits[prompt.size() - 1 + i];
    INFO(arch << " token " << i);
    CHECK(std::max_element(row.begin(), row.end()) - row.begin() == first[i]);
  }
}

TEST_CASE("the Llama 3 frequency factors change the logits the reference must match", "[engine][architectures]") {
  TempDir dir;
  RandomModelSpec spec = tiny_spec("llama");
  spec.rope_scaling = "llama3";
  spec.rope_freq_base = 500000.0f;
  spec.embd = 64;   // head dim 32: pairs 9..15 have wavelengths past 8192 and are slowed 8x
  spec.heads = 2;
  spec.kv_heads = 1;
  write_random_model(spec, dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"));
  REQUIRE(r.model->weights().rope_freqs != nullptr);
  const std::vector<int32_t> tokens = some_tokens(120);
  const std::vector<float> logits = r.logits(tokens);
  // 120 positions make f32 angles coarser (an angle of 119 carries 4e-6 of rounding) and the
  // logits reach about 20: the engine stays within 1e-3 of the exact forward, the same as this
  // shape without rope_freqs does, while ignoring the factors moves logits by whole units.
  CHECK(worst_logit_difference(logits, reference_logits(r.model->file(), tokens)) < 1e-3);
  CHECK(worst_logit_difference(logits, reference_logits(r.model->file(), tokens, {.use_rope_freqs = false})) > 1.0);
}

TEST_CASE("a qwen2 model generates the same tokens every time, each the reference's argmax", "[engine][architectures]") {
  TempDir dir;
  RandomModelSpec spec = tiny_spec("qwen2");
  spec.tied_embeddings = true;
  write_random_model(spec, dir.file("m.gguf"));
  const std::vector<int32_t> prompt = some_tokens(6);
  std::vector<int32_t> first;
  for (int threads : {1, 2, 1}) {
    test::ModelRun r = open_model(dir.file("m.gguf"), threads);
    const Completion result = r.greedy(prompt, 24);
    REQUIRE(result.tokens.size() == 24);
    if (first.empty()) first = result.tokens;
    CHECK(result.tokens == first);
  }
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), first.begin(), first.end() - 1);
  const std::vector<Vec> logits = reference_logits(*GgufFile::open(dir.file("m.gguf")), sequence);
  for (size_t i = 0; i < first.size(); ++i) {
    const Vec& row = logits[prompt.size() - 1 + i];
    CHECK(std::max_element(row.begin(), row.end()) - row.begin() == first[i]);
  }
}

TEST_CASE("make-model writes qwen2 biases, tied embeddings and Llama 3.1's rope_freqs", "[engine][architectures]") {
  TempDir dir;
  RandomModelSpec spec = tiny_spec("qwen2");
  spec.tied_embeddings = true;
  spec.rope_scaling = "llama3";
  spec.embd = 256;
  spec.heads = 2;   // head dim 128, as Llama 3
  spec.rope_freq_base = 500000.0f;
  write_random_model(spec, dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"));
  const ModelConfig& c = r.model->config();
  const ModelWeights& w = r.model->weights();
  CHECK(c.architecture == "qwen2");
  CHECK(c.rope_mode == ops::RopeMode::Neox);
  CHECK(w.tied_output);
  CHECK(w.output.data == w.token_embd.data);
  CHECK(r.model->file().find_tensor("output.weight") == nullptr);
  for (const LayerWeights& l : w.layers) CHECK((l.bq && l.bk && l.bv));
  const std::vector<float> factors = llama3_rope_factors(500000.0f, 128);
  REQUIRE(w.rope_freqs != nullptr);
  CHECK(std::vector<float>(w.rope_freqs, w.rope_freqs + 64) == factors);
}

TEST_CASE("decode reads every weight once but only one row of the embedding table", "[engine][architectures]") {
  const bool tied = GENERATE(true, false);
  TempDir dir;
  RandomModelSpec spec = tiny_spec("qwen2");   // with Q/K/V biases
  spec.tied_embeddings = tied;
  write_random_model(spec, dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"));
  const ModelWeights& w = r.model->weights();
  const uint64_t table = uint64_t(w.token_embd.rows) * w.token_embd.row_bytes;
  // The file's tensors hold the table once; decode reads it whole only as the tied output.
  const uint64_t expected = w.weight_bytes - (tied ? 0 : table) + w.token_embd.row_bytes;
  INFO("tied " << tied);
  CHECK(decode_weight_read_bytes(w, r.model->config()) == expected);
}

TEST_CASE("decode reads a mixture's router, its shared expert and only experts_used of its experts", "[engine][architectures][experts]") {
  const std::string arch = GENERATE(as<std::string>{}, "qwen3moe", "qwen2moe");
  TempDir dir;
  RandomModelSpec spec = tiny_spec(arch);
  spec.experts = 8;
  spec.experts_used = 3;
  write_random_model(spec, dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"));
  const ModelWeights& w = r.model->weights();
  const uint64_t table = uint64_t(w.token_embd.rows) * w.token_embd.row_bytes;
  const ExpertWeights& e = w.layers[0].experts[0];
  const uint64_t expert = uint64_t(e.gate.rows) * e.gate.row_bytes + uint64_t(e.up.rows) * e.up.row_bytes +
                          uint64_t(e.down.rows) * e.down.row_bytes;
  const uint64_t unread_experts = uint64_t(spec.layers) * (8 - 3) * expert;
  INFO(arch);
  CHECK((w.layers[0].shared_gate.rows == 1) == (arch == "qwen2moe"));
  CHECK(decode_weight_read_bytes(w, r.model->config()) == w.weight_bytes - table + w.token_embd.row_bytes - unread_experts);
}

TEST_CASE("gpt-oss with MXFP4 experts (its release's mix) matches the reference forward on every ISA",
          "[engine][architectures][experts][lowbit]") {
  // The reference reads the same MXFP4 weights dequantized; what is left is the engine's 8-bit
  // activation rounding (Q8_0 elsewhere), as for the other low-bit mixes, on ggml's rows and on
  // AVX2's repacked ones.
  const CpuIsa isa = GENERATE(CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::AvxVnni, CpuIsa::Avx512);
  if (!cpu_isa_supported(isa)) return;   // this CPU cannot run that ISA's kernels
  TempDir dir;
  RandomModelSpec spec = tiny_spec("gpt-oss");
  spec.embd = 64;
  spec.ff = 64;
  spec.expert_ff = 64;
  spec.experts = 4;
  spec.experts_used = 2;
  spec.sliding_window = 4;
  spec.rope_scaling = "yarn";
  spec.weight_std = 0.2f;
  spec.mix = *find_weight_mix("mxfp4_moe");
  write_random_model(spec, dir.file("m.gguf"));
  cpu_isa_force(isa);
  test::ModelRun r = open_model(dir.file("m.gguf"), 2);
  CHECK(r.model->file().find_tensor("blk.1.ffn_down_exps.weight")->type == GgmlType::MXFP4);
  CHECK(r.model->file().find_tensor("blk.1.attn_q.weight")->type == GgmlType::Q8_0);
  // The AVX2 and AVX-VNNI paths repack the experts one by one into MXFP4x8.
  const GgmlType expert_type = cpu_layout_pays(GgmlType::MXFP4, isa) ? GgmlType::MXFP4x8 : GgmlType::MXFP4;
  CHECK(r.model->weights().layers[1].experts[3].down.type == expert_type);
  const std::vector<int32_t> tokens = some_tokens(12);
  const std::vector<float> logits = r.logits(tokens);
  cpu_isa_force(cpu_isa_detected());
  // The file as written: the model's copy has its Q8_0 matrices repacked on the AVX2 path.
  check_within_activation_rounding(logits, reference_logits(*GgufFile::open(dir.file("m.gguf")), tokens),
                                   cpu_isa_name(isa));
}

TEST_CASE("older Mixtral files with a tensor per expert matrix load and match the reference forward", "[engine][architectures][experts]") {
  TempDir dir;
  RandomModelSpec spec = tiny_spec("llama");
  spec.experts = 4;
  spec.experts_used = 2;
  spec.split_experts = true;
  write_random_model(spec, dir.file("m.gguf"));
  REQUIRE(GgufFile::open(dir.file("m.gguf"))->find_tensor("blk.1.ffn_down.3.weight") != nullptr);
  test::ModelRun r = open_model(dir.file("m.gguf"), 2);
  CHECK(r.model->weights().layers[1].experts[3].down.rows == spec.embd);
  const std::vector<int32_t> tokens = some_tokens(24);
  CHECK(worst_logit_difference(r.logits(tokens), reference_logits(r.model->file(), tokens)) < 1e-3);
}

TEST_CASE("a mixture's quantized experts are repacked one by one and give the logits of ggml's layout",
          "[engine][architectures][experts][lowbit]") {
  if (!cpu_isa_supported(CpuIsa::Avx2)) return;
  cpu_isa_force(CpuIsa::Avx2);
  TempDir dir;
  RandomModelSpec spec = weight_mix_spec("q4_k_m");
  spec.arch = "qwen3moe";
  spec.experts = 4;
  spec.experts_used = 2;
  spec.expert_ff = 256;
  write_random_model(spec, dir.file("m.gguf"));
  ModelLoadOptions as_stored;
  as_stored.cpu_layouts = false;
  test::ModelRun repacked(Model::load(dir.file("m.gguf")), KvCacheConfig{}, 2);
  test::ModelRun stored(Model::load(dir.file("m.gguf"), as_stored), KvCacheConfig{}, 2);
  const std::vector<ExpertWeights>& experts = repacked.model->weights().layers[0].experts;
  const GgmlType file_type = stored.model->weights().layers[0].experts[3].up.type;
  for (const ExpertWeights& e : experts) CHECK(e.up.type == repacked_type(file_type, e.up.rows));
  CHECK(experts[3].up.data == experts[0].up.row(3 * experts[0].up.rows));
  const std::vector<int32_t> tokens = some_tokens(12);
  const LogitGap gap = logit_gap(repacked.logits(tokens), stored.logits(tokens));
  INFO("largest logit " << gap.spread << ", largest difference " << gap.worst);
  CHECK(gap.spread > 1.0);
  CHECK(gap.worst < 1e-4 * gap.spread);
  cpu_isa_force(cpu_isa_detected());
}

TEST_CASE("low-bit weight mixes load, match the reference forward and generate", "[engine][architectures][lowbit]") {
  // One super-block wide (embd 256, ff 512) with GQA 4, so every mix's per-tensor rules apply:
  // q2_k puts attn_v in Q4_K and attn_output / ffn_down in Q3_K; q3_k_m attn_v of the first two
  // layers in Q5_K, attn_output and ffn_down in Q4_K; both output in Q6_K. The reference forward
  // runs on the same weights dequantized, so what is left is the engine's 8-bit activation
  // rounding, the same for every weight type (the q8_0 case is the control). q4_k_m's Q4_K and
  // Q6_K are repacked at load when the AVX2 kernels are active (KVDESK_ISA=avx2), so the
  // reference reads the file as written, not the model's rewritten copy.
  struct MixCase {
    const char* mix;
    std::vector<GgmlType> types;  // tensor types the file must hold
  };
  const MixCase c = GENERATE(MixCase{"q8_0", {GgmlType::Q8_0}},
                             MixCase{"q2_k", {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K}},
                             MixCase{"q3_k", {GgmlType::Q3_K}},
                             MixCase{"q3_k_m", {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}},
                             MixCase{"q4_k_m", {GgmlType::Q4_K, GgmlType::Q6_K}},
                             MixCase{"iq4_nl", {GgmlType::IQ4_NL}}, MixCase{"iq4_xs", {GgmlType::IQ4_XS}});
  TempDir dir;
  write_random_model(weight_mix_spec(c.mix), dir.file("m.gguf"));
  test::ModelRun r = open_model(dir.file("m.gguf"), 2);
  for (GgmlType type : c.types) {
    const auto& tensors = r.model->file().tensors();
    INFO(c.mix << " holds " << ggml_type_info(type).name);
    CHECK(std::any_of(tensors.begin(), tensors.end(), [&](const GgufTensorInfo& t) { return t.type == type; }));
  }
  const std::vector<int32_t> tokens = some_tokens(12);
  const std::vector<float> logits = r.logits(tokens);
  check_within_activation_rounding(logits, reference_logits(*GgufFile::open(dir.file("m.gguf")), tokens), c.mix);

  test::ModelRun fresh = open_model(dir.file("m.gguf"), 1);
  CHECK(fresh.greedy(some_tokens(4), 8).tokens.size() == 8);
}

TEST_CASE("AVX2's repacked K-quant, IQ4_XS and IQ4_NL layouts give the logits of ggml's layout",
          "[engine][architectures][lowbit]") {
  // q4_k_m (Q4_K, Q6_K), q5_k_m (Q5_K, Q6_K), iq4_xs, iq4_nl, q3_k_m (Q3_K, Q4_K, Q5_K, Q6_K),
  // q2_k (Q2_K, Q3_K, Q4_K, Q6_K), q4_1, q5_0 and q5_1 loaded twice under the AVX2 kernels:
  // repacked at load (Q2_Kx8, Q3_Kx8, Q4_Kx8, Q5_Kx8, Q6_Kx8, IQ4_XSx8, IQ4_NLx8, Q4_1x8, Q5_0x8,
  // Q5_1x8) and as stored. Both kernels sum each super-block (IQ4_XS, IQ4_NL, Q2_K, Q3_K, Q4_1,
  // Q5_0, Q5_1: each 32 values, against their own act scale) in integers, so only the order of
  // the float terms differs. That order can still move an
  // activation across a rounding tie of its int8 quantization, which shifts every later logit
  // by 0.5-1.5% of their spread: on the iq4_xs model (whose activations have a scale per 32
  // values, so more ties), over 12 token sets, the stored and the repacked layout each differed
  // so from the scalar kernels on 5 (4 of them the same sets, so not the layout's doing) and
  // agreed to 2e-6 on the others; some_tokens(12) is one where the stored layout flips. Its
  // bound, and that of the other types with act blocks of their own, is therefore one flip's 3%
  // of the spread: a layout read wrong moves logits by their whole spread.
  if (!cpu_isa_supported(CpuIsa::Avx2)) return;
  cpu_isa_force(CpuIsa::Avx2);
  struct MixCase {
    const char* mix;
    double bound;   // largest logit difference, as a share of the largest logit
  };
  for (const MixCase c : {MixCase{"q4_k_m", 1e-4}, MixCase{"q5_k_m", 1e-4}, MixCase{"iq4_xs", 0.03},
                           MixCase{"iq4_nl", 0.03}, MixCase{"q3_k_m", 0.03}, MixCase{"q2_k", 0.03},
                           MixCase{"q4_1", 0.03}, MixCase{"q5_0", 0.03}, MixCase{"q5_1", 0.03}}) {
    const char* mix = c.mix;
    TempDir dir;
    write_random_model(weight_mix_spec(mix), dir.file("m.gguf"));
    ModelLoadOptions as_stored;
    as_stored.cpu_layouts = false;
    test::ModelRun repacked(Model::load(dir.file("m.gguf")), KvCacheConfig{}, 2);
    test::ModelRun stored(Model::load(dir.file("m.gguf"), as_stored), KvCacheConfig{}, 2);
    const WeightMatrix& up = repacked.model->weights().layers[0].w_up;
    const GgmlType file_type = stored.model->weights().layers[0].w_up.type;
    INFO(mix << ": ffn_up stored as " << ggml_type_info(file_type).name << ", repacked " << ggml_type_info(up.type).name);
    CHECK(up.type != file_type);
    CHECK(up.type == repacked_type(file_type, up.rows));
    const std::vector<int32_t> tokens = some_tokens(12);
    const LogitGap gap = logit_gap(repacked.logits(tokens), stored.logits(tokens));
    INFO("largest logit " << gap.spread << ", largest difference " << gap.worst);
    CHECK(gap.spread > 1.0);
    CHECK(gap.worst < c.bound * gap.spread);
  }
  cpu_isa_force(cpu_isa_detected());
}

TEST_CASE("AVX-512 repacks Q4_0 and Q8_0 for its own tiles and Q4_1, Q5_0, Q5_1 for the AVX2 ones, not the K-quants",
          "[engine][architectures][lowbit]") {
  // On AVX-512 the interleaved layouts pay for Q4_0 and Q8_0 (their 512-bit tiles over pairs of
  // groups) and for Q4_1, Q5_0 and Q5_1 (whose AVX2 tiles beat the AVX-512 row kernels)
  // (cpu_layout_pays): q4_0, q8_0 and q5_1 models' matrices are repacked and give the stored
  // layout's logits, a q4_k_m model's are not repacked at all.
  if (!cpu_isa_supported(CpuIsa::Avx512)) return;
  cpu_isa_force(CpuIsa::Avx512);
  TempDir dir;
  ModelLoadOptions as_stored;
  as_stored.cpu_layouts = false;
  const std::vector<int32_t> tokens = some_tokens(12);
  struct Case {
    const char* mix;
    GgmlType stored, packed;
  };
  for (const Case& c : {Case{"q4_0", GgmlType::Q4_0, GgmlType::Q4_0x8}, Case{"q8_0", GgmlType::Q8_0, GgmlType::Q8_0x8},
                        Case{"q5_1", GgmlType::Q5_1, GgmlType::Q5_1x8}}) {
    INFO("weights " << c.mix);
    const std::string path = dir.file(std::string(c.mix) + ".gguf");
    write_random_model(weight_mix_spec(c.mix), path);
    test::ModelRun repacked(Model::load(path), KvCacheConfig{}, 2);
    test::ModelRun stored(Model::load(path, as_stored), KvCacheConfig{}, 2);
    CHECK(stored.model->weights().layers[0].w_up.type == c.stored);
    CHECK(repacked.model->weights().layers[0].w_up.type == c.packed);
    const LogitGap gap = logit_gap(repacked.logits(tokens), stored.logits(tokens));
    INFO("largest logit " << gap.spread << ", largest difference " << gap.worst);
    CHECK(gap.spread > 1.0);
    CHECK(gap.worst < 0.03 * gap.spread);
  }
  write_random_model(weight_mix_spec("q4_k_m"), dir.file("q4_k_m.gguf"));
  const std::unique_ptr<Model> k_quants = Model::load(dir.file("q4_k_m.gguf"));
  CHECK(k_quants->weights().layers[0].w_up.type == GgmlType::Q4_K);
  cpu_isa_force(cpu_isa_detected());
}

TEST_CASE("Llama 3.1 rope factors keep short wavelengths, slow long ones 8x and blend between", "[engine][architectures]") {
  // Pair i's wavelength is 2 pi base^(2i/128); with base 500000 it passes 8192/4 = 2048 at
  // pair 29 and 8192 at pair 35.
  const std::vector<float> f = llama3_rope_factors(500000.0f, 128);
  REQUIRE(f.size() == 64);
  for (int i = 0; i <= 28; ++i) CHECK(f[size_t(i)] == 1.0f);
  for (int i = 35; i < 64; ++i) CHECK(f[size_t(i)] == 8.0f);
  for (int i = 29; i <= 34; ++i) {
    CHECK(f[size_t(i)] > 1.0f);
    CHECK(f[size_t(i)] < 8.0f);
    CHECK(f[size_t(i)] > f[size_t(i - 1)]);
  }
  // Inside the band, wavelength w: smooth = (8192/w - 1) / 3, factor = 1 / ((1 - smooth)/8 + smooth).
  const double w31 = 2 * M_PI * std::pow(500000.0, 62.0 / 128);
  const double smooth = (8192 / w31 - 1) / 3;
  CHECK(f[31] == Approx(1 / ((1 - smooth) / 8 + smooth)).epsilon(1e-6));
}

// ---------------------------------------------------------------------------------------------
// Errors: metadata and tensors written by hand.
// ---------------------------------------------------------------------------------------------

namespace {

// Hyperparameters of a 1-layer model: d_model 8, 2 heads over 1 KV head (head dim 4), ff 16,
// vocabulary 4 unless given.
void add_metadata(GgufWriter& w, const std::string& arch, uint32_t vocab_size = 4) {
  const std::string a = arch + ".";
  w.add_string("general.architecture", arch);
  w.add_uint32(a + "context_length", 64);
  w.add_uint32(a + "embedding_length", 8);
  w.add_uint32(a + "block_count", 1);
  w.add_uint32(a + "feed_forward_length", 16);
  w.add_uint32(a + "attention.head_count", 2);
  w.add_uint32(a + "attention.head_count_kv", 1);
  w.add_uint32(a + "vocab_size", vocab_size);
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;
  float value = 0.5f;
};

// The tensors of that 1-layer model (with Q/K/V biases), all F32.
std::vector<TensorSpec> tiny_tensors() {
  return {{"token_embd.weight", {8, 4}}, {"output_norm.weight", {8}},
          {"blk.0.attn_norm.weight", {8}}, {"blk.0.attn_q.weight", {8, 8}},
          {"blk.0.attn_k.weight", {8, 4}}, {"blk.0.attn_v.weight", {8, 4}},
          {"blk.0.attn_q.bias", {8}}, {"blk.0.attn_k.bias", {4}}, {"blk.0.attn_v.bias", {4}},
          {"blk.0.attn_output.weight", {8, 8}}, {"blk.0.ffn_norm.weight", {8}},
          {"blk.0.ffn_gate.weight", {8, 16}}, {"blk.0.ffn_up.weight", {8, 16}},
          {"blk.0.ffn_down.weight", {16, 8}}};
}

std::string write_tiny(const TempDir& dir, const std::string& arch, const std::vector<TensorSpec>& tensors) {
  GgufWriter w;
  add_metadata(w, arch);
  for (const TensorSpec& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    w.add_tensor(t.name, GgmlType::F32, t.dims, [n, value = t.value](std::vector<uint8_t>& out) {
      const std::vector<float> values(static_cast<size_t>(n), value);
      out.assign(reinterpret_cast<const uint8_t*>(values.data()), reinterpret_cast<const uint8_t*>(values.data() + n));
    });
  }
  const std::string path = dir.file(arch + ".gguf");
  w.write(path);
  return path;
}

// Weights point into their file, so the two live together.
struct BoundWeights {
  std::unique_ptr<GgufFile> file;
  ModelWeights weights;
};

BoundWeights load_weights(const std::string& path) {
  BoundWeights b;
  b.file = GgufFile::open(path);
  b.weights = bind_model_weights(*b.file, read_model_config(*b.file));
  return b;
}

std::vector<TensorSpec> without(std::vector<TensorSpec> tensors, const std::string& name) {
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const TensorSpec& t) { return t.name == name; }),
                tensors.end());
  return tensors;
}

std::vector<TensorSpec> with(std::vector<TensorSpec> tensors, const TensorSpec& replacement) {
  tensors = without(tensors, replacement.name);
  tensors.push_back(replacement);
  return tensors;
}

}  // namespace

TEST_CASE("an unsupported architecture is named in the error with the supported ones", "[engine][architectures]") {
  const std::string arch = GENERATE(std::string("falcon"), std::string("phi2"), std::string("mamba"));
  TempDir dir;
  const std::string path = write_tiny(dir, arch, tiny_tensors());
  CHECK_THROWS_WITH(Model::load(path), Catch::Contains("architecture '" + arch + "' is not supported") &&
                                           Catch::Contains("kvdesk runs llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma, gemma2, gemma3, phi3, granite, gpt-oss, smollm3"));
}

namespace {

// read_model_config of a file with arch's common keys and those `extra` adds throws `message`.
void check_config_error(const TempDir& dir, const std::string& arch, const std::function<void(GgufWriter&)>& extra,
                        const std::string& message) {
  GgufWriter w;
  add_metadata(w, arch);
  extra(w);
  w.write(dir.file("config.gguf"));
  CHECK_THROWS_WITH(read_model_config(*GgufFile::open(dir.file("config.gguf"))), Catch::Contains(message));
}

}  // namespace

TEST_CASE("missing family keys and tensors are named", "[engine][architectures]") {
  TempDir dir;
  // Gemma 2 must give its window; Granite its multipliers.
  check_config_error(dir, "gemma2", [](GgufWriter&) {}, "missing metadata 'gemma2.attention.sliding_window'");
  check_config_error(dir, "granite", [](GgufWriter& w) { w.add_float32("granite.embedding_scale", 12.0f); },
                     "missing metadata 'granite.residual_scale'");
  // Qwen3 needs its q/k norms; Phi-3 its fused projections.
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, "qwen3", tiny_tensors())), Catch::Contains("missing tensor 'blk.0.attn_q_norm.weight'"));
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, "phi3", tiny_tensors())), Catch::Contains("missing tensor 'blk.0.attn_qkv.weight'"));
  // Qwen3 MoE must say how many experts it has, use at most that many, and have them.
  check_config_error(dir, "qwen3moe", [](GgufWriter&) {}, "missing metadata 'qwen3moe.expert_count'");
  check_config_error(dir, "qwen2moe", [](GgufWriter&) {}, "missing metadata 'qwen2moe.expert_count'");
  check_config_error(dir, "qwen3moe", [](GgufWriter& w) {
    w.add_uint32("qwen3moe.expert_count", 4);
    w.add_uint32("qwen3moe.expert_used_count", 5);
  }, "'qwen3moe.expert_used_count' = 5 is out of range [1, 4]");
  GgufWriter mixtral;
  add_metadata(mixtral, "llama");
  mixtral.add_uint32("llama.expert_count", 4);
  mixtral.add_uint32("llama.expert_used_count", 2);
  for (const TensorSpec& t : tiny_tensors()) {
    if (t.name.find("ffn_") != std::string::npos && t.name != "blk.0.ffn_norm.weight") continue;
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    mixtral.add_tensor(t.name, GgmlType::F32, t.dims, [n](std::vector<uint8_t>& out) { out.assign(size_t(n) * 4, 0); });
  }
  mixtral.add_tensor("blk.0.ffn_gate_inp.weight", GgmlType::F32, {8, 4}, [](std::vector<uint8_t>& out) { out.assign(8 * 4 * 4, 0); });
  mixtral.write(dir.file("mixtral.gguf"));
  CHECK_THROWS_WITH(load_weights(dir.file("mixtral.gguf")), Catch::Contains("missing tensor 'blk.0.ffn_gate_exps.weight'"));
  std::vector<TensorSpec> phi = tiny_tensors();
  phi.push_back({"blk.0.attn_qkv.weight", {8, 16}});
  phi = with(phi, {"blk.0.ffn_up.weight", {8, 16}});
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, "phi3", phi)),
                    Catch::Contains("'blk.0.ffn_up.weight' has shape [8, 16], expected [8, 32]"));
}

TEST_CASE("Mistral Nemo / Small: llama with the tekken byte-level BPE vocabulary loads and runs", "[engine][architectures]") {
  TempDir dir;
  constexpr int64_t kVocab = 258;   // 256 byte tokens, <s>, </s>
  GgufWriter w;
  add_metadata(w, "llama", uint32_t(kVocab));
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
  tokens.push_back("<s>");
  tokens.push_back("</s>");
  std::vector<int32_t> types(256, 1);
  types.push_back(3);
  types.push_back(3);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "tekken");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_int32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {"H i"});
  w.add_uint32("tokenizer.ggml.bos_token_id", 256);
  w.add_uint32("tokenizer.ggml.eos_token_id", 257);
  std::vector<TensorSpec> tensors = with(tiny_tensors(), {"token_embd.weight", {8, kVocab}});
  for (const TensorSpec& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    w.add_tensor(t.name, GgmlType::F32, t.dims, [n](std::vector<uint8_t>& out) {
      std::vector<float> values(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) values[size_t(i)] = float((i * 37) % 11) / 11.0f - 0.5f;
      out.assign(reinterpret_cast<const uint8_t*>(values.data()), reinterpret_cast<const uint8_t*>(values.data() + n));
    });
  }
  w.write(dir.file("nemo.gguf"));
  test::ModelRun r = open_model(dir.file("nemo.gguf"));
  CHECK(r.model->config().architecture == "llama");
  CHECK(r.model->tokenizer().encode("Hi there", false).size() == 8);
  CHECK(r.greedy(r.model->tokenizer().encode("Hi", true), 4).tokens.size() == 4);
}

TEST_CASE("qwen2 reads its own keys, rotates NeoX halves and requires Q/K/V biases", "[engine][architectures]") {
  TempDir dir;
  const std::unique_ptr<GgufFile> file = GgufFile::open(write_tiny(dir, "qwen2", tiny_tensors()));
  const ModelConfig c = read_model_config(*file);
  CHECK(c.embedding_length == 8);
  CHECK(c.head_count_kv == 1);
  CHECK(c.rope_mode == ops::RopeMode::Neox);
  CHECK(c.qkv_bias == TensorPresence::Required);
  const ModelWeights w = bind_model_weights(*file, c);
  CHECK(w.layers[0].bk[3] == 0.5f);
  CHECK(w.tied_output);

  const std::string missing = write_tiny(dir, "qwen2", without(tiny_tensors(), "blk.0.attn_v.bias"));
  CHECK_THROWS_WITH(load_weights(missing), Catch::Contains("missing tensor 'blk.0.attn_v.bias'"));
}

TEST_CASE("llama runs with or without Q/K/V biases", "[engine][architectures]") {
  TempDir dir;
  const ModelWeights with_bias = load_weights(write_tiny(dir, "llama", tiny_tensors())).weights;
  CHECK(with_bias.layers[0].bq != nullptr);
  std::vector<TensorSpec> plain = tiny_tensors();
  for (const char* name : {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"}) plain = without(plain, name);
  const ModelWeights no_bias = load_weights(write_tiny(dir, "llama", plain)).weights;
  CHECK(no_bias.layers[0].bq == nullptr);
  CHECK(no_bias.layers[0].bv == nullptr);
  CHECK(no_bias.rope_freqs == nullptr);
}

TEST_CASE("a bias or rope_freqs of the wrong length or value is a clear error", "[engine][architectures]") {
  TempDir dir;
  const std::string arch = GENERATE(std::string("llama"), std::string("qwen2"));
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, arch, with(tiny_tensors(), {"blk.0.attn_k.bias", {8}}))),
                    Catch::Contains("'blk.0.attn_k.bias' has shape [8], expected [4]"));
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, arch, with(tiny_tensors(), {"blk.0.attn_q.bias", {8, 2}}))),
                    Catch::Contains("'blk.0.attn_q.bias' has shape [8, 2], expected [8]"));
  // Head dim 4: two rotated pairs, two factors.
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, arch, with(tiny_tensors(), {"rope_freqs.weight", {4}, 1.0f}))),
                    Catch::Contains("'rope_freqs.weight' has shape [4], expected [2]"));
  CHECK_THROWS_WITH(load_weights(write_tiny(dir, arch, with(tiny_tensors(), {"rope_freqs.weight", {2}, 0.0f}))),
                    Catch::Contains("rope_freqs.weight[0] = 0.000000 is not a positive frequency factor"));
  const BoundWeights ok = load_weights(write_tiny(dir, arch, with(tiny_tensors(), {"rope_freqs.weight", {2}, 2.0f})));
  REQUIRE(ok.weights.rope_freqs != nullptr);
  CHECK(ok.weights.rope_freqs[1] == 2.0f);
}

TEST_CASE("linear RoPE scaling divides positions, YaRN mixes in over its correction range, others are refused",
          "[engine][architectures]") {
  TempDir dir;
  auto config_with = [&](const std::string& type, double factor, const std::function<void(GgufWriter&)>& extra = {}) {
    GgufWriter w;
    add_metadata(w, "llama");
    if (!type.empty()) w.add_string("llama.rope.scaling.type", type);
    if (factor != 0) w.add_float32("llama.rope.scaling.factor", float(factor));
    if (extra) extra(w);
    w.write(dir.file("c.gguf"));
    return read_model_config(*GgufFile::open(dir.file("c.gguf")));
  };
  CHECK(config_with("", 0).rope_freq_scale == 1.0f);
  CHECK(config_with("linear", 4).rope_freq_scale == 0.25f);
  CHECK(config_with("linear", 4).rope_yarn_ext_factor == 0.0f);
  CHECK(config_with("none", 0).rope_mode == ops::RopeMode::Normal);
  // YaRN as llama.cpp sets it up: ext factor 1, betas 32 and 1, the trained context as the
  // original one unless the file names it; the kernel's own 1 + 0.1 ln 4 scales cos and sin, so
  // the attention factor passed along stays the file's (1).
  const ModelConfig yarn = config_with("yarn", 4);
  CHECK(yarn.rope_freq_scale == 0.25f);
  CHECK(yarn.rope_yarn_ext_factor == 1.0f);
  CHECK(yarn.rope_yarn_beta_fast == 32.0f);
  CHECK(yarn.rope_yarn_beta_slow == 1.0f);
  CHECK(yarn.rope_original_context == yarn.context_length);
  CHECK(yarn.rope_attn_factor == Approx(1.0f));
  const ops::RopeParams p = rope_params(yarn, nullptr);
  CHECK(p.ext_factor == 1.0f);
  CHECK(p.yarn_high > p.yarn_low);
  const ModelConfig tuned = config_with("yarn", 32, [](GgufWriter& w) {
    w.add_uint32("llama.rope.scaling.original_context_length", 4096);
    w.add_float32("llama.rope.scaling.yarn_beta_fast", 16.0f);
  });
  CHECK(tuned.rope_original_context == 4096);
  CHECK(tuned.rope_yarn_beta_fast == 16.0f);
  CHECK_THROWS_WITH(config_with("dynamic", 4), Catch::Contains("rope.scaling.type 'dynamic' is not supported"));
  CHECK_THROWS_WITH(config_with("linear", 0), Catch::Contains("rope.scaling.factor is missing"));
  CHECK_THROWS_WITH(config_with("yarn", 0), Catch::Contains("rope.scaling.factor is missing"));
}
