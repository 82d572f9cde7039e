// ForwardBackend: the one thing the engine step (engine/runtime/engine_core.h) calls to run a ForwardBatch,
// whichever backend (engine/backend/backend.h) was chosen: the CPU Model::forward over host KV, or
// CudaForward (engine/backend/cuda_forward.h, CUDA builds only) over a device KV pool. The backend also
// says where the KV pool's bytes must live and how many blocks its memory holds, so the pool
// is made to fit it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/device_memory.h"
#include "engine/kv/kv_cache.h"

namespace kvdesk {

class Model;
class ThreadPool;
struct ForwardBatch;

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;
  virtual Backend backend() const = 0;
  // Model::forward's contract: logits receives [batch.num_logit_rows()][vocab], in batch order;
  // kv must have been made with kv_pool().
  virtual void forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits) = 0;
  // Where the KV pool's bytes go (KvCacheConfig::device_pool); empty: host memory.
  virtual KvDevicePoolFactory kv_pool() const = 0;
  // The most KV blocks of bytes_per_block this backend's memory holds beside the model;
  // INT32_MAX when the host's limits apply instead (the CPU).
  virtual int32_t max_kv_blocks(size_t bytes_per_block) const = 0;
  virtual DeviceMemoryUse device_memory() const = 0;
};

// The CPU forward pass: Model::forward on the thread pool, KV in host memory.
class CpuForward final : public ForwardBackend {
 public:
  CpuForward(Model& model, ThreadPool& pool) : model_(model), pool_(pool) {}
  Backend backend() const override { return Backend::Cpu; }
  void forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits) override;
  KvDevicePoolFactory kv_pool() const override { return {}; }
  int32_t max_kv_blocks(size_t bytes_per_block) const override;
  DeviceMemoryUse device_memory() const override { return {}; }

 private:
  Model& model_;
  ThreadPool& pool_;
};

// The chosen backend's forward pass for model: CpuForward, or a CudaForward that uploads the
// weights now. Throws kvdesk::Error when cuda is asked of a build without CUDA or the device
// cannot hold the model (every failure of the CUDA runtime while loading included).
std::unique_ptr<ForwardBackend> make_forward_backend(Backend backend, Model& model, ThreadPool& pool);

}  // namespace kvdesk
