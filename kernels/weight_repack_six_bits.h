// Internal to the repacking into Q4_Kx8 and IQ4_XSx8 (kernels/weight_repack.h), whose blocks keep
// N six-bit values split so that a few vector shifts unpack them all: the low 4 bits of value v
// in the N / 2 bytes of `low` (the low nibble of byte v for v < N / 2, else the high nibble of
// byte v - N / 2) and its high 2 bits in the N / 4 bytes of `high` (bits 2k, 2k + 1 of byte
// v % (N / 4), k = v / (N / 4)).
#pragma once
#include <cstdint>

namespace kvdesk {

// Sets value v (0..63) in zeroed bits.
template <int N>
void put_six_bit_value(uint8_t* low, uint8_t* high, int v, int value) {
  const int low_byte = v % (N / 2);
  const int low_shift = v < N / 2 ? 0 : 4;
  low[low_byte] = static_cast<uint8_t>(low[low_byte] | (value & 15) << low_shift);
  const int high_byte = v % (N / 4);
  const int high_shift = 2 * (v / (N / 4));
  high[high_byte] = static_cast<uint8_t>(high[high_byte] | (value >> 4) << high_shift);
}

template <int N>
int six_bit_value(const uint8_t* low, const uint8_t* high, int v) {
  const int low_bits = low[v % (N / 2)] >> (v < N / 2 ? 0 : 4) & 15;
  const int high_bits = high[v % (N / 4)] >> (2 * (v / (N / 4))) & 3;
  return low_bits | high_bits << 4;
}

}  // namespace kvdesk
