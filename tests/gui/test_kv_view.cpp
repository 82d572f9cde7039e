// Tests of app/gui/kv_view: the KvSnapshot as the panels see it, what each KV type costs,
// and which conversation each sequence is attributed to.
#include <catch2/catch.hpp>

#include "app/gui/kv_view.h"

using namespace kvdesk;

namespace {

KvSequenceInfo sequence(int32_t id, int32_t tokens, std::vector<int32_t> table) {
  KvSequenceInfo s;
  s.seq_id = id;
  s.num_tokens = tokens;
  s.block_table = std::move(table);
  return s;
}

}  // namespace

TEST_CASE("make_kv_view copies the snapshot and names the sequences", "[gui][kv_view]") {
  KvSnapshot snap;
  snap.layout.k_type = KvType::F16;
  snap.layout.v_type = KvType::INT8;
  snap.layout.block_size = 16;
  snap.blocks_total = 3;
  snap.blocks = {{BlockState::Shared, 2, 16}, {BlockState::Used, 1, 4}, {BlockState::Cached, 0, 16}};
  snap.sequences = {sequence(0, 20, {0, 1}), sequence(3, 16, {0})};
  snap.what_if = {{8, 4, 100}};
  snap.prefix_hit_rate = 0.5;
  snap.retention_tokens_seen = 480;
  snap.retention_tokens_kept = 120;
  snap.retention_blocks_freed = 21;
  snap.recent_row_bytes = 2048;
  const ui::KvView v = gui::make_kv_view(snap, true, {{3, {42, "Alpha"}}});
  CHECK(v.valid);
  CHECK(v.k_type == "f16");
  CHECK(v.v_type == "int8");
  REQUIRE(v.blocks.size() == 3);
  CHECK(v.blocks[0].kind == ui::BlockKind::Shared);
  CHECK(v.blocks[1].filled == 4);
  CHECK(v.blocks[2].kind == ui::BlockKind::Cached);
  REQUIRE(v.sequences.size() == 2);
  CHECK(v.sequences[0].label == "seq 0");
  CHECK(v.sequences[0].conversation_id == 0);
  CHECK(v.sequences[1].label == "Alpha");
  CHECK(v.sequences[1].conversation_id == 42);
  CHECK(v.what_if.size() == 1);
  CHECK(v.prefix_hit_rate == 0.5);
  CHECK(v.retention_tokens_seen == 480);
  CHECK(v.retention_tokens_kept == 120);
  CHECK(v.retention_blocks_freed == 21);
  CHECK(v.recent_rows == kKvRecentRows);   // int8 V keeps the newest rows in f32
  CHECK(v.recent_row_bytes == 2048);
}

TEST_CASE("a pool of float kv shows no recent rows in f32 whatever its layout says", "[gui][kv_view]") {
  KvSnapshot snap;   // as a server that says nothing of them is read: f32 types
  snap.layout.k_type = snap.layout.v_type = KvType::BF16;
  CHECK(gui::make_kv_view(snap, true, {}).recent_rows == 0);
}

TEST_CASE("kv_type_costs shows the engine's bytes and the known quality by type name", "[gui][kv_view]") {
  ModelSummary m;
  m.kv_types = {{KvType::F32, 320}, {KvType::INT8, 96}, {KvType::INT4, 56}};
  KvQuality int8;
  int8.type = KvType::INT8;
  int8.kl = 1e-4;
  int8.top1 = 99.2;
  const gui::KvQualities quality = {{"int8", gui::kv_quality_view(int8)},
                                    {"int4", ui::KvQualityView{ui::KvQualityState::Measuring, 0, 0, ""}}};
  const std::vector<ui::KvTypeCost> costs = gui::kv_type_costs(m, quality);
  REQUIRE(costs.size() == 3);
  CHECK(costs[0].name == "f32");
  CHECK(costs[0].bytes_per_token == 320);
  CHECK(costs[0].quality.state == ui::KvQualityState::Unknown);
  CHECK(costs[1].name == "int8");
  CHECK(costs[1].quality.state == ui::KvQualityState::Measured);
  CHECK(costs[1].quality.kl == 1e-4);
  CHECK(costs[1].quality.top1 == 99.2);
  CHECK(costs[2].quality.state == ui::KvQualityState::Measuring);
  CHECK(gui::kv_type_costs(ModelSummary{}, quality).empty());
}

TEST_CASE("sequence owners come from the engine's conversation keys", "[gui][kv_view]") {
  const std::vector<kvdesk::SequenceOwner> holders = {{0, 7, 1}, {4, 0, 2}, {5, 9, 0}};
  const gui::SequenceOwners owners = gui::sequence_owners(holders, {{1, "live"}, {2, "parked"}});
  REQUIRE(owners.count(0));
  CHECK(owners.at(0).conversation_id == 1);
  CHECK(owners.at(0).title == "live");
  REQUIRE(owners.count(4));
  CHECK(owners.at(4).title == "parked");
  CHECK_FALSE(owners.count(5));   // a request without a conversation
}
