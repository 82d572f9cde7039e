// Scalar unpacking of the packed quant layouts of ggml_types.h into one integer per value
// (before scales and offsets), shared by the ref dequantizers and the ref dot products.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/ggml_types.h"

namespace kvdesk::ref {

// q[32] in 0..31 of a Q5_0 / Q5_1 block: low nibbles from qs, 5th bit i of qh.
inline void unpack_5bit(const uint8_t* qs, const uint8_t* qh, int* q) {
  uint32_t high;
  std::memcpy(&high, qh, sizeof(high));
  for (int i = 0; i < 16; ++i) {
    q[i] = (qs[i] & 15) | static_cast<int>((high >> i) & 1) << 4;
    q[i + 16] = (qs[i] >> 4) | static_cast<int>((high >> (i + 16)) & 1) << 4;
  }
}

// q[256] in 0..15 of a Q4_K block, value order.
inline void unpack_q4_k(const BlockQ4_K& b, int* q) {
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * (s / 2) + l];
      q[32 * s + l] = s % 2 == 0 ? byte & 15 : byte >> 4;
    }
  }
}

// q[256] in 0..31 of a Q5_K block, value order.
inline void unpack_q5_k(const BlockQ5_K& b, int* q) {
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * (s / 2) + l];
      q[32 * s + l] = (s % 2 == 0 ? byte & 15 : byte >> 4) | ((b.qh[l] >> s) & 1) << 4;
    }
  }
}

// q[256] in 0..63 of a Q6_K block (32 not yet subtracted), value order.
inline void unpack_q6_k(const BlockQ6_K& b, int* q) {
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = b.ql[64 * h + 32 * (k & 1) + l];
        q[128 * h + 32 * k + l] = (k < 2 ? low & 15 : low >> 4) | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4;
      }
    }
  }
}

// q[256] in 0..3 of a Q2_K block, value order (v = 128h + 32k + l: bits 2k of qs[32h + l]).
inline void unpack_q2_k(const BlockQ2_K& b, int* q) {
  for (int v = 0; v < kQK_K; ++v) q[v] = (b.qs[32 * (v / 128) + v % 32] >> (2 * ((v / 32) % 4))) & 3;
}

// q[256] in -4..3 of a Q3_K block, value order: the Q2_K bit pair plus 4 * third bit, minus 4.
inline void unpack_q3_k(const BlockQ3_K& b, int* q) {
  for (int v = 0; v < kQK_K; ++v) {
    const int low = (b.qs[32 * (v / 128) + v % 32] >> (2 * ((v / 32) % 4))) & 3;
    q[v] = low + 4 * ((b.hmask[v % 32] >> (v / 32)) & 1) - 4;
  }
}

// q[32] levels[index] of 16 index bytes: low nibbles are values 0..15, high nibbles 16..31.
inline void unpack_levels(const int8_t (&levels)[16], const uint8_t* qs, int* q) {
  for (int i = 0; i < 16; ++i) {
    q[i] = levels[qs[i] & 15];
    q[i + 16] = levels[qs[i] >> 4];
  }
}

// q[32] int8 levels of 16 IQ4 index bytes.
inline void unpack_iq4(const uint8_t* qs, int* q) { unpack_levels(kIq4nlValues, qs, q); }

}  // namespace kvdesk::ref
