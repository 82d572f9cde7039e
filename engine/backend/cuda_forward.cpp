// CudaForward (see cuda_forward.h): the weight upload, the device memory plan, and the forward
// pass as launches of the kernels/cuda launchers, in engine/model/model.cpp's order. Every launcher
// checks its launch; every copy checks its cudaMemcpy; each forward ends with a device
// synchronize that reports any asynchronous failure of the step.
#include "engine/backend/cuda_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

#include "engine/backend/cuda_kv_pool.h"
#include "engine/backend/device_memory.h"
#include "engine/error.h"
#include "engine/model/key_smoothing.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/hadamard.h"

namespace kvdesk {
namespace {

// Tokens per pass through the layers: a prefill of up to this many tokens reads each weight
// matrix once per 64 tokens (cuda::matmul's GEMM tiles); the activations of a pass take
// kChunk x (3 d_model + 2 q_dim + 2 kv_dim + 2 ffn + vocab) floats (33 MB for TinyLlama's shape).
constexpr int32_t kChunk = 256;
constexpr size_t kAlign = 256;                    // each tensor's start in the weight allocation

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Lays the weights out in one device allocation. Run once without a base to count the bytes,
// then with the allocation's base to copy: both runs visit the same tensors in the same order.
class WeightUploader {
 public:
  explicit WeightUploader(uint8_t* base) : base_(base) {}
  size_t bytes() const { return offset_; }

  // rows x row_bytes from host src stored as dst_rows x dst_row_bytes: each row's bytes then
  // zero bytes, then zero rows. Zero bytes decode to 0 in every ggml type.
  const uint8_t* put(const void* src, int64_t rows, size_t row_bytes, int64_t dst_rows, size_t dst_row_bytes) {
    KVDESK_ASSERT(dst_rows >= rows && dst_row_bytes >= row_bytes);
    offset_ = align_up(offset_, kAlign);
    uint8_t* dst = base_ ? base_ + offset_ : nullptr;
    offset_ += size_t(dst_rows) * dst_row_bytes;
    if (!dst) return nullptr;
    if (dst_rows == rows && dst_row_bytes == row_bytes) {
      cuda::copy_to_device(dst, src, size_t(rows) * row_bytes);
      return dst;
    }
    std::vector<uint8_t> padded(size_t(dst_rows) * dst_row_bytes, 0);   // [dst_rows][dst_row_bytes]
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(padded.data() + size_t(r) * dst_row_bytes, static_cast<const uint8_t*>(src) + size_t(r) * row_bytes,
                  row_bytes);
    }
    cuda::copy_to_device(dst, padded.data(), padded.size());
    return dst;
  }

  // n floats, or null for an absent tensor (a bias the model does not have).
  const float* vector(const float* src, int64_t n) {
    if (!src) return nullptr;
    const size_t bytes = size_t(n) * sizeof(float);
    return reinterpret_cast<const float*>(put(src, 1, bytes, 1, bytes));
  }

  // w stored as [rows][cols], rows >= w.rows and cols >= w.cols padded with zeros; padding
  // columns keeps whole values only for a type of one value per block (plain floats).
  CudaForward::Matrix matrix(const WeightMatrix& w, int64_t rows, int64_t cols) {
    KVDESK_ASSERT(cols == w.cols || ggml_type_info(w.type).block_values == 1);
    const uint8_t* data = put(w.data, w.rows, w.row_bytes, rows, ggml_row_bytes(w.type, cols));
    return CudaForward::Matrix{w.type, data, int32_t(rows), int32_t(cols)};
  }
  CudaForward::Matrix matrix(const WeightMatrix& w) { return matrix(w, w.rows, w.cols); }

 private:
  uint8_t* base_;
  size_t offset_ = 0;
};

// The device copy of every weight. The FFN width is padded to ffn_padded (a multiple of 8,
// which the GEMV reads in chunks of): zero rows of gate and up make h = silu(0) * 0 = 0 in the
// padding, and zero columns of down add nothing for it.
CudaForward::Weights place_weights(const ModelWeights& w, const ModelConfig& c, int32_t ffn_padded,
                                   WeightUploader& up) {
  const int64_t D = c.embedding_length;
  CudaForward::Weights d;
  d.token_embd = up.matrix(w.token_embd);
  for (const LayerWeights& lw : w.layers) {
    CudaForward::Layer l;
    l.attn_norm = up.vector(lw.attn_norm, D);
    l.wq = up.matrix(lw.wq);
    l.wk = up.matrix(lw.wk);
    l.wv = up.matrix(lw.wv);
    l.bq = up.vector(lw.bq, c.q_dim());
    l.bk = up.vector(lw.bk, c.kv_dim());
    l.bv = up.vector(lw.bv, c.kv_dim());
    l.wo = up.matrix(lw.wo);
    l.ffn_norm = up.vector(lw.ffn_norm, D);
    l.w_gate = up.matrix(lw.w_gate, ffn_padded, lw.w_gate.cols);
    l.w_up = up.matrix(lw.w_up, ffn_padded, lw.w_up.cols);
    l.w_down = up.matrix(lw.w_down, lw.w_down.rows, ffn_padded);
    d.layers.push_back(l);
  }
  d.output_norm = up.vector(w.output_norm, D);
  d.output = w.tied_output ? d.token_embd : up.matrix(w.output);
  d.rope_freqs = up.vector(w.rope_freqs, c.rope_dimension_count / 2);
  return d;
}

// Throws kvdesk::Error when the GEMV (or embedding) kernel cannot read w with the columns it
// will have on the device.
void require_runnable(const WeightMatrix& w, int64_t device_cols, const char* name) {
  const int64_t block = ggml_type_info(w.type).block_values;
  if (!cuda::weight_type_supported(w.type)) {
    throw Error(std::string("the CUDA backend cannot run ") + name + ": weight type " + std::string(ggml_type_info(w.type).name) +
                " is not supported there");
  }
  if (device_cols % block != 0 || device_cols % 8 != 0) {
    throw Error(std::string("the CUDA backend cannot run ") + name + ": rows of " + std::to_string(device_cols) +
                " values are not a multiple of 8 and of the " + std::string(ggml_type_info(w.type).name) + " block");
  }
}

void require_runnable(const ModelWeights& w, const ModelConfig& c, int32_t ffn_padded) {
  if (c.architecture != "llama" && c.architecture != "qwen2") {
    throw Error("the CUDA backend runs llama and qwen2 only, not " + c.architecture + "; use --backend cpu");
  }
  if (c.has_experts()) throw Error("the CUDA backend cannot run a mixture of experts; use --backend cpu");
  if (c.rope_yarn_ext_factor != 0) throw Error("the CUDA backend cannot run YaRN RoPE scaling; use --backend cpu");
  if (c.head_dim % 8 != 0 || c.head_dim > cuda::kMaxHeadDim) {
    throw Error("the CUDA backend cannot run a head_dim of " + std::to_string(c.head_dim) +
                " (a multiple of 8, at most " + std::to_string(cuda::kMaxHeadDim) + ")");
  }
  require_runnable(w.token_embd, w.token_embd.cols, "token_embd");
  require_runnable(w.output, w.output.cols, "output");
  for (const LayerWeights& lw : w.layers) {
    for (const WeightMatrix* m : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up}) {
      require_runnable(*m, m->cols, "a layer's projection");
    }
    require_runnable(lw.w_down, ffn_padded, "ffn_down");
  }
}

void matmul(const CudaForward::Matrix& w, const float* x, int32_t batch, float* y) {
  cuda::matmul(w.type, w.data, w.rows, w.cols, x, batch, y);
}

// y[t] += bias for each of n rows of `features` values; nothing without a bias.
void add_bias(float* y, const float* bias, int32_t n, int32_t features) {
  if (bias) cuda::add_columns(y, bias, n, features);
}

// The floats of attention workspace the largest chunk over the longest context needs.
int64_t max_workspace_floats(const ModelConfig& c, int32_t multiprocessors) {
  int64_t floats = 0;
  for (int32_t n = 1; n <= kChunk; ++n) {
    const cuda::AttentionPlan plan = cuda::plan_attention(n, c.head_count, c.head_count_kv, c.context_length, multiprocessors);
    floats = std::max(floats, cuda::attention_workspace_floats(plan, n, c.head_count, c.head_dim));
  }
  return floats;
}

// The longest sequence (in slots) among tokens [first, first + n) of a step.
int32_t chunk_max_tokens(const std::vector<int32_t>& num_tokens, int32_t first, int32_t n) {
  return *std::max_element(num_tokens.begin() + first, num_tokens.begin() + first + n);
}

// Bytes of attention workspace the chunk of tokens [first, first + n) needs under its plan.
size_t attention_workspace_bytes(const std::vector<int32_t>& num_tokens, int32_t first, int32_t n, const ModelConfig& c,
                                 int32_t multiprocessors) {
  const cuda::AttentionPlan plan =
      cuda::plan_attention(n, c.head_count, c.head_count_kv, chunk_max_tokens(num_tokens, first, n), multiprocessors);
  return size_t(cuda::attention_workspace_floats(plan, n, c.head_count, c.head_dim)) * sizeof(float);
}

void grow(cuda::DeviceAllocation& a, size_t bytes, const char* what) {
  if (a.size() < bytes) a = cuda::DeviceAllocation(bytes, what);
}

float* floats(const cuda::DeviceAllocation& a) { return reinterpret_cast<float*>(a.get()); }
int32_t* ints(const cuda::DeviceAllocation& a) { return reinterpret_cast<int32_t*>(a.get()); }

}  // namespace

// Device buffers of the forward pass. Activations hold one chunk of at most kChunk tokens;
// the step inputs and the workspace grow to the largest batch (plan) seen. A buffer is only
// replaced at the start of a forward, after the previous one synchronized.
struct CudaForward::Buffers {
  cuda::DeviceAllocation x, xn, tmp;   // [kChunk][d_model]
  cuda::DeviceAllocation q, att;       // [kChunk][q_dim]
  cuda::DeviceAllocation k, v;         // [kChunk][kv_dim]
  cuda::DeviceAllocation gate, up;     // [kChunk][ffn_padded]
  cuda::DeviceAllocation logits;       // [kChunk][vocab]
  cuda::DeviceAllocation workspace;    // attention partials of one chunk's plan
  cuda::DeviceAllocation tokens, positions, slots;   // [T] int32
  cuda::DeviceAllocation seqs;                       // [T] PagedSeq
  cuda::DeviceAllocation tables;                     // the batch's block tables, concatenated
};

// One forward's inputs on the device, token t of the batch at index t.
struct CudaForward::Step {
  const ForwardBatch* batch = nullptr;
  const int32_t* tokens = nullptr;      // device [T]
  const int32_t* positions = nullptr;   // device [T] RoPE positions
  const int32_t* slots = nullptr;       // device [T] KV row of the token: position - evicted
  const PagedSeq* seqs = nullptr;       // device [T] the token's sequence up to and with its slot
  std::vector<int32_t> num_tokens;      // host [T] seqs[t].num_tokens = slots[t] + 1
};

CudaForward::CudaForward(const Model& model, double utilization)
    : model_(model),
      utilization_(utilization),
      ffn_padded_((model.config().feed_forward_length + 7) / 8 * 8),
      multiprocessors_(cuda::multiprocessor_count()),
      buffers_(std::make_unique<Buffers>()) {
  const ModelConfig& c = model.config();
  require_runnable(model.weights(), c, ffn_padded_);
  const cuda::MemoryInfo info = cuda::memory_info();   // before anything of ours is on the device
  memory_.device = cuda::device_description();
  memory_.free_bytes = info.free_bytes;
  memory_.total_bytes = info.total_bytes;
  WeightUploader counter(nullptr);
  place_weights(model.weights(), c, ffn_padded_, counter);
  memory_.weight_bytes = counter.bytes();
  const size_t chunk = size_t(kChunk);
  const size_t d = chunk * size_t(c.embedding_length) * sizeof(float);
  const size_t q = chunk * size_t(c.q_dim()) * sizeof(float);
  const size_t kv = chunk * size_t(c.kv_dim()) * sizeof(float);
  const size_t ff = chunk * size_t(ffn_padded_) * sizeof(float);
  const size_t workspace = size_t(max_workspace_floats(c, multiprocessors_)) * sizeof(float);
  memory_.activation_bytes = 3 * d + 2 * q + 2 * kv + 2 * ff + chunk * size_t(c.vocab_size) * sizeof(float) + workspace;
  // Refuses now, naming the figures, when the model leaves no room for even a 1-byte KV block.
  memory_.budget_bytes = plan_device_memory(DeviceMemoryInputs{info.free_bytes, info.total_bytes, utilization,
                                                               memory_.weight_bytes, memory_.activation_bytes, 1})
                             .budget_bytes;
  try {
    weight_memory_ = cuda::DeviceAllocation(memory_.weight_bytes, "the model's weights");
    WeightUploader uploader(weight_memory_.get());
    weights_ = place_weights(model.weights(), c, ffn_padded_, uploader);
    Buffers& b = *buffers_;
    for (cuda::DeviceAllocation* a : {&b.x, &b.xn, &b.tmp}) *a = cuda::DeviceAllocation(d, "activations");
    for (cuda::DeviceAllocation* a : {&b.q, &b.att}) *a = cuda::DeviceAllocation(q, "activations");
    for (cuda::DeviceAllocation* a : {&b.k, &b.v}) *a = cuda::DeviceAllocation(kv, "activations");
    for (cuda::DeviceAllocation* a : {&b.gate, &b.up}) *a = cuda::DeviceAllocation(ff, "activations");
    b.logits = cuda::DeviceAllocation(chunk * size_t(c.vocab_size) * sizeof(float), "logits");
    b.workspace = cuda::DeviceAllocation(workspace, "attention workspace");
  } catch (const std::runtime_error& e) {
    throw Error(std::string("loading the model onto ") + memory_.device + ": " + e.what());
  }
}

CudaForward::~CudaForward() = default;

KvDevicePoolFactory CudaForward::kv_pool() const {
  return [](const KvPoolShape& shape) { return std::make_unique<CudaKvPool>(shape); };
}

int32_t CudaForward::max_kv_blocks(size_t bytes_per_block) const {
  return plan_device_memory(DeviceMemoryInputs{memory_.free_bytes, memory_.total_bytes, utilization_,
                                               memory_.weight_bytes, memory_.activation_bytes, bytes_per_block})
      .kv_blocks;
}

// The model's key smoothing, measured by the CPU forward (once per model) on a pool of this
// machine's threads: mu negated for add_bias, 1 / D, and D repeated for each query head.
void CudaForward::upload_key_smoothing() {
  ThreadPool pool(int(std::max(1u, std::thread::hardware_concurrency())));
  const KeySmoothing& smoothing = model_.key_smoothing(pool);
  if (smoothing.empty()) return;
  const ModelConfig& c = model_.config();
  std::vector<float> negated(smoothing.mean.size());   // [layers][kv_dim]
  for (size_t i = 0; i < negated.size(); ++i) negated[i] = -smoothing.mean[i];
  std::vector<float> query_scales(size_t(c.block_count) * size_t(c.q_dim()));   // [layers][q_dim]
  const int32_t group = c.head_count / c.head_count_kv;
  for (int32_t l = 0; l < c.block_count; ++l) {
    for (int32_t h = 0; h < c.head_count; ++h) {
      const float* scale = smoothing.scale.data() + int64_t(l) * c.kv_dim() + (h / group) * c.head_dim;
      std::copy(scale, scale + c.head_dim, query_scales.begin() + int64_t(l) * c.q_dim() + h * c.head_dim);
    }
  }
  const auto upload = [](const std::vector<float>& host, const char* what) {
    cuda::DeviceAllocation device(host.size() * sizeof(float), what);
    cuda::copy_to_device(device.get(), host.data(), host.size() * sizeof(float));
    return device;
  };
  negated_key_means_ = upload(negated, "mean keys");
  key_inverse_scales_ = upload(smoothing.inverse_scale, "key scales");
  query_scales_ = upload(query_scales, "query scales");
}

void CudaForward::forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits) {
  const ModelConfig& c = model_.config();
  const int32_t T = batch.size();
  KVDESK_ASSERT(T > 0 && kv.on_device());
  if (kv.layout().numerics != AttentionNumerics::Exact) {
    throw Error("the CUDA backend computes attention with exact numerics only; use --attn-numerics exact");
  }
  if (kv_keys_smoothed(kv.layout(), c) && negated_key_means_.size() == 0) upload_key_smoothing();
  // Host side: each distinct sequence's block table once, and each token's slot.
  std::vector<int32_t> tables;               // the batch's sequences' block tables, concatenated
  std::map<SeqId, size_t> table_offset;      // sequence -> its table's offset in tables
  std::vector<int32_t> slots(static_cast<size_t>(T));     // [T]
  Step step;
  step.batch = &batch;
  step.num_tokens.resize(size_t(T));
  for (int32_t t = 0; t < T; ++t) {
    const SeqId seq = batch.seq_ids[size_t(t)];
    KVDESK_ASSERT(batch.tokens[size_t(t)] >= 0 && batch.tokens[size_t(t)] < c.vocab_size);
    KVDESK_ASSERT(batch.positions[size_t(t)] < kv.num_tokens(seq));
    if (table_offset.emplace(seq, tables.size()).second) {
      const std::vector<int32_t>& table = kv.block_table(seq);
      tables.insert(tables.end(), table.begin(), table.end());
    }
    step.num_tokens[size_t(t)] = kv.view(seq, batch.positions[size_t(t)] + 1).num_tokens;
    slots[size_t(t)] = step.num_tokens[size_t(t)] - 1;
  }

  // Device side: the previous forward synchronized, so buffers may be replaced, and each is
  // grown here, before the first launch, to what every chunk of this step needs.
  Buffers& b = *buffers_;
  size_t workspace_bytes = 0;
  for (int32_t first = 0; first < T; first += kChunk) {
    const int32_t n = std::min(kChunk, T - first);
    workspace_bytes = std::max(workspace_bytes, attention_workspace_bytes(step.num_tokens, first, n, c, multiprocessors_));
  }
  grow(b.workspace, workspace_bytes, "attention workspace");
  const size_t ints_bytes = size_t(T) * sizeof(int32_t);
  grow(b.tokens, ints_bytes, "step tokens");
  grow(b.positions, ints_bytes, "step positions");
  grow(b.slots, ints_bytes, "step slots");
  grow(b.seqs, size_t(T) * sizeof(PagedSeq), "step sequences");
  grow(b.tables, tables.size() * sizeof(int32_t), "block tables");
  cuda::copy_to_device(b.tokens.get(), batch.tokens.data(), ints_bytes);
  cuda::copy_to_device(b.positions.get(), batch.positions.data(), ints_bytes);
  cuda::copy_to_device(b.slots.get(), slots.data(), ints_bytes);
  cuda::copy_to_device(b.tables.get(), tables.data(), tables.size() * sizeof(int32_t));
  std::vector<PagedSeq> seqs(static_cast<size_t>(T));     // [T] block_table pointers into b.tables (device)
  for (int32_t t = 0; t < T; ++t) {
    seqs[size_t(t)] = PagedSeq{ints(b.tables) + table_offset.at(batch.seq_ids[size_t(t)]), step.num_tokens[size_t(t)]};
  }
  cuda::copy_to_device(b.seqs.get(), seqs.data(), seqs.size() * sizeof(PagedSeq));
  step.tokens = ints(b.tokens);
  step.positions = ints(b.positions);
  step.slots = ints(b.slots);
  step.seqs = reinterpret_cast<const PagedSeq*>(b.seqs.get());

  logits.resize(size_t(batch.num_logit_rows()) * size_t(c.vocab_size));
  int64_t logit_row = 0;
  for (int32_t first = 0; first < T; first += kChunk) {
    run_chunk(step, first, std::min(kChunk, T - first), kv, logits, logit_row);
  }
  try {
    cuda::check_last_error("CUDA forward");
    cuda::synchronize("CUDA forward");
  } catch (const std::runtime_error& e) {
    throw Error(e.what());
  }
}

// Tokens [first, first + count) of the step through every layer. Their K/V rows are appended
// before attention, so a token sees the earlier tokens of its sequence in the same chunk.
void CudaForward::run_chunk(const Step& step, int32_t first, int32_t n, KvCache& kv, std::vector<float>& logits,
                            int64_t& logit_row) {
  const ModelConfig& c = model_.config();
  const Buffers& b = *buffers_;
  const int32_t D = c.embedding_length;
  const int32_t QD = c.q_dim();
  const int32_t KVD = c.kv_dim();
  const int32_t F = ffn_padded_;
  const int32_t V = c.vocab_size;
  float* x = floats(b.x);
  float* xn = floats(b.xn);
  float* tmp = floats(b.tmp);
  float* q = floats(b.q);
  float* att = floats(b.att);
  float* k = floats(b.k);
  float* v = floats(b.v);
  float* gate = floats(b.gate);
  float* up = floats(b.up);
  const int32_t* positions = step.positions + first;
  const int32_t* slots = step.slots + first;
  const PagedSeq* seqs = step.seqs + first;

  const int32_t max_tokens = chunk_max_tokens(step.num_tokens, first, n);
  const cuda::AttentionPlan plan = cuda::plan_attention(n, c.head_count, c.head_count_kv, max_tokens, multiprocessors_);
  KVDESK_ASSERT(attention_workspace_bytes(step.num_tokens, first, n, c, multiprocessors_) <= b.workspace.size());
  AttentionArgs args;
  args.q = q;
  args.num_heads = c.head_count;
  args.scale = 1.0f / std::sqrt(float(c.head_dim));
  args.out = att;
  args.scratch = floats(b.workspace);
  args.numerics = AttentionNumerics::Exact;
  const ops::RopeParams rope = rope_params(c, weights_.rope_freqs);

  // 1. Token embeddings.
  cuda::embedding_rows(weights_.token_embd.type, weights_.token_embd.data, D, step.tokens + first, n, x);
  for (int32_t l = 0; l < c.block_count; ++l) {
    const Layer& lw = weights_.layers[size_t(l)];
    const PagedKvLayer kv_layer = kv.layer(l);   // device pointers (CudaKvPool)
    // 2. q, k, v of norm(x), with their biases.
    cuda::rms_norm(x, lw.attn_norm, xn, n, D, c.rms_eps);
    matmul(lw.wq, xn, n, q);
    matmul(lw.wk, xn, n, k);
    matmul(lw.wv, xn, n, v);
    add_bias(q, lw.bq, n, QD);
    add_bias(k, lw.bk, n, KVD);
    add_bias(v, lw.bv, n, KVD);
    // 3. RoPE, then K/V into the sequences' blocks at each token's slot.
    cuda::rope(q, positions, n, c.head_count, c.head_dim, rope);
    cuda::rope(k, positions, n, c.head_count_kv, c.head_dim, rope);
    //    As the CPU forward: a quantized K type stores k minus the layer's mean key, an int8 or
    //    int4 one also scaled by 1 / D with q scaled by D (engine/model/key_smoothing.h), an int8
    //    or int4 K or V type rotated rows (kernels/hadamard.h).
    if (negated_key_means_.size() > 0 && kv_keys_smoothed(kv.layout(), c)) {
      add_bias(k, floats(negated_key_means_) + size_t(l) * size_t(KVD), n, KVD);
      if (kv_keys_scaled(kv.layout(), c)) {
        cuda::scale_columns(k, floats(key_inverse_scales_) + size_t(l) * size_t(KVD), n, KVD);
        cuda::scale_columns(q, floats(query_scales_) + size_t(l) * size_t(QD), n, QD);
      }
    }
    if (kv_type_rotated(kv.layout().k_type)) {
      cuda::hadamard_rotate_rows(q, int64_t(n) * c.head_count, c.head_dim);
      cuda::hadamard_rotate_rows(k, int64_t(n) * c.head_count_kv, c.head_dim);
    }
    if (kv_type_rotated(kv.layout().v_type)) cuda::hadamard_rotate_rows(v, int64_t(n) * c.head_count_kv, c.head_dim);
    cuda::paged_kv_append(kv_layer, seqs, slots, n, k, v);
    // 4. Causal attention: one query row per token over its sequence's slots [0, slot]; the
    //    output of rotated V rows turned back.
    cuda::paged_attention(kv_layer, seqs, n, max_tokens, args, plan);
    if (kv_type_rotated(kv.layout().v_type)) cuda::hadamard_rotate_rows(att, int64_t(n) * c.head_count, c.head_dim);
    // 5. x += att Wo.
    matmul(lw.wo, att, n, tmp);
    cuda::add_in_place(x, tmp, int64_t(n) * D);
    // 6. x += (silu(xn Wgate) * (xn Wup)) Wdown, xn = norm(x).
    cuda::rms_norm(x, lw.ffn_norm, xn, n, D, c.rms_eps);
    matmul(lw.w_gate, xn, n, gate);
    matmul(lw.w_up, xn, n, up);
    cuda::swiglu(gate, up, gate, int64_t(n) * F);
    matmul(lw.w_down, gate, n, tmp);
    cuda::add_in_place(x, tmp, int64_t(n) * D);
  }

  // 7. Final norm and logits, copied back for the tokens that asked for them.
  const std::vector<uint8_t>& wants = step.batch->wants_logits;
  if (std::none_of(wants.begin() + first, wants.begin() + first + n, [](uint8_t w) { return w != 0; })) return;
  cuda::rms_norm(x, weights_.output_norm, xn, n, D, c.rms_eps);
  matmul(weights_.output, xn, n, floats(b.logits));
  for (int32_t r = 0; r < n; ++r) {
    if (!wants[size_t(first + r)]) continue;
    cuda::copy_to_host(logits.data() + size_t(logit_row) * size_t(V), floats(b.logits) + size_t(r) * size_t(V),
                       size_t(V) * sizeof(float));
    ++logit_row;
  }
}

}  // namespace kvdesk
