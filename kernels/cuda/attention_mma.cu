// Split kernel of batched decode attention on tensor cores (attention_split.cuh's contract).
//
// Why: a GQA group's query heads all read the same K/V rows, so one kv head's step is a small
// matrix product, S = Q K^T with Q [group][head_dim], and then P V. The SIMT kernel
// (paged_attention.cu) spends tens of instructions per K/V row on its dot products, shuffles
// and softmax, and runs at a fraction of the memory bandwidth however few bytes a row has; here
// the products run as WMMA 16x16x16 (f16 inputs, f32 sums) and the softmax once per 64-token
// tile. On an H200 (Llama-3-8B's layer, f16 K/V) it reads 1.2-2.2 TB/s where the SIMT kernel
// read 0.7-1.1; fp8, int8 and int4 rows are not faster yet: decoding them to f16 costs more
// than the bytes they save.
//
// One CTA of 4 warps per (split, kv head x 16-head chunk, sequence). Per tile of 64 tokens:
//   1. 64 threads find the tile's rows through the block table, then every thread loads its
//      16-byte pieces of the K and V rows (all loads first), decodes them (kv_codec.cuh's
//      fetch8 / decode8; f16 rows are copied as they are) and stores f16 rows in shared
//      memory, zeros past the split's end;
//   2. warp w computes S[16 heads][tokens 16w..16w+15] = Q K^T (q prescaled by scale * log2 e,
//      rounded to f16; rows past the chunk's heads are zero);
//   3. each warp runs the online softmax of 4 heads over the tile: the tile's max, the rescale
//      factor alpha = 2^(m_old - m_new), P = 2^(S - m_new) rounded to f16, l = l alpha + sum P;
//   4. the warps compute T = P V, 16 output columns at a time;
//   5. O = O alpha + T, O in shared memory (WMMA fragments have no row order to scale in place).
// At the end the chunk's heads write (m, l) and O as the split's partials.
//
// Rounding: q, P and decoded K/V values are rounded to f16 (f16 K/V exactly), so the output
// differs from ref::paged_attention by about f16's precision (2^-11 relative), where the SIMT
// kernel differs by f32 rounding alone.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <mutex>

#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kv_codec.cuh"

namespace kvdesk::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTileTokens = 64;
constexpr int kHeadsPerCta = 16;      // the M of the products: one 16-row fragment
// The kernel is built for head dims 64 (TinyLlama, Llama 3.2 1B), 96 (Phi-3 mini) and 128
// (Llama 2/3, Mistral, Qwen): a compile-time row length makes a piece's row and column shifts
// and masks. Larger rows would not leave room for 3 CTAs per SM.
constexpr int kMaxMmaHeadDim = 128;
constexpr int kScoreLd = kTileTokens + 4;   // floats per row of S
constexpr int kProbLd = kTileTokens + 8;    // halves per row of P

// Shared memory of one CTA for head_dim d, carved in this order (each part a multiple of 32
// bytes, so every WMMA pointer is 256-bit aligned):
//   q [16][d + 8] half, k [64][d + 8] half, v [64][d + 8] half, p [16][kProbLd] half,
//   s [16][kScoreLd] float, o [16][d + 4] float, t [16][d + 4] float, m, l, alpha [16] float,
//   k_rows, v_rows [64] int64 (the tile's rows' byte offsets in the pool, -1 past the end).
struct Tiles {
  __half* q;
  __half* k;
  __half* v;
  __half* p;
  float* s;
  float* o;
  float* t;
  float* m;
  float* l;
  float* alpha;
  int64_t* k_rows;
  int64_t* v_rows;
};

__host__ __device__ constexpr size_t tiles_bytes(int d) {
  return sizeof(__half) * (size_t(kHeadsPerCta + 2 * kTileTokens) * (d + 8) + size_t(kHeadsPerCta) * kProbLd) +
         sizeof(float) * (size_t(kHeadsPerCta) * kScoreLd + 2 * size_t(kHeadsPerCta) * (d + 4) + 4 * kHeadsPerCta) +
         sizeof(int64_t) * 2 * kTileTokens;
}

__device__ Tiles carve(unsigned char* base, int d) {
  Tiles t;
  t.q = reinterpret_cast<__half*>(base);
  t.k = t.q + kHeadsPerCta * (d + 8);
  t.v = t.k + kTileTokens * (d + 8);
  t.p = t.v + kTileTokens * (d + 8);
  t.s = reinterpret_cast<float*>(t.p + kHeadsPerCta * kProbLd);
  t.o = t.s + kHeadsPerCta * kScoreLd;
  t.t = t.o + kHeadsPerCta * (d + 4);
  t.m = t.t + kHeadsPerCta * (d + 4);
  t.l = t.m + kHeadsPerCta;
  t.alpha = t.l + kHeadsPerCta;
  t.k_rows = reinterpret_cast<int64_t*>(t.alpha + 2 * kHeadsPerCta);   // 8-byte aligned: 16 floats of padding
  t.v_rows = t.k_rows + kTileTokens;
  return t;
}

__device__ inline uint4 pack_halves(const float (&x)[8]) {
  uint4 packed;
  uint32_t* words = reinterpret_cast<uint32_t*>(&packed);
  for (int i = 0; i < 4; ++i) {
    const __half2 pair = __floats2half2_rn(x[2 * i], x[2 * i + 1]);
    words[i] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return packed;
}

// 8 fetched values as 8 f16 (f16 rows as loaded), or zeros for a row past the split's end.
template <KvType kType>
__device__ inline uint4 as_halves(const RowPart& part, bool present) {
  if (!present) return make_uint4(0, 0, 0, 0);
  if constexpr (kType == KvType::F16) {
    return part.lo;
  } else {
    float x[8];
    decode8<kType>(kType, part, x);
    return pack_halves(x);
  }
}

// Byte offsets of the rows [t0, t0 + 64) of one kv head in K and V, -1 from `end`: the block
// table's division and modulo once per row, not once per 16-byte piece.
__device__ void find_rows(const Tiles& sh, const PagedKvLayer& layer, const PagedSeq& seq, int32_t kv_head, int32_t t0,
                          int32_t end) {
  if (threadIdx.x >= kTileTokens) return;
  const int32_t pos = t0 + int32_t(threadIdx.x);
  int64_t k = -1, v = -1;
  if (pos < end) {
    const int64_t block = seq.block_table[pos / layer.block_size];
    const int64_t slot = pos % layer.block_size;
    k = block * int64_t(layer.k.block_stride) + kv_head * int64_t(layer.k.head_stride) + slot * int64_t(layer.k.row_stride);
    v = block * int64_t(layer.v.block_stride) + kv_head * int64_t(layer.v.head_stride) + slot * int64_t(layer.v.row_stride);
  }
  sh.k_rows[threadIdx.x] = k;
  sh.v_rows[threadIdx.x] = v;
}

// The tile's K and V rows (offsets k_rows / v_rows, -1 for a zero row) as f16 into sh.k and
// sh.v [64][kDim + 8]. Each thread owns kPerThread 16-byte pieces of each; all their loads are
// issued before the first is decoded or stored, so a thread has 2 x kPerThread loads in flight
// rather than waiting out one memory latency per piece.
template <KvType kType, int kDim>
__device__ void load_tiles(const Tiles& sh, const uint8_t* k_data, const uint8_t* v_data) {
  constexpr int32_t kPieces = kDim / 8;
  static_assert(kTileTokens * kPieces % kThreads == 0, "every thread owns as many pieces");
  constexpr int32_t kPerThread = kTileTokens * kPieces / kThreads;
  // Piece j of this thread: its row in the tile and its first value.
  const auto row_of = [](int32_t j) { return (int32_t(threadIdx.x) + j * kThreads) / kPieces; };
  const auto e0_of = [](int32_t j) { return (int32_t(threadIdx.x) + j * kThreads) % kPieces * 8; };
  RowPart k_parts[kPerThread], v_parts[kPerThread];
#pragma unroll
  for (int32_t j = 0; j < kPerThread; ++j) {
    const int32_t r = row_of(j);
    if (sh.k_rows[r] >= 0) fetch8<kType>(kType, k_data + sh.k_rows[r], kDim, e0_of(j), k_parts[j]);
    if (sh.v_rows[r] >= 0) fetch8<kType>(kType, v_data + sh.v_rows[r], kDim, e0_of(j), v_parts[j]);
  }
#pragma unroll
  for (int32_t j = 0; j < kPerThread; ++j) {
    const int32_t r = row_of(j);
    *reinterpret_cast<uint4*>(sh.k + r * (kDim + 8) + e0_of(j)) = as_halves<kType>(k_parts[j], sh.k_rows[r] >= 0);
    *reinterpret_cast<uint4*>(sh.v + r * (kDim + 8) + e0_of(j)) = as_halves<kType>(v_parts[j], sh.v_rows[r] >= 0);
  }
}

// Step 3 for heads 4w..4w+3 of warp w: the tile's scores in base 2 -> P, and m, l, alpha.
__device__ void softmax_tile(const Tiles& sh, int32_t valid) {
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  for (int h = warp * (kHeadsPerCta / kWarps); h < (warp + 1) * (kHeadsPerCta / kWarps); ++h) {
    const float s0 = lane < valid ? sh.s[h * kScoreLd + lane] : -INFINITY;
    const float s1 = lane + 32 < valid ? sh.s[h * kScoreLd + lane + 32] : -INFINITY;
    const float m_old = sh.m[h];
    float mx = fmaxf(s0, s1);
    for (int offset = 16; offset > 0; offset /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, offset));
    const float m_new = fmaxf(m_old, mx);
    const __half p0 = __float2half_rn(exp2f(s0 - m_new));
    const __half p1 = __float2half_rn(exp2f(s1 - m_new));
    sh.p[h * kProbLd + lane] = p0;
    sh.p[h * kProbLd + lane + 32] = p1;
    float sum = __half2float(p0) + __half2float(p1);   // the sum of the P that V is weighed by
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
    if (lane == 0) {
      const float alpha = exp2f(m_old - m_new);   // 0 at the first tile (m_old = -inf)
      sh.l[h] = sh.l[h] * alpha + sum;
      sh.m[h] = m_new;
      sh.alpha[h] = alpha;
    }
  }
}

template <int kTypeCode, int kDim>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(SplitParams p) {
  constexpr KvType kType = KvType(kTypeCode);
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  const int32_t seq_index = blockIdx.z;
  const int32_t kv_head = blockIdx.y / p.head_chunks;
  const int32_t head0 = kv_head * p.group + (blockIdx.y % p.head_chunks) * kHeadsPerCta;
  const int32_t heads = min(kHeadsPerCta, kv_head * p.group + p.group - head0);
  const PagedSeq seq = p.seqs[seq_index];
  const int32_t begin = blockIdx.x * p.split_tokens;
  if (begin >= seq.num_tokens) return;   // this sequence is shorter than the plan's longest
  const int32_t end = min(seq.num_tokens, begin + p.split_tokens);
  const PagedKvLayer& layer = p.layer;
  constexpr int32_t d = kDim;
  const Tiles sh = carve(shared_bytes, d);
  const int warp = threadIdx.x / 32;

  const float q_scale = p.scale * kLog2e;
  for (int32_t i = threadIdx.x; i < kHeadsPerCta * d; i += kThreads) {
    const int32_t h = i / d;
    const int32_t e = i % d;
    const float value = h < heads ? p.q[(int64_t(seq_index) * p.num_heads + head0 + h) * d + e] * q_scale : 0.0f;
    sh.q[h * (d + 8) + e] = __float2half_rn(value);
    sh.o[h * (d + 4) + e] = 0.0f;
  }
  if (threadIdx.x < kHeadsPerCta) {
    sh.m[threadIdx.x] = -INFINITY;
    sh.l[threadIdx.x] = 0.0f;
  }

  for (int32_t t0 = begin; t0 < end; t0 += kTileTokens) {
    find_rows(sh, layer, seq, kv_head, t0, end);
    __syncthreads();
    load_tiles<kType, kDim>(sh, layer.k.data, layer.v.data);
    __syncthreads();
    {  // S for tokens 16 warp .. 16 warp + 15 of the tile
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
      wmma::fill_fragment(s, 0.0f);
      for (int32_t kk = 0; kk < d; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> q;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> k;
        wmma::load_matrix_sync(q, sh.q + kk, d + 8);
        wmma::load_matrix_sync(k, sh.k + 16 * warp * (d + 8) + kk, d + 8);
        wmma::mma_sync(s, q, k, s);
      }
      wmma::store_matrix_sync(sh.s + 16 * warp, s, kScoreLd, wmma::mem_row_major);
    }
    __syncthreads();
    softmax_tile(sh, end - t0);
    __syncthreads();
    for (int32_t n0 = 16 * warp; n0 < d; n0 += 16 * kWarps) {   // T columns n0 .. n0 + 15
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> t;
      wmma::fill_fragment(t, 0.0f);
      for (int32_t kk = 0; kk < kTileTokens; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> prob;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> v;
        wmma::load_matrix_sync(prob, sh.p + kk, kProbLd);
        wmma::load_matrix_sync(v, sh.v + kk * (d + 8) + n0, d + 8);
        wmma::mma_sync(t, prob, v, t);
      }
      wmma::store_matrix_sync(sh.t + n0, t, d + 4, wmma::mem_row_major);
    }
    __syncthreads();
    for (int32_t i = threadIdx.x; i < kHeadsPerCta * d; i += kThreads) {
      const int32_t h = i / d;
      const int32_t e = i % d;
      sh.o[h * (d + 4) + e] = fmaf(sh.o[h * (d + 4) + e], sh.alpha[h], sh.t[h * (d + 4) + e]);
    }
  }
  __syncthreads();

  const int64_t row0 = (int64_t(seq_index) * p.num_heads + head0) * p.num_splits + blockIdx.x;
  if (threadIdx.x < heads) {
    const int64_t row = row0 + int64_t(threadIdx.x) * p.num_splits;
    p.partial_ml[2 * row] = sh.m[threadIdx.x];
    p.partial_ml[2 * row + 1] = sh.l[threadIdx.x];
  }
  for (int32_t i = threadIdx.x; i < heads * d; i += kThreads) {
    const int32_t h = i / d;
    const int32_t e = i % d;
    p.partial_acc[(row0 + int64_t(h) * p.num_splits) * d + e] = sh.o[h * (d + 4) + e];
  }
}

template <KvType kType, int kDim>
void launch_dim(const SplitParams& p, int32_t num_seqs) {
  constexpr auto kernel = attention_mma_kernel<int(kType), kDim>;
  static std::once_flag configured;
  std::call_once(configured,
                 [] { cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(tiles_bytes(kDim))); });
  const dim3 grid(unsigned(p.num_splits), unsigned(p.layer.num_kv_heads * p.head_chunks), unsigned(num_seqs));
  kernel<<<grid, kThreads, tiles_bytes(kDim)>>>(p);
}

template <KvType kType>
void launch(const SplitParams& p, int32_t num_seqs) {
  switch (p.layer.head_dim) {
    case 64: return launch_dim<kType, 64>(p, num_seqs);
    case 96: return launch_dim<kType, 96>(p, num_seqs);
    default: return launch_dim<kType, 128>(p, num_seqs);   // mma_attention_takes allows no other
  }
}

}  // namespace

bool mma_attention_takes(const PagedKvLayer& layer) {
  const KvType type = layer.k.type;
  const bool narrow = type == KvType::F16 || type == KvType::FP8_E4M3 || type == KvType::FP8_E5M2 ||
                      type == KvType::INT8 || type == KvType::INT4;
  const int32_t d = layer.head_dim;
  return narrow && layer.v.type == type && (d == 64 || d == 96 || d == kMaxMmaHeadDim);
}

int32_t mma_attention_head_chunks(int32_t group) { return (group + kHeadsPerCta - 1) / kHeadsPerCta; }

void launch_mma_attention(const SplitParams& p, int32_t num_seqs) {
  switch (p.layer.k.type) {
    case KvType::F16: return launch<KvType::F16>(p, num_seqs);
    case KvType::FP8_E4M3: return launch<KvType::FP8_E4M3>(p, num_seqs);
    case KvType::FP8_E5M2: return launch<KvType::FP8_E5M2>(p, num_seqs);
    case KvType::INT8: return launch<KvType::INT8>(p, num_seqs);
    case KvType::INT4: return launch<KvType::INT4>(p, num_seqs);
    default: return;   // mma_attention_takes refuses the rest
  }
}

}  // namespace kvdesk::cuda
