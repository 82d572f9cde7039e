// AVX2 gated activations (kernels/gated_activation.h): 8 lanes at a time as
// g * up / (1 + e^-z), e^x by Cephes expf (x = n ln 2 + r, ln 2 in two parts so that r carries
// no error from rounding ln 2; e^r ~ 1 + r + r^2 P(r), about 1 ulp).
#include "kernels/cpu/gated_activation_avx2.h"

#include <cstring>

#include "kernels/cpu/simd_prelude.h"
#include "kernels/ops.h"

namespace kvdesk {
namespace {

// e^x, x clamped to [-87, 89]: from -87 up, 2^n is a normal float (n >= -126), so a gate far
// above 0 gets a sigmoid of 1; past 88.4, n = 128 makes 2^n, and e^x, +inf, so a gate far below
// 0 gets g / inf = 0 as the twins' g / (1 + e^-g) does (and NaN for g = -inf, as they do),
// where a finite clamp would leave g / e^88, far from 0 for |g| near FLT_MAX.
ALWAYS_INLINE __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  constexpr float kPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,
                             5.0000001201e-1f};
  __m256 p = _mm256_set1_ps(kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kPoly[i]));
  const __m256 e_r = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e_r, _mm256_castsi256_ps(two_n));
}

// g * up / (1 + e^-z) for 8 lanes.
ALWAYS_INLINE __m256 sigmoid_gated(__m256 g, __m256 z, __m256 up) {
  const __m256 denominator = _mm256_add_ps(_mm256_set1_ps(1.0f), exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), z)));
  return _mm256_mul_ps(_mm256_div_ps(g, denominator), up);
}

// The inputs as they are (SwiGLU, GeGLU).
struct Unclamped {
  ALWAYS_INLINE void operator()(__m256&, __m256&) const {}
};

// A whole row, 8 values at a time; its last partial vector goes through a zero-padded copy, so
// every value takes the same formula wherever it sits in the row. clamp(g, up) first rewrites
// a vector's inputs where the activation bounds them.
template <class Gate, class Clamp = Unclamped>
void gate_row(const float* gate, const float* up, float* h, int64_t n, Gate z_of, Clamp clamp = {}) {
  const auto gated = [&](__m256 g, __m256 u) {
    clamp(g, u);
    return sigmoid_gated(g, z_of(g), u);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(h + i, gated(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i >= n) return;
  alignas(32) float tail_gate[8] = {}, tail_up[8] = {};
  const int64_t rest = n - i;
  std::memcpy(tail_gate, gate + i, sizeof(float) * size_t(rest));
  std::memcpy(tail_up, up + i, sizeof(float) * size_t(rest));
  _mm256_store_ps(tail_gate, gated(_mm256_load_ps(tail_gate), _mm256_load_ps(tail_up)));
  std::memcpy(h + i, tail_gate, sizeof(float) * size_t(rest));
}

}  // namespace

void swiglu_avx2(const float* gate, const float* up, float* h, int64_t n) {
  gate_row(gate, up, h, n, [](__m256 g) { return g; });
}

void geglu_tanh_avx2(const float* gate, const float* up, float* h, int64_t n) {
  constexpr float kTwoSqrt2OverPi = 2 * 0.7978845608028654f;
  gate_row(gate, up, h, n, [](__m256 g) {
    const __m256 cubic = _mm256_mul_ps(_mm256_mul_ps(g, g), _mm256_mul_ps(g, _mm256_set1_ps(0.044715f)));
    return _mm256_mul_ps(_mm256_set1_ps(kTwoSqrt2OverPi), _mm256_add_ps(g, cubic));
  });
}

void swiglu_oai_avx2(const float* gate, const float* up, float* h, int64_t n) {
  gate_row(gate, up, h, n, [](__m256 g) { return _mm256_mul_ps(_mm256_set1_ps(ops::kSwigluOaiAlpha), g); },
           [](__m256& g, __m256& u) {
             const __m256 limit = _mm256_set1_ps(ops::kSwigluOaiLimit);
             // The limit first: min and max return their second operand for a NaN, which then
             // stays NaN as in the twin's std::min and std::clamp.
             g = _mm256_min_ps(limit, g);
             u = _mm256_min_ps(limit, _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), limit), u));
             u = _mm256_add_ps(u, _mm256_set1_ps(1.0f));
           });
}

}  // namespace kvdesk
