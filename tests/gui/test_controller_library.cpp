// The controller's library and file browser: a scan's cards reach the view, folders are
// remembered in the store, the browser lists folders first and keeps its place on a bad path,
// and the app starts on the library when there is no model to open.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "tests/gui/controller_session.h"

using namespace kvdesk;
namespace fs = std::filesystem;

namespace {

bool lists(const ui::ViewModel& vm, const std::string& name) {
  return std::any_of(vm.library.entries.begin(), vm.library.entries.end(),
                     [&](const ui::LibraryEntryView& e) { return e.name == name; });
}

}  // namespace

TEST_CASE("The app starts on the library without a model, and an added folder's models appear and stay", "[gui][library]") {
  test::TempDir shelf;
  fs::create_directories(shelf.path() / "stories");
  fs::copy_file(test::model_path("stories260K.gguf"), shelf.path() / "stories/tiny.gguf");
  test::TempDir db;
  {
    ui::ViewModel vm;
    gui::Controller controller{vm, {}};
    gui::AppOptions options;
    options.db_path = db.file("kvdesk.db");
    controller.start(options);
    CHECK(vm.ui.show_library);
    REQUIRE(controller.apply({ui::ActionKind::AddLibraryFolder, 0, shelf.path().string()}));
    REQUIRE(test::pump(controller, [&] { return !vm.library.scanning && lists(vm, "stories/tiny"); }));
    const auto it = std::find_if(vm.library.entries.begin(), vm.library.entries.end(),
                                 [](const ui::LibraryEntryView& e) { return e.name == "stories/tiny"; });
    CHECK(it->arch == "llama");
    CHECK(it->source == "folder");
    CHECK_FALSE(it->fits.empty());
    CHECK_FALSE(controller.apply({ui::ActionKind::AddLibraryFolder, 0, shelf.file("no-such-folder")}));
    CHECK(vm.library.folders == std::vector<std::string>{shelf.path().string()});
  }
  ui::ViewModel vm;
  gui::Controller controller{vm, {}};
  gui::AppOptions options;
  options.db_path = db.file("kvdesk.db");
  controller.start(options);
  CHECK(vm.library.folders == std::vector<std::string>{shelf.path().string()});
  REQUIRE(test::pump(controller, [&] { return !vm.library.scanning && lists(vm, "stories/tiny"); }));
  REQUIRE(controller.apply({ui::ActionKind::RemoveLibraryFolder, 0, shelf.path().string()}));
  REQUIRE(test::pump(controller, [&] { return !vm.library.scanning; }));
  CHECK_FALSE(lists(vm, "stories/tiny"));
}

TEST_CASE("The file browser lists folders first, skips hidden entries and keeps its folder on a bad path", "[gui][library]") {
  test::ControllerSession s(false);
  test::TempDir dir;
  fs::create_directories(dir.path() / "zeta");
  fs::create_directories(dir.path() / ".hidden");
  fs::copy_file(test::model_path("stories260K.gguf"), dir.path() / "alpha.gguf");
  REQUIRE(s.controller.apply({ui::ActionKind::BrowseFolder, 0, dir.path().string()}));
  REQUIRE(s.vm.browser.entries.size() == 2);
  CHECK(s.vm.browser.entries[0].name == "zeta");
  CHECK(s.vm.browser.entries[0].is_folder);
  CHECK(s.vm.browser.entries[1].is_model);
  CHECK(s.vm.browser.entries[1].name == "alpha.gguf");
  CHECK(s.vm.browser.entries[1].size_bytes == fs::file_size(dir.path() / "alpha.gguf"));
  CHECK(s.vm.browser.error.empty());
  REQUIRE(s.controller.apply({ui::ActionKind::BrowseFolder, 0, dir.file("missing")}));
  CHECK(s.vm.browser.folder == dir.path().string());
  CHECK(s.vm.browser.error.find("cannot list") != std::string::npos);
  // Opening a model from the library or the browser leaves the library view for the chat.
  s.vm.ui.show_library = true;
  REQUIRE(s.controller.apply({ui::ActionKind::OpenModel, 0, dir.file("alpha.gguf")}));
  CHECK_FALSE(s.vm.ui.show_library);
}
