// CUDA device discovery: how many devices this process can use, and why none when none
// (no driver, driver too old for the runtime, no GPU), so callers can say
// "no CUDA device: <reason>; using the CPU". Plain C++: includes no CUDA header.
#pragma once
#include <string>

namespace kvdesk::cuda {

struct DeviceCount {
  int count = 0;
  std::string reason;   // empty when count > 0; otherwise the runtime's explanation
};

DeviceCount device_count();

// Streaming multiprocessors of device 0 (sizes the split of long sequences); needs a device.
int multiprocessor_count();

// "NVIDIA H200, sm_90, 139.8 GiB" of device 0, for logs and benchmark headers; needs a device.
std::string device_description();

// Throws std::runtime_error("<what>: <cudaGetErrorString>") when the last launch or any
// earlier asynchronous work failed.
void check_last_error(const char* what);

}  // namespace kvdesk::cuda
