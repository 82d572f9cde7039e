// The CUDA kernels' weight decoders (kernels/cuda/weight_codec.cuh) run on the host, against
// the CPU dequantizer: decode8 over a whole row gives ref::dequantize_row's floats, bit for
// bit, for every computable weight type. Needs no GPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/weight_codec.cuh"
#include "kernels/quantize.h"
#include "tests/gpu/gpu_test_support.h"

using namespace kvdesk;

namespace {

// Normal values with a few large ones, so scales and mins of every size show up.
std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 97 == 0 ? 40.0f : 1.0f);
  return x;
}

}  // namespace

TEST_CASE("CUDA weight decode8 equals ref::dequantize_row for every weight type the CUDA kernels decode", "[cuda_codec][weights]") {
  for (GgmlType type : gpu_test::kCudaWeightTypes) {
    INFO(ggml_type_info(type).name);
    CHECK(cuda::weight_type_supported(type));
    for (uint32_t seed : {1u, 2u, 3u}) {
      const int64_t n = 768;   // three K-quant super-blocks, 24 blocks of 32
      const std::vector<float> x = random_row(n, seed);
      std::vector<uint8_t> row(ggml_row_bytes(type, n));
      ref::quantize_row(type, x.data(), row.data(), n);
      std::vector<float> want(static_cast<size_t>(n)), got(want.size());
      ref::dequantize_row(type, row.data(), want.data(), n);
      for (int64_t e0 = 0; e0 < n; e0 += 8) {
        float values[8];
        cuda::decode8(type, row.data(), e0, values);
        std::memcpy(&got[size_t(e0)], values, sizeof(values));
      }
      CHECK(got == want);
    }
  }
}

TEST_CASE("CUDA weight kernels refuse types they cannot decode", "[cuda_codec][weights]") {
  for (GgmlType type : {GgmlType::Q8_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::I8}) {
    CHECK_FALSE(cuda::weight_type_supported(type));
  }
}
