// Internal: the AVX-512 VNNI kernels for the 256-value low-bit types Q2_K, Q3_K and IQ4_XS
// (kernels/cpu/dot_lowbit_avx512.cpp), reached only through kAvx512Kernels. Not for use outside
// kernels/cpu/.
#pragma once
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {

// Their dots and matmuls against the Q8Act rows kAvx512Kernels prepared.
struct LowbitKernels {
  float (*vec_dot)(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n);
  void (*matmul_rows)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
};

extern const LowbitKernels kAvx512LowbitKernels;

}  // namespace kvdesk
