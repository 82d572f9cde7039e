// KV row formats (see kv_quant.h): the type table, fp8 codecs and the scalar row quantizers
// that paged_kv_write uses and every attention kernel is tested against.
#include "kernels/kv_quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/check.h"
#include "kernels/fp16.h"

namespace kvdesk {
namespace {

constexpr std::array<KvType, 7> kAllKvTypes = {KvType::F32,      KvType::F16,      KvType::BF16, KvType::FP8_E4M3,
                                               KvType::FP8_E5M2, KvType::INT8, KvType::INT4};

// The larger / smaller of a and b, ignoring a NaN b as std::fmax / std::fmin do for NaNs met
// here (a is never NaN): written as comparisons so they compile to maxss / minss, where
// std::fmax is a libm call per value.
float max_of(float a, float b) { return b > a ? b : a; }
float min_of(float a, float b) { return b < a ? b : a; }

// Nearest code (ties to even) of an 8-bit float with kMant mantissa bits and exponent bias
// kBias, saturating at max: with q = max(floor(log2 |x|), 1 - kBias) - kMant the grid step is
// 2^q, and steps = round(|x| / 2^q) is the code's significand (the implicit 1 included).
template <int kMant, int kBias>
uint8_t encode_fp8(float x, float max, uint8_t nan_code) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | nan_code;
  const float a = min_of(max, std::fabs(x));
  if (a == 0.0f) return sign;
  constexpr int kMinExp = 1 - kBias;
  int exp = std::max(std::ilogb(a), kMinExp);
  int steps = int(std::nearbyint(std::ldexp(a, kMant - exp)));
  if (steps == 2 << kMant) {   // rounded up into the next binade
    steps = 1 << kMant;
    ++exp;
  }
  if (steps < (1 << kMant)) return uint8_t(sign | steps);   // subnormal: exponent field 0
  return uint8_t(sign | (exp + kBias) << kMant | (steps - (1 << kMant)));
}

float row_scale(const uint8_t* row) {
  float s;
  std::memcpy(&s, row, sizeof(s));
  return s;
}

float abs_max(const float* x, int32_t n) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = max_of(amax, std::fabs(x[i]));
  return amax;
}

// s = amax / max, codes[i] = fp8(x[i] / s)
template <uint8_t (*kEncode)(float)>
void quantize_fp8_row(const float* x, uint8_t* row, int32_t n, float max) {
  const float s = abs_max(x, n) / max;
  std::memcpy(row, &s, sizeof(s));
  uint8_t* codes = row + sizeof(s);
  for (int32_t i = 0; i < n; ++i) codes[i] = s != 0.0f ? kEncode(x[i] / s) : 0;
}

float clamp_to_fp16_range(float x) { return min_of(65504.0f, max_of(-65504.0f, x)); }

// A group's stored (scale, min): bits = f16 s | f16 m << 16 (s first in memory), and both as f32.
struct AffineScale {
  uint32_t bits = 0;
  float s = 0.0f;
  float m = 0.0f;
};

// m = f16(lo); s = f16((hi - m) / levels), one f16 step up where rounding down would leave hi
// above code `levels`, so no value but a NaN clamps: every error stays within s / 2 (plus the
// f16 rounding of m for values below it). lo > hi (no finite value) gives (0, 0).
AffineScale affine_scale_from_range(float lo, float hi, float levels) {
  if (!(lo <= hi)) return {};
  const uint16_t m16 = fp32_to_fp16(clamp_to_fp16_range(lo));
  const float m = fp16_to_fp32(m16);
  const float span = max_of(0.0f, hi - m);
  uint16_t s16 = fp32_to_fp16(clamp_to_fp16_range(span / levels));
  if (fp16_to_fp32(s16) * levels < span && s16 < 0x7BFF) ++s16;
  return {uint32_t(s16) | uint32_t(m16) << 16, fp16_to_fp32(s16), m};
}

// code = clamp(round((x - m) / s), 0, levels); a NaN gets 0.
uint8_t affine_code(float x, const AffineScale& a, float levels) {
  const float r = a.s != 0.0f ? std::nearbyint((x - a.m) / a.s) : 0.0f;
  return uint8_t(min_of(levels, max_of(0.0f, r)));
}

// x = s * code + m, fused as every kernel computes it.
float affine_value(uint32_t bits, int code) {
  return std::fma(float(code), fp16_to_fp32(uint16_t(bits & 0xFFFF)), fp16_to_fp32(uint16_t(bits >> 16)));
}

// A group's (scale, min) pair as stored: m = f16(min), s = f16((max - m) / levels). NaNs are
// skipped (min_of / max_of ignore them); an empty or all-NaN group gets (0, 0).
AffineScale affine_group_scale(const float* x, int32_t n, float levels) {
  float lo = INFINITY, hi = -INFINITY;
  for (int32_t i = 0; i < n; ++i) lo = min_of(lo, x[i]), hi = max_of(hi, x[i]);
  return affine_scale_from_range(lo, hi, levels);
}

// int8 / int4 rows: per group, code[i] = affine_code(x[i]); int4 packs two codes a byte.
void quantize_affine_row(KvType type, const float* x, uint8_t* row, int32_t n) {
  const int32_t group = kv_row_group(type, n);
  const float levels = type == KvType::INT8 ? kKvInt8Levels : kKvInt4Levels;
  uint8_t* codes = row + kv_row_values_offset(type, n);
  if (type == KvType::INT4) std::memset(codes, 0, size_t(n / 2));
  const int32_t groups = kv_row_scales(type, n);
  for (int32_t g = 0; g < groups; ++g) {
    const int32_t begin = g * group, end = kv_group_end(type, n, g);
    const AffineScale a = affine_group_scale(x + begin, end - begin, levels);
    std::memcpy(row + 4 * size_t(g), &a.bits, sizeof(a.bits));
    for (int32_t i = begin; i < end; ++i) {
      const uint8_t code = affine_code(x[i], a, levels);
      if (type == KvType::INT8) codes[i] = code;
      else codes[i / 2] |= uint8_t(code << (4 * (i % 2)));
    }
  }
}

void dequantize_affine_row(KvType type, const uint8_t* row, float* x, int32_t n) {
  const uint8_t* codes = row + kv_row_values_offset(type, n);
  for (int32_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, row + 4 * size_t(kv_group_of(type, n, i)), sizeof(bits));
    const int code = type == KvType::INT8 ? codes[i] : (codes[i / 2] >> (4 * (i % 2))) & 15;
    x[i] = affine_value(bits, code);
  }
}

}  // namespace

std::span<const KvType> all_kv_types() { return kAllKvTypes; }

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::FP8_E4M3: return "fp8_e4m3";
    case KvType::FP8_E5M2: return "fp8_e5m2";
    case KvType::INT8: return "int8";
    case KvType::INT4: return "int4";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (KvType t : kAllKvTypes) {
    if (name == kv_type_name(t)) return t;
  }
  return std::nullopt;
}

size_t kv_row_bytes(KvType type, int32_t head_dim) {
  const size_t n = size_t(head_dim);
  switch (type) {
    case KvType::F32: return 4 * n;
    case KvType::F16:
    case KvType::BF16: return 2 * n;
    case KvType::FP8_E4M3:
    case KvType::FP8_E5M2:
    case KvType::INT8: return kv_row_values_offset(type, head_dim) + n;
    case KvType::INT4:
      KVDESK_ASSERT(head_dim % 2 == 0);
      return kv_row_values_offset(type, head_dim) + n / 2;
  }
  KVDESK_ASSERT(false);
  return 0;
}

uint8_t fp32_to_fp8_e4m3(float x) { return encode_fp8<3, 7>(x, kFp8E4M3Max, 0x7F); }
uint8_t fp32_to_fp8_e5m2(float x) { return encode_fp8<2, 15>(x, kFp8E5M2Max, 0x7F); }

// e4m3: exponent field e, mantissa m: (1 + m/8) 2^(e-7), or m/8 2^-6 when e == 0; S.1111.111 is NaN.
float fp8_e4m3_to_fp32(uint8_t code) {
  const int e = (code >> 3) & 15;
  const int m = code & 7;
  float a = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
  if ((code & 0x7F) == 0x7F) a = NAN;
  return code & 0x80 ? -a : a;
}

// e5m2 is the high byte of an IEEE half.
float fp8_e5m2_to_fp32(uint8_t code) { return fp16_to_fp32(uint16_t(code << 8)); }

namespace ref {

void quantize_kv_row(KvType type, const float* x, uint8_t* row, int32_t head_dim) {
  const int32_t n = head_dim;
  switch (type) {
    case KvType::F32:
      std::memcpy(row, x, sizeof(float) * size_t(n));
      return;
    case KvType::F16:
      for (int32_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(row)[i] = fp32_to_fp16(x[i]);
      return;
    case KvType::BF16:
      for (int32_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(row)[i] = fp32_to_bf16(x[i]);
      return;
    case KvType::FP8_E4M3: return quantize_fp8_row<fp32_to_fp8_e4m3>(x, row, n, kFp8E4M3Max);
    case KvType::FP8_E5M2: return quantize_fp8_row<fp32_to_fp8_e5m2>(x, row, n, kFp8E5M2Max);
    case KvType::INT8:
    case KvType::INT4: return quantize_affine_row(type, x, row, n);
  }
  KVDESK_ASSERT(false);
}

void dequantize_kv_row(KvType type, const uint8_t* row, float* x, int32_t head_dim) {
  const int32_t n = head_dim;
  const uint8_t* values = row + kv_row_values_offset(type, n);
  switch (type) {
    case KvType::F32:
      std::memcpy(x, row, sizeof(float) * size_t(n));
      return;
    case KvType::F16:
      for (int32_t i = 0; i < n; ++i) x[i] = fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
      return;
    case KvType::BF16:
      for (int32_t i = 0; i < n; ++i) x[i] = bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
      return;
    case KvType::FP8_E4M3:
      for (int32_t i = 0; i < n; ++i) x[i] = row_scale(row) * fp8_e4m3_to_fp32(values[i]);
      return;
    case KvType::FP8_E5M2:
      for (int32_t i = 0; i < n; ++i) x[i] = row_scale(row) * fp8_e5m2_to_fp32(values[i]);
      return;
    case KvType::INT8:
    case KvType::INT4: return dequantize_affine_row(type, row, x, n);
  }
  KVDESK_ASSERT(false);
}

}  // namespace ref
}  // namespace kvdesk
