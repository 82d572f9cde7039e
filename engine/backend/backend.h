// Which compute backend runs a model: the CPU kernels or CUDA on device 0. The choice is made
// once at load from what was asked (--backend auto|cpu|cuda) and what this process can use.
// choose_backend is the whole decision table as a pure function; select_backend probes CUDA
// (never when the CPU was asked for) and applies it. auto falls back to the CPU and says why in
// the note; an explicit cuda that cannot run is a kvdesk::Error, never a silent CPU run.
#pragma once
#include <cstdint>
#include <string>

#include "engine/engine_types.h"

namespace kvdesk {

enum class Backend : uint8_t { Cpu, Cuda };

const char* backend_name(Backend backend);                    // "cpu", "cuda"

// What this process can use of CUDA, as found by probe_cuda().
struct CudaAvailability {
  bool built = false;              // this build has the CUDA kernels (KVDESK_CUDA)
  int32_t devices = 0;             // usable devices
  std::string no_device_reason;    // built and devices == 0: the runtime's explanation
  std::string device;              // devices > 0: "NVIDIA H200, sm_90, 139.8 GiB" (device 0)
  bool forward_pass = false;       // the engine can run a model's forward pass on CUDA
};

struct BackendChoice {
  Backend backend = Backend::Cpu;
  // For the log and `info`: why auto took the CPU, or which device CUDA runs on; empty when
  // the CPU was asked for.
  std::string note;
};

// The decision table. Throws kvdesk::Error when cuda was asked for and cannot run.
BackendChoice choose_backend(BackendRequest requested, const CudaAvailability& cuda);

// Device count and description of device 0; {built = false} in a build without CUDA.
CudaAvailability probe_cuda();

// choose_backend over probe_cuda(); the CPU without probing when the CPU was asked for.
BackendChoice select_backend(BackendRequest requested);

}  // namespace kvdesk
