// The CUDA forward-step kernels against their CPU references (NMSE over random data):
// rms_norm, rope (Normal/NeoX, partial, frequency factors), swiglu and the residual add against
// kernels/ops.h; embedding rows against ref::dequantize_row; GEMV for every computable weight
// type and batch 1..8 against dequantized rows dotted in double; the tensor-core GEMM against
// the f16-rounded operands dotted in double, and matmul's exact f32 path; argmax against the greedy
// sampler; and the launchers' refusals of shapes they cannot run.
#include <catch2/catch.hpp>

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "engine/runtime/sampler.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/quantize.h"
#include "tests/gpu/device_buffer.h"
#include "tests/gpu/gpu_test_support.h"

using namespace kvdesk;
using gpu_test::nmse;
using gpu_test::normal_values;
using gpu_test::DeviceBuffer;

namespace {

// A [rows][n] weight matrix of `type` quantized by the CPU, and its rows dequantized.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;   // [rows][n]
};
Weights make_weights(GgmlType type, int32_t rows, int32_t n, uint32_t seed) {
  const std::vector<float> x = normal_values(size_t(rows) * size_t(n), seed);
  const size_t row_bytes = ggml_row_bytes(type, n);
  Weights w{std::vector<uint8_t>(row_bytes * size_t(rows)), std::vector<float>(x.size())};
  for (int32_t r = 0; r < rows; ++r) {
    ref::quantize_row(type, &x[size_t(r) * size_t(n)], &w.bytes[size_t(r) * row_bytes], n);
    ref::dequantize_row(type, &w.bytes[size_t(r) * row_bytes], &w.values[size_t(r) * size_t(n)], n);
  }
  return w;
}

// want[b][r] = dot(dequantized row r, x[b]) summed in double: x [batch][n], want [batch][rows].
std::vector<float> products_in_double(const Weights& w, const std::vector<float>& x, int32_t rows, int32_t n,
                                      int32_t batch) {
  std::vector<float> want(size_t(batch) * rows);
  for (int32_t b = 0; b < batch; ++b) {
    for (int32_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int32_t i = 0; i < n; ++i) sum += double(w.values[size_t(r) * n + i]) * x[size_t(b) * n + i];
      want[size_t(b) * rows + r] = float(sum);
    }
  }
  return want;
}

}  // namespace

TEST_CASE("CUDA rms_norm equals ops::rms_norm", "[cuda][ops]") {
  for (int32_t n : {64, 288, 4096, 5120}) {
    const int32_t rows = 5;
    const std::vector<float> x = normal_values(size_t(rows) * n, uint32_t(n)), w = normal_values(size_t(n), 9);
    std::vector<float> want(x.size());
    for (int32_t r = 0; r < rows; ++r) ops::rms_norm(&x[size_t(r) * n], w.data(), &want[size_t(r) * n], n, 1e-5f);
    DeviceBuffer<float> d_x(x), d_w(w), d_y(x.size());
    cuda::rms_norm(d_x.get(), d_w.get(), d_y.get(), rows, n, 1e-5f);
    cuda::rms_norm(d_x.get(), d_w.get(), d_x.get(), rows, n, 1e-5f);   // in place
    gpu_test::synchronize();
    INFO("n " << n);
    CHECK(nmse(d_y.download(), want) < 1e-12);
    CHECK(nmse(d_x.download(), want) < 1e-12);
  }
}

TEST_CASE("CUDA rope equals ops::rope_angles + rope_rotate", "[cuda][ops]") {
  const int32_t tokens = 7, heads = 6, head_dim = 128;
  const std::vector<int32_t> positions = {0, 1, 2, 100, 4095, 8191, 131071};
  std::vector<float> factors(64);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.5f * float(i % 7);
  DeviceBuffer<float> d_factors(factors);
  DeviceBuffer<int32_t> d_positions(positions);
  for (ops::RopeMode mode : {ops::RopeMode::Normal, ops::RopeMode::Neox}) {
    for (int n_rot : {128, 64}) {
      for (bool with_factors : {false, true}) {
        ops::RopeParams p;
        p.n_rot = n_rot;
        p.freq_base = with_factors ? 500000.0f : 10000.0f;
        p.freq_scale = with_factors ? 0.5f : 1.0f;
        p.mode = mode;
        const std::vector<float> x = normal_values(size_t(tokens) * heads * head_dim, uint32_t(n_rot));
        std::vector<float> want = x, cos_sin(static_cast<size_t>(n_rot));
        p.freq_factors = with_factors && n_rot == 128 ? factors.data() : nullptr;
        for (int32_t t = 0; t < tokens; ++t) {
          ops::rope_angles(positions[size_t(t)], p, cos_sin.data());
          for (int32_t h = 0; h < heads; ++h) ops::rope_rotate(&want[(size_t(t) * heads + h) * head_dim], cos_sin.data(), n_rot, mode);
        }
        DeviceBuffer<float> d_x(x);
        ops::RopeParams device_p = p;
        device_p.freq_factors = p.freq_factors ? d_factors.get() : nullptr;
        cuda::rope(d_x.get(), d_positions.get(), tokens, heads, head_dim, device_p);
        gpu_test::synchronize();
        INFO("mode " << int(mode) << ", n_rot " << n_rot << ", factors " << with_factors);
        CHECK(nmse(d_x.download(), want) < 1e-10);
      }
    }
  }
}

TEST_CASE("CUDA swiglu and the residual add equal ops::", "[cuda][ops]") {
  const size_t n = 11008 * 3 + 5;
  const std::vector<float> gate = normal_values(n, 1), up = normal_values(n, 2), y0 = normal_values(n, 3);
  std::vector<float> want_h(n), want_y = y0;
  ops::swiglu(gate.data(), up.data(), want_h.data(), int64_t(n));
  ops::add_in_place(want_y.data(), gate.data(), int64_t(n));
  DeviceBuffer<float> d_gate(gate), d_up(up), d_h(n), d_y(y0);
  cuda::swiglu(d_gate.get(), d_up.get(), d_h.get(), int64_t(n));
  cuda::add_in_place(d_y.get(), d_gate.get(), int64_t(n));
  gpu_test::synchronize();
  CHECK(nmse(d_h.download(), want_h) < 1e-12);
  CHECK(d_y.download() == want_y);   // one IEEE add per value: exact
}

TEST_CASE("CUDA embedding rows equal ref::dequantize_row for every weight type the CUDA kernels decode", "[cuda][ops]") {
  const int32_t vocab = 50, n = 512;
  const std::vector<int32_t> tokens = {0, 49, 7, 7, 23};
  for (GgmlType type : gpu_test::kCudaWeightTypes) {
    const Weights table = make_weights(type, vocab, n, 5);
    std::vector<float> want;
    for (int32_t t : tokens) want.insert(want.end(), table.values.begin() + long(t) * n, table.values.begin() + long(t + 1) * n);
    DeviceBuffer<uint8_t> d_table(table.bytes);
    DeviceBuffer<int32_t> d_tokens(tokens);
    DeviceBuffer<float> d_out(want.size());
    cuda::embedding_rows(type, d_table.get(), n, d_tokens.get(), int32_t(tokens.size()), d_out.get());
    gpu_test::synchronize();
    INFO(ggml_type_info(type).name);
    CHECK(nmse(d_out.download(), want) < 1e-13);
  }
}

TEST_CASE("CUDA GEMV equals dequantized rows dotted in double for every weight type the CUDA kernels decode and batch", "[cuda][ops][gemv]") {
  for (GgmlType type : gpu_test::kCudaWeightTypes) {
    for (auto [rows, n] : {std::pair{37, 256}, std::pair{515, 2048}, std::pair{96, 5632}}) {
      const Weights w = make_weights(type, rows, n, uint32_t(rows));
      DeviceBuffer<uint8_t> d_w(w.bytes);
      for (int32_t batch : {1, 3, cuda::kMaxGemvBatch}) {
        const std::vector<float> x = normal_values(size_t(batch) * n, uint32_t(batch));
        const std::vector<float> want = products_in_double(w, x, rows, n, batch);
        DeviceBuffer<float> d_x(x), d_y(want.size());
        cuda::gemv(type, d_w.get(), rows, n, d_x.get(), batch, d_y.get());
        gpu_test::synchronize();
        INFO(ggml_type_info(type).name << ", " << rows << " x " << n << ", batch " << batch);
        CHECK(nmse(d_y.download(), want) < 1e-10);
      }
    }
  }
}

TEST_CASE("CUDA GEMM equals the f16-rounded operands dotted in double for every weight type the CUDA kernels decode", "[cuda][ops][gemm]") {
  for (GgmlType type : gpu_test::kCudaWeightTypes) {
    // Edge tiles in both directions (rows and tokens not multiples of 64), K-quant rows of
    // one and of 22 blocks.
    for (auto [rows, n, batch] : {std::tuple{37, 256, 9}, std::tuple{130, 5632, 70}, std::tuple{64, 2048, 64}}) {
      const Weights w = make_weights(type, rows, n, uint32_t(rows));
      const std::vector<float> x = normal_values(size_t(batch) * n, uint32_t(batch));
      std::vector<float> want(size_t(batch) * rows);
      double worst_scale = 0;   // the largest sum of |products| of one output
      for (int32_t b = 0; b < batch; ++b) {
        for (int32_t r = 0; r < rows; ++r) {
          double sum = 0, magnitude = 0;
          for (int32_t i = 0; i < n; ++i) {
            const double p = double(__half2float(__float2half_rn(w.values[size_t(r) * n + i]))) *
                             double(__half2float(__float2half_rn(x[size_t(b) * n + i])));
            sum += p;
            magnitude += std::abs(p);
          }
          want[size_t(b) * rows + r] = float(sum);
          worst_scale = std::max(worst_scale, magnitude);
        }
      }
      DeviceBuffer<uint8_t> d_w(w.bytes);
      DeviceBuffer<float> d_x(x), d_y(want.size());
      cuda::gemm(type, d_w.get(), rows, n, d_x.get(), batch, d_y.get());
      gpu_test::synchronize();
      const std::vector<float> got = d_y.download();
      INFO(ggml_type_info(type).name << ", " << rows << " x " << n << ", batch " << batch);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
      CHECK(worst <= 3e-5 * worst_scale);   // f32 sums of exact f16 x f16 products
    }
  }
}

TEST_CASE("CUDA matmul keeps f32 weights exact past the GEMV's batch", "[cuda][ops][gemm]") {
  const int32_t rows = 70, n = 512, batch = 21;
  const Weights w = make_weights(GgmlType::F32, rows, n, 5);
  const std::vector<float> x = normal_values(size_t(batch) * n, 6);
  const std::vector<float> want = products_in_double(w, x, rows, n, batch);
  DeviceBuffer<uint8_t> d_w(w.bytes);
  DeviceBuffer<float> d_x(x), d_y(want.size());
  cuda::matmul(GgmlType::F32, d_w.get(), rows, n, d_x.get(), batch, d_y.get());
  gpu_test::synchronize();
  CHECK(nmse(d_y.download(), want) < 1e-10);
}

TEST_CASE("CUDA argmax picks the greedy sampler's token", "[cuda][ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int32_t n = 32000;
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 0; seed < 4; ++seed) rows.push_back(normal_values(size_t(n), seed));
  rows[1][31999] = 50.0f;
  rows[2][5] = rows[2][20000] = 60.0f;   // a tie: the first
  rows[3][0] = nan;                     // NaN at index 0 stays the pick
  std::vector<float> special(size_t(n), -inf);
  special[17] = nan;
  special[300] = -1.0f;
  rows.push_back(special);
  std::vector<float> flat;
  std::vector<int32_t> want;
  Sampler sampler(SamplingParams{});
  for (const std::vector<float>& r : rows) {
    flat.insert(flat.end(), r.begin(), r.end());
    want.push_back(sampler.sample(r.data(), n, {}));
  }
  DeviceBuffer<float> d_logits(flat);
  DeviceBuffer<int32_t> d_out(rows.size());
  cuda::argmax_rows(d_logits.get(), int32_t(rows.size()), n, d_out.get());
  gpu_test::synchronize();
  CHECK(d_out.download() == want);
}

TEST_CASE("CUDA forward-step kernels refuse shapes and types they cannot run", "[cuda][ops]") {
  ops::RopeParams odd;
  odd.n_rot = 7;
  CHECK_THROWS_AS(cuda::rope(nullptr, nullptr, 1, 1, 8, odd), std::invalid_argument);
  ops::RopeParams wide;
  wide.n_rot = 256;
  CHECK_THROWS_AS(cuda::rope(nullptr, nullptr, 1, 1, 128, wide), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemv(GgmlType::Q3_K, nullptr, 4, 256, nullptr, 1, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemv(GgmlType::Q4_K, nullptr, 4, 200, nullptr, 1, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemv(GgmlType::F16, nullptr, 4, 12, nullptr, 1, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemv(GgmlType::Q8_0, nullptr, 4, 256, nullptr, cuda::kMaxGemvBatch + 1, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemm(GgmlType::Q3_K, nullptr, 4, 256, nullptr, 64, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemm(GgmlType::Q4_K, nullptr, 4, 200, nullptr, 64, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::gemm(GgmlType::Q8_0, nullptr, 4, 256, nullptr, 0, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::embedding_rows(GgmlType::Q8_1, nullptr, 256, nullptr, 1, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::rms_norm(nullptr, nullptr, nullptr, 1, 0, 1e-5f), std::invalid_argument);
  CHECK_THROWS_AS(cuda::argmax_rows(nullptr, 1, 0, nullptr), std::invalid_argument);
}
