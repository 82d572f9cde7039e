// Device-side KV row codec (row layouts in kernels/kv_quant.h). Loaders dequantize 8
// consecutive values of a row into registers for attention; encoders reproduce the scalar
// quantizers of kernels/kv_quant.cpp bit for bit (same IEEE operations in the same order,
// same NaN and tie rules), so a row written on the GPU equals the one written on the CPU.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/kv_quant.h"
#include "kernels/paged_kv.h"

namespace kvdesk::cuda {

// A KvType known only at run time (mixed K/V types): loaders switch per row.
constexpr KvType kAnyKvType = KvType(255);

// ---- decoding: row + element e0 (a multiple of 8) -> x[8] ----

__device__ inline float fp8_e4m3_value(uint32_t code) {
  // The 7 low bits placed as a float's exponent+mantissa give (1 + m/8) 2^(e - 127), or the
  // float subnormal m 2^-129; 2^120 rebiases both to e4m3 (bias 7).
  const float a = __uint_as_float((code & 0x7Fu) << 20) * 0x1p120f;
  return (code & 0x80u) ? -a : a;
}

__device__ inline float fp8_e5m2_value(uint32_t code) {
  return __half2float(__ushort_as_half(uint16_t(code << 8)));   // the high byte of a half
}

__device__ inline void unpack_bytes8(const uint8_t* p, uint32_t (&w)[2]) {
  w[0] = reinterpret_cast<const uint32_t*>(p)[0];
  w[1] = reinterpret_cast<const uint32_t*>(p)[1];
}

template <KvType kType>
__device__ inline void load8(KvType type, const uint8_t* row, int32_t head_dim, int32_t e0, float (&x)[8]) {
  if constexpr (kType == kAnyKvType) {
    switch (type) {
      case KvType::F32: return load8<KvType::F32>(type, row, head_dim, e0, x);
      case KvType::F16: return load8<KvType::F16>(type, row, head_dim, e0, x);
      case KvType::BF16: return load8<KvType::BF16>(type, row, head_dim, e0, x);
      case KvType::FP8_E4M3: return load8<KvType::FP8_E4M3>(type, row, head_dim, e0, x);
      case KvType::FP8_E5M2: return load8<KvType::FP8_E5M2>(type, row, head_dim, e0, x);
      case KvType::INT8: return load8<KvType::INT8>(type, row, head_dim, e0, x);
      default: return load8<KvType::INT4>(type, row, head_dim, e0, x);
    }
  } else if constexpr (kType == KvType::F32) {
    const float4* p = reinterpret_cast<const float4*>(row) + e0 / 4;
    const float4 a = p[0], b = p[1];
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
    x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
  } else if constexpr (kType == KvType::F16 || kType == KvType::BF16) {
    const uint4 u = reinterpret_cast<const uint4*>(row)[e0 / 8];
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (kType == KvType::F16) {
        x[2 * i] = __half2float(__ushort_as_half(uint16_t(w[i] & 0xFFFFu)));
        x[2 * i + 1] = __half2float(__ushort_as_half(uint16_t(w[i] >> 16)));
      } else {
        x[2 * i] = __uint_as_float(w[i] << 16);
        x[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
      }
    }
  } else if constexpr (kType == KvType::INT4) {
    const float s = __half2float(__ushort_as_half(reinterpret_cast<const uint16_t*>(row)[e0 / kKvInt4Group]));
    const uint32_t w = *reinterpret_cast<const uint32_t*>(row + kv_row_values_offset(KvType::INT4, head_dim) + e0 / 2);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = s * float(int((w >> (4 * i)) & 15u) - 8);
  } else {   // fp8 and int8: f32 scale, then one byte per value
    const float s = *reinterpret_cast<const float*>(row);
    uint32_t w[2];
    unpack_bytes8(row + sizeof(float) + e0, w);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t code = (w[i / 4] >> (8 * (i % 4))) & 0xFFu;
      float value;
      if constexpr (kType == KvType::FP8_E4M3) value = fp8_e4m3_value(code);
      else if constexpr (kType == KvType::FP8_E5M2) value = fp8_e5m2_value(code);
      else value = float(int8_t(code));
      x[i] = s * value;
    }
  }
}

// ---- encoding: the scalar quantizers of kv_quant.cpp, element by element ----

// fp32_to_fp16 of kernels/fp16.h: round to nearest even, NaN -> sign | 0x7E00.
__device__ inline uint16_t encode_fp16(float f) {
  if (isnan(f)) return uint16_t((__float_as_uint(f) >> 16 & 0x8000u) | 0x7E00u);
  return __half_as_ushort(__float2half_rn(f));
}

// fp32_to_bf16 of kernels/fp16.h, the same integer operations.
__device__ inline uint16_t encode_bf16(float f) {
  const uint32_t w = __float_as_uint(f);
  if ((w & 0x7fffffffu) > 0x7f800000u) return uint16_t((w >> 16) | 64);
  return uint16_t((w + (0x7fffu + ((w >> 16) & 1))) >> 16);
}

// encode_fp8 of kv_quant.cpp: nearest code, ties to even, saturating at max.
template <int kMant, int kBias>
__device__ inline uint8_t encode_fp8(float x, float max, uint8_t nan_code) {
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  if (isnan(x)) return sign | nan_code;
  const float a = fminf(fabsf(x), max);
  if (a == 0.0f) return sign;
  constexpr int kMinExp = 1 - kBias;
  int exp = ilogbf(a) > kMinExp ? ilogbf(a) : kMinExp;
  int steps = int(rintf(ldexpf(a, kMant - exp)));
  if (steps == 2 << kMant) {
    steps = 1 << kMant;
    ++exp;
  }
  if (steps < (1 << kMant)) return uint8_t(sign | steps);
  return uint8_t(sign | (exp + kBias) << kMant | (steps - (1 << kMant)));
}

__device__ inline uint8_t encode_fp8_e4m3(float x) { return encode_fp8<3, 7>(x, kFp8E4M3Max, 0x7F); }
__device__ inline uint8_t encode_fp8_e5m2(float x) { return encode_fp8<2, 15>(x, kFp8E5M2Max, 0x7F); }

// quantize_int8_row's per-value step: q = clamp(round(x / s), -127, 127).
__device__ inline int8_t encode_int8(float x, float s) {
  const float r = s != 0.0f ? rintf(x / s) : 0.0f;
  return int8_t(fminf(fmaxf(r, -127.0f), 127.0f));
}

// quantize_int4_row's per-value step: nibble = clamp(round(x / s) + 8, 0, 15).
__device__ inline uint32_t encode_int4(float x, float s) {
  const float r = s != 0.0f ? rintf(x / s) + 8.0f : 8.0f;
  return uint32_t(fminf(fmaxf(r, 0.0f), 15.0f));
}

// quantize_int4_row's group scale from m, the group's value of largest magnitude.
__device__ inline uint16_t int4_group_scale(float m) {
  return encode_fp16(fminf(fmaxf(m / -8.0f, -65504.0f), 65504.0f));
}

}  // namespace kvdesk::cuda
