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

// Nearest code (ties to even) of an 8-bit float with kMant mantissa bits and exponent bias
// kBias, saturating at max: with q = max(floor(log2 |x|), 1 - kBias) - kMant the grid step is
// 2^q, and steps = round(|x| / 2^q) is the code's significand (the implicit 1 included).
template <int kMant, int kBias>
uint8_t encode_fp8(float x, float max, uint8_t nan_code) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | nan_code;
  const float a = std::fmin(std::fabs(x), max);
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
  for (int32_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
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

// s = amax / 127, q[i] = round(x[i] / s)
void quantize_int8_row(const float* x, uint8_t* row, int32_t n) {
  const float s = abs_max(x, n) / 127.0f;
  std::memcpy(row, &s, sizeof(s));
  int8_t* q = reinterpret_cast<int8_t*>(row + sizeof(s));
  for (int32_t i = 0; i < n; ++i) {
    const float r = s != 0.0f ? std::nearbyint(x[i] / s) : 0.0f;
    q[i] = int8_t(std::fmin(std::fmax(r, -127.0f), 127.0f));
  }
}

// Per group: m = the value of largest magnitude (sign kept), s = f16(m / -8),
// nibble[i] = clamp(round(x[i] / s) + 8, 0, 15), so m is exactly -8 * s.
void quantize_int4_row(const float* x, uint8_t* row, int32_t n) {
  uint16_t* scales = reinterpret_cast<uint16_t*>(row);
  uint8_t* nibbles = row + kv_row_values_offset(KvType::INT4, n);
  std::memset(nibbles, 0, size_t(n / 2));
  for (int32_t g = 0; g * kKvInt4Group < n; ++g) {
    const int32_t begin = g * kKvInt4Group;
    const int32_t end = std::min(n, begin + kKvInt4Group);
    float m = 0.0f;
    for (int32_t i = begin; i < end; ++i) {
      if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    }
    const uint16_t s16 = fp32_to_fp16(std::fmin(std::fmax(m / -8.0f, -65504.0f), 65504.0f));
    std::memcpy(scales + g, &s16, sizeof(s16));
    const float s = fp16_to_fp32(s16);
    for (int32_t i = begin; i < end; ++i) {
      const float r = s != 0.0f ? std::nearbyint(x[i] / s) + 8.0f : 8.0f;
      const int nibble = int(std::fmin(std::fmax(r, 0.0f), 15.0f));
      nibbles[i / 2] |= uint8_t(nibble << (4 * (i % 2)));
    }
  }
}

void dequantize_int4_row(const uint8_t* row, float* x, int32_t n) {
  const uint8_t* nibbles = row + kv_row_values_offset(KvType::INT4, n);
  for (int32_t i = 0; i < n; ++i) {
    uint16_t s16;
    std::memcpy(&s16, row + sizeof(s16) * size_t(i / kKvInt4Group), sizeof(s16));
    const int nibble = (nibbles[i / 2] >> (4 * (i % 2))) & 15;
    x[i] = fp16_to_fp32(s16) * float(nibble - 8);
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
    case KvType::INT8: return quantize_int8_row(x, row, n);
    case KvType::INT4: return quantize_int4_row(x, row, n);
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
      for (int32_t i = 0; i < n; ++i) x[i] = row_scale(row) * float(int8_t(values[i]));
      return;
    case KvType::INT4: return dequantize_int4_row(row, x, n);
  }
  KVDESK_ASSERT(false);
}

}  // namespace ref
}  // namespace kvdesk
