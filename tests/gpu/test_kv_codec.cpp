// The CUDA kernels' KV row codec (kernels/cuda/kv_codec.cuh) run on the host, against the CPU
// quantizer: every encoder gives the CPU's bits (fp16, bf16, fp8 over a sweep of float bit
// patterns, ties and specials; int8/int4 rows), and fetch8 + decode8 give the CPU's
// dequantized values for every KvType. Needs no GPU, so CI checks the codec on every build.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/kv_codec.cuh"
#include "kernels/fp16.h"
#include "kernels/kv_quant.h"

using namespace kvdesk;

namespace {

// Every 65521st float bit pattern (all signs, exponents and many mantissas), the specials,
// and the halfway points between neighbouring fp8 values of both formats (ties to even).
std::vector<float> probe_floats() {
  std::vector<float> x;
  for (uint64_t w = 0; w <= 0xFFFFFFFFull; w += 65521) x.push_back(cuda::float_from_bits(uint32_t(w)));
  for (float f : {0.0f, -0.0f, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f, 1e-45f, 6e-8f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(f);
  }
  for (uint32_t w = 0; w < 0x10000; w += 7) {   // exact ties for bf16 (low half 0x8000) and f16
    x.push_back(cuda::float_from_bits(w << 16 | 0x8000u));
    const float h = fp16_to_fp32(uint16_t(w)), next = fp16_to_fp32(uint16_t(w + 1));
    if (std::isfinite(h) && std::isfinite(next)) x.push_back(0.5f * (h + next));
  }
  for (int code = 0; code < 0x7E; ++code) {
    for (float (*decode)(uint8_t) : {fp8_e4m3_to_fp32, fp8_e5m2_to_fp32}) {
      const float mid = 0.5f * (decode(uint8_t(code)) + decode(uint8_t(code + 1)));
      x.push_back(mid);
      x.push_back(-mid);
    }
  }
  return x;
}

std::vector<float> random_row(int32_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(d));
  for (float& e : x) e = normal(rng);
  if (seed % 3 == 0) x[1] = -x[0];   // a +- tie for the int4 group maximum
  if (seed % 3 == 1) {                 // scales of exactly 1 and values halfway between levels
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 15) - 7) + 0.5f;
    for (size_t g = 0; g < x.size(); g += kKvInt4Group) x[g] = -8.0f;
    x[5] = 127.0f;
  }
  return x;
}

}  // namespace

TEST_CASE("CUDA codec encoders give the CPU quantizer's bits", "[cuda_codec]") {
  size_t mismatches = 0;
  for (float f : probe_floats()) {
    mismatches += cuda::encode_fp16(f) != fp32_to_fp16(f);
    mismatches += cuda::encode_bf16(f) != fp32_to_bf16(f);
    mismatches += cuda::encode_fp8_e4m3(f) != fp32_to_fp8_e4m3(f);
    mismatches += cuda::encode_fp8_e5m2(f) != fp32_to_fp8_e5m2(f);
  }
  CHECK(mismatches == 0);
}

namespace {

// A row as kv_append.cu writes it: per group the finite min and max, affine_pair, then the
// codes of encode_affine (int4: two a byte, low nibble first).
std::vector<uint8_t> cuda_affine_row(KvType type, const std::vector<float>& x) {
  const int32_t d = int32_t(x.size());
  const int32_t group = kv_row_group(type, d);
  const float levels = type == KvType::INT8 ? kKvInt8Levels : kKvInt4Levels;
  std::vector<uint8_t> row(kv_row_bytes(type, d), 0);
  uint8_t* codes = row.data() + kv_row_values_offset(type, d);
  const int32_t groups = kv_row_scales(type, d);   // the last one runs to the row's end
  for (int32_t g = 0; g < groups; ++g) {
    const int32_t begin = g * group, end = g + 1 == groups ? d : begin + group;
    float lo = INFINITY, hi = -INFINITY;
    for (int32_t i = begin; i < end; ++i) lo = fminf(lo, x[size_t(i)]), hi = fmaxf(hi, x[size_t(i)]);
    const cuda::AffinePair a = cuda::affine_pair(lo, hi, levels);
    std::memcpy(row.data() + 4 * size_t(g), &a.s16, sizeof(a.s16));
    std::memcpy(row.data() + 4 * size_t(g) + 2, &a.m16, sizeof(a.m16));
    for (int32_t i = begin; i < end; ++i) {
      const uint32_t code = cuda::encode_affine(x[size_t(i)], a, levels);
      if (type == KvType::INT8) codes[i] = uint8_t(code);
      else codes[i / 2] |= uint8_t(code << (4 * (i % 2)));
    }
  }
  return row;
}

}  // namespace

TEST_CASE("CUDA codec int8 and int4 rows equal the CPU rows", "[cuda_codec]") {
  for (int32_t d : {8, 32, 64, 80, 128}) {
    for (uint32_t seed = 0; seed < 30; ++seed) {
      std::vector<float> x = random_row(d, seed);
      if (seed == 7) std::fill(x.begin(), x.begin() + std::min(d, 64), 0.0f);   // an all-zero group
      if (seed == 8) x[3] = NAN;
      if (seed == 9) std::fill(x.begin(), x.end(), 0.37f);   // max == min
      if (seed == 10) for (float& v : x) v *= 1e-6f;   // scales in f16's subnormal range
      for (KvType type : {KvType::INT8, KvType::INT4}) {
        INFO(kv_type_name(type) << ", head_dim " << d << ", seed " << seed);
        std::vector<uint8_t> want(kv_row_bytes(type, d));
        ref::quantize_kv_row(type, x.data(), want.data(), d);
        CHECK(cuda_affine_row(type, x) == want);
      }
    }
  }
}

TEST_CASE("CUDA codec fetch8 + decode8 dequantize like the CPU for every KV type", "[cuda_codec]") {
  for (KvType type : all_kv_types()) {
    for (int32_t d : {8, 64, 80, 128}) {
      INFO(kv_type_name(type) << ", head_dim " << d);
      const std::vector<float> x = random_row(d, uint32_t(d));
      std::vector<uint8_t> row(kv_row_bytes(type, d) + 16);
      ref::quantize_kv_row(type, x.data(), row.data(), d);
      std::vector<float> want(static_cast<size_t>(d)), got(want.size()), any(want.size());
      ref::dequantize_kv_row(type, row.data(), want.data(), d);
      for (int32_t e0 = 0; e0 < d; e0 += 8) {
        cuda::RowPart part, any_part;
        float values[8], any_values[8];
        switch (type) {   // the per-type instances, as the same-type attention kernels use them
          case KvType::F32: cuda::fetch8<KvType::F32>(type, row.data(), d, e0, part);
                            cuda::decode8<KvType::F32>(type, part, values); break;
          case KvType::F16: cuda::fetch8<KvType::F16>(type, row.data(), d, e0, part);
                            cuda::decode8<KvType::F16>(type, part, values); break;
          case KvType::BF16: cuda::fetch8<KvType::BF16>(type, row.data(), d, e0, part);
                             cuda::decode8<KvType::BF16>(type, part, values); break;
          case KvType::FP8_E4M3: cuda::fetch8<KvType::FP8_E4M3>(type, row.data(), d, e0, part);
                                 cuda::decode8<KvType::FP8_E4M3>(type, part, values); break;
          case KvType::FP8_E5M2: cuda::fetch8<KvType::FP8_E5M2>(type, row.data(), d, e0, part);
                                 cuda::decode8<KvType::FP8_E5M2>(type, part, values); break;
          case KvType::INT8: cuda::fetch8<KvType::INT8>(type, row.data(), d, e0, part);
                             cuda::decode8<KvType::INT8>(type, part, values); break;
          case KvType::INT4: cuda::fetch8<KvType::INT4>(type, row.data(), d, e0, part);
                             cuda::decode8<KvType::INT4>(type, part, values); break;
        }
        cuda::fetch8<cuda::kAnyKvType>(type, row.data(), d, e0, any_part);
        cuda::decode8<cuda::kAnyKvType>(type, any_part, any_values);
        std::memcpy(&got[size_t(e0)], values, sizeof(values));
        std::memcpy(&any[size_t(e0)], any_values, sizeof(any_values));
      }
      CHECK(got == want);
      CHECK(any == want);
    }
  }
}
