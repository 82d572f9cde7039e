// The Hadamard rotation of KV rows: the butterfly equals the matrix definition (every block
// size a head dim gives), it is its own inverse and keeps lengths, and it spreads an outlier
// channel evenly over its block, which is what the quantized KV types store it for; and attention
// over rotated f32 rows with a rotated query, its output turned back, is attention unrotated.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/hadamard.h"
#include "kernels/kv_quant.h"

using namespace kvdesk;

namespace {

std::vector<float> gaussian_row(int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

// One query token of `heads` heads over n tokens of one kv head (head_dim d), f32 rows in one
// block: out[heads][d] of cpu::paged_attention.
std::vector<float> f32_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                 int32_t heads, int32_t n, int32_t d) {
  PagedKvLayer layer;
  layer.block_size = n;
  layer.num_kv_heads = 1;
  layer.head_dim = d;
  std::vector<uint8_t> k_rows(size_t(n) * size_t(d) * sizeof(float)), v_rows(k_rows.size());
  for (auto [t, rows] : {std::pair{&layer.k, &k_rows}, std::pair{&layer.v, &v_rows}}) {
    t->type = KvType::F32;
    t->row_stride = size_t(d) * sizeof(float);
    t->head_stride = t->row_stride * size_t(n);
    t->block_stride = t->head_stride;
    t->data = rows->data();
  }
  const int32_t table[1] = {0};
  const PagedSeq seq{table, n};
  for (int32_t j = 0; j < n; ++j) paged_kv_write(layer, seq, j, &k[size_t(j) * size_t(d)], &v[size_t(j) * size_t(d)]);
  std::vector<float> out(size_t(heads) * size_t(d));
  std::vector<float> scratch(size_t(attention_scratch_floats(heads, d)));
  AttentionArgs args;
  args.q = q.data();
  args.num_heads = heads;
  args.scale = 1.0f / std::sqrt(float(d));
  args.out = out.data();
  args.scratch = scratch.data();
  cpu::paged_attention(layer, seq, args);
  return out;
}

double squared_norm(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += double(v) * v;
  return sum;
}

}  // namespace

TEST_CASE("hadamard blocks are the largest power of two dividing the head dim", "[kernels][hadamard]") {
  CHECK(hadamard_block(8) == 8);
  CHECK(hadamard_block(64) == 64);
  CHECK(hadamard_block(80) == 16);
  CHECK(hadamard_block(96) == 32);
  CHECK(hadamard_block(112) == 16);
  CHECK(hadamard_block(128) == 128);
  CHECK(hadamard_block(6) == 2);
}

TEST_CASE("the hadamard butterfly equals the matrix product", "[kernels][hadamard]") {
  const int32_t n = GENERATE(1, 2, 6, 8, 64, 80, 96, 112, 128, 256);
  const int32_t rows = 3;
  std::vector<float> x = gaussian_row(rows * n, uint32_t(n));
  std::vector<float> expected(x.size());
  for (int32_t r = 0; r < rows; ++r) ref::hadamard_rotate(x.data() + r * n, expected.data() + r * n, n);
  hadamard_rotate_rows(x.data(), rows, n);
  INFO("head dim " << n);
  for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(expected[i]).margin(1e-5));
}

TEST_CASE("the hadamard rotation is its own inverse and keeps lengths", "[kernels][hadamard]") {
  const int32_t n = GENERATE(8, 80, 128);
  const std::vector<float> x = gaussian_row(n, 7);
  std::vector<float> y = x;
  hadamard_rotate_rows(y.data(), 1, n);
  CHECK(squared_norm(y) == Approx(squared_norm(x)).epsilon(1e-5));
  hadamard_rotate_rows(y.data(), 1, n);
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == Approx(x[i]).margin(1e-5));
}

// A key row with one outlier channel (stories260K's reach 28 among values of a few units)
// rotates into a row whose largest magnitude is about outlier / sqrt(block).
TEST_CASE("the hadamard rotation spreads an outlier channel over its block", "[kernels][hadamard]") {
  std::vector<float> x(64, 0.0f);
  x[5] = 28.0f;
  hadamard_rotate_rows(x.data(), 1, 64);
  for (float v : x) CHECK(std::fabs(v) == Approx(28.0f / 8.0f));
}

TEST_CASE("only the integer kv types store rotated rows", "[kernels][hadamard]") {
  CHECK_FALSE(kv_type_rotated(KvType::F32));
  CHECK_FALSE(kv_type_rotated(KvType::F16));
  CHECK_FALSE(kv_type_rotated(KvType::BF16));
  CHECK_FALSE(kv_type_rotated(KvType::FP8_E4M3));
  CHECK_FALSE(kv_type_rotated(KvType::FP8_E5M2));
  CHECK(kv_type_rotated(KvType::INT8));
  CHECK(kv_type_rotated(KvType::INT4));
}

// What the model forward does for a rotated KV type (engine/model/model.cpp): q and the stored
// rows turned by H, the output turned back. Over f32 rows nothing is quantized, so only f32
// rounding separates it from plain attention.
TEST_CASE("attention over hadamard-rotated rows equals attention over plain rows", "[kernels][hadamard][attention]") {
  const int32_t d = GENERATE(8, 64, 80, 128);
  const int32_t heads = 4, n = 37;
  std::vector<float> q = gaussian_row(heads * d, 1), k = gaussian_row(n * d, 2), v = gaussian_row(n * d, 3);
  k[3] = 28.0f;   // an outlier channel in one key, as stories260K's
  const std::vector<float> plain = f32_attention(q, k, v, heads, n, d);
  hadamard_rotate_rows(q.data(), heads, d);
  hadamard_rotate_rows(k.data(), n, d);
  hadamard_rotate_rows(v.data(), n, d);
  std::vector<float> rotated = f32_attention(q, k, v, heads, n, d);
  hadamard_rotate_rows(rotated.data(), heads, d);
  INFO("head dim " << d);
  for (size_t i = 0; i < plain.size(); ++i) CHECK(rotated[i] == Approx(plain[i]).margin(2e-5));
}

// Rows of 128 channels, two of them outliers (+20 and -15 where the rest are N(0, 1)), as keys
// of real models have: stored as int8 / int4 rows plain and rotated, the rotated ones come back
// (turned back by H) with less than half the squared error, since their groups' range no longer
// spans the outliers.
TEST_CASE("int rows of outlier keys lose less rotated than plain", "[kernels][hadamard][kv_quant]") {
  const KvType type = GENERATE(KvType::INT8, KvType::INT4);
  const int32_t d = 128, rows = 64;
  std::vector<float> x = gaussian_row(rows * d, 11);
  for (int32_t r = 0; r < rows; ++r) {
    x[size_t(r * d + 3)] += 20.0f;
    x[size_t(r * d + 77)] -= 15.0f;
  }
  std::vector<uint8_t> row(kv_row_bytes(type, d));
  const auto squared_error = [&](bool rotate) {
    double err = 0;
    for (int32_t r = 0; r < rows; ++r) {
      std::vector<float> in(x.begin() + r * d, x.begin() + (r + 1) * d);
      std::vector<float> out(static_cast<size_t>(d));
      if (rotate) hadamard_rotate_rows(in.data(), 1, d);
      ref::quantize_kv_row(type, in.data(), row.data(), d);
      ref::dequantize_kv_row(type, row.data(), out.data(), d);
      if (rotate) hadamard_rotate_rows(out.data(), 1, d);
      for (int32_t i = 0; i < d; ++i) err += std::pow(double(out[size_t(i)]) - x[size_t(r * d + i)], 2);
    }
    return err;
  };
  const double plain = squared_error(false), rotated = squared_error(true);
  INFO(kv_type_name(type) << ": squared error plain " << plain << ", rotated " << rotated);
  CHECK(rotated < plain / 2);   // numpy on the same shape: 2.4x (int8), 4.2x (int4)
}
