// The Llama-family forward pass (architecture.h), top-down: embed -> per layer (attention
// block, FFN block) -> final norm -> logits, with each family's optional pieces (q/k norms,
// post norms, GeGLU, sliding windows, soft caps, Granite's multipliers, a mixture of experts,
// gpt-oss's biases and attention sinks) where its config says. Matmuls are split across the
// thread pool by weight rows; attention is split by (token, kv head). Buffers are
// [tokens][features], row-major.
#include "engine/model/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/expert_routing.h"
#include "engine/model/key_smoothing.h"
#include "engine/model/recent_window.h"
#include "engine/system/load_progress.h"
#include "engine/system/memory_limit.h"
#include "engine/system/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/gated_activation.h"
#include "kernels/ggml_types.h"
#include "kernels/hadamard.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quantize.h"
#include "kernels/check.h"

namespace kvdesk {

void ForwardBatch::add(int32_t token, int32_t position, SeqId seq, bool logits) {
  tokens.push_back(token);
  positions.push_back(position);
  seq_ids.push_back(seq);
  wants_logits.push_back(logits ? 1 : 0);
}

int32_t ForwardBatch::num_logit_rows() const {
  int32_t n = 0;
  for (uint8_t w : wants_logits) n += w;
  return n;
}

// Activation buffers, grown to the largest batch seen and reused across calls.
struct Model::Scratch {
  std::vector<float> x, xn, q, k, v, att, tmp, gate, up;  // [T][features]; gate, up of a MoE layer [T * k][expert_ff]
  std::vector<float> router;                              // [T][experts] a MoE layer's router scores, then
                                                          // [T] its shared expert's gate scores
  std::vector<float> expert_in, expert_out;               // [T * k][d_model] each route's input and FFN output
  std::vector<float> logit_rows;                          // [L][d_model]
  std::vector<float> rope_cos_sin;                        // [n_rot] one token's RoPE angles
  std::vector<uint8_t> acts;                              // prepared activation rows
  std::vector<float> attn_scratch;                        // [threads][attention scratch]
  std::vector<float> attn_weights;                        // observed tokens' [heads][slots]
  RecentWindow recent;                                    // the f32 rows attention reads exact
};

namespace {

// Tokens whose attention weights a KV retention policy collects (kv_retention.h): where each
// one's [heads][slots] weights go in Scratch::attn_weights, -1 for the rest.
struct ObservedAttention {
  std::vector<int64_t> offset;                 // [T]
  std::vector<RetentionState*> state;          // [T]
  int64_t total_floats = 0;
};

ObservedAttention observed_attention(const ForwardBatch& batch, KvCache& kv, int32_t num_heads) {
  ObservedAttention o;
  o.offset.assign(size_t(batch.size()), -1);
  o.state.assign(size_t(batch.size()), nullptr);
  for (int32_t t = 0; t < batch.size(); ++t) {
    RetentionState* r = kv.retention(batch.seq_ids[t]);
    if (!r || !r->observes(batch.positions[t])) continue;
    o.offset[size_t(t)] = o.total_floats;
    o.state[size_t(t)] = r;
    o.total_floats += int64_t(num_heads) * kv.view(batch.seq_ids[t], batch.positions[t] + 1).num_tokens;
  }
  return o;
}

// Batches narrower than this are read from memory as streams by every tier's kernels (AVX-512's
// interleaved tiles stream up to 7 act rows, the 256-bit tiers' up to 3).
constexpr int64_t kStreamedBatch = 8;

// One matrix product of a forward step: y[batch][w.rows] = x[batch][w.cols] W^T.
struct MatmulJob {
  const WeightMatrix* w;
  const float* x;   // [batch][w->cols]
  float* y;         // [batch][w->rows]
  int64_t batch;
};

// How many row chunks a thread gets in a loop over these matrices. The pool runs a thread's range
// one task (one chunk, one kernel call) at a time, and a call of a narrow batch (decode) reads its
// weights from memory as several streams that every call starts anew: ggml's rows as the GEMV's
// kGemvRows row segments, the interleaved layouts (kernels/weight_repack.h) as runs of groups
// read side by side. Those take 8 chunks a thread (32 made AVX-512 Q4_0 decode slower in every
// pair; with the interleaved runs, TinyLlama-shaped Q4_K_M decode on the AVX2 path read 25.2-26.2
// GB/s at 32 and 27.2-28.3 at 8, three alternating rounds). Wider batches on the interleaved
// layouts reuse each block from L2, and finer chunks shorten the end of the loop, where one
// thread waits for the other's last chunk: 32 (AVX-512 Q4_0 prefill of 128 tokens 295-303 tok/s
// against 269-293 at 8).
int64_t chunks_per_thread(std::span<const MatmulJob> jobs) {
  for (const MatmulJob& job : jobs) {
    if (ggml_type_info(job.w->type).in_files || job.batch < kStreamedBatch) return 8;
  }
  return 32;
}

// Runs jobs as one parallel loop: activations are prepared once per input and weight type (q/k/v
// and gate/up share theirs), then row chunks of every job are handed out together, so the step
// pays one synchronization instead of one per matrix. Each job has its own batch: a mixture's
// experts each run the rows routed to them.
void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs, std::vector<uint8_t>& act_buffer) {
  struct Part {
    MatmulArgs args;
    int64_t rows;
    int64_t rows_per_task;
    int64_t first_task;
    int64_t tasks;
  };
  std::vector<Part> parts;
  size_t act_bytes_total = 0;
  for (const MatmulJob& job : jobs) act_bytes_total += act_row_bytes(job.w->type, job.w->cols) * size_t(job.batch);
  if (act_buffer.size() < act_bytes_total) act_buffer.resize(act_bytes_total);

  int64_t total_macs = 0;
  for (const MatmulJob& job : jobs) total_macs += job.w->rows * job.w->cols * job.batch;
  // Chunks of equal work across the jobs give each thread's contiguous range of tasks
  // (ThreadPool) an equal share; 16-row multiples keep SIMD tiles whole.
  const int64_t chunks = pool.num_threads() * chunks_per_thread(jobs);
  const int64_t chunk_macs = (total_macs + chunks - 1) / chunks;

  size_t act_offset = 0;
  int64_t num_tasks = 0;
  const MatmulJob* prepared_for = nullptr;
  uint8_t* acts = nullptr;
  for (const MatmulJob& job : jobs) {
    const WeightMatrix& w = *job.w;
    const int64_t batch = job.batch;
    const size_t row_bytes = act_row_bytes(w.type, w.cols);
    const bool reuse = prepared_for && prepared_for->x == job.x && prepared_for->batch == batch &&
                       act_row_bytes(prepared_for->w->type, w.cols) == row_bytes &&
                       act_format_for(prepared_for->w->type) == act_format_for(w.type);
    if (!reuse) {
      acts = act_buffer.data() + act_offset;
      act_offset += row_bytes * size_t(batch);
      pool.parallel_for(batch, [&](int64_t b, int) {
        cpu::prepare_act_row(w.type, job.x + b * w.cols, acts + size_t(b) * row_bytes, w.cols);
      }, batch * w.cols);
      prepared_for = &job;
    }
    const int64_t chunk_rows = (chunk_macs + w.cols * batch - 1) / (w.cols * batch);
    const int64_t rows_per_task = (chunk_rows + 15) / 16 * 16;
    const int64_t tasks = (w.rows + rows_per_task - 1) / rows_per_task;
    parts.push_back(Part{MatmulArgs{w.type, w.data, w.cols, acts, batch, job.y, w.rows}, w.rows,
                         rows_per_task, num_tasks, tasks});
    num_tasks += tasks;
  }
  // Tasks [begin, end): per job they cover, one call over its rows from the first to the last.
  pool.parallel_for_ranges(num_tasks, [&](int64_t begin, int64_t end, int) {
    size_t p = parts.size() - 1;
    while (parts[p].first_task > begin) --p;
    for (; p < parts.size() && parts[p].first_task < end; ++p) {
      const Part& part = parts[p];
      const int64_t first = std::max(begin, part.first_task) - part.first_task;
      const int64_t last = std::min(end - part.first_task, part.tasks);
      cpu::matmul_rows(part.args, first * part.rows_per_task, std::min(part.rows, last * part.rows_per_task));
    }
  }, total_macs);
}

// A matrix product of x [batch][w.cols] and where it goes.
struct MatmulTarget {
  const WeightMatrix* w;
  const float* x;
  float* y;
};

// run_matmuls for products over the same batch (a step's tokens): q/k/v, gate/up, or one.
void run_matmuls(ThreadPool& pool, int64_t batch, std::initializer_list<MatmulTarget> targets,
                 std::vector<uint8_t>& act_buffer) {
  constexpr size_t kMaxTargets = 3;
  KVDESK_ASSERT(targets.size() <= kMaxTargets);
  std::array<MatmulJob, kMaxTargets> jobs{};
  size_t n = 0;
  for (const MatmulTarget& t : targets) jobs[n++] = {t.w, t.x, t.y, batch};
  run_matmuls(pool, std::span<const MatmulJob>(jobs.data(), n), act_buffer);
}

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// y[t] += bias for each of T rows of n values; nothing when the model has no such bias.
void add_bias(float* y, const float* bias, int64_t T, int64_t n) {
  if (!bias) return;
  for (int64_t t = 0; t < T; ++t) ops::add_in_place(y + t * n, bias, n);
}

// RMS norm of each head of T rows of `heads` heads in place; nothing when w is null.
void norm_heads(float* x, const float* w, int64_t T, int32_t heads, int32_t head_dim, float eps) {
  if (!w) return;
  for (int64_t r = 0; r < T * heads; ++r) ops::rms_norm(x + r * head_dim, w, x + r * head_dim, head_dim, eps);
}

// A block's output y[T][D] joins the residual stream: x += post_norm(y) * residual_scale
// (post_norm when the architecture has one, Gemma; the scale only in Granite).
void add_block_output(float* x, float* y, const float* post_norm, float residual_scale, int64_t T, int64_t D, float eps) {
  for (int64_t t = 0; t < T; ++t) {
    float* row = y + t * D;
    if (post_norm) ops::rms_norm(row, post_norm, row, D, eps);
    if (residual_scale != 1.0f) ops::scale_in_place(row, residual_scale, D);
    ops::add_in_place(x + t * D, row, D);
  }
}

// The gated FFN's activation, in place over gate [T][F]: h = act(gate) * up, one task per
// token (a decode step's single row is below the pool's parallel threshold and stays on the
// caller).
void ffn_activation(ThreadPool& pool, FfnActivation act, float* gate, const float* up, int64_t T, int64_t F) {
  pool.parallel_for(T, [&](int64_t t, int) {
    switch (act) {
      case FfnActivation::GeluTanh: return cpu::geglu_tanh(gate + t * F, up + t * F, gate + t * F, F);
      case FfnActivation::SwigluOai: return cpu::swiglu_oai(gate + t * F, up + t * F, gate + t * F, F);
      case FfnActivation::Silu: return cpu::swiglu(gate + t * F, up + t * F, gate + t * F, F);
    }
  }, T * F);
}

// The buffers a MoE layer works in, each grown to its size in Model::Scratch.
struct ExpertScratch {
  float* router;      // [T][experts], then [T] the shared expert's gate scores
  float* in;          // [T * k][d_model]
  float* gate;        // [T * k][expert_ff], then [T][shared_ff] the shared expert's
  float* up;          // [T * k][expert_ff], then [T][shared_ff]
  float* out;         // [T * k][d_model]
  std::vector<uint8_t>& acts;
};

// Floats a MoE layer's gate and up buffers hold for T tokens: the routed rows and the shared
// expert's.
int64_t expert_ffn_floats(const ModelConfig& c, int64_t T) {
  return T * (int64_t(c.expert_used_count) * c.expert_feed_forward_length + c.expert_shared_feed_forward_length);
}

// Each expert's bias (gpt-oss; nothing without) added to its routed rows of y [rows][n].
void add_expert_biases(const LayerWeights& lw, const ModelConfig& c, const ExpertRoutes& routes,
                       const float* ExpertWeights::*bias, float* y, int64_t n) {
  for (int32_t e = 0; e < c.expert_count; ++e) {
    const float* b = lw.experts[size_t(e)].*bias;
    add_bias(y + int64_t(routes.first_row[size_t(e)]) * n, b, routes.rows_of(e), n);
  }
}

// A mixture of experts over xn [T][d_model] into out [T][d_model]: each token's rows go to its
// experts (route_tokens), every expert runs the gated FFN over its rows, and each token's output
// is its rows' outputs weighted by the router. A shared expert runs over all T tokens in the same
// loops, its output written to out and scaled by sigmoid(its gate score) before the routed
// experts' are added.
void expert_ffn(ThreadPool& pool, const LayerWeights& lw, const ModelConfig& c, int64_t T, const float* xn, float* out,
                const ExpertScratch& s) {
  const int64_t D = c.embedding_length;
  const int64_t FE = c.expert_feed_forward_length;
  const int64_t FS = c.expert_shared_feed_forward_length;
  const bool shared = lw.shared_gate.rows > 0;
  float* shared_scores = s.router + T * c.expert_count;
  if (shared) {
    run_matmuls(pool, T, {{&lw.router, xn, s.router}, {&lw.shared_gate, xn, shared_scores}}, s.acts);
  } else {
    run_matmuls(pool, T, {{&lw.router, xn, s.router}}, s.acts);
  }
  add_bias(s.router, lw.router_bias, T, c.expert_count);
  const ExpertRoutes routes = route_tokens(s.router, T, c.expert_count, c.expert_used_count,
                                           c.traits.expert_weights_renormalized);
  const int64_t rows = int64_t(routes.tokens.size());
  for (int64_t r = 0; r < rows; ++r) std::copy_n(xn + routes.tokens[size_t(r)] * D, D, s.in + r * D);
  std::vector<MatmulJob> gate_up, down;
  float* shared_gate = s.gate + rows * FE;
  float* shared_up = s.up + rows * FE;
  if (shared) {
    gate_up.push_back({&lw.w_gate, xn, shared_gate, T});
    gate_up.push_back({&lw.w_up, xn, shared_up, T});
    down.push_back({&lw.w_down, shared_gate, out, T});
  }
  for (int32_t e = 0; e < c.expert_count; ++e) {
    const int64_t first = routes.first_row[size_t(e)];
    const int64_t n = routes.rows_of(e);
    if (n == 0) continue;
    const ExpertWeights& ew = lw.experts[size_t(e)];
    gate_up.push_back({&ew.gate, s.in + first * D, s.gate + first * FE, n});
    gate_up.push_back({&ew.up, s.in + first * D, s.up + first * FE, n});
    down.push_back({&ew.down, s.gate + first * FE, s.out + first * D, n});
  }
  run_matmuls(pool, gate_up, s.acts);
  add_expert_biases(lw, c, routes, &ExpertWeights::gate_bias, s.gate, FE);
  add_expert_biases(lw, c, routes, &ExpertWeights::up_bias, s.up, FE);
  ffn_activation(pool, c.traits.ffn_activation, s.gate, s.up, rows, FE);
  if (shared) ffn_activation(pool, c.traits.ffn_activation, shared_gate, shared_up, T, FS);
  run_matmuls(pool, down, s.acts);
  add_expert_biases(lw, c, routes, &ExpertWeights::down_bias, s.out, D);
  if (shared) {
    for (int64_t t = 0; t < T; ++t) ops::scale_in_place(out + t * D, 1.0f / (1.0f + std::exp(-shared_scores[t])), D);
  } else {
    std::fill_n(out, T * D, 0.0f);
  }
  for (int64_t r = 0; r < rows; ++r) {
    ops::add_scaled_in_place(out + routes.tokens[size_t(r)] * D, s.out + r * D, routes.weights[size_t(r)], D);
  }
}

// Logit post-processing: Granite divides by logit_scale, Gemma 2 soft-caps.
void finish_logits(const ModelConfig& c, float* logits, int64_t n) {
  if (c.logit_scale != 1.0f) ops::scale_in_place(logits, 1.0f / c.logit_scale, n);
  if (c.final_logit_softcap > 0) ops::softcap(logits, n, c.final_logit_softcap);
}

// squares[kv_dim] += q^2 of one token's queries q [heads][head_dim], each head into its kv head's.
void add_query_squares(const float* q, const ModelConfig& c, double* squares) {
  const int32_t HD = c.head_dim;
  const int32_t group = c.head_count / c.head_count_kv;
  for (int32_t h = 0; h < c.head_count; ++h) {
    for (int32_t i = 0; i < HD; ++i) squares[(h / group) * HD + i] += double(q[h * HD + i]) * q[h * HD + i];
  }
}

// One token's q [heads][head_dim], k and v [kv heads][head_dim] into the rotated space of the
// KV types that store rotated rows (kernels/hadamard.h): q with k, since q·k = Hq·Hk; v alone,
// its attention output turned back after attention.
void rotate_for_kv(const KvLayout& layout, float* q, float* k, float* v, const ModelConfig& c) {
  if (kv_type_rotated(layout.k_type)) {
    hadamard_rotate_rows(q, c.head_count, c.head_dim);
    hadamard_rotate_rows(k, c.head_count_kv, c.head_dim);
  }
  if (kv_type_rotated(layout.v_type)) hadamard_rotate_rows(v, c.head_count_kv, c.head_dim);
}

// After a layer's attention: each observed token's weights into its sequence's scores, in
// batch order (one thread; tokens of one sequence add to the same rows).
void add_observed_attention(const ObservedAttention& observed, const ForwardBatch& batch, const KvCache& kv,
                            int32_t layer, int32_t num_kv_heads, int32_t group, const std::vector<float>& weights) {
  for (int32_t t = 0; t < batch.size(); ++t) {
    if (observed.offset[size_t(t)] < 0) continue;
    const int32_t slots = kv.view(batch.seq_ids[t], batch.positions[t] + 1).num_tokens;
    for (int32_t g = 0; g < num_kv_heads; ++g) {
      const float* w = weights.data() + observed.offset[size_t(t)] + int64_t(g) * group * slots;
      observed.state[size_t(t)]->add_attention(layer, g, w, group, slots);
    }
  }
}

}  // namespace

Model::~Model() = default;

size_t Model::scratch_bytes() const {
  const Scratch& s = *scratch_;
  size_t bytes = s.acts.capacity() + s.attn_scratch.capacity() * sizeof(float);
  for (const std::vector<float>* v : {&s.x, &s.xn, &s.q, &s.k, &s.v, &s.att, &s.tmp, &s.gate, &s.up, &s.router,
                                     &s.expert_in, &s.expert_out, &s.logit_rows, &s.rope_cos_sin}) {
    bytes += v->capacity() * sizeof(float);
  }
  return bytes;
}

std::unique_ptr<Model> Model::load(const std::string& path, const ModelLoadOptions& options) {
  LoadProgress quiet;
  return load(path, options, quiet);
}

std::unique_ptr<Model> Model::load(const std::string& path, const ModelLoadOptions& options, LoadProgress& progress) {
  std::unique_ptr<Model> m(new Model());
  // Measured before the file is read in, which may take its size from what is available.
  const uint64_t memory = memory_budget(options.memory_limit_bytes);
  // The interleaved layouts serve the GEMMs over them, on AVX-512 only for the types where they
  // beat its row kernels (cpu_layout_pays); the scalar kernels keep ggml's rows. On AVX2 and
  // AVX-VNNI repacking touches every matrix byte once more, about as much work as reading it:
  // half the progress. On AVX-512 the K-quants keep their rows, so reading gets all of it, and a
  // Q4_0 or Q8_0 model's progress waits at its end while the matrices are repacked.
  const CpuIsa isa = cpu_isa_active();
  const bool repack = options.cpu_layouts && isa != CpuIsa::Scalar;
  const double read_share = repack && (isa == CpuIsa::Avx2 || isa == CpuIsa::AvxVnni) ? 0.5 : 1.0;
  m->file_ = GgufFile::open(path, progress, read_share);
  m->config_ = read_model_config(*m->file_);
  m->weights_ = bind_model_weights(*m->file_, m->config_);
  progress.check_cancelled();
  if (repack && m->file_->data_in_memory()) {
    m->file_->rewrite_tensor_data([&] { repack_matrices(m->weights_, isa, progress, 1.0 - read_share); });
  }
  require_memory(m->weights_.weight_bytes, memory, path + ": the model's weights");
  m->tokenizer_ = options.tokenizer_path.empty() ? Tokenizer::from_gguf(*m->file_)
                                                 : Tokenizer::from_spm_file(options.tokenizer_path);
  // Equal, as llama.cpp requires: ids past the vocabulary could be sampled but never printed,
  // ids past the embedding never embedded.
  if (m->tokenizer_->vocab_size() != m->config_.vocab_size) {
    const std::string vocabulary = options.tokenizer_path.empty() ? "its vocabulary" : options.tokenizer_path;
    throw Error(path + ": " + vocabulary + " has " + std::to_string(m->tokenizer_->vocab_size()) +
                " tokens but the model embeds " + std::to_string(m->config_.vocab_size) +
                ": the tokenizer does not belong to this model");
  }
  m->scratch_ = std::make_unique<Scratch>();
  return m;
}

const KeySmoothing& Model::key_smoothing(ThreadPool& pool) const {
  std::call_once(key_smoothing_measured_, [&] { key_smoothing_ = measure_key_smoothing(*this, pool); });
  return key_smoothing_;
}

void Model::forward(const ForwardBatch& batch, KvCache& kv, ThreadPool& pool,
                    std::vector<float>& logits) const {
  run_forward(batch, kv, pool, logits, nullptr);
}

void Model::forward_measuring_queries(const ForwardBatch& batch, KvCache& kv, ThreadPool& pool,
                                      std::vector<float>& logits, std::vector<double>& query_squares) const {
  KVDESK_ASSERT(query_squares.size() == size_t(config_.block_count) * size_t(config_.kv_dim()));
  run_forward(batch, kv, pool, logits, &query_squares);
}

void Model::run_forward(const ForwardBatch& batch, KvCache& kv, ThreadPool& pool, std::vector<float>& logits,
                        std::vector<double>* query_squares) const {
  // First, before the scratch is in use: measuring the key smoothing runs a forward of its own.
  const KeySmoothing* smoothing = kv_keys_smoothed(kv.layout(), config_) ? &key_smoothing(pool) : nullptr;
  if (smoothing && smoothing->empty()) smoothing = nullptr;
  const bool keys_scaled = smoothing && kv_keys_scaled(kv.layout(), config_);
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  Scratch& s = *scratch_;
  const int64_t T = batch.size();
  const int64_t D = c.embedding_length;
  const int64_t F = c.feed_forward_length;
  const int64_t QD = c.q_dim();
  const int64_t KVD = c.kv_dim();
  const int32_t HD = c.head_dim;
  KVDESK_ASSERT(T > 0);
  for (int64_t t = 0; t < T; ++t) {
    KVDESK_ASSERT(batch.tokens[t] >= 0 && batch.tokens[t] < c.vocab_size);
    KVDESK_ASSERT(batch.positions[t] < kv.num_tokens(batch.seq_ids[t]));
  }
  grow(s.x, T * D); grow(s.xn, T * D); grow(s.tmp, T * D);
  grow(s.q, T * QD); grow(s.att, T * QD); grow(s.k, T * KVD); grow(s.v, T * KVD);
  const int64_t expert_rows = T * c.expert_used_count;
  grow(s.gate, std::max(T * F, expert_ffn_floats(c, T)));
  grow(s.up, std::max(T * F, expert_ffn_floats(c, T)));
  grow(s.router, T * (c.expert_count + 1));
  grow(s.expert_in, expert_rows * D); grow(s.expert_out, expert_rows * D);
  grow(s.rope_cos_sin, c.rope_dimension_count);
  const int64_t attn_floats = attention_scratch_floats(c.head_count / c.head_count_kv, HD);
  grow(s.attn_scratch, attn_floats * pool.num_threads());
  const ObservedAttention observed = observed_attention(batch, kv, c.head_count);
  grow(s.attn_weights, size_t(observed.total_floats));
  std::vector<int32_t> slot(static_cast<size_t>(T));   // [T] each token's cache slot: position - positions dropped by KV retention
  for (int64_t t = 0; t < T; ++t) slot[size_t(t)] = batch.positions[t] - kv.num_evicted(batch.seq_ids[t]);
  s.recent.plan(batch, slot, kv);

  // 1. Token embeddings: x[t] = token_embd[token[t]].
  for (int64_t t = 0; t < T; ++t) {
    ref::dequantize_row(w.token_embd.type, w.token_embd.row(batch.tokens[t]), s.x.data() + t * D, D);
    if (c.embedding_scale != 1.0f) ops::scale_in_place(s.x.data() + t * D, c.embedding_scale, D);
  }

  for (int32_t l = 0; l < c.block_count; ++l) {
    const LayerWeights& lw = w.layers[l];
    const PagedKvLayer kv_layer = kv.layer(l);
    const ops::RopeParams rope = layer_rope_params(c, w.rope_freqs, l);
    const int32_t window = c.is_local_layer(l) ? c.sliding_window : 0;

    // 2. Attention block: xn = norm(x); q, k, v = xn Wq + bq, xn Wk + bk, xn Wv + bv.
    for (int64_t t = 0; t < T; ++t) ops::rms_norm(s.x.data() + t * D, lw.attn_norm, s.xn.data() + t * D, D, c.rms_eps);
    run_matmuls(pool, T, {{&lw.wq, s.xn.data(), s.q.data()},
                          {&lw.wk, s.xn.data(), s.k.data()},
                          {&lw.wv, s.xn.data(), s.v.data()}}, s.acts);
    add_bias(s.q.data(), lw.bq, T, QD);
    add_bias(s.k.data(), lw.bk, T, KVD);
    add_bias(s.v.data(), lw.bv, T, KVD);
    norm_heads(s.q.data(), lw.q_norm, T, c.head_count, HD, c.rms_eps);
    norm_heads(s.k.data(), lw.k_norm, T, c.head_count_kv, HD, c.rms_eps);

    // 3. RoPE on q and k heads (one set of angles per token), then K/V of every token into
    //    its sequence's blocks, at slot position - evicted (KV retention keeps K with the RoPE
    //    of its original position). A quantized K type stores k minus the layer's mean key,
    //    an int8 or int4 one also scaled by 1 / D with q scaled by D (engine/model/key_smoothing.h);
    //    an int8 or int4 K or V type stores its rows rotated (kernels/hadamard.h): q and k (or v)
    //    turn by the same H here. Low-bit KV keeps the newest rows in f32 too (RecentWindow).
    for (int64_t t = 0; t < T; ++t) {
      ops::rope_angles(batch.positions[t], rope, s.rope_cos_sin.data());
      for (int32_t h = 0; h < c.head_count; ++h) {
        ops::rope_rotate(s.q.data() + t * QD + h * HD, s.rope_cos_sin.data(), rope.n_rot, rope.mode);
      }
      for (int32_t h = 0; h < c.head_count_kv; ++h) {
        ops::rope_rotate(s.k.data() + t * KVD + h * HD, s.rope_cos_sin.data(), rope.n_rot, rope.mode);
      }
      if (query_squares && batch.positions[t] > 0) add_query_squares(s.q.data() + t * QD, c, query_squares->data() + l * KVD);
      if (smoothing) smooth_keys(*smoothing, l, keys_scaled, s.k.data() + t * KVD, c);
      if (keys_scaled) scale_queries(*smoothing, l, s.q.data() + t * QD, c);
      rotate_for_kv(kv.layout(), s.q.data() + t * QD, s.k.data() + t * KVD, s.v.data() + t * KVD, c);
      const PagedSeq seq = kv.view(batch.seq_ids[t], batch.positions[t] + 1, l);
      paged_kv_write(kv_layer, seq, slot[size_t(t)], s.k.data() + t * KVD, s.v.data() + t * KVD);
    }
    s.recent.gather(kv, l, s.k.data(), s.v.data());

    // 4. Causal attention: token t attends to positions [0, pos_t] of its sequence, on a local
    //    layer only to its last `window` slots. One task per (token, kv head) runs that head's
    //    group of query heads (GQA), with their sink logits where the model has them. The newest
    //    rows are read from their f32 copies, and this batch's rows then replace the kept ones.
    const int32_t group = c.head_count / c.head_count_kv;
    int64_t attention_macs = 0;
    for (int32_t p : batch.positions) attention_macs += int64_t(p + 1) * QD * 2;
    pool.parallel_for(T * c.head_count_kv, [&](int64_t task, int thread) {
      const int64_t t = task / c.head_count_kv;
      const int32_t g = int32_t(task % c.head_count_kv);
      PagedKvLayer one_head = kv_layer;
      one_head.k.data += size_t(g) * kv_layer.k.head_stride;
      one_head.v.data += size_t(g) * kv_layer.v.head_stride;
      one_head.num_kv_heads = 1;
      AttentionArgs args;
      args.q = s.q.data() + t * QD + int64_t(g) * group * HD;
      args.num_heads = group;
      args.scale = c.attention_scale;
      args.softcap = c.attn_logit_softcap;
      args.out = s.att.data() + t * QD + int64_t(g) * group * HD;
      args.scratch = s.attn_scratch.data() + thread * attn_floats;
      args.numerics = kv.layout().numerics;
      const PagedSeq seq = kv.view(batch.seq_ids[t], batch.positions[t] + 1, l);
      if (window > 0) args.first_token = std::max(0, seq.num_tokens - window);
      if (lw.attn_sinks) args.sinks = lw.attn_sinks + int64_t(g) * group;
      s.recent.attach(t, g, HD, args);
      if (observed.offset[size_t(t)] >= 0) {
        args.weights = s.attn_weights.data() + observed.offset[size_t(t)] + int64_t(g) * group * seq.num_tokens;
      }
      cpu::paged_attention(one_head, seq, args);
    }, attention_macs);
    add_observed_attention(observed, batch, kv, l, c.head_count_kv, group, s.attn_weights);
    s.recent.keep(kv, l, s.k.data(), s.v.data());
    if (kv_type_rotated(kv.layout().v_type)) hadamard_rotate_rows(s.att.data(), T * c.head_count, HD);

    // 5. x += att Wo + bo (through the block's post norm and residual scale, where present).
    run_matmuls(pool, T, {{&lw.wo, s.att.data(), s.tmp.data()}}, s.acts);
    add_bias(s.tmp.data(), lw.bo, T, D);
    add_block_output(s.x.data(), s.tmp.data(), lw.attn_post_norm, c.residual_scale, T, D, c.rms_eps);

    // 6. FFN block: x += (act(xn Wgate) * (xn Wup)) Wdown, xn = norm(x); act is SiLU or GELU.
    //    A MoE layer sums that over each token's experts instead, weighted by its router.
    for (int64_t t = 0; t < T; ++t) ops::rms_norm(s.x.data() + t * D, lw.ffn_norm, s.xn.data() + t * D, D, c.rms_eps);
    if (lw.experts.empty()) {
      run_matmuls(pool, T, {{&lw.w_gate, s.xn.data(), s.gate.data()},
                            {&lw.w_up, s.xn.data(), s.up.data()}}, s.acts);
      ffn_activation(pool, c.traits.ffn_activation, s.gate.data(), s.up.data(), T, F);
      run_matmuls(pool, T, {{&lw.w_down, s.gate.data(), s.tmp.data()}}, s.acts);
    } else {
      expert_ffn(pool, lw, c, T, s.xn.data(), s.tmp.data(),
                 {s.router.data(), s.expert_in.data(), s.gate.data(), s.up.data(), s.expert_out.data(), s.acts});
    }
    add_block_output(s.x.data(), s.tmp.data(), lw.ffn_post_norm, c.residual_scale, T, D, c.rms_eps);
  }

  // 7. Final norm and logits, only for the tokens that asked for them.
  const int64_t L = batch.num_logit_rows();
  grow(s.logit_rows, L * D);
  int64_t row = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (!batch.wants_logits[t]) continue;
    ops::rms_norm(s.x.data() + t * D, w.output_norm, s.logit_rows.data() + row * D, D, c.rms_eps);
    ++row;
  }
  logits.resize(size_t(L) * size_t(c.vocab_size));
  if (L > 0) run_matmuls(pool, L, {{&w.output, s.logit_rows.data(), logits.data()}}, s.acts);
  finish_logits(c, logits.data(), L * c.vocab_size);
}

}  // namespace kvdesk
