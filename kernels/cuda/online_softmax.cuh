// One step of the online softmax of ref::paged_attention, in base 2 (scores prescaled by
// scale x log2 e, so exp2 replaces exp): a running max m and sum l over the keys seen so far,
// and for each new score the factors that update the unnormalized value accumulator:
//   m' = max(m, s);  acc' = acc * 2^(m - m') + V * 2^(s - m');  l' = l * 2^(m - m') + 2^(s - m')
// __host__ __device__, so host tests run the kernels' attention math against the CPU.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#ifndef KVDESK_HOST_DEVICE
#define KVDESK_HOST_DEVICE __host__ __device__
#endif

namespace kvdesk::cuda {

constexpr float kLog2e = 1.4426950408889634f;

struct SoftmaxStep {
  float acc_scale;   // what the accumulator (and l) is multiplied by
  float weight;      // what the new value row is added with
};

// Starts from m = -INFINITY, l = 0: the first step's acc_scale is 0.
KVDESK_HOST_DEVICE inline SoftmaxStep online_softmax_step(float& m, float& l, float s) {
  const float m_new = fmaxf(m, s);
  const SoftmaxStep step{exp2f(m - m_new), exp2f(s - m_new)};
  l = l * step.acc_scale + step.weight;
  m = m_new;
  return step;
}

}  // namespace kvdesk::cuda
