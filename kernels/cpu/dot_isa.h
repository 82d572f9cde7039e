// Internal: the kernel table each ISA translation unit exports (everything else in those files
// has internal linkage), and the table cpu:: uses now. Not for use outside kernels/.
#pragma once
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {

struct IsaKernels {
  void (*prepare_act_row)(GgmlType weight_type, const float* x, void* act, int64_t n);
  float (*vec_dot)(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n);
  void (*matmul_rows)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
};

extern const IsaKernels kAvx2Kernels;     // kernels/cpu/dot_avx2.cpp
extern const IsaKernels kAvxVnniKernels;  // kernels/cpu/dot_avx2.cpp built for AVX-VNNI
extern const IsaKernels kAvx512Kernels;   // kernels/cpu/dot_avx512.cpp
// The K-quants (Q4_K, Q5_K, Q6_K) against Q8K rows, which the tables above hand them to (AVX2's
// serves AVX-VNNI too: there each sub-block's scale meets its int16 sums in the vpmaddwd that
// widens them, which vpdpbusd would not save).
extern const IsaKernels kAvx2KQuantKernels;    // kernels/cpu/dot_kquant_avx2.cpp
extern const IsaKernels kAvx512KQuantKernels;  // kernels/cpu/dot_kquant_avx512.cpp

// Q4_0x8 (kernels/weight_repack.h) x Q8Act, row_begin and row_end multiples of 8
// (kernels/cpu/matmul_q4_0x8_avx2.cpp; the AVX-512 tier's in matmul_x8_avx512.cpp, which hands
// an unpaired last group to the AVX2 one). Those named _avxvnni are the same sources built for
// AVX-VNNI.
void matmul_q4_0x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q4_0x8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q4_0x8_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// Q4_1x8, Q5_0x8 and Q5_1x8 x Q8Act the same way (kernels/cpu/matmul_q4_1_q5_x8_avx2.cpp).
void matmul_q4_1x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q4_1x8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q5_0x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q5_0x8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q5_1x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q5_1x8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// Q2_Kx8 and Q3_Kx8 x Q8Act the same way (kernels/cpu/matmul_q2_kx8_avx2.cpp,
// matmul_q3_kx8_avx2.cpp).
void matmul_q2_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q2_kx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q3_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q3_kx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// Q4_Kx8, Q5_Kx8 and Q6_Kx8 x Q8K the same way (kernels/cpu/matmul_q4_kx8_avx2.cpp,
// matmul_q5_kx8_avx2.cpp, matmul_q6_kx8_avx2.cpp).
void matmul_q4_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q4_kx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q5_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q5_kx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q6_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q6_kx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// Q8_0x8 x Q8Act the same way (kernels/cpu/matmul_q8_0x8_avx2.cpp; AVX-512: matmul_x8_avx512.cpp).
void matmul_q8_0x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q8_0x8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q8_0x8_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// IQ4_XSx8 and IQ4_NLx8 x Q8Act the same way (kernels/cpu/matmul_iq4_xsx8_avx2.cpp,
// matmul_iq4_nlx8_avx2.cpp).
void matmul_iq4_xsx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_iq4_xsx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_iq4_nlx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_iq4_nlx8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// MXFP4x8 x Q8Act the same way (kernels/cpu/matmul_mxfp4x8_avx2.cpp).
void matmul_mxfp4x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_mxfp4x8_avxvnni(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

// The table of cpu_isa_active(); set once at startup, changed only by cpu_isa_force.
const IsaKernels& cpu_isa_kernels();

}  // namespace kvdesk
