// Internal: the AVX-512 VNNI K-quant kernels (kernels/cpu/dot_kquant_avx512.cpp), reached only
// through kAvx512Kernels for Q4_K, Q5_K and Q6_K weights. Not for use outside kernels/cpu/.
#pragma once
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {

float kquant_vec_dot_avx512(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n);
void kquant_matmul_rows_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

}  // namespace kvdesk
