// probe_cuda (see backend.h): the only engine file that asks the CUDA runtime anything, through
// kernels/cuda/device.h. Compiled with KVDESK_HAVE_CUDA=1 when kvdesk_cuda_kernels is built.
#include "engine/backend/backend.h"

#if KVDESK_HAVE_CUDA
#include "kernels/cuda/device.h"
#endif

namespace kvdesk {

CudaAvailability probe_cuda() {
  CudaAvailability cuda;
#if KVDESK_HAVE_CUDA
  // The whole forward pass runs on the device (engine/backend/cuda_forward.h; issue #8).
  constexpr bool kCudaForwardPass = true;
  cuda.built = true;
  const kvdesk::cuda::DeviceCount found = kvdesk::cuda::device_count();
  cuda.devices = found.count;
  cuda.no_device_reason = found.reason;
  if (found.count > 0) cuda.device = kvdesk::cuda::device_description();
  cuda.forward_pass = kCudaForwardPass;
#endif
  return cuda;
}

}  // namespace kvdesk
