// The controller's KV quality: once stories260K has loaded, the KV types panel's view model
// fills with the engine's KL and top-1 figures for every type, they are stored, and a later
// start with the same model shows the stored figures instead of measuring again.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "app/store/sqlite_db.h"
#include "tests/gui/controller_session.h"
#include "ui/panel_data.h"

using namespace kvdesk;

namespace {

using test::pump;

const ui::KvTypeCost* type_named(const ui::ViewModel& vm, const std::string& name) {
  for (const ui::KvTypeCost& t : vm.kv_types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool all_measured(const ui::ViewModel& vm) {
  if (vm.kv_types.size() != all_kv_types().size()) return false;
  for (const ui::KvTypeCost& t : vm.kv_types) {
    if (t.quality.state != ui::KvQualityState::Measured) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("the kv types panel fills with the model's kl and top-1 and a restart shows the stored ones", "[gui][controller][kv_quality]") {
  test::TempDir dir;
  gui::AppOptions options;
  options.db_path = dir.file("kvdesk.db");
  options.model_path = test::model_path("stories260K.gguf");
  {
    ui::ViewModel vm;
    gui::Controller controller{vm, {}};
    controller.start(options);
    REQUIRE(pump(controller, [&] { return all_measured(vm); }));
    CHECK(type_named(vm, "f32")->quality.kl == 0);
    CHECK(type_named(vm, "f32")->quality.top1 == 100);
    CHECK(type_named(vm, "f16")->quality.kl < 1e-5);
    CHECK(type_named(vm, "int4")->quality.kl > type_named(vm, "int8")->quality.kl);
    REQUIRE_FALSE(vm.kv.k_type.empty());
    const std::string line = ui::kv_quality_line(vm.kv_types, vm.kv.k_type);
    CHECK(line.find(vm.kv.k_type + " vs f32 KV on this model: KL ") == 0);
  }
  {
    store::Database db(options.db_path, store::OpenMode::ReadWrite, 1000);
    CHECK(db.query_int("SELECT count(*) FROM kv_quality") == int64_t(all_kv_types().size()));
    // A figure no measurement gives: shown after the restart only if read from the store.
    db.exec("UPDATE kv_quality SET kl = 0.125, top1 = 12.5 WHERE kv_type = 'int8'");
  }
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};
  controller.start(options);
  REQUIRE(pump(controller, [&] { return vm.model.state == ui::ModelState::Loaded && !vm.kv_types.empty(); }));
  CHECK(all_measured(vm));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  controller.update();
  REQUIRE(type_named(vm, "int8") != nullptr);
  CHECK(type_named(vm, "int8")->quality.kl == 0.125);
  CHECK(type_named(vm, "int8")->quality.top1 == 12.5);
  store::Database db(options.db_path, store::OpenMode::ReadOnly, 1000);
  CHECK(db.query_text("SELECT kl FROM kv_quality WHERE kv_type = 'int8'") == "0.125");
}
