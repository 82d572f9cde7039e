// The controller without a window, for tests: a scratch database, stories260K loaded (or no
// model), and the frame loop's work run until a condition holds.
#pragma once
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "app/gui/controller.h"
#include "tests/test_support.h"

namespace kvdesk::test {

// Runs the controller's frame work until `done` or 60 s pass.
inline bool pump(gui::Controller& c, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    c.update();
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

struct ControllerSession {
  TempDir dir;
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};

  explicit ControllerSession(bool with_model = true) {
    gui::AppOptions options;
    options.db_path = dir.file("kvdesk.db");
    if (with_model) options.model_path = model_path("stories260K.gguf");
    controller.start(options);
    if (with_model) {
      REQUIRE(pump(controller, [&] { return vm.model.state == ui::ModelState::Loaded && vm.model.context_length > 0; }));
    }
  }
  // Applies the action and waits until its answer has finished.
  void answer(const ui::UiAction& action) {
    REQUIRE(controller.apply(action));
    REQUIRE(pump(controller, [&] { return !controller.streaming(); }));
  }
};

}  // namespace kvdesk::test
