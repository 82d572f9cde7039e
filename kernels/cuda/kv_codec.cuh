// KV row codec of the CUDA kernels (row layouts in kernels/kv_quant.h). fetch8/decode8
// dequantize 8 consecutive values of a row into registers for attention; encoders reproduce the
// scalar quantizers of kernels/kv_quant.cpp bit for bit (same IEEE operations in the same
// order, same NaN and tie rules), so a row written on the GPU equals the one written on the CPU.
// Everything here is __host__ __device__ and plain C++ for a host compiler, so host tests check
// it against the CPU quantizer on machines without a GPU.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/kv_quant.h"
#include "kernels/paged_kv.h"

#define KVDESK_HOST_DEVICE __host__ __device__

namespace kvdesk::cuda {

// A KvType known only at run time (mixed K/V types): loaders switch per row.
constexpr KvType kAnyKvType = KvType(255);

KVDESK_HOST_DEVICE inline float float_from_bits(uint32_t w) {
  float f;
  memcpy(&f, &w, sizeof(f));
  return f;
}
KVDESK_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t w;
  memcpy(&w, &f, sizeof(w));
  return w;
}
KVDESK_HOST_DEVICE inline float half_bits_to_float(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// ---- decoding: one lane's 8 consecutive values of a row, from element e0 (a multiple of 8) ----
// fetch8 loads the raw bytes (and scale) into registers, decode8 turns them into floats, so a
// kernel can have the loads of several rows in flight before it does any math.

// The raw words of 8 values: f32 uses lo and hi, f16/bf16 lo, fp8/int8 lo.x and lo.y, int4 lo.x.
struct RowPart {
  uint4 lo = {0, 0, 0, 0};
  uint4 hi = {0, 0, 0, 0};
  float scale = 0.0f;   // the row's (fp8) or the group's (int8, int4) scale
  float min = 0.0f;     // the group's min (int8, int4): x = scale * code + min
};

KVDESK_HOST_DEVICE inline float fp8_e4m3_value(uint32_t code) {
  // The 7 low bits placed as a float's exponent+mantissa give (1 + m/8) 2^(e - 127), or the
  // float subnormal m 2^-129; 2^120 rebiases both to e4m3 (bias 7).
  const float a = float_from_bits((code & 0x7Fu) << 20) * 0x1p120f;
  return (code & 0x80u) ? -a : a;
}

KVDESK_HOST_DEVICE inline float fp8_e5m2_value(uint32_t code) {
  return half_bits_to_float(uint16_t(code << 8));   // the high byte of a half
}

template <KvType kType>
KVDESK_HOST_DEVICE inline void fetch8(KvType type, const uint8_t* row, int32_t head_dim, int32_t e0, RowPart& part) {
  if constexpr (kType == kAnyKvType) {
    switch (type) {
      case KvType::F32: return fetch8<KvType::F32>(type, row, head_dim, e0, part);
      case KvType::F16:
      case KvType::BF16: return fetch8<KvType::F16>(type, row, head_dim, e0, part);
      case KvType::INT8: return fetch8<KvType::INT8>(type, row, head_dim, e0, part);
      case KvType::INT4: return fetch8<KvType::INT4>(type, row, head_dim, e0, part);
      default: return fetch8<KvType::FP8_E4M3>(type, row, head_dim, e0, part);   // both fp8
    }
  } else if constexpr (kType == KvType::F32) {
    const uint4* p = reinterpret_cast<const uint4*>(row) + e0 / 4;
    part.lo = p[0];
    part.hi = p[1];
  } else if constexpr (kType == KvType::F16 || kType == KvType::BF16) {
    part.lo = reinterpret_cast<const uint4*>(row)[e0 / 8];
  } else if constexpr (kType == KvType::INT8 || kType == KvType::INT4) {
    const uint16_t* pair = reinterpret_cast<const uint16_t*>(row) + 2 * kv_group_of(kType, head_dim, e0);
    part.scale = half_bits_to_float(pair[0]);
    part.min = half_bits_to_float(pair[1]);
    const uint32_t* codes = reinterpret_cast<const uint32_t*>(row + kv_row_values_offset(kType, head_dim) +
                                                              (kType == KvType::INT8 ? e0 : e0 / 2));
    part.lo.x = codes[0];
    if constexpr (kType == KvType::INT8) part.lo.y = codes[1];
  } else {   // fp8: f32 scale, then one byte per value (4-byte aligned)
    part.scale = *reinterpret_cast<const float*>(row);
    const uint32_t* codes = reinterpret_cast<const uint32_t*>(row + sizeof(float) + e0);
    part.lo.x = codes[0];
    part.lo.y = codes[1];
  }
}

template <KvType kType>
KVDESK_HOST_DEVICE inline void decode8(KvType type, const RowPart& part, float (&x)[8]) {
  if constexpr (kType == kAnyKvType) {
    switch (type) {
      case KvType::F32: return decode8<KvType::F32>(type, part, x);
      case KvType::F16: return decode8<KvType::F16>(type, part, x);
      case KvType::BF16: return decode8<KvType::BF16>(type, part, x);
      case KvType::FP8_E4M3: return decode8<KvType::FP8_E4M3>(type, part, x);
      case KvType::FP8_E5M2: return decode8<KvType::FP8_E5M2>(type, part, x);
      case KvType::INT8: return decode8<KvType::INT8>(type, part, x);
      default: return decode8<KvType::INT4>(type, part, x);
    }
  } else if constexpr (kType == KvType::F32) {
    const uint32_t w[8] = {part.lo.x, part.lo.y, part.lo.z, part.lo.w, part.hi.x, part.hi.y, part.hi.z, part.hi.w};
    for (int i = 0; i < 8; ++i) x[i] = float_from_bits(w[i]);
  } else if constexpr (kType == KvType::F16 || kType == KvType::BF16) {
    const uint32_t w[4] = {part.lo.x, part.lo.y, part.lo.z, part.lo.w};
    for (int i = 0; i < 4; ++i) {
      if constexpr (kType == KvType::F16) {
        x[2 * i] = half_bits_to_float(uint16_t(w[i] & 0xFFFFu));
        x[2 * i + 1] = half_bits_to_float(uint16_t(w[i] >> 16));
      } else {
        x[2 * i] = float_from_bits(w[i] << 16);
        x[2 * i + 1] = float_from_bits(w[i] & 0xFFFF0000u);
      }
    }
  } else if constexpr (kType == KvType::INT4) {
    for (int i = 0; i < 8; ++i) x[i] = fmaf(float((part.lo.x >> (4 * i)) & 15u), part.scale, part.min);
  } else if constexpr (kType == KvType::INT8) {
    const uint32_t w[2] = {part.lo.x, part.lo.y};
    for (int i = 0; i < 8; ++i) x[i] = fmaf(float((w[i / 4] >> (8 * (i % 4))) & 0xFFu), part.scale, part.min);
  } else {
    const uint32_t w[2] = {part.lo.x, part.lo.y};
    for (int i = 0; i < 8; ++i) {
      const uint32_t code = (w[i / 4] >> (8 * (i % 4))) & 0xFFu;
      float value;
      if constexpr (kType == KvType::FP8_E4M3) value = fp8_e4m3_value(code);
      else value = fp8_e5m2_value(code);
      x[i] = part.scale * value;
    }
  }
}

// ---- encoding: the scalar quantizers of kv_quant.cpp, element by element ----

// fp32_to_fp16 of kernels/fp16.h: round to nearest even, NaN -> sign | 0x7E00.
KVDESK_HOST_DEVICE inline uint16_t encode_fp16(float f) {
  if (std::isnan(f)) return uint16_t((float_bits(f) >> 16 & 0x8000u) | 0x7E00u);
  return __half_raw(__float2half_rn(f)).x;
}

// fp32_to_bf16 of kernels/fp16.h, the same integer operations.
KVDESK_HOST_DEVICE inline uint16_t encode_bf16(float f) {
  const uint32_t w = float_bits(f);
  if ((w & 0x7fffffffu) > 0x7f800000u) return uint16_t((w >> 16) | 64);
  return uint16_t((w + (0x7fffu + ((w >> 16) & 1))) >> 16);
}

// encode_fp8 of kv_quant.cpp: nearest code, ties to even, saturating at max.
template <int kMant, int kBias>
KVDESK_HOST_DEVICE inline uint8_t encode_fp8(float x, float max, uint8_t nan_code) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | nan_code;
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

KVDESK_HOST_DEVICE inline uint8_t encode_fp8_e4m3(float x) { return encode_fp8<3, 7>(x, kFp8E4M3Max, 0x7F); }
KVDESK_HOST_DEVICE inline uint8_t encode_fp8_e5m2(float x) { return encode_fp8<2, 15>(x, kFp8E5M2Max, 0x7F); }

// affine_scale_from_range of kv_quant.cpp: a group's stored (scale, min) from its finite
// min lo and max hi; lo > hi (no finite value) gives (0, 0).
struct AffinePair {
  uint16_t s16 = 0;
  uint16_t m16 = 0;
  float s = 0.0f;
  float m = 0.0f;
};

KVDESK_HOST_DEVICE inline float clamp_to_fp16_range(float x) { return fminf(fmaxf(x, -65504.0f), 65504.0f); }

KVDESK_HOST_DEVICE inline AffinePair affine_pair(float lo, float hi, float levels) {
  AffinePair a;
  if (!(lo <= hi)) return a;
  a.m16 = encode_fp16(clamp_to_fp16_range(lo));
  a.m = half_bits_to_float(a.m16);
  const float span = fmaxf(hi - a.m, 0.0f);
  a.s16 = encode_fp16(clamp_to_fp16_range(span / levels));
  if (half_bits_to_float(a.s16) * levels < span && a.s16 < 0x7BFF) ++a.s16;
  a.s = half_bits_to_float(a.s16);
  return a;
}

// affine_code of kv_quant.cpp: clamp(round((x - m) / s), 0, levels); a NaN gets 0.
KVDESK_HOST_DEVICE inline uint32_t encode_affine(float x, const AffinePair& a, float levels) {
  const float r = a.s != 0.0f ? rintf((x - a.m) / a.s) : 0.0f;
  return uint32_t(fminf(fmaxf(r, 0.0f), levels));
}

}  // namespace kvdesk::cuda
