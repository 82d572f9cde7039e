// Internal to the repacking of the super-block types whose bytes come in 32-byte runs (Q2_K's
// qs, Q3_K's qs and hmask; kernels/weight_repack.h): run `run` of a row goes to chunks
// 8 run .. 8 run + 7 of the group's interleaved bytes, 4 bytes of each of the 8 rows a chunk,
// and the twins read a row's byte back out of them.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/weight_repack.h"

namespace kvdesk {

constexpr int kRunChunks = 8;       // chunks of 4 bytes per row in a 32-byte run
constexpr int kRunChunkBytes = 4;   // bytes of one row in a chunk

// Run `run` of row r (32 bytes at 32 * run of row_bytes) into chunks 8 run .. 8 run + 7 of `out`.
inline void interleave_run(const uint8_t* row_bytes, int run, int r, uint8_t* out) {
  for (int c = 0; c < kRunChunks; ++c) {
    std::memcpy(&out[32 * (kRunChunks * run + c) + kRunChunkBytes * r], &row_bytes[32 * run + kRunChunkBytes * c],
                kRunChunkBytes);
  }
}

// Byte l (< 32) of run `run` of row r in interleaved bytes.
inline uint8_t run_byte(const uint8_t* bytes, int run, int r, int l) {
  return bytes[32 * (kRunChunks * run + l / kRunChunkBytes) + kRunChunkBytes * r + l % kRunChunkBytes];
}

}  // namespace kvdesk
