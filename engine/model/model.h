// Model: a loaded Llama-family GGUF (mapped file, hyperparameters, weight views, tokenizer)
// and its forward pass over a batch of tokens from any number of sequences. Keys and values
// go through the paged KV cache: each token's K/V are written at its position in its
// sequence, and attention reads the sequence's blocks through its block table.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/key_smoothing.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

class LoadProgress;
class ThreadPool;

// One forward call: tokens of one or more sequences, each at its own position. A sequence's
// tokens in a batch are consecutive positions in increasing order (a prefill chunk or one
// decode token); the KV cache must already hold slots for them (KvCache::append).
struct ForwardBatch {
  std::vector<int32_t> tokens;        // [n]
  std::vector<int32_t> positions;     // [n]
  std::vector<SeqId> seq_ids;         // [n]
  std::vector<uint8_t> wants_logits;  // [n] 1: return this token's next-token logits

  void add(int32_t token, int32_t position, SeqId seq, bool logits);
  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_logit_rows() const;
};

struct ModelLoadOptions {
  std::string tokenizer_path;  // a SentencePiece .model to use instead of the GGUF vocabulary
  uint64_t memory_limit_bytes = 0;  // the weights must fit in this; 0: MemAvailable
  // Repack matrices into the layouts of the active ISA's GEMM at load where they pay
  // (repack_matrices in engine/model/model_weights.h); false when the weights go to a GPU, which
  // wants ggml's.
  bool cpu_layouts = true;
};

class Model {
 public:
  // Throws kvdesk::Error naming the file and the problem. With progress: reading the file and
  // (AVX2) repacking its matrices are reported as the load's stages, and a cancelled load
  // throws LoadCancelled with nothing left allocated.
  static std::unique_ptr<Model> load(const std::string& path, const ModelLoadOptions& options = {});
  static std::unique_ptr<Model> load(const std::string& path, const ModelLoadOptions& options, LoadProgress& progress);
  ~Model();

  const GgufFile& file() const { return *file_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

  // Bytes of the activation buffers the forward pass holds (they grow to the largest batch).
  size_t scratch_bytes() const;

  // logits receives [batch.num_logit_rows()][vocab], in batch order. Const: it changes only the
  // activation scratch (one forward at a time) and, at the first smoothed KV, the key smoothing.
  void forward(const ForwardBatch& batch, KvCache& kv, ThreadPool& pool,
               std::vector<float>& logits) const;

  // forward, also adding each token's post-RoPE q^2 (positions after 0) into
  // query_squares [layers][kv_dim], summed over each kv head's query heads: the query statistics
  // of the key scales (engine/model/key_smoothing.h).
  void forward_measuring_queries(const ForwardBatch& batch, KvCache& kv, ThreadPool& pool, std::vector<float>& logits,
                                 std::vector<double>& query_squares) const;

  // The mean keys and key scales that smoothed KV types apply (engine/model/key_smoothing.h),
  // measured with pool at the first call.
  const KeySmoothing& key_smoothing(ThreadPool& pool) const;

 private:
  Model() = default;
  struct Scratch;

  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Scratch> scratch_;
  mutable std::once_flag key_smoothing_measured_;
  mutable KeySmoothing key_smoothing_;   // empty until measured

  // forward, with query_squares null when nothing is measured.
  void run_forward(const ForwardBatch& batch, KvCache& kv, ThreadPool& pool, std::vector<float>& logits,
                   std::vector<double>* query_squares) const;
};

}  // namespace kvdesk
