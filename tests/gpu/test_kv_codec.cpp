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

TEST_CASE("CUDA codec int8 and int4 rows equal the CPU rows", "[cuda_codec]") {
  for (int32_t d : {64, 80, 128}) {
    for (uint32_t seed = 0; seed < 30; ++seed) {
      std::vector<float> x = random_row(d, seed);
      if (seed == 7) std::fill(x.begin(), x.begin() + 32, 0.0f);   // an all-zero int4 group
      if (seed == 8) x[3] = NAN;
      std::vector<uint8_t> want(kv_row_bytes(KvType::INT8, d)), got(want.size());
      ref::quantize_kv_row(KvType::INT8, x.data(), want.data(), d);
      float amax = 0.0f;
      for (float e : x) amax = std::fmax(amax, std::fabs(e));
      const float s = amax / 127.0f;
      std::memcpy(got.data(), &s, sizeof(s));
      for (int32_t i = 0; i < d; ++i) got[sizeof(s) + size_t(i)] = uint8_t(cuda::encode_int8(x[size_t(i)], s));
      CHECK(got == want);

      want.assign(kv_row_bytes(KvType::INT4, d), 0);
      got.assign(want.size(), 0);
      ref::quantize_kv_row(KvType::INT4, x.data(), want.data(), d);
      uint8_t* nibbles = got.data() + kv_row_values_offset(KvType::INT4, d);
      for (int32_t begin = 0; begin < d; begin += kKvInt4Group) {
        float m = 0.0f;   // first value of largest magnitude, never NaN (the kernel's rule)
        for (int32_t i = begin; i < std::min(d, begin + kKvInt4Group); ++i) {
          if (std::fabs(x[size_t(i)]) > std::fabs(m)) m = x[size_t(i)];
        }
        const uint16_t s16 = cuda::int4_group_scale(m);
        std::memcpy(got.data() + 2 * (begin / kKvInt4Group), &s16, sizeof(s16));
        for (int32_t i = begin; i < std::min(d, begin + kKvInt4Group); ++i) {
          nibbles[i / 2] |= uint8_t(cuda::encode_int4(x[size_t(i)], fp16_to_fp32(s16)) << (4 * (i % 2)));
        }
      }
      CHECK(got == want);
    }
  }
}

TEST_CASE("CUDA codec fetch8 + decode8 dequantize like the CPU for every KV type", "[cuda_codec]") {
  for (KvType type : all_kv_types()) {
    for (int32_t d : {64, 80, 128}) {
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
