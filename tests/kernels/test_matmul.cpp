// Tiled matmul: every SIMD path against ref::matmul_rows for decode (batch 1) and prefill
// batches, on row ranges that are not whole tiles, and its results independent of the tiling.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/ggml_types.h"
#include "kernels/matmul.h"
#include "kernels/quantize.h"
#include "kernels/weight_repack.h"
#include "tests/kernels/quant_test_support.h"
#include "tests/kernels/simd_isas.h"

using namespace kvdesk;

namespace {

using kvdesk::test::for_each_simd_isa;
using kvdesk::test::random_values;
using kvdesk::test::relative_error;

// W[rows][n] of `type` and A[batch][n] prepared for it, from normal values.
struct Problem {
  GgmlType type;
  int64_t rows;
  int64_t n;
  int64_t batch;
  std::vector<uint8_t> weights;
  std::vector<uint8_t> acts;

  Problem(GgmlType t, int64_t rows_, int64_t n_, int64_t batch_)
      : type(t), rows(rows_), n(n_), batch(batch_) {
    const size_t w_row = ggml_row_bytes(type, n);
    const size_t a_row = act_row_bytes(type, n);
    const std::vector<float> w = random_values(rows * n, 1);
    const std::vector<float> a = random_values(batch * n, 2);
    weights.resize(w_row * static_cast<size_t>(rows));
    acts.resize(a_row * static_cast<size_t>(batch));
    for (int64_t r = 0; r < rows; ++r) {
      ref::quantize_row(type, &w[static_cast<size_t>(r * n)], &weights[w_row * static_cast<size_t>(r)], n);
    }
    for (int64_t b = 0; b < batch; ++b) {
      ref::prepare_act_row(type, &a[static_cast<size_t>(b * n)], &acts[a_row * static_cast<size_t>(b)], n);
    }
  }

  // y[batch][ld_y], NaN where the call must not write.
  std::vector<float> run(void (*matmul)(const MatmulArgs&, int64_t, int64_t), int64_t ld_y,
                         int64_t row_begin, int64_t row_end) const {
    std::vector<float> y(static_cast<size_t>(batch * ld_y), std::numeric_limits<float>::quiet_NaN());
    const MatmulArgs args{type, weights.data(), n, acts.data(), batch, y.data(), ld_y};
    matmul(args, row_begin, row_end);
    return y;
  }
};

// The n values to try per type: odd block / group counts for quantized types, odd vector
// tails for float types.
// K-quants: odd super-block counts (3 and 17 of 256).
std::vector<int64_t> sizes_for(GgmlType type) {
  if (ggml_type_info(type).block_values == kQK_K) return {768, 4352};
  if (act_format_for(type) == ActFormat::Q8Act) return {96, 4128};
  return {33, 4103};
}

// One size per type spanning several L2 row blocks at 150 rows.
int64_t large_size_for(GgmlType type) { return sizes_for(type).back(); }

// A small size per type with more than one block (or vector) per row.
int64_t small_size_for(GgmlType type) {
  if (ggml_type_info(type).block_values == kQK_K) return 512;
  return act_format_for(type) == ActFormat::Q8Act ? 160 : 45;
}

// Byte offsets of a 256-value super-block type's fp16 scales in its block.
std::vector<size_t> half_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::Q5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::Q6_K: return {offsetof(BlockQ6_K, d)};
    case GgmlType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::Q3_K: return {offsetof(BlockQ3_K, d)};
    case GgmlType::IQ4_XS: return {offsetof(BlockIQ4_XS, d)};
    default: return {};
  }
}

// Every block's bytes random (so every bit of the packed sub-block scales, mins and high bits
// takes both values), its fp16 scales then set to finite values of either sign.
void randomize_super_blocks(GgmlType type, std::vector<uint8_t>& weights, uint32_t seed) {
  std::mt19937 rng(seed);
  for (uint8_t& byte : weights) byte = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-1.0f, 1.0f);
  const size_t block_bytes = static_cast<size_t>(ggml_type_info(type).block_bytes);
  for (size_t block = 0; block + block_bytes <= weights.size(); block += block_bytes) {
    for (size_t offset : half_offsets(type)) {
      const uint16_t half = fp32_to_fp16(scale(rng));
      std::memcpy(&weights[block + offset], &half, sizeof(half));
    }
  }
}

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K,
                               GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

}  // namespace

// Batches 3, 7 and 17 end in act chunks narrower than the kernel's kActs (2 to 8 act rows a chunk).
TEST_CASE("SIMD matmul matches ref for batches 1, 3, 7 and 17 on a partial row range", "[kernels][matmul]") {
  // rows [2, 37) of 37: neither end on a tile boundary; ld_y 40 leaves columns to stay untouched.
  const int64_t rows = 37, ld_y = 40, row_begin = 2, row_end = 37;
  for (GgmlType type : kTypes) {
    for (int64_t n : sizes_for(type)) {
      for (int64_t batch : {1, 3, 7, 17}) {
        const Problem p(type, rows, n, batch);
        const std::vector<float> want = p.run(ref::matmul_rows, ld_y, row_begin, row_end);
        for_each_simd_isa([&](CpuIsa isa) {
          INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name << " n " << n
                      << " batch " << batch);
          const std::vector<float> got = p.run(cpu::matmul_rows, ld_y, row_begin, row_end);
          CHECK(relative_error(got, want, batch, ld_y, row_begin, row_end) < 1e-10);
        });
      }
    }
  }
}

TEST_CASE("SIMD matmul matches ref on super-blocks of random bytes", "[kernels][matmul]") {
  // 9 rows: two 4-row decode tiles and a single row; batch 3 takes the prefill tiles. Kernels
  // that unpack several rows' scales at once must keep each row's bits apart.
  const int64_t rows = 9, n = 512;
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K,
                        GgmlType::IQ4_XS}) {
    for (int64_t batch : {1, 3}) {
      Problem p(type, rows, n, batch);
      randomize_super_blocks(type, p.weights, 7);
      const std::vector<float> want = p.run(ref::matmul_rows, rows, 0, rows);
      for_each_simd_isa([&](CpuIsa isa) {
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name << " batch " << batch);
        const std::vector<float> got = p.run(cpu::matmul_rows, rows, 0, rows);
        CHECK(relative_error(got, want, batch, rows, 0, rows) < 1e-10);
      });
    }
  }
}

TEST_CASE("SIMD matmul matches ref across several L2 row blocks", "[kernels][matmul]") {
  // 150 rows of 4103 to 4352 values span more than one 256 KiB row block for every type.
  for (GgmlType type : kTypes) {
    const int64_t n = large_size_for(type);
    const Problem p(type, 150, n, 5);
    const std::vector<float> want = p.run(ref::matmul_rows, 150, 0, 150);
    for_each_simd_isa([&](CpuIsa isa) {
      INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name);
      const std::vector<float> got = p.run(cpu::matmul_rows, 150, 0, 150);
      CHECK(relative_error(got, want, p.batch, 150, 0, 150) < 1e-10);
    });
  }
}

TEST_CASE("SIMD matmul results do not depend on the row split or the batch size", "[kernels][matmul]") {
  // Threads split rows anywhere, and decode (batch 1) must agree with prefill bit for bit, so
  // every output is accumulated in the same order whatever tile it falls in.
  const int64_t rows = 29, batch = 6;
  for (GgmlType type : kTypes) {
    const int64_t n = small_size_for(type);
    const Problem p(type, rows, n, batch);
    for_each_simd_isa([&](CpuIsa isa) {
      INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name);
      const std::vector<float> whole = p.run(cpu::matmul_rows, rows, 0, rows);
      std::vector<float> split(whole.size());
      const size_t a_row = act_row_bytes(type, n);
      for (int64_t b = 0; b < batch; ++b) {
        // One act row at a time, rows cut at 0, 5, 6, 17, 29.
        const int64_t cuts[] = {0, 5, 6, 17, rows};
        for (int i = 0; i + 1 < 5; ++i) {
          const MatmulArgs args{type, p.weights.data(), n, p.acts.data() + a_row * b, 1,
                                split.data() + b * rows, rows};
          cpu::matmul_rows(args, cuts[i], cuts[i + 1]);
        }
      }
      CHECK(split == whole);
    });
  }
}

// The AVX-VNNI tier is the AVX2 source with vpdpbusd for the u8 x s8 dots: the int16 sums that
// AVX2 keeps never saturate, so every integer and then every float is the same, bit for bit, in
// ggml's layout and the interleaved one, for decode and prefill batches (random super-block
// bytes: every scale, negative Q6_K ones included).
TEST_CASE("AVX-VNNI matmul equals AVX2's bit for bit for every weight type and layout", "[kernels][matmul]") {
  if (!cpu_isa_supported(CpuIsa::AvxVnni)) return;
  const int64_t rows = 48;
  for (GgmlType type : kTypes) {
    const int64_t n = sizes_for(type).back();
    for (int64_t batch : {1, 3, 4, 5, 17}) {
      Problem p(type, rows, n, batch);
      if (ggml_type_info(type).block_values == kQK_K) randomize_super_blocks(type, p.weights, uint32_t(batch));
      Problem packed = p;
      repack_rows(type, packed.weights.data(), rows, n);
      packed.type = repacked_type(type, rows);
      for (const Problem* layout : {&p, &packed}) {
        INFO("type " << ggml_type_info(layout->type).name << " n " << n << " batch " << batch);
        cpu_isa_force(CpuIsa::Avx2);
        const std::vector<float> avx2 = layout->run(cpu::matmul_rows, rows, 0, rows);
        cpu_isa_force(CpuIsa::AvxVnni);
        REQUIRE(cpu_isa_active() == CpuIsa::AvxVnni);
        const std::vector<float> vnni = layout->run(cpu::matmul_rows, rows, 0, rows);
        CHECK(std::memcmp(vnni.data(), avx2.data(), sizeof(float) * avx2.size()) == 0);
        // The outputs are real dots, not zeros or NaNs.
        CHECK(relative_error(vnni, p.run(ref::matmul_rows, rows, 0, rows), batch, rows, 0, rows) < 1e-10);
      }
    }
  }
  cpu_isa_force(cpu_isa_detected());
}
