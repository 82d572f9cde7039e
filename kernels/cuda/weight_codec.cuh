// Weight row decoders of the CUDA kernels (block layouts in kernels/ggml_types.h): decode8
// turns 8 consecutive values of one row of any computable GGUF type into floats, from element
// e0 (a multiple of 8), doing what ref::dequantize_row does for them with the same float
// operations in the same order. __host__ __device__ and plain C++ for a host compiler, so host
// tests check every type against the CPU dequantizer on machines without a GPU. Reads bytes
// one at a time: block starts are only 2-byte aligned (Q8_0 blocks are 34 bytes).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/ggml_types.h"

#ifndef KVDESK_HOST_DEVICE
#define KVDESK_HOST_DEVICE __host__ __device__
#endif

namespace kvdesk::cuda {

KVDESK_HOST_DEVICE inline float weight_half(const uint8_t* p) {
  __half_raw raw;
  raw.x = uint16_t(p[0] | p[1] << 8);
  return __half2float(__half(raw));
}

KVDESK_HOST_DEVICE inline float weight_bf16(const uint8_t* p) {
  const uint32_t bits = uint32_t(p[0] | p[1] << 8) << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

// get_scale_min_k4 of ggml (kernels/ggml_types.h k_scale_min): sub-block s of a Q4_K/Q5_K block.
KVDESK_HOST_DEVICE inline void k_scale_min_of(const uint8_t* scales, int s, int& scale, int& min) {
  if (s < 4) {
    scale = scales[s] & 63;
    min = scales[s + 4] & 63;
  } else {
    scale = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4;
    min = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
  }
}

// Values e0 .. e0 + 7 of a row of `type` (ggml_type_info(type).computable). The row starts at
// its first block; e0 is a multiple of 8 below the row length.
KVDESK_HOST_DEVICE inline void decode8(GgmlType type, const uint8_t* row, int64_t e0, float (&x)[8]) {
  switch (type) {
    case GgmlType::F32:
      for (int i = 0; i < 8; ++i) memcpy(&x[i], row + 4 * (e0 + i), sizeof(float));
      return;
    case GgmlType::F16:
      for (int i = 0; i < 8; ++i) x[i] = weight_half(row + 2 * (e0 + i));
      return;
    case GgmlType::BF16:
      for (int i = 0; i < 8; ++i) x[i] = weight_bf16(row + 2 * (e0 + i));
      return;
    case GgmlType::Q8_0: {   // d * qs[j]
      const uint8_t* b = row + sizeof(BlockQ8_0) * (e0 / 32);
      const float d = weight_half(b);
      const int j = int(e0 % 32);
      for (int i = 0; i < 8; ++i) x[i] = d * float(int8_t(b[2 + j + i]));
      return;
    }
    case GgmlType::Q4_0:
    case GgmlType::Q4_1: {   // Q4_0: d * (q - 8); Q4_1: d * q + m
      const bool has_min = type == GgmlType::Q4_1;
      const uint8_t* b = row + (has_min ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0)) * (e0 / 32);
      const float d = weight_half(b);
      const uint8_t* qs = b + (has_min ? 4 : 2);
      const int j = int(e0 % 32);
      for (int i = 0; i < 8; ++i) {
        const int q = j < 16 ? qs[j + i] & 15 : qs[j - 16 + i] >> 4;
        x[i] = has_min ? d * float(q) + weight_half(b + 2) : d * float(q - 8);
      }
      return;
    }
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {   // Q5_0: d * (q - 16); Q5_1: d * q + m; 5th bit of value j: bit j of qh
      const bool has_min = type == GgmlType::Q5_1;
      const uint8_t* b = row + (has_min ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0)) * (e0 / 32);
      const float d = weight_half(b);
      const uint8_t* qh = b + (has_min ? 4 : 2);
      const uint8_t* qs = qh + 4;
      const uint32_t high = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
      const int j = int(e0 % 32);
      for (int i = 0; i < 8; ++i) {
        const int low = j < 16 ? qs[j + i] & 15 : qs[j - 16 + i] >> 4;
        const int q = low | int((high >> (j + i)) & 1) << 4;
        x[i] = has_min ? d * float(q) + weight_half(b + 2) : d * float(q - 16);
      }
      return;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {   // d * sc[s] * q - dmin * m[s], value 32s + l
      const bool five = type == GgmlType::Q5_K;
      const uint8_t* b = row + (five ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K)) * (e0 / kQK_K);
      const int v = int(e0 % kQK_K), s = v / 32, l = v % 32;
      int sc, m;
      k_scale_min_of(b + 4, s, sc, m);
      const float scale = weight_half(b) * float(sc);
      const float shift = weight_half(b + 2) * float(m);
      const uint8_t* qh = b + 4 + kKScaleBytes;
      const uint8_t* qs = qh + (five ? kQK_K / 8 : 0);
      for (int i = 0; i < 8; ++i) {
        const uint8_t byte = qs[32 * (s / 2) + l + i];
        int q = s % 2 == 0 ? byte & 15 : byte >> 4;
        if (five) q |= ((qh[l + i] >> s) & 1) << 4;
        x[i] = scale * float(q) - shift;
      }
      return;
    }
    case GgmlType::Q6_K: {   // d * scales[v / 16] * (q - 32), v = 128h + 32k + l
      const uint8_t* b = row + sizeof(BlockQ6_K) * (e0 / kQK_K);
      const uint8_t* ql = b;
      const uint8_t* qh = b + kQK_K / 2;
      const int8_t* scales = reinterpret_cast<const int8_t*>(b + kQK_K / 2 + kQK_K / 4);
      const float d = weight_half(b + kQK_K / 2 + kQK_K / 4 + kQK_K / 16);
      const int v = int(e0 % kQK_K), h = v / 128, k = (v % 128) / 32, l = v % 32;
      const float dsc = d * float(scales[v / 16]);
      for (int i = 0; i < 8; ++i) {
        const uint8_t low = ql[64 * h + 32 * (k & 1) + l + i];
        const int q = (k < 2 ? low & 15 : low >> 4) | ((qh[32 * h + l + i] >> (2 * k)) & 3) << 4;
        x[i] = dsc * float(q - 32);
      }
      return;
    }
    default:
      for (int i = 0; i < 8; ++i) x[i] = 0.0f;   // not computable: the launchers refuse it first
      return;
  }
}

// Host side of a launcher: throws std::invalid_argument (naming `what`) unless rows of n values
// of `type` can be decoded: a computable type, n a whole number of its blocks and of 8 values.
inline void require_weight_row(GgmlType type, int32_t n, const char* what) {
  if (!weight_type_supported(type)) {
    throw std::invalid_argument(std::string(what) + ": weight type " + std::string(ggml_type_info(type).name) +
                                " is not supported");
  }
  const int64_t block = ggml_type_info(type).block_values;
  if (n <= 0 || n % block != 0 || n % 8 != 0) {
    throw std::invalid_argument(std::string(what) + ": a row of " + std::to_string(n) + " values is not a whole number of " +
                                std::string(ggml_type_info(type).name) + " blocks and of 8 values");
  }
}

}  // namespace kvdesk::cuda
