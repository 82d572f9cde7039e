// CpuForward and the backend factory (see forward_backend.h). Compiled with
// KVDESK_HAVE_CUDA=1 when kvdesk_cuda_kernels is built; only then does cuda make a CudaForward.
#include "engine/backend/forward_backend.h"

#include <exception>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/model/model.h"
#include "kernels/check.h"

#if KVDESK_HAVE_CUDA
#include "engine/backend/cuda_forward.h"
#endif

namespace kvdesk {

void CpuForward::forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits) {
  KVDESK_ASSERT(!kv.on_device());
  model_.forward(batch, kv, pool_, logits);
}

int32_t CpuForward::max_kv_blocks(size_t) const { return std::numeric_limits<int32_t>::max(); }

std::unique_ptr<ForwardBackend> make_forward_backend(Backend backend, Model& model, ThreadPool& pool) {
  if (backend == Backend::Cpu) return std::make_unique<CpuForward>(model, pool);
#if KVDESK_HAVE_CUDA
  try {
    return std::make_unique<CudaForward>(model);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {   // the CUDA runtime's failures, as one kvdesk::Error
    throw Error(std::string("the CUDA backend could not load the model: ") + e.what());
  }
#else
  throw Error("the CUDA backend was asked for, but this build has no CUDA support (configure with -DKVDESK_CUDA=ON)");
#endif
}

}  // namespace kvdesk
