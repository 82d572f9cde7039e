// Speed run (hidden tag [.bench], run by tests/gpu/check.sh): the dequantizing GEMV of decode
// at Llama-3-8B's projection shapes (q/o 4096 x 4096, gate/up 14336 x 4096, down 4096 x 14336,
// output 128256 x 4096) for f16 and the common quantized types, batch 1 and 8. Prints the time
// per call and the weight bytes read per second (decode reads every weight once per token);
// asserts nothing about speed. Weights hold one constant byte pattern: the work does not
// depend on the values.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "tests/gpu/device_buffer.h"
#include "tests/gpu/device_timer.h"

using namespace kvdesk;
using gpu_test::DeviceBuffer;

namespace {

constexpr int kWarmup = 3, kRuns = 20;

// Milliseconds per call of y = W x for a rows x n matrix of `type`.
double time_gemv(GgmlType type, int32_t rows, int32_t n, int32_t batch) {
  DeviceBuffer<uint8_t> w(ggml_row_bytes(type, n) * size_t(rows));
  cudaMemset(w.get(), 0x3C, w.size());
  DeviceBuffer<float> x(std::vector<float>(size_t(batch) * n, 0.01f));
  DeviceBuffer<float> y(size_t(batch) * rows);
  const auto launch = [&] { cuda::gemv(type, w.get(), rows, n, x.get(), batch, y.get()); };
  for (int i = 0; i < kWarmup; ++i) launch();
  return gpu_test::device_ms_per_call(kRuns, launch);
}

}  // namespace

TEST_CASE("CUDA GEMV speed", "[.bench][cuda]") {
  struct Shape {
    const char* name;
    int32_t rows, n;
  };
  const Shape shapes[] = {{"q_proj", 4096, 4096}, {"up", 14336, 4096}, {"down", 4096, 14336}, {"output", 128256, 4096}};
  std::printf("\ngemv, %s; weight bytes read once per call\n", cuda::device_description().c_str());
  std::printf("%-6s %-7s %6s %6s %5s %10s %9s\n", "type", "matrix", "rows", "n", "batch", "ms/call", "GB/s");
  for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (const Shape& s : shapes) {
      for (int32_t batch : {1, cuda::kMaxGemvBatch}) {
        const double ms = time_gemv(type, s.rows, s.n, batch);
        const double bytes = double(ggml_row_bytes(type, s.n)) * s.rows;
        std::printf("%-6s %-7s %6d %6d %5d %10.4f %9.1f\n", std::string(ggml_type_info(type).name).c_str(), s.name,
                    s.rows, s.n, batch, ms, bytes / (ms * 1e-3) / 1e9);
        std::fflush(stdout);
      }
    }
  }
}
