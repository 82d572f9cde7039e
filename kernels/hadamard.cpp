// The Hadamard rotation of KV rows (see hadamard.h): the in-place butterfly and its matrix twin.
#include "kernels/hadamard.h"

#include <bit>
#include <cmath>

#include "kernels/check.h"

namespace kvdesk {
namespace {

// One block of b values (b a power of two): log2(b) butterfly stages (a, b) -> (a + b, a - b),
// then the 1/sqrt(b) that makes the transform orthonormal.
void hadamard_block_in_place(float* x, int32_t b) {
  for (int32_t half = 1; half < b; half *= 2) {
    for (int32_t start = 0; start < b; start += 2 * half) {
      for (int32_t i = start; i < start + half; ++i) {
        const float lo = x[i];
        const float hi = x[i + half];
        x[i] = lo + hi;
        x[i + half] = lo - hi;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(float(b));
  for (int32_t i = 0; i < b; ++i) x[i] *= norm;
}

}  // namespace

void hadamard_rotate_rows(float* x, int64_t rows, int32_t n) {
  KVDESK_ASSERT(n > 0);
  const int32_t b = hadamard_block(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t begin = 0; begin < n; begin += b) hadamard_block_in_place(x + r * n + begin, b);
  }
}

namespace ref {

void hadamard_rotate(const float* x, float* y, int32_t n) {
  KVDESK_ASSERT(n > 0);
  const int32_t b = hadamard_block(n);
  const double norm = 1.0 / std::sqrt(double(b));
  for (int32_t begin = 0; begin < n; begin += b) {
    for (int32_t i = 0; i < b; ++i) {
      double sum = 0;
      for (int32_t j = 0; j < b; ++j) {
        const double sign = std::popcount(uint32_t(i & j)) % 2 ? -1.0 : 1.0;
        sum += sign * x[begin + j];
      }
      y[begin + i] = float(sum * norm);
    }
  }
}

}  // namespace ref
}  // namespace kvdesk
