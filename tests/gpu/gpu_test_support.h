// Shared pieces of the CUDA tests, host-run codec tests and device tests alike: the weight
// types the CUDA kernels decode, normal random values, and the NMSE every comparison with a
// CPU reference is bounded by.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/ggml_types.h"

namespace kvdesk::gpu_test {

// The weight types kernels/cuda/weight_codec.cuh decodes (the CPU computes more: Q2_K, Q3_K,
// IQ4_NL and IQ4_XS have no CUDA decoder yet).
inline constexpr GgmlType kCudaWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                                GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                                GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

inline std::vector<float> normal_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& e : x) e = normal(rng);
  return x;
}

// sum (got - want)^2 / sum want^2 over n values (the plain squared error when want is all zero).
inline double nmse(const float* got, const float* want, size_t n) {
  double err = 0;
  double ref = 0;
  for (size_t i = 0; i < n; ++i) {
    err += (double(got[i]) - double(want[i])) * (double(got[i]) - double(want[i]));
    ref += double(want[i]) * double(want[i]);
  }
  return ref > 0 ? err / ref : err;
}

inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  return nmse(got.data(), want.data(), want.size());
}

}  // namespace kvdesk::gpu_test
