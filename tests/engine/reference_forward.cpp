// The reference forward pass: everything read from the file by name, computed in double with
// plain loops.
#include "tests/engine/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/ggml_types.h"
#include "kernels/quantize.h"

namespace kvdesk::test {
namespace {

// All of a tensor's values, dequantized; empty when the file has no such tensor.
Vec tensor_values(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) return {};
  const int64_t cols = t->dims[0];
  const int64_t rows = t->num_elements / cols;
  const size_t row_bytes = ggml_row_bytes(t->type, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  Vec out;
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(t->type, f.tensor_data(*t) + size_t(r) * row_bytes, row.data(), cols);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// y[rows] = W[rows][cols] x[cols] (+ bias[rows] when not empty).
Vec matvec(const Vec& w, const Vec& x, const Vec& bias = {}) {
  const size_t cols = x.size();
  const size_t rows = w.size() / cols;
  Vec y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = bias.empty() ? 0.0 : bias[r];
    for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

double key_or(const GgufFile& f, const std::string& key, double fallback) {
  return f.find_float(key).value_or(fallback);
}

// Everything that differs between the families, read the way each model's own code defines it.
struct ReferenceShape {
  std::string arch;
  size_t D, H, KVH, HD, layers, window;
  double eps, base, local_base, attn_scale, attn_cap, final_cap, embd_scale, residual_scale, logit_scale, rope_mscale;
  bool neox, gemma, gelu, gpt_oss;
  size_t experts_used;   // of a mixture of experts; 0: a dense FFN
  bool renormalize_experts;   // the chosen experts' probabilities scaled to sum to 1
  bool shared_expert;
  Vec rope_factors;
  // YaRN (transformers' _compute_yarn_parameters): factor 0 when the file has none.
  double yarn_factor, yarn_low, yarn_high;

  bool local(size_t l) const {
    if (window == 0) return false;
    if (arch == "gemma2" || arch == "gpt-oss") return l % 2 == 0;
    return arch == "gemma3" && l % 6 < 5;
  }
};

// YaRN as transformers computes it: the correction range is the pairs turning beta_fast (32)
// down to beta_slow (1) times over the original context, floored and ceiled; cos and sin are
// scaled by 0.1 ln(factor) + 1 (times the file's attn_factor).
void read_yarn(const GgufFile& f, const std::string& a, ReferenceShape& s) {
  s.yarn_factor = 0;
  if (f.find_string(a + "rope.scaling.type").value_or("") != "yarn") return;
  s.yarn_factor = f.get_float(a + "rope.scaling.factor");
  const double original = double(f.get_uint(a + "rope.scaling.original_context_length"));
  auto correction_dim = [&](double rotations) {
    return double(s.HD) * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(s.base));
  };
  s.yarn_low = std::max(0.0, std::floor(correction_dim(key_or(f, a + "rope.scaling.yarn_beta_fast", 32.0))));
  s.yarn_high = std::min(double(s.HD) - 1, std::ceil(correction_dim(key_or(f, a + "rope.scaling.yarn_beta_slow", 1.0))));
  s.rope_mscale *= 0.1 * std::log(s.yarn_factor) + 1;
}

ReferenceShape reference_shape(const GgufFile& f, const ReferenceOptions& options) {
  ReferenceShape s;
  s.arch = f.get_string("general.architecture");
  const std::string a = s.arch + ".";
  s.D = f.get_uint(a + "embedding_length");
  s.H = f.get_uint(a + "attention.head_count");
  s.KVH = f.get_uint(a + "attention.head_count_kv");
  s.HD = f.find(a + "attention.key_length") ? f.get_uint(a + "attention.key_length") : s.D / s.H;
  s.layers = f.get_uint(a + "block_count");
  s.eps = f.get_float(a + "attention.layer_norm_rms_epsilon");
  s.base = f.get_float(a + "rope.freq_base");
  s.gemma = s.arch == "gemma" || s.arch == "gemma2" || s.arch == "gemma3";
  s.gelu = s.gemma;
  s.gpt_oss = s.arch == "gpt-oss";
  s.neox = s.arch.starts_with("qwen") || s.gemma || s.arch == "phi3" || s.gpt_oss;
  s.experts_used = f.find(a + "expert_used_count") ? f.get_uint(a + "expert_used_count") : 0;
  s.renormalize_experts = s.arch != "qwen2moe";   // Qwen1.5-MoE's norm_topk_prob is false
  s.shared_expert = options.use_shared_expert && f.find_tensor("blk.0.ffn_gate_inp_shexp.weight");
  s.local_base = s.arch == "gemma3" ? 10000.0 : s.base;
  s.window = options.use_sliding_window && f.find(a + "attention.sliding_window") ? f.get_uint(a + "attention.sliding_window") : 0;
  s.attn_scale = key_or(f, a + "attention.scale", 1.0 / std::sqrt(double(s.HD)));
  s.attn_cap = s.arch == "gemma2" ? key_or(f, a + "attn_logit_softcapping", 50.0) : 0.0;
  s.final_cap = s.arch == "gemma2" ? key_or(f, a + "final_logit_softcapping", 30.0) : 0.0;
  s.embd_scale = s.gemma ? std::sqrt(double(s.D)) : key_or(f, a + "embedding_scale", 1.0);
  s.residual_scale = key_or(f, a + "residual_scale", 1.0);
  s.logit_scale = key_or(f, a + "logit_scale", 1.0);
  s.rope_mscale = key_or(f, a + "rope.scaling.attn_factor", 1.0);
  s.rope_factors = options.use_rope_freqs ? tensor_values(f, "rope_freqs.weight") : Vec{};
  read_yarn(f, a, s);
  if (f.find_tensor("rope_factors_long.weight")) {   // Phi-3 LongRoPE: long factors past the original context
    const bool past = f.get_uint(a + "context_length") > f.get_uint(a + "rope.scaling.original_context_length");
    s.rope_factors = tensor_values(f, past ? "rope_factors_long.weight" : "rope_factors_short.weight");
  }
  return s;
}

void softcap(double& x, double cap) {
  if (cap > 0) x = cap * std::tanh(x / cap);
}

enum class Activation { Silu, GeluTanh, SwigluOai };

// act(g) * up: SiLU, GELU's tanh form, or gpt-oss's (g capped at 7, up clamped to +-7 and
// shifted by 1, sigmoid(1.702 g)).
double activate(Activation act, double g, double up) {
  switch (act) {
    case Activation::GeluTanh: return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up;
    case Activation::SwigluOai: {
      g = std::min(g, 7.0);
      return g / (1.0 + std::exp(-1.702 * g)) * (std::clamp(up, -7.0, 7.0) + 1.0);
    }
    case Activation::Silu: break;
  }
  return g / (1.0 + std::exp(-g)) * up;
}

// The gated FFN: (act(xn Wg + bg) * (xn Wu + bu)) Wd + bd, the biases gpt-oss's experts have.
struct FfnBiases {
  Vec gate, up, down;
};
Vec gated_ffn(const Vec& wg, const Vec& wu, const Vec& wd, const Vec& xn, Activation act, const FfnBiases& b = {}) {
  Vec gate = matvec(wg, xn, b.gate);
  const Vec up = matvec(wu, xn, b.up);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = activate(act, gate[i], up[i]);
  return matvec(wd, gate, b.down);
}

// Rows [first, first + count) of a [rows][cols] matrix.
Vec rows_of(const Vec& m, size_t cols, size_t first, size_t count) {
  return Vec(m.begin() + first * cols, m.begin() + (first + count) * cols);
}

// A mixture of experts as Mixtral's, the Qwen MoEs' and gpt-oss's reference code computes it:
// the router's softmax over all experts (gpt-oss: its scores biased), the k most probable kept
// (and renormalized, but in Qwen2 MoE), their FFNs (gpt-oss: biased, clamped SwiGLU) summed;
// Qwen2 MoE adds its shared expert's FFN times sigmoid(xn . ffn_gate_inp_shexp).
Vec expert_ffn(const GgufFile& f, size_t layer, const ReferenceShape& S, const Vec& xn) {
  const size_t k = S.experts_used;
  auto w = [&](const std::string& name) { return tensor_values(f, "blk." + std::to_string(layer) + "." + name); };
  // Every expert's matrix of a kind: stacked, or one tensor per expert (older Mixtral files).
  auto experts_of = [&](const std::string& kind) {
    Vec all = w("ffn_" + kind + "_exps.weight");
    if (!all.empty()) return all;
    for (size_t e = 0;; ++e) {
      const Vec one = w("ffn_" + kind + "." + std::to_string(e) + ".weight");
      if (one.empty()) return all;
      all.insert(all.end(), one.begin(), one.end());
    }
  };
  const Vec router = w("ffn_gate_inp.weight"), gates = experts_of("gate"), ups = experts_of("up"),
            downs = experts_of("down");
  const size_t D = xn.size(), E = router.size() / D, FE = gates.size() / E / D;
  const Vec scores = matvec(router, xn, w("ffn_gate_inp.bias"));
  const Vec gate_biases = w("ffn_gate_exps.bias"), up_biases = w("ffn_up_exps.bias"), down_biases = w("ffn_down_exps.bias");
  const double top = *std::max_element(scores.begin(), scores.end());
  Vec p(E);
  for (size_t e = 0; e < E; ++e) p[e] = std::exp(scores[e] - top);
  std::vector<size_t> order(E);
  for (size_t e = 0; e < E; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  double kept = 0;
  for (size_t j = 0; j < (S.renormalize_experts ? k : E); ++j) kept += p[order[j]];
  Vec out(D, 0.0);
  if (S.shared_expert) {
    const Vec score = matvec(w("ffn_gate_inp_shexp.weight"), xn);
    out = gated_ffn(w("ffn_gate_shexp.weight"), w("ffn_up_shexp.weight"), w("ffn_down_shexp.weight"), xn, Activation::Silu);
    for (double& v : out) v /= 1.0 + std::exp(-score[0]);
  }
  for (size_t j = 0; j < k; ++j) {
    const size_t e = order[j];
    FfnBiases b;
    if (S.gpt_oss) b = {rows_of(gate_biases, FE, e, 1), rows_of(up_biases, FE, e, 1), rows_of(down_biases, D, e, 1)};
    const Vec y = gated_ffn(rows_of(gates, D, e * FE, FE), rows_of(ups, D, e * FE, FE), rows_of(downs, FE, e * D, D), xn,
                            S.gpt_oss ? Activation::SwigluOai : Activation::Silu, b);
    for (size_t i = 0; i < D; ++i) out[i] += p[e] / kept * y[i];
  }
  return out;
}

}  // namespace

std::vector<Vec> reference_logits(const GgufFile& f, const std::vector<int32_t>& tokens,
                                  const ReferenceOptions& options) {
  const ReferenceShape S = reference_shape(f, options);
  const size_t D = S.D, H = S.H, KVH = S.KVH, HD = S.HD;

  // Rotates one head at position pos: pair i turns by pos * base^(-2i/HD) / factor_i (YaRN:
  // that frequency blended with itself / factor by a ramp over the correction range), and
  // LongRoPE and YaRN scale the rotated values by their attention factor.
  auto rope = [&](double* x, size_t pos, double base) {
    for (size_t i = 0; i < HD / 2; ++i) {
      const double factor = S.rope_factors.empty() ? 1.0 : S.rope_factors[i];
      double inv_freq = std::pow(base, -2.0 * double(i) / double(HD)) / factor;
      if (S.yarn_factor > 0) {
        const double span = S.yarn_high == S.yarn_low ? 0.001 : S.yarn_high - S.yarn_low;
        const double extrapolation = 1 - std::clamp((double(i) - S.yarn_low) / span, 0.0, 1.0);
        inv_freq = inv_freq / S.yarn_factor * (1 - extrapolation) + inv_freq * extrapolation;
      }
      const double theta = double(pos) * inv_freq;
      const size_t ia = S.neox ? i : 2 * i;
      const size_t ib = S.neox ? i + HD / 2 : 2 * i + 1;
      const double x0 = x[ia], x1 = x[ib];
      x[ia] = S.rope_mscale * (x0 * std::cos(theta) - x1 * std::sin(theta));
      x[ib] = S.rope_mscale * (x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  };
  auto norm_heads = [&](Vec& x, const Vec& w) {
    if (w.empty()) return;
    for (size_t h = 0; h < x.size() / HD; ++h) {
      const Vec head = rms_norm(Vec(x.begin() + h * HD, x.begin() + (h + 1) * HD), w, S.eps);
      std::copy(head.begin(), head.end(), x.begin() + h * HD);
    }
  };
  // x += post_norm(y) * residual_scale.
  auto add_residual = [&](Vec& x, Vec y, const Vec& post_norm) {
    if (!post_norm.empty()) y = rms_norm(y, post_norm, S.eps);
    for (size_t i = 0; i < D; ++i) x[i] += y[i] * S.residual_scale;
  };

  const Vec embd = tensor_values(f, "token_embd.weight");
  const size_t T = tokens.size();
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) {
    x[t] = Vec(embd.begin() + tokens[t] * D, embd.begin() + (tokens[t] + 1) * D);
    for (double& v : x[t]) v *= S.embd_scale;
  }

  for (size_t l = 0; l < S.layers; ++l) {
    auto w = [&](const std::string& name) { return tensor_values(f, "blk." + std::to_string(l) + "." + name); };
    // gpt-oss names its FFN's input norm post_attention_norm; it has no post norms.
    const Vec attn_norm = w("attn_norm.weight"), ffn_norm = w(S.gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight");
    Vec wq = w("attn_q.weight"), wk = w("attn_k.weight"), wv = w("attn_v.weight");
    const Vec wo = w("attn_output.weight"), bo = w("attn_output.bias"), sinks = w("attn_sinks.weight");
    const Vec bq = w("attn_q.bias"), bk = w("attn_k.bias"), bv = w("attn_v.bias");
    const Vec q_norm = w("attn_q_norm.weight"), k_norm = w("attn_k_norm.weight");
    const Vec post_attn = S.gpt_oss ? Vec{} : w("post_attention_norm.weight"), post_ffn = w("post_ffw_norm.weight");
    Vec wg = w("ffn_gate.weight"), wu = w("ffn_up.weight");
    const Vec wd = w("ffn_down.weight");
    const Vec wqkv = w("attn_qkv.weight");
    if (!wqkv.empty()) {   // Phi-3: rows [q | k | v]
      const size_t q_values = H * HD * D, kv_values = KVH * HD * D;
      wq = Vec(wqkv.begin(), wqkv.begin() + q_values);
      wk = Vec(wqkv.begin() + q_values, wqkv.begin() + q_values + kv_values);
      wv = Vec(wqkv.begin() + q_values + kv_values, wqkv.end());
    }
    if (wg.empty() && !wu.empty()) {   // Phi-3: ffn_up rows [gate | up]
      wg = Vec(wu.begin(), wu.begin() + wu.size() / 2);
      wu = Vec(wu.begin() + wu.size() / 2, wu.end());
    }
    const double base = S.local(l) ? S.local_base : S.base;
    const bool nope = S.arch == "smollm3" && (l + 1) % 4 == 0;   // SmolLM3: no RoPE in every fourth layer
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const Vec xn = rms_norm(x[t], attn_norm, S.eps);
      q[t] = matvec(wq, xn, bq);
      k[t] = matvec(wk, xn, bk);
      v[t] = matvec(wv, xn, bv);
      norm_heads(q[t], q_norm);
      norm_heads(k[t], k_norm);
      for (size_t h = 0; h < H && !nope; ++h) rope(&q[t][h * HD], t, base);
      for (size_t h = 0; h < KVH && !nope; ++h) rope(&k[t][h * HD], t, base);
    }
    for (size_t t = 0; t < T; ++t) {
      const size_t first = S.local(l) && t + 1 > S.window ? t + 1 - S.window : 0;
      Vec att(H * HD, 0.0);
      for (size_t h = 0; h < H; ++h) {
        const size_t g = h / (H / KVH);
        Vec p(t + 1 - first);
        for (size_t j = first; j <= t; ++j) {
          double s = 0;
          for (size_t i = 0; i < HD; ++i) s += q[t][h * HD + i] * k[j][g * HD + i];
          p[j - first] = s * S.attn_scale;
          softcap(p[j - first], S.attn_cap);
        }
        const double m = *std::max_element(p.begin(), p.end());
        double sum = sinks.empty() ? 0.0 : std::exp(sinks[h] - m);   // gpt-oss: the head's sink joins the sum
        for (double& e : p) sum += (e = std::exp(e - m));
        for (size_t j = first; j <= t; ++j) {
          for (size_t i = 0; i < HD; ++i) att[h * HD + i] += p[j - first] / sum * v[j][g * HD + i];
        }
      }
      add_residual(x[t], matvec(wo, att, bo), post_attn);
      const Vec xn = rms_norm(x[t], ffn_norm, S.eps);
      add_residual(x[t], S.experts_used > 0 ? expert_ffn(f, l, S, xn)
                                            : gated_ffn(wg, wu, wd, xn, S.gelu ? Activation::GeluTanh : Activation::Silu),
                   post_ffn);
    }
  }

  const Vec out_norm = tensor_values(f, "output_norm.weight");
  Vec output = tensor_values(f, "output.weight");
  if (output.empty()) output = embd;
  std::vector<Vec> logits(T);
  for (size_t t = 0; t < T; ++t) {
    logits[t] = matvec(output, rms_norm(x[t], out_norm, S.eps));
    for (double& v : logits[t]) {
      v /= S.logit_scale;
      softcap(v, S.final_cap);
    }
  }
  return logits;
}

}  // namespace kvdesk::test
