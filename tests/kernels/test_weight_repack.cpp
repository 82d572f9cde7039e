// Q4_0x8 (kernels/weight_repack.h): repacking keeps every product bit for bit in the scalar twin,
// the SIMD GEMM over it matches ref for decode and prefill batches on row-group ranges, and
// shapes without whole groups keep ggml's layout.
#include <catch2/catch.hpp>

#include <cmath>
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

// W[rows][n] in Q4_0 and its repacked copy, A[batch][n] prepared for Q4_0.
struct Problem {
  int64_t rows, n, batch;
  std::vector<uint8_t> q4_0;
  std::vector<uint8_t> repacked;
  std::vector<uint8_t> acts;

  Problem(int64_t rows_, int64_t n_, int64_t batch_) : rows(rows_), n(n_), batch(batch_) {
    const size_t w_row = ggml_row_bytes(GgmlType::Q4_0, n);
    const size_t a_row = act_row_bytes(GgmlType::Q4_0, n);
    const std::vector<float> w = test::random_values(rows * n, 1);
    const std::vector<float> a = test::random_values(batch * n, 2);
    q4_0.resize(w_row * static_cast<size_t>(rows));
    acts.resize(a_row * static_cast<size_t>(batch));
    for (int64_t r = 0; r < rows; ++r) {
      ref::quantize_row(GgmlType::Q4_0, &w[static_cast<size_t>(r * n)], &q4_0[w_row * static_cast<size_t>(r)], n);
    }
    for (int64_t b = 0; b < batch; ++b) {
      ref::prepare_act_row(GgmlType::Q4_0, &a[static_cast<size_t>(b * n)], &acts[a_row * static_cast<size_t>(b)], n);
    }
    repacked = q4_0;
    repack_rows(GgmlType::Q4_0, repacked.data(), rows, n);
  }

  // y[batch][ld_y] over rows [row_begin, row_end), NaN elsewhere.
  std::vector<float> run(void (*matmul)(const MatmulArgs&, int64_t, int64_t), GgmlType type, int64_t ld_y,
                         int64_t row_begin, int64_t row_end) const {
    std::vector<float> y(static_cast<size_t>(batch * ld_y), std::numeric_limits<float>::quiet_NaN());
    const void* w = type == GgmlType::Q4_0 ? q4_0.data() : repacked.data();
    matmul(MatmulArgs{type, w, n, acts.data(), batch, y.data(), ld_y}, row_begin, row_end);
    return y;
  }
};

// Relative squared error of got against want over rows [row_begin, row_end); the other entries
// must be untouched (NaN).
double relative_error(const std::vector<float>& got, const std::vector<float>& want, int64_t batch, int64_t ld_y,
                      int64_t row_begin, int64_t row_end) {
  double err = 0.0, ref = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < ld_y; ++r) {
      const size_t i = static_cast<size_t>(b * ld_y + r);
      if (r < row_begin || r >= row_end) {
        CHECK(std::isnan(got[i]));
        continue;
      }
      err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      ref += double(want[i]) * want[i];
    }
  }
  return err / ref;
}

}  // namespace

TEST_CASE("Q4_0x8 is chosen only for whole groups of 8 Q4_0 rows", "[kernels][repack]") {
  CHECK(repacked_type(GgmlType::Q4_0, 64) == GgmlType::Q4_0x8);
  CHECK(repacked_type(GgmlType::Q4_0, 60) == GgmlType::Q4_0);
  CHECK(repacked_type(GgmlType::Q8_0, 64) == GgmlType::Q8_0);
  CHECK(ggml_row_bytes(GgmlType::Q4_0x8, 256) == ggml_row_bytes(GgmlType::Q4_0, 256));
  CHECK_FALSE(ggml_type_info(GgmlType::Q4_0x8).in_files);
}

TEST_CASE("the Q4_0x8 scalar twin equals ref Q4_0 bit for bit", "[kernels][repack]") {
  const Problem p(24, 160, 3);
  const std::vector<float> want = p.run(ref::matmul_rows, GgmlType::Q4_0, 24, 0, 24);
  const std::vector<float> got = p.run(ref::matmul_rows, GgmlType::Q4_0x8, 24, 0, 24);
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
}

TEST_CASE("SIMD Q4_0x8 matmul matches ref for decode and prefill batches on group ranges", "[kernels][repack]") {
  // rows [8, 40) of 48 (groups 1..4), ld_y 50: the rows outside stay untouched.
  const int64_t rows = 48, ld_y = 50, row_begin = 8, row_end = 40;
  for (int64_t n : {96, 4128}) {
    for (int64_t batch : {1, 2, 3, 4, 5, 17}) {
      const Problem p(rows, n, batch);
      const std::vector<float> want = p.run(ref::matmul_rows, GgmlType::Q4_0, ld_y, row_begin, row_end);
      test::for_each_simd_isa([&](CpuIsa isa) {
        INFO("isa " << cpu_isa_name(isa) << " n " << n << " batch " << batch);
        const std::vector<float> got = p.run(cpu::matmul_rows, GgmlType::Q4_0x8, ld_y, row_begin, row_end);
        CHECK(relative_error(got, want, batch, ld_y, row_begin, row_end) < 1e-10);
      });
    }
  }
}

TEST_CASE("SIMD Q4_0x8 matmul matches ref across several L2 row blocks", "[kernels][repack]") {
  const int64_t rows = 160, n = 4128, batch = 6;
  const Problem p(rows, n, batch);
  const std::vector<float> want = p.run(ref::matmul_rows, GgmlType::Q4_0, rows, 0, rows);
  test::for_each_simd_isa([&](CpuIsa isa) {
    INFO("isa " << cpu_isa_name(isa));
    const std::vector<float> got = p.run(cpu::matmul_rows, GgmlType::Q4_0x8, rows, 0, rows);
    CHECK(relative_error(got, want, batch, rows, 0, rows) < 1e-10);
  });
}
