// Internal: the AVX-512 VNNI kernels for the 256-value low-bit types Q2_K, Q3_K and IQ4_XS
// (kernels/cpu/dot_lowbit_avx512.cpp), reached only through kAvx512Kernels. Not for use outside
// kernels/cpu/.
#pragma once
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {

float lowbit_vec_dot_avx512(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n);
void lowbit_matmul_rows_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

}  // namespace kvdesk
