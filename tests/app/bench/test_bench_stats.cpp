// kvdesk-bench's building blocks: medians and spreads, seeded workloads (same seed, same
// workload; a synthetic trace reads back through the replay parser), SVG plots, knob values.
#include <catch2/catch.hpp>

#include <sstream>

#include "app/bench/bench_options.h"
#include "app/bench/bench_stats.h"
#include "app/bench/bench_svg.h"
#include "app/bench/workload.h"
#include "engine/error.h"

namespace kvdesk::bench {

TEST_CASE("A summary is the median with min max and spread", "[bench][stats]") {
  const Stats s = summarize({3, 1, 2});
  CHECK(s.median == 2);
  CHECK(s.min == 1);
  CHECK(s.max == 3);
  CHECK(s.spread == Approx(1.0));
  CHECK(s.values == std::vector<double>{3, 1, 2});
  CHECK(summarize({4, 1, 2, 3}).median == 2.5);
  CHECK(summarize({}).median == 0);
  CHECK(format_stats(s, 1) == "2.0 (1.0..3.0)");
  CHECK(format_stats(summarize({5}), 2) == "5.00");
}

TEST_CASE("Percentiles take the nearest rank", "[bench][stats]") {
  const std::vector<double> v{10, 20, 30, 40, 50};
  CHECK(percentile(v, 0.5) == 30);
  CHECK(percentile(v, 0.95) == 50);
  CHECK(percentile(v, 0) == 10);
  CHECK(percentile({}, 0.5) == 0);
}

TEST_CASE("Lengths drawn from one seed repeat and stay in range", "[bench][workload]") {
  const LengthDist dist{100, 0.8, 8, 400};
  const std::vector<int32_t> a = draw_lengths(dist, 5000, 7);
  CHECK(a == draw_lengths(dist, 5000, 7));
  CHECK(a != draw_lengths(dist, 5000, 8));
  for (int32_t n : a) REQUIRE((n >= 8 && n <= 400));
  std::vector<double> d(a.begin(), a.end());
  CHECK(median(d) == Approx(100).epsilon(0.1));
}

TEST_CASE("A synthetic trace reads back through the replay parser", "[bench][workload]") {
  ChatWorkload w;
  w.conversations = 4;
  w.turns = 3;
  w.system_prompts = 2;
  const std::vector<TraceConversation> trace = synthetic_trace(w);
  REQUIRE(trace.size() == 4);
  CHECK(trace[0].turns[0].system == trace[2].turns[0].system);
  CHECK(trace[0].turns[0].system != trace[1].turns[0].system);
  std::stringstream text;
  write_trace(trace, text);
  const std::vector<TraceConversation> back = parse_trace(text, "synthetic");
  REQUIRE(back.size() == trace.size());
  for (size_t c = 0; c < trace.size(); ++c) {
    REQUIRE(back[c].turns.size() == 3);
    for (size_t t = 0; t < 3; ++t) {
      CHECK(back[c].turns[t].user == trace[c].turns[t].user);
      CHECK(back[c].turns[t].max_tokens == trace[c].turns[t].max_tokens);
      CHECK(back[c].turns[t].start_ms == Approx(trace[c].turns[t].start_ms));
    }
  }
}

TEST_CASE("Line and bar plots render as SVG with escaped text", "[bench][svg]") {
  Plot line{"l", "a < b", "x", "y", {}, {{"s1", {1, 2, 3}, {0, 10, 20}}}};
  const std::string svg = render_svg(line);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("<polyline") != std::string::npos);
  CHECK(svg.find("a &lt; b") != std::string::npos);
  Plot bars{"b", "bars", "", "n", {"f16", "int8"}, {{"contiguous", {1, 2}, {}}, {"paged", {3, 4}, {}}}};
  const std::string bar_svg = render_svg(bars);
  CHECK(bar_svg.find("<rect x=") != std::string::npos);
  CHECK(bar_svg.find("int8") != std::string::npos);
}

TEST_CASE("Knobs parse their values and reject bad ones", "[bench][options]") {
  Knobs k;
  set_knob(k, Knob::KvType, "int8");
  set_knob(k, Knob::BlockSize, "32");
  set_knob(k, Knob::PrefixCache, "off");
  set_knob(k, Knob::PreemptMode, "swap");
  CHECK(k.kv_type == KvType::INT8);
  CHECK(k.block_size == 32);
  CHECK_FALSE(k.prefix_cache);
  CHECK(k.preempt_mode == PreemptMode::Swap);
  CHECK(knob_value(k, Knob::KvType) == "int8");
  CHECK_THROWS_AS(set_knob(k, Knob::BlockSize, "12"), Error);
  CHECK_THROWS_AS(set_knob(k, Knob::KvType, "fp4"), Error);
  CHECK_THROWS_AS(set_knob(k, Knob::Threads, "two"), Error);
  CHECK(knob_from_name("chunk-size") == Knob::ChunkSize);
  CHECK_FALSE(knob_from_name("chunk").has_value());
}

}  // namespace kvdesk::bench
