// Binding GGUF tensors to the Llama layer structure (names as llama.cpp's llama-arch), with
// shape and type checks; each architecture's optional tensors per its traits.
#include "engine/model/model_weights.h"

#include <cmath>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/system/load_progress.h"
#include "kernels/weight_repack.h"

namespace kvdesk {
namespace {

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const GgufTensorInfo& require_tensor(const GgufFile& file, const std::string& name,
                                     const std::vector<int64_t>& dims) {
  const GgufTensorInfo* t = file.find_tensor(name);
  if (!t) throw Error(file.path() + ": missing tensor '" + name + "'");
  if (t->dims != dims) {
    throw Error(file.path() + ": tensor '" + name + "' has shape " + shape_text(t->dims) +
                ", expected " + shape_text(dims));
  }
  const GgmlTypeInfo& info = ggml_type_info(t->type);
  if (!info.computable) {
    throw Error(file.path() + ": tensor '" + name + "' has type " + std::string(info.name) +
                ", which kvdesk cannot run yet");
  }
  return *t;
}

class Binder {
 public:
  Binder(const GgufFile& file, ModelWeights& weights) : file_(file), weights_(weights) {}

  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    return matrix_of(require_tensor(file_, name, {cols, rows}), rows, cols);
  }

  // A matrix of one row, which files store as [1][cols] or as a vector of cols (ggml dims
  // {cols, 1} or {cols}).
  WeightMatrix row_matrix(const std::string& name, int64_t cols) {
    const GgufTensorInfo* t = file_.find_tensor(name);
    const std::vector<int64_t> vector_dims = {cols};
    const std::vector<int64_t> dims = t && t->dims == vector_dims ? vector_dims : std::vector<int64_t>{cols, 1};
    return matrix_of(require_tensor(file_, name, dims), 1, cols);
  }

  // A stack of `count` matrices W[rows][cols] (ggml dims {cols, rows, count}), bound as one
  // matrix of count * rows rows.
  WeightMatrix matrix_stack(const std::string& name, int64_t count, int64_t rows, int64_t cols) {
    const GgufTensorInfo& t = require_tensor(file_, name, {cols, rows, count});
    count_tensor(t);
    return WeightMatrix{t.type, file_.tensor_data(t), count * rows, cols, ggml_row_bytes(t.type, cols)};
  }

  // Rows [first, first + rows) of a matrix already bound: one part of a fused tensor.
  static WeightMatrix rows_of(const WeightMatrix& m, int64_t first, int64_t rows) {
    WeightMatrix part = m;
    part.data = m.row(first);
    part.rows = rows;
    return part;
  }

  const float* vector(const std::string& name, int64_t n) {
    const GgufTensorInfo& t = require_tensor(file_, name, {n});
    require_f32(t, name);
    count_tensor(t);
    return reinterpret_cast<const float*>(file_.tensor_data(t));
  }

  // count vectors of n floats stored as one [count][n] tensor (ggml dims {n, count}).
  const float* vector_stack(const std::string& name, int64_t count, int64_t n) {
    const GgufTensorInfo& t = require_tensor(file_, name, {n, count});
    require_f32(t, name);
    count_tensor(t);
    return reinterpret_cast<const float*>(file_.tensor_data(t));
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  // A vector the architecture may or must have; nullptr when optional and absent.
  const float* vector(const std::string& name, int64_t n, TensorPresence presence) {
    if (presence == TensorPresence::Absent) return nullptr;
    if (presence == TensorPresence::Optional && !has(name)) return nullptr;
    return vector(name, n);
  }

 private:
  void require_f32(const GgufTensorInfo& t, const std::string& name) const {
    if (t.type != GgmlType::F32) {
      throw Error(file_.path() + ": tensor '" + name + "' has type " +
                  std::string(ggml_type_info(t.type).name) + ", expected f32");
    }
  }

  WeightMatrix matrix_of(const GgufTensorInfo& t, int64_t rows, int64_t cols) {
    count_tensor(t);
    return WeightMatrix{t.type, file_.tensor_data(t), rows, cols, ggml_row_bytes(t.type, cols)};
  }

  void count_tensor(const GgufTensorInfo& t) {
    weights_.num_parameters += t.num_elements;
    weights_.weight_bytes += t.num_bytes;
  }
  const GgufFile& file_;
  ModelWeights& weights_;
};

// Each factor divides a rotation frequency, so it must be a positive finite number.
void check_rope_freqs(const GgufFile& file, const float* factors, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!(factors[i] > 0) || !std::isfinite(factors[i])) {
      throw Error(file.path() + ": rope_freqs.weight[" + std::to_string(i) + "] = " +
                  std::to_string(factors[i]) + " is not a positive frequency factor");
    }
  }
}

// The frequency factors RoPE uses: Llama 3's rope_freqs, or one of Phi-3's LongRoPE pair.
const float* bind_rope_factors(const GgufFile& file, const ModelConfig& c, Binder& bind) {
  const int64_t n = c.rope_dimension_count / 2;
  const float* factors = bind.vector("rope_freqs.weight", n, TensorPresence::Optional);
  const bool longrope = file.find_tensor("rope_factors_long.weight") || file.find_tensor("rope_factors_short.weight");
  if (longrope) {
    const float* long_factors = bind.vector("rope_factors_long.weight", n);
    const float* short_factors = bind.vector("rope_factors_short.weight", n);
    const bool past_original = c.rope_original_context > 0 && c.context_length > c.rope_original_context;
    factors = past_original ? long_factors : short_factors;
  }
  if (factors) check_rope_freqs(file, factors, n);
  return factors;
}

void bind_attention(Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.embedding_length;
  if (c.traits.fused_projections) {
    const WeightMatrix qkv = bind.matrix(p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), d);
    l.wq = Binder::rows_of(qkv, 0, c.q_dim());
    l.wk = Binder::rows_of(qkv, c.q_dim(), c.kv_dim());
    l.wv = Binder::rows_of(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
  } else {
    l.wq = bind.matrix(p + "attn_q.weight", c.q_dim(), d);
    l.wk = bind.matrix(p + "attn_k.weight", c.kv_dim(), d);
    l.wv = bind.matrix(p + "attn_v.weight", c.kv_dim(), d);
  }
  l.bq = bind.vector(p + "attn_q.bias", c.q_dim(), c.traits.qkv_bias);
  l.bk = bind.vector(p + "attn_k.bias", c.kv_dim(), c.traits.qkv_bias);
  l.bv = bind.vector(p + "attn_v.bias", c.kv_dim(), c.traits.qkv_bias);
  l.q_norm = bind.vector(p + "attn_q_norm.weight", c.head_dim, c.traits.qk_norm);
  l.k_norm = bind.vector(p + "attn_k_norm.weight", c.head_dim, c.traits.qk_norm);
  l.wo = bind.matrix(p + "attn_output.weight", d, c.q_dim());
  if (c.traits.output_and_expert_biases) l.bo = bind.vector(p + "attn_output.bias", d);
  if (c.traits.attention_sinks) l.attn_sinks = bind.vector(p + "attn_sinks.weight", c.head_count);
  if (c.traits.post_norms) l.attn_post_norm = bind.vector(p + "post_attention_norm.weight", d);
}

// Qwen2 MoE's shared expert, a gated FFN of its own width, and its gate's scoring row.
void bind_shared_expert(Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.embedding_length;
  const int64_t ff = c.expert_shared_feed_forward_length;
  l.shared_gate = bind.row_matrix(p + "ffn_gate_inp_shexp.weight", d);
  l.w_gate = bind.matrix(p + "ffn_gate_shexp.weight", ff, d);
  l.w_up = bind.matrix(p + "ffn_up_shexp.weight", ff, d);
  l.w_down = bind.matrix(p + "ffn_down_shexp.weight", d, ff);
}

// Mixtral files converted before April 2024 store each expert's matrices as tensors of their own
// (blk.N.ffn_gate.E.weight), as llama.cpp still reads them.
bool has_split_experts(const Binder& bind, const std::string& p) {
  return !bind.has(p + "ffn_gate_exps.weight") && bind.has(p + "ffn_gate.0.weight");
}

void bind_split_experts(Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.embedding_length;
  const int64_t ff = c.expert_feed_forward_length;
  l.experts.resize(size_t(c.expert_count));
  for (int32_t e = 0; e < c.expert_count; ++e) {
    const std::string x = "." + std::to_string(e) + ".weight";
    l.experts[size_t(e)] = ExpertWeights{bind.matrix(p + "ffn_gate" + x, ff, d), bind.matrix(p + "ffn_up" + x, ff, d),
                                         bind.matrix(p + "ffn_down" + x, d, ff)};
  }
}

// gpt-oss: the router's bias and each expert's rows of the stacked expert biases.
void bind_expert_biases(Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.embedding_length;
  const int64_t ff = c.expert_feed_forward_length;
  const int64_t n = c.expert_count;
  l.router_bias = bind.vector(p + "ffn_gate_inp.bias", n);
  const float* gates = bind.vector_stack(p + "ffn_gate_exps.bias", n, ff);
  const float* ups = bind.vector_stack(p + "ffn_up_exps.bias", n, ff);
  const float* downs = bind.vector_stack(p + "ffn_down_exps.bias", n, d);
  for (int64_t e = 0; e < n; ++e) {
    ExpertWeights& ew = l.experts[size_t(e)];
    ew.gate_bias = gates + e * ff;
    ew.up_bias = ups + e * ff;
    ew.down_bias = downs + e * d;
  }
}

// The router and each expert's rows of the stacked expert tensors (or its own tensors), and the
// shared expert or the biases.
void bind_experts(Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.embedding_length;
  const int64_t ff = c.expert_feed_forward_length;
  const int64_t n = c.expert_count;
  l.router = bind.matrix(p + "ffn_gate_inp.weight", n, d);
  if (c.traits.shared_expert) bind_shared_expert(bind, p, c, l);
  if (has_split_experts(bind, p)) {
    bind_split_experts(bind, p, c, l);
    return;
  }
  const WeightMatrix gates = bind.matrix_stack(p + "ffn_gate_exps.weight", n, ff, d);
  const WeightMatrix ups = bind.matrix_stack(p + "ffn_up_exps.weight", n, ff, d);
  const WeightMatrix downs = bind.matrix_stack(p + "ffn_down_exps.weight", n, d, ff);
  l.experts.resize(size_t(n));
  for (int64_t e = 0; e < n; ++e) {
    l.experts[size_t(e)] = ExpertWeights{Binder::rows_of(gates, e * ff, ff), Binder::rows_of(ups, e * ff, ff),
                                         Binder::rows_of(downs, e * d, d)};
  }
  if (c.traits.output_and_expert_biases) bind_expert_biases(bind, p, c, l);
}

void bind_ffn(Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.embedding_length;
  const int64_t ff = c.feed_forward_length;
  l.ffn_norm = bind.vector(p + std::string(c.traits.ffn_norm_name) + ".weight", d);
  if (c.traits.post_norms) l.ffn_post_norm = bind.vector(p + "post_ffw_norm.weight", d);
  if (c.has_experts()) {
    bind_experts(bind, p, c, l);
    return;
  }
  if (c.traits.fused_projections) {
    const WeightMatrix gate_up = bind.matrix(p + "ffn_up.weight", 2 * ff, d);
    l.w_gate = Binder::rows_of(gate_up, 0, ff);
    l.w_up = Binder::rows_of(gate_up, ff, ff);
  } else {
    l.w_gate = bind.matrix(p + "ffn_gate.weight", ff, d);
    l.w_up = bind.matrix(p + "ffn_up.weight", ff, d);
  }
  l.w_down = bind.matrix(p + "ffn_down.weight", d, ff);
}

uint64_t matrix_bytes(const WeightMatrix& m) { return uint64_t(m.rows) * m.row_bytes; }
uint64_t vector_bytes(const float* v, int64_t n) { return v ? uint64_t(n) * sizeof(float) : 0; }

}  // namespace

ModelWeights bind_model_weights(const GgufFile& file, const ModelConfig& c) {
  ModelWeights w;
  Binder bind(file, w);
  const int64_t d = c.embedding_length;
  w.token_embd = bind.matrix("token_embd.weight", c.vocab_size, d);
  w.output_norm = bind.vector("output_norm.weight", d);
  w.tied_output = file.find_tensor("output.weight") == nullptr;
  w.output = w.tied_output ? w.token_embd : bind.matrix("output.weight", c.vocab_size, d);
  w.rope_freqs = bind_rope_factors(file, c, bind);
  w.layers.resize(c.block_count);
  for (int32_t i = 0; i < c.block_count; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = bind.vector(p + "attn_norm.weight", d);
    bind_attention(bind, p, c, l);
    bind_ffn(bind, p, c, l);
  }
  return w;
}

namespace {

// Every matrix repack_matrices may rewrite: the layers' and the untied output matrix.
std::vector<WeightMatrix*> repackable_matrices(ModelWeights& w) {
  std::vector<WeightMatrix*> out;
  for (LayerWeights& l : w.layers) {
    for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo}) out.push_back(m);
    for (WeightMatrix* m : {&l.w_gate, &l.w_up, &l.w_down}) {
      if (m->rows > 0) out.push_back(m);
    }
    for (ExpertWeights& e : l.experts) {
      for (WeightMatrix* m : {&e.gate, &e.up, &e.down}) out.push_back(m);
    }
  }
  if (!w.tied_output) out.push_back(&w.output);
  return out;
}

}  // namespace

int repack_matrices(ModelWeights& w, CpuIsa isa, LoadProgress& progress, double share) {
  std::vector<WeightMatrix*> to_repack;
  uint64_t total = 0;
  for (WeightMatrix* m : repackable_matrices(w)) {
    if (repacked_type(m->type, m->rows) == m->type || !cpu_layout_pays(m->type, isa)) continue;
    to_repack.push_back(m);
    total += matrix_bytes(*m);
  }
  progress.begin_stage(share, total);
  for (WeightMatrix* m : to_repack) {
    const uint64_t bytes = matrix_bytes(*m);
    const GgmlType type = repacked_type(m->type, m->rows);
    repack_rows(m->type, const_cast<void*>(m->data), m->rows, m->cols);
    m->type = type;
    progress.advance(bytes);
  }
  return int(to_repack.size());
}

uint64_t decode_weight_read_bytes(const ModelWeights& w, const ModelConfig& c) {
  const int64_t d = w.token_embd.cols;
  uint64_t bytes = w.token_embd.row_bytes + matrix_bytes(w.output) + vector_bytes(w.output_norm, d);
  for (const LayerWeights& l : w.layers) {
    bytes += matrix_bytes(l.wq) + matrix_bytes(l.wk) + matrix_bytes(l.wv) + matrix_bytes(l.wo) +
             matrix_bytes(l.w_gate) + matrix_bytes(l.w_up) + matrix_bytes(l.w_down);
    if (!l.experts.empty()) {   // every expert has the same shape and type
      const ExpertWeights& e = l.experts.front();
      bytes += matrix_bytes(l.router) + matrix_bytes(l.shared_gate) + vector_bytes(l.router_bias, c.expert_count) +
               uint64_t(c.expert_used_count) * (matrix_bytes(e.gate) + matrix_bytes(e.up) + matrix_bytes(e.down) +
                                                vector_bytes(e.gate_bias, e.gate.rows) +
                                                vector_bytes(e.up_bias, e.up.rows) + vector_bytes(e.down_bias, d));
    }
    bytes += vector_bytes(l.attn_norm, d) + vector_bytes(l.ffn_norm, d) + vector_bytes(l.bq, l.wq.rows) +
             vector_bytes(l.bk, l.wk.rows) + vector_bytes(l.bv, l.wv.rows) + vector_bytes(l.attn_post_norm, d) +
             vector_bytes(l.ffn_post_norm, d) + vector_bytes(l.q_norm, c.head_dim) + vector_bytes(l.k_norm, c.head_dim) +
             vector_bytes(l.bo, d) + vector_bytes(l.attn_sinks, c.head_count);
  }
  return bytes;
}

}  // namespace kvdesk
