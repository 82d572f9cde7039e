// The backend decision table (see backend.h).
#include "engine/backend/backend.h"

#include "engine/error.h"

namespace kvdesk {
namespace {

constexpr const char* kNoForwardPass = "the CUDA forward pass is not available in this build yet";

}  // namespace

const char* backend_name(Backend backend) { return backend == Backend::Cuda ? "cuda" : "cpu"; }

BackendChoice choose_backend(BackendRequest requested, const CudaAvailability& cuda) {
  if (requested == BackendRequest::Cpu) return BackendChoice{Backend::Cpu, {}};
  const bool explicit_cuda = requested == BackendRequest::Cuda;
  if (!cuda.built) {
    if (explicit_cuda) {
      throw Error("the CUDA backend was asked for, but this build has no CUDA support (configure with -DKVDESK_CUDA=ON)");
    }
    return BackendChoice{Backend::Cpu, "no CUDA device: this build has no CUDA support; using the CPU"};
  }
  if (cuda.devices <= 0) {
    if (explicit_cuda) throw Error("the CUDA backend was asked for, but there is no CUDA device: " + cuda.no_device_reason);
    return BackendChoice{Backend::Cpu, "no CUDA device: " + cuda.no_device_reason + "; using the CPU"};
  }
  if (!cuda.forward_pass) {
    if (explicit_cuda) {
      throw Error("the CUDA backend was asked for and CUDA device " + cuda.device + " is present, but " + kNoForwardPass +
                  "; choose the cpu or auto backend");
    }
    return BackendChoice{Backend::Cpu, "CUDA device " + cuda.device + " found, but " + kNoForwardPass + "; using the CPU"};
  }
  return BackendChoice{Backend::Cuda, "using CUDA device " + cuda.device};
}

BackendChoice select_backend(BackendRequest requested) {
  if (requested == BackendRequest::Cpu) return choose_backend(requested, CudaAvailability{});
  return choose_backend(requested, probe_cuda());
}

}  // namespace kvdesk
