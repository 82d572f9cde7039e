// The per-element math of the CUDA row kernels (kernels/cuda/row_ops.cuh) run on the host:
// rms_norm, rope (Normal and NeoX, partial rotary, Llama 3 frequency factors, linear scaling),
// the Hadamard rotation of KV rows and swiglu give kernels/ops.h's and kernels/hadamard.h's
// floats bit for bit, and the argmax rule reduced in any order picks the greedy sampler's token
// (ties, NaN, infinities). Needs no GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/runtime/sampler.h"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/hadamard.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_support.h"

using namespace kvdesk;
using gpu_test::normal_values;

namespace {

// What rope_kernel does for one head: every pair from its own theta.
void rope_head_like_kernel(float* head, int32_t position, const ops::RopeParams& p) {
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float theta = cuda::rope_theta(position, p, cuda::rope_theta_scale(p), i);
    cuda::rope_pair(head[cuda::rope_first(p.mode, i)], head[cuda::rope_second(p.mode, p.n_rot, i)], std::cos(theta),
                    std::sin(theta));
  }
}

// argmax_kernel's rule applied in a shuffled order, as threads and warps combine candidates.
int32_t argmax_any_order(const std::vector<float>& logits, uint32_t seed) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  cuda::ArgmaxCandidate best{logits[0], 0};
  for (int32_t i : order) {
    const cuda::ArgmaxCandidate c{logits[size_t(i)], i};
    if (cuda::argmax_better(c, best)) best = c;
  }
  return std::isnan(logits[0]) ? 0 : best.index;
}

}  // namespace

TEST_CASE("CUDA rms_norm math equals ops::rms_norm", "[cuda_codec][row_ops]") {
  for (int64_t n : {64, 288, 4096}) {
    const std::vector<float> x = normal_values(size_t(n), uint32_t(n)), w = normal_values(size_t(n), 7);
    std::vector<float> want(x.size()), got(x.size());
    ops::rms_norm(x.data(), w.data(), want.data(), n, 1e-5f);
    double sum_sq = 0;
    for (float e : x) sum_sq += double(e) * e;
    const float scale = cuda::rms_scale(sum_sq, n, 1e-5f);
    for (size_t i = 0; i < x.size(); ++i) got[i] = x[i] * scale * w[i];
    // Both sum in double, in different orders (the kernel by threads, ops:: by 8 partial sums):
    // the float scale may differ in its last bit.
    for (size_t i = 0; i < x.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(3e-7).margin(1e-30));
  }
}

TEST_CASE("CUDA rope math equals ops::rope_angles + rope_rotate", "[cuda_codec][row_ops]") {
  const std::vector<float> factors = [] {
    std::vector<float> f(32);
    for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f + 0.25f * float(i % 5);
    return f;
  }();
  for (ops::RopeMode mode : {ops::RopeMode::Normal, ops::RopeMode::Neox}) {
    for (int n_rot : {64, 32}) {   // full and partial rotary of a 64-dim head
      for (const float* freq_factors : {static_cast<const float*>(nullptr), factors.data()}) {
        ops::RopeParams p;
        p.n_rot = n_rot;
        p.freq_base = n_rot == 64 ? 10000.0f : 500000.0f;
        p.freq_scale = freq_factors ? 0.25f : 1.0f;
        p.freq_factors = n_rot == 64 ? freq_factors : nullptr;
        p.mode = mode;
        for (int32_t position : {0, 1, 17, 4095, 131071}) {
          INFO("mode " << int(mode) << ", n_rot " << n_rot << ", position " << position);
          const std::vector<float> x = normal_values(64, uint32_t(position));
          std::vector<float> want = x, got = x, cos_sin(static_cast<size_t>(n_rot));
          ops::rope_angles(position, p, cos_sin.data());
          ops::rope_rotate(want.data(), cos_sin.data(), n_rot, mode);
          rope_head_like_kernel(got.data(), position, p);
          CHECK(got == want);
        }
      }
    }
  }
}

TEST_CASE("CUDA hadamard math equals hadamard_rotate_rows", "[cuda_codec][row_ops]") {
  for (int32_t head_dim : {8, 64, 80, 96, 128}) {
    const int32_t rows = 5;
    std::vector<float> want = normal_values(size_t(rows * head_dim), uint32_t(head_dim)), got = want;
    hadamard_rotate_rows(want.data(), rows, head_dim);
    const int32_t b = hadamard_block(head_dim);
    for (int32_t block = 0; block < rows * head_dim / b; ++block) cuda::hadamard_block_in_place(got.data() + block * b, b);
    INFO("head dim " << head_dim);
    CHECK(got == want);
  }
}

TEST_CASE("CUDA swiglu math equals ops::swiglu", "[cuda_codec][row_ops]") {
  std::vector<float> gate = normal_values(1000, 1), up = normal_values(1000, 2);
  gate[0] = 90.0f;
  gate[1] = -90.0f;
  std::vector<float> want(gate.size()), got(gate.size());
  ops::swiglu(gate.data(), up.data(), want.data(), int64_t(gate.size()));
  for (size_t i = 0; i < gate.size(); ++i) got[i] = cuda::silu_mul(gate[i], up[i]);
  CHECK(got == want);
}

TEST_CASE("CUDA argmax rule picks the greedy sampler's token in any reduction order", "[cuda_codec][row_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows = {
      normal_values(512, 3),
      {1.0f, 3.0f, 2.0f, 3.0f, 3.0f},          // ties: the first
      {nan, 5.0f, 7.0f},                       // NaN at index 0 stays the pick
      {1.0f, nan, 0.5f, nan},                  // NaN elsewhere never wins
      {-inf, -inf, -inf},                      // all -inf: index 0
      {-inf, -2.0f, inf, inf, nan},
  };
  std::vector<float> late = normal_values(32000, 4);
  late[31999] = 100.0f;
  rows.push_back(late);
  Sampler sampler(SamplingParams{});
  for (const std::vector<float>& row : rows) {
    const int32_t want = sampler.sample(row.data(), int32_t(row.size()), {});
    for (uint32_t seed = 0; seed < 5; ++seed) CHECK(argmax_any_order(row, seed) == want);
  }
}
