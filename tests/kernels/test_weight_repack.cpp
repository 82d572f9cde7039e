// Q4_0x8, Q8_0x8, IQ4_NLx8, MXFP4x8, Q4_1x8, Q5_0x8, Q5_1x8, Q2_Kx8, Q3_Kx8, Q4_Kx8, Q5_Kx8, Q6_Kx8 and
// IQ4_XSx8 (kernels/weight_repack.h): repacking keeps every product bit for bit in the scalar twins,
// the SIMD GEMMs over them match ref for decode and prefill batches on row-group ranges, and shapes
// without whole groups keep ggml's layout and its kernels.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/quantize.h"
#include "kernels/weight_repack.h"
#include "tests/kernels/quant_test_support.h"
#include "tests/kernels/simd_isas.h"

using namespace kvdesk;

namespace {

// W[rows][n] in a file type (Q4_0 unless named) and its repacked copy, A[batch][n] prepared for it.
struct Problem {
  GgmlType base;
  int64_t rows, n, batch;
  std::vector<uint8_t> ggml;
  std::vector<uint8_t> repacked;
  std::vector<uint8_t> acts;

  Problem(int64_t rows_, int64_t n_, int64_t batch_, GgmlType base_ = GgmlType::Q4_0)
      : base(base_), rows(rows_), n(n_), batch(batch_) {
    const size_t w_row = ggml_row_bytes(base, n);
    const size_t a_row = act_row_bytes(base, n);
    const std::vector<float> w = test::random_values(rows * n, 1);
    const std::vector<float> a = test::random_values(batch * n, 2);
    ggml.resize(w_row * static_cast<size_t>(rows));
    acts.resize(a_row * static_cast<size_t>(batch));
    for (int64_t r = 0; r < rows; ++r) {
      ref::quantize_row(base, &w[static_cast<size_t>(r * n)], &ggml[w_row * static_cast<size_t>(r)], n);
    }
    for (int64_t b = 0; b < batch; ++b) {
      ref::prepare_act_row(base, &a[static_cast<size_t>(b * n)], &acts[a_row * static_cast<size_t>(b)], n);
    }
    repacked = ggml;
    repack_rows(base, repacked.data(), rows, n);
  }

  // y[batch][ld_y] over rows [row_begin, row_end), NaN elsewhere.
  std::vector<float> run(void (*matmul)(const MatmulArgs&, int64_t, int64_t), GgmlType type, int64_t ld_y,
                         int64_t row_begin, int64_t row_end) const {
    std::vector<float> y(static_cast<size_t>(batch * ld_y), std::numeric_limits<float>::quiet_NaN());
    const void* w = type == base ? ggml.data() : repacked.data();
    matmul(MatmulArgs{type, w, n, acts.data(), batch, y.data(), ld_y}, row_begin, row_end);
    return y;
  }
};

// Whole groups of rows inside a larger matrix, y's rows ld_y apart (past rows, so the rows outside
// are seen untouched). Decode cuts a range into runs read side by side (4 for one act row, 2 for
// two) and takes the groups past the last whole run together; the AVX-512 Q4_0x8 and Q8_0x8
// tiles take groups in pairs and hand an odd last group to AVX2. 2 groups (no whole run of 4);
// 4; 5 (odd); 6 (runs of 1, 2 past them); 19 (runs of 4, 3 past them; on AVX-512 runs of 4 over
// 18, one pair past them, and the odd one).
struct GroupRange {
  int64_t rows, ld_y, row_begin, row_end;
};
constexpr GroupRange kGroupRanges[] = {
    {32, 34, 8, 24}, {48, 50, 8, 40}, {56, 58, 8, 48}, {64, 66, 8, 56}, {176, 178, 16, 168}};
// Decode (1 to 3 act rows; to 7 on AVX-512), full tiles (4 act rows; 8 on AVX-512) and the
// narrower tiles that follow them, which read the blocks the first full tile kept unpacked (24:
// two such full tiles on AVX-512).
constexpr int64_t kGroupRangeBatches[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 17, 24};

// Every SIMD ISA's matmul over base's interleaved layout against ref over ggml's rows, for each
// group range and batch with n values a row.
void check_group_ranges(GgmlType base, int64_t n) {
  for (const GroupRange& range : kGroupRanges) {
    for (int64_t batch : kGroupRangeBatches) {
      const Problem p(range.rows, n, batch, base);
      const std::vector<float> want = p.run(ref::matmul_rows, base, range.ld_y, range.row_begin, range.row_end);
      test::for_each_simd_isa([&](CpuIsa isa) {
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(base).name << " n " << n << " rows "
                    << range.row_begin << ".." << range.row_end << " batch " << batch);
        const std::vector<float> got =
            p.run(cpu::matmul_rows, repacked_type(base, range.rows), range.ld_y, range.row_begin, range.row_end);
        CHECK(test::relative_error(got, want, batch, range.ld_y, range.row_begin, range.row_end) < 1e-10);
      });
    }
  }
}

// rows x n values of `type` (blocks of struct Block), fill(block, index) setting each block.
template <class Block, class Fill>
std::vector<uint8_t> filled_blocks(GgmlType type, int64_t rows, int64_t n, Fill fill) {
  std::vector<uint8_t> bytes(ggml_row_bytes(type, n) * static_cast<size_t>(rows));
  auto* blocks = reinterpret_cast<Block*>(bytes.data());
  for (int64_t b = 0; b < static_cast<int64_t>(bytes.size() / sizeof(Block)); ++b) fill(blocks[b], b);
  return bytes;
}

// For weights chosen to make the GEMMs' integer sums largest: ggml holds `rows` rows of n values
// of `base`, x [batch][n] the activations. The scalar twin over the repacked bytes must equal
// ref bit for bit, and every SIMD path must match ref (an overflowing sum would be far off).
void check_largest_sums(GgmlType base, const std::vector<uint8_t>& ggml, int64_t rows, int64_t n,
                        const std::vector<float>& x) {
  const int64_t batch = static_cast<int64_t>(x.size()) / n;
  const size_t a_row = act_row_bytes(base, n);
  std::vector<uint8_t> acts(a_row * static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    ref::prepare_act_row(base, &x[static_cast<size_t>(b * n)], &acts[a_row * static_cast<size_t>(b)], n);
  }
  std::vector<uint8_t> repacked = ggml;
  repack_rows(base, repacked.data(), rows, n);
  const GgmlType packed = repacked_type(base, rows);
  REQUIRE(packed != base);
  std::vector<float> want(static_cast<size_t>(batch * rows)), twin(want.size()), got(want.size());
  ref::matmul_rows(MatmulArgs{base, ggml.data(), n, acts.data(), batch, want.data(), rows}, 0, rows);
  ref::matmul_rows(MatmulArgs{packed, repacked.data(), n, acts.data(), batch, twin.data(), rows}, 0, rows);
  CHECK(twin == want);
  test::for_each_simd_isa([&](CpuIsa isa) {
    INFO("isa " << cpu_isa_name(isa));
    cpu::matmul_rows(MatmulArgs{packed, repacked.data(), n, acts.data(), batch, got.data(), rows}, 0, rows);
    CHECK(test::relative_error(got, want, batch, rows, 0, rows) < 1e-12);
  });
}

}  // namespace

// The 32-value block file types with an interleaved layout.
constexpr GgmlType kBlock32Bases[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4,
                                      GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1};

TEST_CASE("Q4_0x8 / Q8_0x8 / IQ4_NLx8 / MXFP4x8 / Q4_1x8 / Q5_0x8 / Q5_1x8 are chosen only for whole groups of 8 rows",
          "[kernels][repack]") {
  CHECK(repacked_type(GgmlType::Q4_0, 64) == GgmlType::Q4_0x8);
  CHECK(repacked_type(GgmlType::Q8_0, 64) == GgmlType::Q8_0x8);
  CHECK(repacked_type(GgmlType::IQ4_NL, 64) == GgmlType::IQ4_NLx8);
  CHECK(repacked_type(GgmlType::MXFP4, 64) == GgmlType::MXFP4x8);
  CHECK(repacked_type(GgmlType::Q5_0, 64) == GgmlType::Q5_0x8);
  CHECK(repacked_type(GgmlType::Q5_1, 64) == GgmlType::Q5_1x8);
  CHECK(repacked_type(GgmlType::Q4_1, 64) == GgmlType::Q4_1x8);
  CHECK(repacked_type(GgmlType::F16, 64) == GgmlType::F16);
  for (GgmlType base : kBlock32Bases) {
    const GgmlType packed = repacked_type(base, 8);
    INFO("type " << ggml_type_info(base).name);
    CHECK(repacked_type(base, 60) == base);
    CHECK(ggml_row_bytes(packed, 256) == ggml_row_bytes(base, 256));
    CHECK(act_row_bytes(packed, 256) == act_row_bytes(base, 256));
    CHECK_FALSE(ggml_type_info(packed).in_files);
    const Problem p(60, 256, 1, base);
    CHECK(p.repacked == p.ggml);
  }
}

TEST_CASE("the Q4_0x8 / Q8_0x8 / IQ4_NLx8 / MXFP4x8 / Q4_1x8 / Q5_0x8 / Q5_1x8 scalar twins equal ref Q4_0 / Q8_0 / IQ4_NL / "
          "MXFP4 / Q4_1 / Q5_0 / Q5_1 bit for bit",
          "[kernels][repack]") {
  for (GgmlType base : kBlock32Bases) {
    INFO("type " << ggml_type_info(base).name);
    const Problem p(24, 160, 3, base);
    const std::vector<float> want = p.run(ref::matmul_rows, base, 24, 0, 24);
    const std::vector<float> got = p.run(ref::matmul_rows, repacked_type(base, 24), 24, 0, 24);
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
  }
}

TEST_CASE("SIMD Q4_0x8 / Q8_0x8 / IQ4_NLx8 / MXFP4x8 / Q4_1x8 / Q5_0x8 / Q5_1x8 matmuls match ref for decode and prefill batches on group ranges",
          "[kernels][repack]") {
  for (GgmlType base : kBlock32Bases) {
    for (int64_t n : {96, 4128}) check_group_ranges(base, n);
  }
}

TEST_CASE("SIMD Q4_0x8 / Q8_0x8 / IQ4_NLx8 / MXFP4x8 / Q4_1x8 / Q5_0x8 / Q5_1x8 matmuls match ref across several L2 row blocks", "[kernels][repack]") {
  // 14 act rows: full tiles and a narrower one in every row block, on every tier.
  const int64_t rows = 160, n = 4128, batch = 14;
  for (GgmlType base : kBlock32Bases) {
    const Problem p(rows, n, batch, base);
    const std::vector<float> want = p.run(ref::matmul_rows, base, rows, 0, rows);
    test::for_each_simd_isa([&](CpuIsa isa) {
      INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(base).name);
      const std::vector<float> got = p.run(cpu::matmul_rows, repacked_type(base, rows), rows, 0, rows);
      CHECK(test::relative_error(got, want, batch, rows, 0, rows) < 1e-10);
    });
  }
}

TEST_CASE("Q8_0x8 keeps the extreme quants exact: -128 weights against +-127 activations", "[kernels][repack]") {
  // Every weight -128 or 127 and every activation +-127: the largest pair sums maddubs sees.
  const int64_t rows = 16, n = 256, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockQ8_0>(GgmlType::Q8_0, rows, n, [](BlockQ8_0& w, int64_t b) {
    w.d = 0x3c00;  // 1.0
    for (int i = 0; i < kQ8_0BlockValues; ++i) w.qs[i] = static_cast<int8_t>((b + i) % 3 == 0 ? 127 : -128);
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 5 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::Q8_0, ggml, rows, n, x);
}

// The 256-value super-block file types with an interleaved layout.
constexpr GgmlType kSuperBlockBases[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                         GgmlType::Q6_K, GgmlType::IQ4_XS};

TEST_CASE("Q2_Kx8 / Q3_Kx8 / Q4_Kx8 / Q5_Kx8 / Q6_Kx8 / IQ4_XSx8 are chosen only for whole groups of 8 rows, other shapes keep "
          "ggml's bytes",
          "[kernels][repack]") {
  CHECK(repacked_type(GgmlType::Q3_K, 64) == GgmlType::Q3_Kx8);
  CHECK(repacked_type(GgmlType::Q4_K, 64) == GgmlType::Q4_Kx8);
  CHECK(repacked_type(GgmlType::Q5_K, 64) == GgmlType::Q5_Kx8);
  CHECK(repacked_type(GgmlType::Q6_K, 64) == GgmlType::Q6_Kx8);
  CHECK(repacked_type(GgmlType::IQ4_XS, 64) == GgmlType::IQ4_XSx8);
  CHECK(repacked_type(GgmlType::Q2_K, 64) == GgmlType::Q2_Kx8);
  for (GgmlType base : kSuperBlockBases) {
    const GgmlType packed = repacked_type(base, 8);
    INFO("type " << ggml_type_info(base).name);
    CHECK(repacked_type(base, 60) == base);
    CHECK(ggml_row_bytes(packed, 512) == ggml_row_bytes(base, 512));
    CHECK(act_row_bytes(packed, 512) == act_row_bytes(base, 512));
    CHECK_FALSE(ggml_type_info(packed).in_files);
    const Problem p(60, 512, 1, base);
    CHECK(p.repacked == p.ggml);
  }
}

TEST_CASE("the Q2_Kx8 / Q3_Kx8 / Q4_Kx8 / Q5_Kx8 / Q6_Kx8 / IQ4_XSx8 scalar twins equal ref Q2_K / Q3_K / Q4_K / Q5_K / "
          "Q6_K / IQ4_XS bit for bit",
          "[kernels][repack]") {
  for (GgmlType base : kSuperBlockBases) {
    INFO("type " << ggml_type_info(base).name);
    const Problem p(24, 768, 3, base);
    const std::vector<float> want = p.run(ref::matmul_rows, base, 24, 0, 24);
    const std::vector<float> got = p.run(ref::matmul_rows, repacked_type(base, 24), 24, 0, 24);
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
  }
}

TEST_CASE("SIMD Q2_Kx8 / Q3_Kx8 / Q4_Kx8 / Q5_Kx8 / Q6_Kx8 / IQ4_XSx8 matmuls match ref for decode and prefill batches on "
          "group ranges",
          "[kernels][repack]") {
  for (GgmlType base : kSuperBlockBases) {
    for (int64_t n : {256, 2304}) check_group_ranges(base, n);
  }
}

TEST_CASE("SIMD Q2_Kx8 / Q3_Kx8 / Q4_Kx8 / Q5_Kx8 / Q6_Kx8 / IQ4_XSx8 matmuls match ref across several L2 row blocks",
          "[kernels][repack]") {
  const int64_t rows = 160, n = 5632, batch = 6;
  for (GgmlType base : kSuperBlockBases) {
    const Problem p(rows, n, batch, base);
    const std::vector<float> want = p.run(ref::matmul_rows, base, rows, 0, rows);
    test::for_each_simd_isa([&](CpuIsa isa) {
      INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(base).name);
      const std::vector<float> got = p.run(cpu::matmul_rows, repacked_type(base, rows), rows, 0, rows);
      CHECK(test::relative_error(got, want, batch, rows, 0, rows) < 1e-10);
    });
  }
}

TEST_CASE("Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS rows not a multiple of 8 stay on the ggml-layout kernels",
          "[kernels][repack]") {
  const int64_t rows = 60, n = 512, batch = 5;
  for (GgmlType base : kSuperBlockBases) {
    const Problem p(rows, n, batch, base);
    const GgmlType kept = repacked_type(base, rows);
    REQUIRE(kept == base);
    const std::vector<float> want = p.run(ref::matmul_rows, base, rows, 0, rows);
    test::for_each_simd_isa([&](CpuIsa isa) {
      INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(base).name);
      const std::vector<float> got = p.run(cpu::matmul_rows, kept, rows, 0, rows);
      CHECK(test::relative_error(got, want, batch, rows, 0, rows) < 1e-10);
    });
  }
}

TEST_CASE("Q5_Kx8 keeps the largest sums exact: quants 31, scales and mins 63, activations +-127",
          "[kernels][repack]") {
  // Every quant 31 (nibble 15, fifth bit set) and every act value +-127 in runs of 16 of one
  // sign: the largest s16 run sums the GEMM forms (8 products of 31 x 127).
  const int64_t rows = 16, n = 512, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockQ5_K>(GgmlType::Q5_K, rows, n, [](BlockQ5_K& w, int64_t) {
    w.d = 0x3c00;     // 1.0
    w.dmin = 0x3800;  // 0.5
    for (uint8_t& v : w.scales) v = 0xFF;
    for (uint8_t& v : w.qh) v = 0xFF;
    for (uint8_t& v : w.qs) v = 0xFF;
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 16 + i / 256) % 3 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::Q5_K, ggml, rows, n, x);
}

TEST_CASE("Q4_1x8 / Q5_0x8 / Q5_1x8 keep the largest sums exact: quants 15 / 31, activations +-127",
          "[kernels][repack]") {
  // Every quant 31 (nibble 15, fifth bit set; Q4_1: 15) and every act value +-127 in runs of 16 of
  // one sign: the largest s16 half-block sums the GEMM forms (8 maddubs pairs of 31 x 127).
  const int64_t rows = 16, n = 256, batch = 5;
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 16 + i / 64) % 3 == 0 ? -1.0f : 1.0f;
  const std::vector<uint8_t> q4_1 = filled_blocks<BlockQ4_1>(GgmlType::Q4_1, rows, n, [](BlockQ4_1& w, int64_t) {
    w.d = 0x3c00;  // 1.0
    w.m = 0xb800;  // -0.5
    for (uint8_t& v : w.qs) v = 0xFF;
  });
  check_largest_sums(GgmlType::Q4_1, q4_1, rows, n, x);
  const std::vector<uint8_t> q5_0 = filled_blocks<BlockQ5_0>(GgmlType::Q5_0, rows, n, [](BlockQ5_0& w, int64_t) {
    w.d = 0x3c00;  // 1.0
    for (uint8_t& v : w.qh) v = 0xFF;
    for (uint8_t& v : w.qs) v = 0xFF;
  });
  check_largest_sums(GgmlType::Q5_0, q5_0, rows, n, x);
  const std::vector<uint8_t> q5_1 = filled_blocks<BlockQ5_1>(GgmlType::Q5_1, rows, n, [](BlockQ5_1& w, int64_t) {
    w.d = 0x3c00;  // 1.0
    w.m = 0xb800;  // -0.5
    for (uint8_t& v : w.qh) v = 0xFF;
    for (uint8_t& v : w.qs) v = 0xFF;
  });
  check_largest_sums(GgmlType::Q5_1, q5_1, rows, n, x);
}

TEST_CASE("Q2_Kx8 keeps the largest sums exact: quants 3, scales and mins 15, activations +-127",
          "[kernels][repack]") {
  // Every quant 3, every scale and min 15, and every act value +-127 in runs of 16 of one sign:
  // the largest s16 sub-block sums the GEMM forms (16 products of 3 x 127) and the largest act
  // half sums (16 x 127) the mins meet.
  const int64_t rows = 16, n = 512, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockQ2_K>(GgmlType::Q2_K, rows, n, [](BlockQ2_K& w, int64_t) {
    w.d = 0x3c00;     // 1.0
    w.dmin = 0x3800;  // 0.5
    for (uint8_t& v : w.scales) v = 0xFF;
    for (uint8_t& v : w.qs) v = 0xFF;
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 16 + i / 256) % 3 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::Q2_K, ggml, rows, n, x);
}

TEST_CASE("Q3_Kx8 keeps the largest sums exact: quants -4 and 3, scales -32 and 31, activations +-127",
          "[kernels][repack]") {
  // Quants -4 (bit pair 0, third bit clear) and 3 (pair 3, third bit set) in runs of 8, every act
  // value +-127 in runs of 16 of one sign: the largest s16 sub-block sums the GEMM forms (16
  // products of 4 x 127); sub-blocks 0-7 take scale 0 (-32), 8-15 scale 63 (+31).
  const int64_t rows = 16, n = 512, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockQ3_K>(GgmlType::Q3_K, rows, n, [](BlockQ3_K& w, int64_t b) {
    w.d = 0x3c00;  // 1.0
    for (int i = 0; i < 8; ++i) w.scales[i] = 0xF0;          // low bits 0 (i < 8), 15 (i >= 8)
    for (int i = 8; i < 12; ++i) w.scales[i] = 0xF0;         // high bits 0 (i < 8), 3 (i >= 8)
    for (int l = 0; l < 32; ++l) w.hmask[l] = (l / 8 + b) % 2 ? 0xFF : 0x00;
    for (int l = 0; l < 64; ++l) w.qs[l] = (l % 32 / 8 + b) % 2 ? 0xFF : 0x00;
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 16 + i / 256) % 3 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::Q3_K, ggml, rows, n, x);
}

TEST_CASE("IQ4_XSx8 keeps the largest sums exact: levels -127, scales 0 and 63, activations +-127",
          "[kernels][repack]") {
  // Every index 0 (level -127) and every act value +-127 in runs of 8 of one sign: the largest
  // maddubs pair sums (2 x 127 x 127) the GEMM forms; sub-block scales -32 and +31 alternate.
  const int64_t rows = 16, n = 512, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockIQ4_XS>(GgmlType::IQ4_XS, rows, n, [](BlockIQ4_XS& w, int64_t) {
    w.d = 0x3c00;           // 1.0
    w.scales_h = 0xCCCC;    // high bits 0 for even s, 3 for odd s
    for (uint8_t& v : w.scales_l) v = 0xF0;  // low bits 0 for even s, 15 for odd s
    for (uint8_t& v : w.qs) v = 0;
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 8 + i / 256) % 3 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::IQ4_XS, ggml, rows, n, x);
}

TEST_CASE("IQ4_NLx8 keeps the largest sums exact: levels -127 and 113 against activations +-127",
          "[kernels][repack]") {
  // Every index of a block 0 (level -127) or 15 (level 113), scales +-1, and every act value
  // +-127 in runs of 8 of one sign: the largest maddubs pair sums (2 x 127 x 127) the GEMM forms.
  const int64_t rows = 16, n = 512, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockIQ4_NL>(GgmlType::IQ4_NL, rows, n, [](BlockIQ4_NL& w, int64_t b) {
    w.d = b % 2 == 0 ? 0x3c00 : 0xbc00;  // +-1.0
    for (uint8_t& v : w.qs) v = b % 3 == 0 ? 0xFF : 0;
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 8 + i / 256) % 3 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::IQ4_NL, ggml, rows, n, x);
}

TEST_CASE("MXFP4x8 keeps the largest sums exact: levels +-12 against activations +-127", "[kernels][repack]") {
  const int64_t rows = 16, n = 512, batch = 5;
  const std::vector<uint8_t> ggml = filled_blocks<BlockMXFP4>(GgmlType::MXFP4, rows, n, [](BlockMXFP4& w, int64_t b) {
    w.e = static_cast<uint8_t>(120 + b % 16);
    for (uint8_t& v : w.qs) v = b % 3 == 0 ? 0xF7 : 0x7F;   // levels 12 and -12
  });
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 8 + i / 256) % 3 == 0 ? -1.0f : 1.0f;
  check_largest_sums(GgmlType::MXFP4, ggml, rows, n, x);
}

TEST_CASE("MXFP4x8 decodes every row's exponent as ref does, the denormal scales too", "[kernels][repack]") {
  // One block per row, every level 12, every activation 1: row r is 12 * 32 * 127 * a.d times
  // 2^(e_r - 128), e from 0 (2^-128, a denormal) to 254. Products of powers of two and small
  // integers round the same in every order, so each row must equal ref exactly.
  const uint8_t exponents[kInterleavedRows] = {0, 1, 2, 3, 127, 128, 200, 254};
  const std::vector<uint8_t> ggml = filled_blocks<BlockMXFP4>(GgmlType::MXFP4, kInterleavedRows, 32, [&](BlockMXFP4& w, int64_t b) {
    w.e = exponents[b];
    for (uint8_t& v : w.qs) v = 0x77;
  });
  std::vector<uint8_t> repacked = ggml;
  repack_rows(GgmlType::MXFP4, repacked.data(), kInterleavedRows, 32);
  const std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> acts(act_row_bytes(GgmlType::MXFP4, 32));
  ref::prepare_act_row(GgmlType::MXFP4, x.data(), acts.data(), 32);
  std::vector<float> want(kInterleavedRows), got(kInterleavedRows);
  ref::matmul_rows(MatmulArgs{GgmlType::MXFP4, ggml.data(), 32, acts.data(), 1, want.data(), kInterleavedRows}, 0,
                   kInterleavedRows);
  CHECK(want[0] > 0.0f);
  test::for_each_simd_isa([&](CpuIsa isa) {
    cpu::matmul_rows(MatmulArgs{GgmlType::MXFP4x8, repacked.data(), 32, acts.data(), 1, got.data(), kInterleavedRows},
                     0, kInterleavedRows);
    for (int r = 0; r < kInterleavedRows; ++r) {
      INFO("isa " << cpu_isa_name(isa) << " exponent " << int(exponents[r]));
      CHECK(got[size_t(r)] == want[size_t(r)]);
    }
  });
}
