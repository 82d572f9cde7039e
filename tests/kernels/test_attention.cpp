// Paged attention: ref:: equals attention over the same keys and values laid out contiguously,
// whatever the block table's order, block size, GQA ratio, length or KV type; cpu:: (AVX-512
// and AVX2) equals its scalar twin ref::paged_attention_twin, which stays within the query's
// 8-bit rounding of ref:: over int8 / int4 keys and, with int8 / int4 values weighted by 8-bit
// codes, within that rounding's measured error; each KV type stays within its
// format's error of f32 attention; and the newest rows, when passed in f32, replace their
// cached copies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "kernels/attention.h"
#include "kernels/attention_int_keys.h"
#include "kernels/attention_int_values.h"
#include "kernels/dot.h"
#include "kernels/kv_quant.h"

using namespace kvdesk;

namespace {

// One query token over n cached tokens: q[heads][d], k and v [n][kv_heads][d].
struct Problem {
  int heads, kv_heads, d, n;
  std::vector<float> q, k, v;
};

Problem random_problem(uint32_t seed, int heads, int kv_heads, int d, int n) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Problem p{heads, kv_heads, d, n, std::vector<float>(size_t(heads) * d), std::vector<float>(size_t(n) * kv_heads * d), {}};
  p.v.resize(p.k.size());
  for (std::vector<float>* x : {&p.q, &p.k, &p.v}) {
    for (float& e : *x) e = normal(rng);
  }
  return p;
}

// A problem's K and V written through paged_kv_write into a pool of shuffled blocks; the
// spare blocks and unwritten rows hold 0xFF bytes (NaN in float types), so a stray read shows.
class PagedKv {
 public:
  PagedKv(const Problem& p, KvType k_type, KvType v_type, int block_size, uint32_t seed) {
    const int blocks = (p.n + block_size - 1) / block_size;
    const int pool_blocks = blocks + 3;
    table_.resize(size_t(pool_blocks));
    for (int i = 0; i < pool_blocks; ++i) table_[size_t(i)] = i;
    std::mt19937 rng(seed);
    std::shuffle(table_.begin(), table_.end(), rng);
    table_.resize(size_t(blocks));
    layer_.block_size = block_size;
    layer_.num_kv_heads = p.kv_heads;
    layer_.head_dim = p.d;
    init_tensor(layer_.k, k_store_, k_type, pool_blocks);
    init_tensor(layer_.v, v_store_, v_type, pool_blocks);
    for (int j = 0; j < p.n; ++j) {
      const size_t row = size_t(j) * p.kv_heads * p.d;
      paged_kv_write(layer_, seq(), j, &p.k[row], &p.v[row]);
    }
  }
  const PagedKvLayer& layer() const { return layer_; }
  PagedSeq seq() const { return PagedSeq{table_.data(), int32_t(table_.size()) * layer_.block_size}; }

 private:
  void init_tensor(PagedKvTensor& t, std::vector<uint8_t>& store, KvType type, int pool_blocks) {
    t.type = type;
    t.row_stride = kv_row_bytes(type, layer_.head_dim);
    t.head_stride = t.row_stride * size_t(layer_.block_size);
    t.block_stride = t.head_stride * size_t(layer_.num_kv_heads);
    store.assign(t.block_stride * size_t(pool_blocks), 0xFF);
    t.data = store.data();
  }

  PagedKvLayer layer_;
  std::vector<int32_t> table_;
  std::vector<uint8_t> k_store_, v_store_;
};

// x [rows][d] as the type stores it, dequantized again.
std::vector<float> rounded(KvType type, const std::vector<float>& x, int d) {
  std::vector<float> y(x.size());
  std::vector<uint8_t> row(kv_row_bytes(type, d));
  for (size_t r = 0; r < x.size() / size_t(d); ++r) {
    ref::quantize_kv_row(type, &x[r * d], row.data(), d);
    ref::dequantize_kv_row(type, row.data(), &y[r * d], d);
  }
  return y;
}

// Softmax attention in double over contiguous k, v [n][kv_heads][d].
std::vector<float> contiguous_attention(const Problem& p, const std::vector<float>& k, const std::vector<float>& v) {
  const int group = p.heads / p.kv_heads;
  const int d = p.d;
  std::vector<float> out(size_t(p.heads) * d);
  for (int h = 0; h < p.heads; ++h) {
    const int g = h / group;
    std::vector<double> s(size_t(p.n)), acc(size_t(d), 0.0);
    double max_s = -INFINITY;
    for (int j = 0; j < p.n; ++j) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(p.q[size_t(h) * d + i]) * k[(size_t(j) * p.kv_heads + g) * d + i];
      s[size_t(j)] = dot / std::sqrt(double(d));
      max_s = std::max(max_s, s[size_t(j)]);
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - max_s));
    for (int j = 0; j < p.n; ++j) {
      for (int i = 0; i < d; ++i) acc[size_t(i)] += s[size_t(j)] / sum * v[(size_t(j) * p.kv_heads + g) * d + i];
    }
    for (int i = 0; i < d; ++i) out[size_t(h) * d + i] = float(acc[size_t(i)]);
  }
  return out;
}

// Ref: the float truth; RefIntKeys: the SIMD kernels' scalar twin with integer key scores and
// values weighted in f32; TwinOfAvx2 / TwinOfAvxVnni / TwinOfAvx512: the twin as that ISA's
// kernel runs (its values weighted by codes where it does that, cpu::int_attention_scheme).
enum class Path { Ref, RefIntKeys, TwinOfAvx2, TwinOfAvxVnni, TwinOfAvx512, Avx2, AvxVnni, Avx512 };

const char* path_name(Path path) {
  switch (path) {
    case Path::Ref: return "ref";
    case Path::RefIntKeys: return "ref int keys";
    case Path::TwinOfAvx2: return "twin of avx2";
    case Path::TwinOfAvxVnni: return "twin of avxvnni";
    case Path::TwinOfAvx512: return "twin of avx512";
    case Path::Avx2: return "avx2";
    case Path::AvxVnni: return "avxvnni";
    case Path::Avx512: return "avx512";
  }
  return "?";
}

Path twin_of(Path path) {
  switch (path) {
    case Path::Avx2: return Path::TwinOfAvx2;
    case Path::AvxVnni: return Path::TwinOfAvxVnni;
    default: return Path::TwinOfAvx512;
  }
}

// The newest `count` rows of a problem passed in f32 (AttentionArgs::recent_k), and where a
// sliding window starts.
struct RecentRows {
  int count = 0;
  int first_token = 0;
};

// Attention of p's query over its n tokens in kv: out [heads][d]. weights, when given,
// receives the softmax weights [heads][n] (AttentionArgs::weights).
struct Run {
  const PagedKv& kv;
  const Problem& p;
  AttentionNumerics numerics = AttentionNumerics::Exact;
  std::vector<float>* weights = nullptr;
  RecentRows recent = {};
  const float* sinks = nullptr;
  std::vector<float> out = std::vector<float>(size_t(p.heads) * p.d);
  std::vector<float> scratch = std::vector<float>(size_t(attention_scratch_floats(p.heads, p.d)));

  AttentionArgs args() {
    AttentionArgs a;
    a.q = p.q.data();
    a.num_heads = p.heads;
    a.scale = 1.0f / std::sqrt(float(p.d));
    a.out = out.data();
    a.scratch = scratch.data();
    a.numerics = numerics;
    if (weights) {
      weights->assign(size_t(p.heads) * size_t(p.n), NAN);
      a.weights = weights->data();
    }
    const size_t recent_row = size_t(p.n - recent.count) * p.kv_heads * p.d;
    a.recent_k = p.k.data() + recent_row;
    a.recent_v = p.v.data() + recent_row;
    a.recent_count = recent.count;
    a.recent_stride = int64_t(p.kv_heads) * p.d;
    a.first_token = recent.first_token;
    a.sinks = sinks;
    return a;
  }
  PagedSeq seq() const {
    PagedSeq s = kv.seq();
    s.num_tokens = p.n;
    return s;
  }
};

// The twin rounding as `scheme` says.
std::vector<float> run_twin(const PagedKv& kv, const Problem& p, const IntAttentionScheme& scheme, RecentRows recent = {}) {
  Run run{kv, p};
  run.recent = recent;
  ref::paged_attention_twin(kv.layer(), run.seq(), run.args(), scheme);
  return run.out;
}

// How an ISA's kernel rounds over kv's int8 / int4 rows (value_tile 0: values weighed in f32).
IntAttentionScheme scheme_of(CpuIsa isa, const PagedKv& kv) {
  cpu_isa_force(isa);
  const IntAttentionScheme scheme = cpu::int_attention_scheme(kv.layer(), AttentionArgs{});
  cpu_isa_force(cpu_isa_detected());
  return scheme;
}

CpuIsa isa_of(Path path) {
  if (path == Path::Avx2 || path == Path::TwinOfAvx2) return CpuIsa::Avx2;
  if (path == Path::AvxVnni || path == Path::TwinOfAvxVnni) return CpuIsa::AvxVnni;
  return CpuIsa::Avx512;
}

// The AVX-VNNI paths run only where the CPU has AVX-VNNI (elsewhere they would repeat AVX2's).
bool runs_here(Path path) { return isa_of(path) != CpuIsa::AvxVnni || cpu_isa_supported(CpuIsa::AvxVnni); }

// The query's limit on pairs of codes on a path with integer key scores.
int32_t query_pair_max_of(Path path, const PagedKv& kv) {
  return path == Path::RefIntKeys ? 0 : scheme_of(isa_of(path), kv).query_pair_max;
}

std::vector<float> run_attention(Path path, const PagedKv& kv, const Problem& p,
                                 AttentionNumerics numerics = AttentionNumerics::Exact,
                                 std::vector<float>* weights = nullptr, RecentRows recent = {}) {
  Run run{kv, p, numerics, weights, recent};
  const AttentionArgs args = run.args();
  switch (path) {
    case Path::Ref: ref::paged_attention(kv.layer(), run.seq(), args); break;
    case Path::RefIntKeys: ref::paged_attention_twin(kv.layer(), run.seq(), args, IntAttentionScheme{}); break;
    case Path::TwinOfAvx2:
    case Path::TwinOfAvxVnni:
    case Path::TwinOfAvx512: ref::paged_attention_twin(kv.layer(), run.seq(), args, scheme_of(isa_of(path), kv)); break;
    case Path::Avx2:
    case Path::AvxVnni:
    case Path::Avx512:
      cpu_isa_force(isa_of(path));
      cpu::paged_attention(kv.layer(), run.seq(), args);
      cpu_isa_force(cpu_isa_detected());
      break;
  }
  return run.out;
}

double nmse(const std::vector<float>& out, const std::vector<float>& expected) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (double(out[i]) - expected[i]) * (double(out[i]) - expected[i]);
    norm += double(expected[i]) * expected[i];
  }
  return err / norm;
}

void check_close(const std::vector<float>& out, const std::vector<float>& expected, float rel) {
  for (size_t i = 0; i < out.size(); ++i) {
    INFO("i=" << i << " out " << out[i] << " expected " << expected[i]);
    REQUIRE(std::fabs(out[i] - expected[i]) <= rel * (1.0f + std::fabs(expected[i])));
  }
}

// A SIMD kernel's output against its twin's. Where values are weighed by codes, a code may
// round the other way in one and not the other (their exp and sums differ in the last bits),
// which moves the outputs of that head by up to a 255th (a 127th with 7-bit codes) of a row's
// weight times its value: the outputs then agree in NMSE (measured up to 2e-7, one such code
// over 37 rows).
void check_twin(const std::vector<float>& out, const std::vector<float>& twin, bool weighed_by_codes) {
  if (weighed_by_codes) {
    CHECK(nmse(out, twin) < 1e-6);
  } else {
    check_close(out, twin, 1e-5f);
  }
}

// Quantizing head h's query moves each of its codes by at most sq / 2 (sq: its scale),
// so every score by at most E = scale * sq / 2 * max_j sum_i |k_ji| (k as stored): E per head
// (query_score_bounds). The softmax weights then move by at most 2E in sum, and an output by
// at most max|v| 2E to first order: that bound (x 1.1) per head (query_rounding_bounds).
std::vector<double> query_score_bounds(const Problem& p, KvType type, int32_t pair_max) {
  const std::vector<float> k = rounded(type, p.k, p.d);
  std::vector<double> bounds(size_t(p.heads));
  std::vector<int16_t> codes(size_t(p.d));
  for (int h = 0; h < p.heads; ++h) {
    const int g = h / (p.heads / p.kv_heads);
    const double sq = quantize_query(p.q.data() + size_t(h) * p.d, p.d, pair_max, codes.data());
    double k_sum = 0;
    for (int j = 0; j < p.n; ++j) {
      double sum = 0;
      for (int i = 0; i < p.d; ++i) sum += std::fabs(k[(size_t(j) * p.kv_heads + g) * p.d + i]);
      k_sum = std::max(k_sum, sum);
    }
    bounds[size_t(h)] = k_sum * sq / 2 / std::sqrt(double(p.d));
  }
  return bounds;
}

std::vector<double> query_rounding_bounds(const Problem& p, KvType type, int32_t pair_max) {
  const std::vector<float> v = rounded(type, p.v, p.d);
  double v_max = 0;
  for (float x : v) v_max = std::max(v_max, double(std::fabs(x)));
  std::vector<double> bounds = query_score_bounds(p, type, pair_max);
  for (double& e : bounds) e = v_max * 2 * e * 1.1;
  return bounds;
}

// out within expected's rel (as check_close) plus the query rounding bound of each head.
void check_within_query_rounding(const std::vector<float>& out, const std::vector<float>& expected, const Problem& p,
                                 KvType type, int32_t pair_max, float rel) {
  const std::vector<double> bounds = query_rounding_bounds(p, type, pair_max);
  for (size_t i = 0; i < out.size(); ++i) {
    INFO("i=" << i << " out " << out[i] << " expected " << expected[i] << " bound " << bounds[i / size_t(p.d)]);
    REQUIRE(std::fabs(out[i] - expected[i]) <= rel * (1.0f + std::fabs(expected[i])) + bounds[i / size_t(p.d)]);
  }
}

}  // namespace

TEST_CASE("paged attention over shuffled blocks equals contiguous attention for every kv type", "[kernels][attention]") {
  const int block_size = GENERATE(8, 16, 32, 64);
  const int group = GENERATE(1, 2, 4, 8);
  const int kv_heads = GENERATE(1, 2);
  const int n = GENERATE(1, 37, 130);
  const KvType type = GENERATE(from_range(all_kv_types().begin(), all_kv_types().end()));
  const int d = 16;
  const uint32_t seed = uint32_t(block_size * 1000 + group * 10 + n);
  const Problem p = random_problem(seed, kv_heads * group, kv_heads, d, n);
  const PagedKv kv(p, type, type, block_size, seed);
  // The contiguous side rounds each row through the format on its own, without any paging.
  const std::vector<float> expected = contiguous_attention(p, rounded(type, p.k, d), rounded(type, p.v, d));
  for (Path path : {Path::Ref, Path::Avx512}) {
    INFO(kv_type_name(type) << " block " << block_size << " group " << group << " kv heads " << kv_heads
                            << " n " << n << " " << path_name(path));
    if (path != Path::Ref && scheme_of(CpuIsa::Avx512, kv).value_tile > 0) {
      // Weighted by codes: equal to the twin that does the same (which reads rows as ref:: does).
      check_twin(run_attention(path, kv, p), run_attention(twin_of(path), kv, p), true);
    } else if (path != Path::Ref && int_key_scores(type, d)) {
      check_within_query_rounding(run_attention(path, kv, p), expected, p, type, query_pair_max_of(path, kv), 1e-5f);
    } else {
      check_close(run_attention(path, kv, p), expected, 1e-5f);
    }
  }
}

// The newest rows passed in f32 are read instead of the cached ones: every path equals
// attention over rows [first_token, n - count) as stored and the last `count` rows exact, the
// integer-key paths within their query rounding of it.
TEST_CASE("recent rows passed in f32 replace the cached rows they stand for", "[kernels][attention]") {
  const Path path = GENERATE(Path::Ref, Path::RefIntKeys, Path::Avx2, Path::AvxVnni, Path::Avx512);
  if (!runs_here(path)) return;
  const auto [k_type, v_type] = GENERATE(table<KvType, KvType>({{KvType::INT4, KvType::INT4},
      {KvType::INT8, KvType::INT8}, {KvType::FP8_E4M3, KvType::FP8_E4M3}, {KvType::INT8, KvType::F16}}));
  const auto [count, first_token] = GENERATE(table<int, int>({{0, 0}, {1, 0}, {7, 0}, {16, 0}, {17, 0}, {45, 0},
                                                               {3, 40}, {5, 40}}));
  const auto [heads, kv_heads, d] = GENERATE(table<int, int, int>({{8, 2, 64}, {3, 1, 8}, {4, 4, 128}}));
  const int n = 45;
  const uint32_t seed = uint32_t(count * 97 + heads + d);
  const Problem p = random_problem(seed, heads, kv_heads, d, n);
  const PagedKv kv(p, k_type, v_type, 16, seed);
  const size_t recent_first = size_t(n - count) * kv_heads * d;
  std::vector<float> k = rounded(k_type, p.k, d), v = rounded(v_type, p.v, d);
  std::copy(p.k.begin() + long(recent_first), p.k.end(), k.begin() + long(recent_first));
  std::copy(p.v.begin() + long(recent_first), p.v.end(), v.begin() + long(recent_first));
  Problem window = p;
  window.n = n - first_token;
  window.k.assign(k.begin() + long(size_t(first_token) * kv_heads * d), k.end());
  window.v.assign(v.begin() + long(size_t(first_token) * kv_heads * d), v.end());
  const std::vector<float> expected = contiguous_attention(window, window.k, window.v);
  const std::vector<float> out = run_attention(path, kv, p, AttentionNumerics::Exact, nullptr, {count, first_token});
  INFO(path_name(path) << " k " << kv_type_name(k_type) << " v " << kv_type_name(v_type) << " recent " << count
                       << " first " << first_token << " heads " << heads << "/" << kv_heads << " d " << d);
  const bool simd = path == Path::Avx2 || path == Path::AvxVnni || path == Path::Avx512;
  if (simd && scheme_of(isa_of(path), kv).value_tile > 0) {
    // Weighted by codes: equal to the twin that does the same (which reads rows as ref:: does).
    check_twin(out, run_attention(twin_of(path), kv, p, AttentionNumerics::Exact, nullptr, {count, first_token}), true);
  } else if (path != Path::Ref && int_key_scores(k_type, d)) {
    check_within_query_rounding(out, expected, p, k_type, query_pair_max_of(path, kv), 1e-5f);
  } else {
    check_close(out, expected, 1e-5f);
  }
}

// The integer key scores (their scalar twin, which the SIMD kernels equal) against the float
// reference, with an 8-bit query and one whose pairs of codes are limited (AVX2 over int8
// keys): within the query's rounding (query_rounding_bounds), and not equal (it did run).
TEST_CASE("integer key scores stay within the query rounding of float attention", "[kernels][attention]") {
  const KvType type = GENERATE(KvType::INT8, KvType::INT4);
  const int32_t pair_max = GENERATE(0, kQueryPairMaxBytePairs);
  const auto [heads, kv_heads, d, n] = GENERATE(table<int, int, int, int>({
      {8, 4, 64, 130}, {32, 4, 64, 300}, {16, 2, 128, 77}, {4, 2, 8, 50}, {6, 1, 40, 33}, {8, 1, 72, 20},
      {8, 2, 80, 45}, {12, 4, 96, 70}, {8, 4, 256, 40}}));
  const Problem p = random_problem(uint32_t(heads + d * 7 + n), heads, kv_heads, d, n);
  const PagedKv kv(p, type, type, 16, uint32_t(n));
  const std::vector<float> expected = run_attention(Path::Ref, kv, p);
  IntAttentionScheme scheme;
  scheme.query_pair_max = pair_max;
  const std::vector<float> twin = run_twin(kv, p, scheme);
  INFO(kv_type_name(type) << " query pairs to " << pair_max << " heads " << heads << "/" << kv_heads << " d " << d
                          << " n " << n << " NMSE " << nmse(twin, expected));
  check_within_query_rounding(twin, expected, p, type, pair_max, 1e-6f);
  // NMSE measured over int8 and int4 keys alike 3.4e-6 to 4.2e-5 with the 8-bit query, below
  // int8 KV's own (6.8e-5, below), and 3.8e-5 to 2e-4 with pairs limited (1.5e-4 for int8 keys
  // with head dim 40: 20 pairs, whose largest sum is nearly twice the largest value); two
  // orders below int4 KV's (1.5e-2).
  CHECK(nmse(twin, expected) > 0);
  CHECK(nmse(twin, expected) < (pair_max == 0 ? 1e-4 : 3e-4));
}

// The query quantizer: codes within +-127 (and where pairs are limited, each pair's sum of
// magnitudes within the limit), each within half a step of q / sq, the largest magnitude (or
// pair) at the limit; an all-zero query gives zero codes and scale.
TEST_CASE("query quantizer rounds to the nearest step within its limits", "[kernels][attention]") {
  const int32_t pair_max = GENERATE(0, kQueryPairMaxBytePairs);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> q(64);
  for (float& x : q) x = normal(rng);
  std::vector<int16_t> c(q.size());
  const float sq = quantize_query(q.data(), int32_t(q.size()), pair_max, c.data());
  float amax = 0, pair_amax = 0;
  int max_code = 0, max_pair = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    amax = std::max(amax, std::fabs(q[i]));
    max_code = std::max(max_code, std::abs(int(c[i])));
    REQUIRE(std::abs(int(c[i])) <= kQueryCodeMax);
    REQUIRE(std::fabs(q[i] - sq * c[i]) <= 0.5f * sq * 1.001f);
  }
  for (size_t i = 0; i < q.size(); i += 2) {
    pair_amax = std::max(pair_amax, std::fabs(q[i]) + std::fabs(q[i + 1]));
    max_pair = std::max(max_pair, std::abs(int(c[i])) + std::abs(int(c[i + 1])));
  }
  if (pair_max == 0) {
    CHECK(sq == amax / kQueryCodeMax);
    CHECK(max_code == kQueryCodeMax);
  } else {
    CHECK(sq == Approx(pair_amax / (pair_max - 1)).epsilon(1e-6));
    CHECK(max_pair <= pair_max);
    CHECK(max_pair >= pair_max - 1);
  }
  const std::vector<float> zeros(8, 0.0f);
  std::vector<int16_t> zero_codes(8, 1);
  CHECK(quantize_query(zeros.data(), 8, pair_max, zero_codes.data()) == 0.0f);
  CHECK(std::all_of(zero_codes.begin(), zero_codes.end(), [](int16_t x) { return x == 0; }));
}

// Pairs that reach the limit only by rounding up together stay within it; a lone spike (its
// pair's other value 0) keeps the full 127 codes.
TEST_CASE("pair-limited query codes never pass the limit", "[kernels][attention]") {
  std::vector<int16_t> c(4);
  // 64.5 + 63.5 steps of a 128th of the largest pair: both would round up, to 129.
  const std::vector<float> halves = {64.5f, -63.5f, -10.0f, 3.0f};
  quantize_query(halves.data(), 4, kQueryPairMaxBytePairs, c.data());
  CHECK(std::abs(int(c[0])) + std::abs(int(c[1])) <= kQueryPairMaxBytePairs);
  CHECK(std::abs(int(c[2])) + std::abs(int(c[3])) <= kQueryPairMaxBytePairs);
  const std::vector<float> spike = {0.0f, 2.0f, 0.5f, -0.5f};
  const float sq = quantize_query(spike.data(), 4, kQueryPairMaxBytePairs, c.data());
  CHECK(sq == 2.0f / kQueryCodeMax);
  CHECK(c[1] == kQueryCodeMax);
}

// The value weight quantizer: codes in [0, code_max], each within half a step of w / step, the
// largest at code_max; all-zero weights give zero codes and step.
TEST_CASE("value weight quantizer rounds to the nearest of code_max steps of the largest weight", "[kernels][attention]") {
  const int32_t code_max = GENERATE(kValueWeightCodeMax, kValueWeightCodeMaxBytePairs);
  std::mt19937 rng(9);
  std::exponential_distribution<float> exponential(3.0f);
  std::vector<float> w(16);
  for (float& x : w) x = exponential(rng);
  std::vector<uint8_t> k(w.size());
  const float step = quantize_value_weights(w.data(), int32_t(w.size()), code_max, k.data());
  const float wmax = *std::max_element(w.begin(), w.end());
  CHECK(step == wmax / float(code_max));
  CHECK(*std::max_element(k.begin(), k.end()) == code_max);
  for (size_t r = 0; r < w.size(); ++r) REQUIRE(std::fabs(w[r] - step * k[r]) <= 0.5f * step * 1.001f);
  const std::vector<float> zeros(4, 0.0f);
  std::vector<uint8_t> zero_codes(4, 1);
  CHECK(quantize_value_weights(zeros.data(), 4, code_max, zero_codes.data()) == 0.0f);
  CHECK(std::all_of(zero_codes.begin(), zero_codes.end(), [](uint8_t x) { return x == 0; }));
}

// Values weighted by 8-bit and 7-bit codes over tiles of 16 or 32 rows (the twin as the SIMD
// kernels run it) against the same twin weighting in f32, with the newest rows in f32 and a
// sliding window cutting the tiles short: output NMSE measured 8.7e-6 to 2.2e-5 with 8-bit codes,
// 3.6e-5 to 9e-5 with 7-bit ones (four times: half the steps), for int8 and int4 alike (the
// weights' rounding scales with the value's scale times a code's distance from the middle, the
// same range for both). These N(0, 1) problems spread attention evenly, so every row's weight is
// near its tile's largest: the worst case. What the values already cost, their attention NMSE
// against f32 KV, is 6.8e-5 (int8) and 1.5e-2 (int4).
TEST_CASE("values weighted by codes stay within their rounding of f32 weights", "[kernels][attention]") {
  const KvType type = GENERATE(KvType::INT8, KvType::INT4);
  const int32_t tile = GENERATE(16, 32);
  const int32_t code_max = GENERATE(kValueWeightCodeMax, kValueWeightCodeMaxBytePairs);
  const auto [count, first_token] = GENERATE(table<int, int>({{0, 0}, {16, 0}, {5, 37}}));
  const auto [heads, kv_heads, d, n] = GENERATE(table<int, int, int, int>({{16, 4, 64, 300}, {8, 1, 128, 130}, {6, 2, 48, 77}}));
  const Problem p = random_problem(uint32_t(heads * 13 + d + n + tile), heads, kv_heads, d, n);
  const PagedKv kv(p, type, type, 16, uint32_t(n));
  IntAttentionScheme scheme;
  const std::vector<float> f32_weights = run_twin(kv, p, scheme, {count, first_token});
  scheme.value_tile = tile;
  scheme.weight_code_max = code_max;
  const std::vector<float> coded = run_twin(kv, p, scheme, {count, first_token});
  const double err = nmse(coded, f32_weights);
  INFO(kv_type_name(type) << " tile " << tile << " codes to " << code_max << " recent " << count << " first " << first_token << " heads " << heads
                          << "/" << kv_heads << " d " << d << " n " << n << " NMSE " << err);
  CHECK(err > 0);
  CHECK(err < (code_max == kValueWeightCodeMax ? 3e-5 : 1.2e-4));
}

// Rounding each K and V value by a relative e moves every score by at most
// E = scale * e * max_j sum_i |q_i k_ji|, so the softmax weights by at most 2E in sum, and an
// output by at most max|v| (e + 2E) to first order.
TEST_CASE("f16 and bf16 paged attention stays within their rounding of f32 attention", "[kernels][attention]") {
  const auto [type, e] = GENERATE(table<KvType, double>({{KvType::F16, 0x1p-11}, {KvType::BF16, 0x1p-8}}));
  const int d = GENERATE(8, 64, 128);
  const int n = GENERATE(1, 37, 300);
  const Problem p = random_problem(uint32_t(d + n), 8, 2, d, n);
  const PagedKv kv(p, type, type, 16, uint32_t(n));
  const std::vector<float> expected = contiguous_attention(p, p.k, p.v);
  double v_max = 0;
  for (float x : p.v) v_max = std::max(v_max, double(std::fabs(x)));
  for (int h = 0; h < p.heads; ++h) {
    const int g = h / (p.heads / p.kv_heads);
    double score_err = 0;
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int i = 0; i < d; ++i) sum += std::fabs(double(p.q[size_t(h) * d + i]) * p.k[(size_t(j) * p.kv_heads + g) * d + i]);
      score_err = std::max(score_err, sum * e / std::sqrt(double(d)));
    }
    const double bound = v_max * (e + 2 * score_err) * 1.1;
    for (Path path : {Path::Ref, Path::Avx512}) {
      const std::vector<float> out = run_attention(path, kv, p);
      for (int i = 0; i < d; ++i) {
        INFO(kv_type_name(type) << " d " << d << " n " << n << " head " << h << " " << path_name(path));
        REQUIRE(std::fabs(out[size_t(h) * d + i] - expected[size_t(h) * d + i]) <= bound);
      }
    }
  }
}

TEST_CASE("cpu paged attention equals the reference for every kv type shape and isa", "[kernels][attention]") {
  const Path path = GENERATE(Path::Avx2, Path::AvxVnni, Path::Avx512);
  if (!runs_here(path)) return;
  const auto [k_type, v_type] = GENERATE(table<KvType, KvType>({
      {KvType::F32, KvType::F32}, {KvType::F16, KvType::F16}, {KvType::BF16, KvType::BF16},
      {KvType::FP8_E4M3, KvType::FP8_E4M3}, {KvType::FP8_E5M2, KvType::FP8_E5M2}, {KvType::INT8, KvType::INT8},
      {KvType::INT4, KvType::INT4}, {KvType::INT8, KvType::INT4}, {KvType::F16, KvType::FP8_E4M3}}));
  const int block_size = GENERATE(8, 16, 32, 64);
  // heads, kv heads, head dim, tokens: GQA 1/2/4/8, MQA, odd groups (head tiles 4+2, 2+1),
  // lengths that are not multiples of any block size; head dims 40, 48, 72 end int8 rows (and
  // int4 rows of 72) with a wider last group (kernels/kv_quant.h) and have key chunks that are
  // not a multiple of four words; 80, 96 and 256 are those of Phi-2, Phi-3 and Gemma (an int4
  // row of 80 or 96 is one wider group, its last 64-dim value unit part used; an int8 row of
  // 80 ends in a short group).
  const auto [heads, kv_heads, d, n] = GENERATE(table<int, int, int, int>({
      {4, 4, 64, 37}, {8, 4, 64, 130}, {16, 4, 128, 37}, {32, 4, 64, 130}, {8, 1, 128, 100},
      {32, 1, 64, 75}, {6, 1, 64, 50}, {3, 1, 8, 19}, {8, 4, 8, 69}, {2, 2, 8, 1}, {16, 2, 128, 1000},
      {6, 1, 40, 33}, {4, 2, 48, 40}, {8, 1, 72, 20}, {8, 2, 80, 45}, {12, 4, 96, 70}, {8, 4, 256, 40}}));
  const uint32_t seed = uint32_t(heads * 7919 + d * 31 + n + block_size);
  const Problem p = random_problem(seed, heads, kv_heads, d, n);
  const PagedKv kv(p, k_type, v_type, block_size, seed);
  const std::vector<float> expected = run_attention(twin_of(path), kv, p);
  const std::vector<float> out = run_attention(path, kv, p);
  INFO(path_name(path) << " k " << kv_type_name(k_type) << " v " << kv_type_name(v_type) << " block " << block_size
                       << " heads " << heads << "/" << kv_heads << " d " << d << " n " << n);
  // int8 / int4 values add their min term apart from the codes' sum (s * code + m as two
  // sums), so f32 rounding grows with |m| / |x|: NMSE up to 4e-10 there, 1e-11 elsewhere.
  const bool int_v = v_type == KvType::INT8 || v_type == KvType::INT4;
  const bool weighed_by_codes = scheme_of(isa_of(path), kv).value_tile > 0;
  if (!weighed_by_codes) CHECK(nmse(out, expected) < (int_v ? 1e-9 : 1e-11));
  check_twin(out, expected, weighed_by_codes);
}

TEST_CASE("llama.cpp numerics over f16 kv take the reference path bit for bit", "[kernels][attention]") {
  const Problem p = random_problem(3, 8, 4, 64, 77);
  const PagedKv kv(p, KvType::F16, KvType::F16, 16, 3);
  const std::vector<float> expected = run_attention(Path::Ref, kv, p, AttentionNumerics::LlamaCpp);
  const std::vector<float> out = run_attention(Path::Avx512, kv, p, AttentionNumerics::LlamaCpp);
  CHECK(std::memcmp(out.data(), expected.data(), sizeof(float) * out.size()) == 0);
  CHECK(nmse(expected, run_attention(Path::Ref, kv, p)) > 0);
}

// Output NMSE against exact f32 attention over N(0, 1) keys and values (d 64, 300 tokens):
// the keys' and the values' round-trip errors add, so it is about twice a row's round-trip
// NMSE (kv_quant.h: e4m3 6.6e-4, e5m2 2.6e-3, int8 3.5e-5, int4 7.3e-3; measured here 1.1e-3,
// 4.9e-3, 1.1e-4 (AVX2 1.8e-4), 1.4e-2: int8's also carries the query and weight codes of its
// integer arithmetic, attention_int_keys.h and attention_int_values.h, 6.8e-5 without them;
// AVX2's pair-limited query and 7-bit weights round more). Bounds: 3x the round-trip NMSE,
// int8's 8x; the floor shows it was quantized.
TEST_CASE("quantized kv attention stays within its format's error of f32 attention", "[kernels][attention]") {
  const auto [type, bound] = GENERATE(table<KvType, double>({{KvType::FP8_E4M3, 2e-3}, {KvType::FP8_E5M2, 8e-3},
                                                             {KvType::INT8, 2.8e-4}, {KvType::INT4, 2.2e-2}}));
  const Path path = GENERATE(Path::Avx2, Path::AvxVnni, Path::Avx512);
  if (!runs_here(path)) return;
  const Problem p = random_problem(11, 16, 4, 64, 300);
  const PagedKv kv(p, type, type, 16, 11);
  const std::vector<float> expected = contiguous_attention(p, p.k, p.v);
  const double err = nmse(run_attention(path, kv, p), expected);
  INFO(kv_type_name(type) << " " << path_name(path) << " attention NMSE " << err);
  CHECK(err < bound);
  CHECK(err > bound / 30);
}

// The optional weights output (KV retention reads it): softmax(q K^T * scale) per head, equal
// between cpu:: and its scalar twin and to a double-precision softmax, summing to 1; asking for it leaves
// the attention output bit for bit as it was.
TEST_CASE("attention weights output equals the softmax and leaves the output unchanged", "[kernels][attention][retention]") {
  const Path path = GENERATE(Path::Ref, Path::Avx2, Path::AvxVnni, Path::Avx512);
  if (!runs_here(path)) return;
  const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::INT8, KvType::FP8_E4M3);
  const auto [heads, kv_heads, d, n] = GENERATE(table<int, int, int, int>({
      {4, 4, 64, 37}, {8, 2, 64, 130}, {6, 1, 64, 50}, {3, 1, 8, 19}, {2, 2, 8, 1}}));
  const uint32_t seed = uint32_t(heads * 131 + d + n);
  const Problem p = random_problem(seed, heads, kv_heads, d, n);
  const PagedKv kv(p, type, type, 16, seed);
  std::vector<float> weights, ref_weights;
  const std::vector<float> plain = run_attention(path, kv, p);
  const std::vector<float> out = run_attention(path, kv, p, AttentionNumerics::Exact, &weights);
  run_attention(path == Path::Ref ? Path::Ref : twin_of(path), kv, p, AttentionNumerics::Exact, &ref_weights);
  INFO(path_name(path) << " " << kv_type_name(type) << " heads " << heads << "/" << kv_heads << " d " << d << " n " << n);
  REQUIRE(std::memcmp(out.data(), plain.data(), sizeof(float) * out.size()) == 0);
  check_close(weights, ref_weights, 1e-5f);
  const std::vector<float> k = rounded(type, p.k, d);
  const int group = heads / kv_heads;
  for (int h = 0; h < heads; ++h) {
    std::vector<double> s(static_cast<size_t>(n));
    double max_s = -INFINITY, sum = 0, weight_sum = 0;
    for (int j = 0; j < n; ++j) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(p.q[size_t(h) * d + i]) * k[(size_t(j) * kv_heads + h / group) * d + i];
      max_s = std::max(max_s, s[size_t(j)] = dot / std::sqrt(double(d)));
    }
    for (double& x : s) sum += (x = std::exp(x - max_s));
    // Integer key scores move each score by at most E, so a weight by a factor within e^(+-2E).
    const double e = path != Path::Ref && int_key_scores(type, d) ? query_score_bounds(p, type, query_pair_max_of(path, kv))[size_t(h)] : 0.0;
    for (int j = 0; j < n; ++j) {
      const float w = weights[size_t(h) * n + j];
      const double expected = s[size_t(j)] / sum;
      weight_sum += w;
      REQUIRE(std::fabs(w - expected) <= 1e-4 * (1.0 + expected) + expected * std::expm1(2.2 * e));
    }
    REQUIRE(std::fabs(weight_sum - 1.0) < 1e-4);
  }
}

TEST_CASE("a head's sink logit joins the softmax's sum on every path", "[kernels][attention]") {
  // gpt-oss: p[j] = e^s[j] / (e^sink + sum e^s[j]); the sink takes its share and gives no value.
  const Path path = GENERATE(Path::Ref, Path::Avx2, Path::AvxVnni, Path::Avx512);
  if (!runs_here(path)) return;
  const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::INT8);
  const auto [heads, kv_heads, d, n] = GENERATE(table<int, int, int, int>({{4, 4, 64, 37}, {8, 2, 64, 130}, {6, 1, 64, 1}}));
  const uint32_t seed = uint32_t(heads * 17 + n);
  const Problem p = random_problem(seed, heads, kv_heads, d, n);
  const PagedKv kv(p, type, type, 16, seed);
  std::vector<float> sinks(static_cast<size_t>(heads));
  for (int h = 0; h < heads; ++h) sinks[size_t(h)] = float(h % 3) * 2.0f - 1.0f;   // -1, 1, 3
  Run run{kv, p};
  run.sinks = sinks.data();
  std::vector<float> weights;
  run.weights = &weights;
  const AttentionArgs args = run.args();
  if (path == Path::Ref) {
    ref::paged_attention(kv.layer(), run.seq(), args);
  } else {
    cpu_isa_force(isa_of(path));
    cpu::paged_attention(kv.layer(), run.seq(), args);
    cpu_isa_force(cpu_isa_detected());
  }
  const std::vector<float> k = rounded(type, p.k, d), v = rounded(type, p.v, d);
  const int group = heads / kv_heads;
  INFO(path_name(path) << " " << kv_type_name(type) << " heads " << heads << "/" << kv_heads << " n " << n);
  for (int h = 0; h < heads; ++h) {
    const int g = h / group;
    std::vector<double> e(static_cast<size_t>(n));
    double sum = std::exp(double(sinks[size_t(h)])), weight_sum = 0;
    for (int j = 0; j < n; ++j) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(p.q[size_t(h) * d + i]) * k[(size_t(j) * kv_heads + g) * d + i];
      sum += e[size_t(j)] = std::exp(dot / std::sqrt(double(d)));
    }
    for (int j = 0; j < n; ++j) weight_sum += weights[size_t(h) * n + j];
    // Integer keys move the scores by the query's rounding: a looser bound there.
    const double tolerance = type == KvType::INT8 && path != Path::Ref ? 3e-2 : 1e-4;
    CHECK(weight_sum == Approx(1.0 - std::exp(double(sinks[size_t(h)])) / sum).margin(tolerance));
    for (int i = 0; i < d; ++i) {
      double want = 0;
      for (int j = 0; j < n; ++j) want += e[size_t(j)] / sum * v[(size_t(j) * kv_heads + g) * d + i];
      CHECK(run.out[size_t(h) * d + i] == Approx(want).margin(tolerance));
    }
  }
}

// The AVX-VNNI tier is AVX2's kernel with vpdpbusd for the byte products, rounding as AVX2 does
// (the same query and weight codes): its integer sums equal AVX2's int16-then-widened ones, so
// over int8 / int4 KV the outputs and weights are the same bit for bit.
TEST_CASE("AVX-VNNI attention over int8 and int4 kv equals AVX2's bit for bit", "[kernels][attention]") {
  if (!cpu_isa_supported(CpuIsa::AvxVnni)) return;
  const auto [k_type, v_type] = GENERATE(table<KvType, KvType>({{KvType::INT8, KvType::INT8},
      {KvType::INT4, KvType::INT4}, {KvType::INT8, KvType::INT4}, {KvType::INT8, KvType::F16}}));
  const auto [heads, kv_heads, d, n] = GENERATE(table<int, int, int, int>({
      {8, 4, 64, 130}, {32, 4, 64, 300}, {16, 2, 128, 77}, {3, 1, 8, 19}, {6, 1, 40, 33}, {8, 1, 72, 20},
      {12, 4, 96, 70}, {8, 4, 256, 40}}));
  const uint32_t seed = uint32_t(heads * 31 + d * 7 + n);
  const Problem p = random_problem(seed, heads, kv_heads, d, n);
  const PagedKv kv(p, k_type, v_type, 16, seed);
  INFO("k " << kv_type_name(k_type) << " v " << kv_type_name(v_type) << " heads " << heads << "/" << kv_heads << " d "
            << d << " n " << n);
  std::vector<float> avx2_weights, vnni_weights;
  const std::vector<float> avx2 = run_attention(Path::Avx2, kv, p, AttentionNumerics::Exact, &avx2_weights);
  const std::vector<float> vnni = run_attention(Path::AvxVnni, kv, p, AttentionNumerics::Exact, &vnni_weights);
  CHECK(std::memcmp(vnni.data(), avx2.data(), sizeof(float) * avx2.size()) == 0);
  CHECK(std::memcmp(vnni_weights.data(), avx2_weights.data(), sizeof(float) * avx2_weights.size()) == 0);
  // Integer arithmetic ran: the output is not the float reference's.
  CHECK(nmse(vnni, run_attention(Path::Ref, kv, p)) > 0);
}
