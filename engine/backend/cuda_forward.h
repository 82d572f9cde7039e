// CudaForward: the Llama-family forward pass (engine/model/model.cpp's, same order of operations) on
// CUDA device 0 with the kernels of kernels/cuda. The model's weights are uploaded once, at
// construction, within plan_device_memory's budget; the KV pool is a CudaKvPool that the
// host KvCache drives (kv_storage.h), and each forward copies the batch's block tables to the
// device. Logits come back to the host for the rows asked, so the sampler is unchanged.
//
// The batch runs in passes of up to 256 tokens through all layers: a decode step's few tokens
// through the GEMV, a prefill's through the tensor-core GEMM (cuda::matmul). Every token,
// prefill or decode, is one query row of the flash-decoding attention over its own causal prefix.
// Not yet on the device: KV retention (refused by KvCache) and the LlamaCpp attention numerics
// (refused here). CUDA builds only.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/forward_backend.h"
#include "kernels/cuda/device_allocation.h"
#include "kernels/ggml_types.h"

namespace kvdesk {

class CudaForward final : public ForwardBackend {
 public:
  // Uploads model's weights (the model must outlive this). Throws kvdesk::Error when the model
  // has a shape or type the CUDA kernels cannot run, or the device cannot hold it.
  explicit CudaForward(const Model& model, double utilization = 0.9);
  ~CudaForward() override;

  Backend backend() const override { return Backend::Cuda; }
  void forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits) override;
  KvDevicePoolFactory kv_pool() const override;
  int32_t max_kv_blocks(size_t bytes_per_block) const override;
  DeviceMemoryUse device_memory() const override { return memory_; }

  // A device weight matrix W[rows][cols]; rows and cols may be padded with zeros past the
  // model's (see cuda_forward.cpp: the FFN width is padded to a multiple of 8).
  struct Matrix {
    GgmlType type = GgmlType::F32;
    const uint8_t* data = nullptr;
    int32_t rows = 0;
    int32_t cols = 0;
  };
  struct Layer {
    const float* attn_norm = nullptr;               // [d_model]
    Matrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float* bq = nullptr;                      // [q_dim] or null
    const float* bk = nullptr;                      // [kv_dim] or null
    const float* bv = nullptr;                      // [kv_dim] or null
    const float* ffn_norm = nullptr;                // [d_model]
  };
  struct Weights {
    Matrix token_embd;                              // [vocab][d_model]
    std::vector<Layer> layers;                      // [block_count]
    const float* output_norm = nullptr;             // [d_model]
    Matrix output;                                  // [vocab][d_model]
    const float* rope_freqs = nullptr;              // [n_rot / 2] or null
  };

 private:
  struct Buffers;
  struct Step;

  void upload_key_smoothing();
  void run_chunk(const Step& step, int32_t first, int32_t count, KvCache& kv, std::vector<float>& logits,
                 int64_t& logit_row);

  const Model& model_;
  double utilization_;
  int32_t ffn_padded_;        // feed_forward_length rounded up to a multiple of 8
  int32_t multiprocessors_;
  DeviceMemoryUse memory_;
  cuda::DeviceAllocation weight_memory_;
  Weights weights_;
  std::unique_ptr<Buffers> buffers_;
  // engine/model/key_smoothing.h's constants, uploaded at the first forward over a smoothed KV
  // type; empty before (and for a text too short to measure them): -mu and 1 / D [layers][kv_dim],
  // and D of each query head's kv head [layers][q_dim].
  cuda::DeviceAllocation negated_key_means_;
  cuda::DeviceAllocation key_inverse_scales_;
  cuda::DeviceAllocation query_scales_;
};

}  // namespace kvdesk
