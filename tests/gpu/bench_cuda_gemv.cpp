// Speed runs (hidden tag [.bench], run by tests/gpu/check.sh) at Llama-3-8B's projection shapes
// (q/o 4096 x 4096, gate/up 14336 x 4096, down 4096 x 14336, output 128256 x 4096) for f16 and
// the common quantized types: the dequantizing GEMV of decode, batch 1 and 8, as the time per
// call and the weight bytes read per second (decode reads every weight once per token); the
// tensor-core GEMM of prefill, batch 512, as the time per call and TFLOP/s. Asserts nothing
// about speed. Weights hold one constant byte pattern: the work does not
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

struct Shape {
  const char* name;
  int32_t rows, n;
};
constexpr Shape kShapes[] = {{"q_proj", 4096, 4096}, {"up", 14336, 4096}, {"down", 4096, 14336}, {"output", 128256, 4096}};
constexpr GgmlType kTypes[] = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};

// Milliseconds per call of y = W x for a rows x n matrix of `type` (GEMV or GEMM).
template <typename Launcher>
double time_product(Launcher product, GgmlType type, int32_t rows, int32_t n, int32_t batch) {
  DeviceBuffer<uint8_t> w(ggml_row_bytes(type, n) * size_t(rows));
  cudaMemset(w.get(), 0x3C, w.size());
  DeviceBuffer<float> x(std::vector<float>(size_t(batch) * n, 0.01f));
  DeviceBuffer<float> y(size_t(batch) * rows);
  const auto launch = [&] { product(type, w.get(), rows, n, x.get(), batch, y.get()); };
  for (int i = 0; i < kWarmup; ++i) launch();
  return gpu_test::device_ms_per_call(kRuns, launch);
}

}  // namespace

TEST_CASE("CUDA GEMV speed", "[.bench][cuda]") {
  std::printf("\ngemv, %s; weight bytes read once per call\n", cuda::device_description().c_str());
  std::printf("%-6s %-7s %6s %6s %5s %10s %9s\n", "type", "matrix", "rows", "n", "batch", "ms/call", "GB/s");
  for (GgmlType type : kTypes) {
    for (const Shape& s : kShapes) {
      for (int32_t batch : {1, cuda::kMaxGemvBatch}) {
        const double ms = time_product(cuda::gemv, type, s.rows, s.n, batch);
        const double bytes = double(ggml_row_bytes(type, s.n)) * s.rows;
        std::printf("%-6s %-7s %6d %6d %5d %10.4f %9.1f\n", std::string(ggml_type_info(type).name).c_str(), s.name,
                    s.rows, s.n, batch, ms, bytes / (ms * 1e-3) / 1e9);
        std::fflush(stdout);
      }
    }
  }
}

TEST_CASE("CUDA GEMM speed", "[.bench][cuda]") {
  constexpr int32_t kBatch = 512;
  std::printf("\ngemm, %s; batch %d\n", cuda::device_description().c_str(), kBatch);
  std::printf("%-6s %-7s %6s %6s %10s %9s\n", "type", "matrix", "rows", "n", "ms/call", "TFLOP/s");
  for (GgmlType type : kTypes) {
    for (const Shape& s : kShapes) {
      const double ms = time_product(cuda::gemm, type, s.rows, s.n, kBatch);
      std::printf("%-6s %-7s %6d %6d %10.4f %9.1f\n", std::string(ggml_type_info(type).name).c_str(), s.name, s.rows, s.n,
                  ms, 2.0 * kBatch * s.rows * s.n / (ms * 1e-3) / 1e12);
      std::fflush(stdout);
    }
  }
}
