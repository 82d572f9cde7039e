// kvdesk: the desktop app. Numbered phases as in ImGui's example_glfw_opengl3: options,
// window + GL context, ImGui, controller (store, model) + fonts, the frame loop, shutdown.
// One frame: engine events in -> panels drawn from the view model -> actions carried out
// -> rendered (and captured, in scripted mode) -> swapped.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/gui/app_options.h"
#include "app/gui/controller.h"
#include "app/gui/emoji_input.h"
#include "app/gui/font_atlas.h"
#include "app/gui/frame_stats.h"
#include "app/gui/gl_texture_cache.h"
#include "app/gui/model_file.h"
#include "app/gui/screenshot.h"
#include "app/gui/script.h"
#include "engine/error.h"
#include "ui/emoji_text.h"
#include "ui/emoji_text_field.h"
#include "ui/font_size.h"
#include "ui/fonts.h"
#include "ui/panels.h"

namespace {

using namespace kvdesk;
using Clock = std::chrono::steady_clock;

// While nothing streams the loop sleeps until input or an engine event arrives, waking a few
// times a second for the statistics; scripts and streaming answers keep frames coming.
// Frames are also capped at 60 a second: every token wakes the loop, and a frame per token
// would take the CPU the engine needs.
constexpr double kIdleWaitS = 0.25;
constexpr double kBusyWaitS = 1.0 / 60.0;
constexpr auto kMinFrameInterval = std::chrono::microseconds(16667);

// What GLFW's window callbacks report between frames; the window's user pointer points here.
struct WindowEvents {
  std::vector<std::string> dropped;   // paths dropped on the window since the last frame, in order
  float content_scale = 1.0f;         // the monitor's, as last reported (HiDPI: 1.5, 2, ...)
};

void on_drop(GLFWwindow* window, int count, const char** paths) {
  auto* events = static_cast<WindowEvents*>(glfwGetWindowUserPointer(window));
  if (!events) return;
  for (int i = 0; i < count; ++i) events->dropped.emplace_back(paths[i]);
}

// Moving the window to a monitor of another scale: the fonts follow on the next frame.
void on_content_scale(GLFWwindow* window, float x_scale, float y_scale) {
  auto* events = static_cast<WindowEvents*>(glfwGetWindowUserPointer(window));
  if (events) events->content_scale = std::max(x_scale, y_scale);
}

void glfw_error(int code, const char* description) { std::fprintf(stderr, "kvdesk: GLFW error %d: %s\n", code, description); }

GLFWwindow* create_window(const gui::AppOptions& options) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) return nullptr;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(options.width, options.height, "kvdesk", nullptr, nullptr);
  if (!window) return nullptr;
  glfwMakeContextCurrent(window);
  glfwSwapInterval(options.script_path.empty() ? 1 : 0);
  return window;
}

// ImGui's sizes (padding, spacing, scrollbars) at the monitor's content scale, as the fonts are;
// the colours, which the theme sets, are kept.
void scale_style(float content_scale) {
  ImGuiStyle& style = ImGui::GetStyle();
  ImGuiStyle scaled;
  std::copy(std::begin(style.Colors), std::end(style.Colors), std::begin(scaled.Colors));
  scaled.WindowRounding = 0;
  scaled.ScaleAllSizes(content_scale);
  style = scaled;
}

void init_imgui(GLFWwindow* window) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;   // the layout is remembered in the database (Controller::remember_layout)
  ImGui::StyleColorsDark();
  scale_style(1.0f);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  gui::install_emoji_input(window);
  ImGui_ImplOpenGL3_Init("#version 330");
}

// The size the window had when kvdesk last closed, unless --width / --height ask for another.
void restore_window_size(GLFWwindow* window, const gui::AppOptions& options, const ui::WindowLayout& layout) {
  if (options.size_given || (layout.width == options.width && layout.height == options.height)) return;
  glfwSetWindowSize(window, layout.width, layout.height);
}

struct Frame {
  GLFWwindow* window;
  ui::ViewModel& vm;
  gui::FontAtlas& fonts;
  float style_scale;     // the content scale ImGui's sizes are scaled to
  gui::Controller& controller;
  gui::Script* script;
  WindowEvents& events;
  gui::GlTextureCache textures;
  gui::ScriptFrameRequest request;
  int resize_width = 0;   // a script's resize in progress: the size asked for
  int resize_height = 0;
  ui::Theme theme = ui::Theme::Dark;   // the colours ImGui has now
  int exit_code = 0;
  bool done = false;
};

// Script step before drawing; marks the frame loop done (with the exit code) when it ends.
void step_script(Frame& f) {
  if (!f.script) return;
  switch (f.script->step(f.controller, f.vm, f.request)) {
    case gui::Script::Status::Running: return;
    case gui::Script::Status::Done: f.done = true; return;
    case gui::Script::Status::Failed:
      std::fprintf(stderr, "kvdesk: script failed: %s\n", f.script->failure().c_str());
      f.exit_code = 1;
      f.done = true;
      return;
  }
}

// A script's resize: asked of the window once, done when the window reports the new size.
void resize_if_asked(Frame& f) {
  if (f.request.resize_width > 0) {
    f.resize_width = f.request.resize_width;
    f.resize_height = f.request.resize_height;
    f.request.resize_width = f.request.resize_height = 0;
    glfwSetWindowSize(f.window, f.resize_width, f.resize_height);
  }
  if (f.resize_width == 0) return;
  int width = 0, height = 0;
  glfwGetWindowSize(f.window, &width, &height);
  if (width != f.resize_width || height != f.resize_height) return;
  f.resize_width = f.resize_height = 0;
  f.request.resize_done = true;
}

// Files dropped on the window (a script's drop goes through the same callback): one of them is
// opened as the model picker opens a model; the controller explains a file that is not one.
void open_dropped(Frame& f) {
  if (!f.request.drop_path.empty()) {
    const char* path = f.request.drop_path.c_str();
    on_drop(f.window, 1, &path);
    f.request.drop_path.clear();
  }
  if (f.events.dropped.empty()) return;
  const std::string path = gui::dropped_model_path(f.events.dropped);
  f.events.dropped.clear();
  if (f.controller.apply({ui::ActionKind::OpenModel, 0, path})) f.vm.ui.model_path = path;
}

void capture_if_asked(Frame& f, int width, int height) {
  if (f.request.screenshot_path.empty()) return;
  try {
    gui::save_screenshot(f.request.screenshot_path, width, height);
  } catch (const Error& e) {
    f.request.screenshot_error = e.what();
  }
  f.request.screenshot_path.clear();
  f.request.screenshot_done = true;
}

// The fonts at the size the settings and the monitor ask for now, and ImGui's sizes at the
// monitor's scale: the atlas is rebuilt and its GL texture made again here, between frames,
// never between NewFrame and Render (ImGui 1.86 reads the atlas while a frame is open). The
// Korean atlas takes about a second to build. Emoji met in the last frame are drawn into it here.
void rebuild_fonts_if_needed(Frame& f) {
  const float scale = ui::usable_content_scale(f.events.content_scale);
  if (scale != f.style_scale) {
    scale_style(scale);
    f.style_scale = scale;
  }
  const float pixels = ui::font_pixels(f.events.content_scale, f.vm.ui.layout_prefs.font_size);
  if (pixels != f.fonts.size_px()) {
    f.fonts.build(pixels);
    f.vm.status.font_note = f.fonts.note();
  }
  f.fonts.update();
}

// 5. One frame. Returns the milliseconds spent before GL rendering (events, panels, actions):
// what kvdesk's own code costs, apart from the GPU (or, under Xvfb, llvmpipe) drawing it.
double run_frame(Frame& f) {
  const auto start = Clock::now();
  f.controller.update();                                   // 5a. engine events, statistics
  step_script(f);                                          // 5b. scripted actions, dropped files
  resize_if_asked(f);
  open_dropped(f);
  if (f.vm.ui.layout_prefs.theme != f.theme) {
    f.theme = f.vm.ui.layout_prefs.theme;
    ui::apply_theme(f.theme);
  }
  gui::hand_typed_characters_to_imgui();
  rebuild_fonts_if_needed(f);
  ImGui_ImplOpenGL3_NewFrame();                            // 5c. draw the panels
  ImGui_ImplGlfw_NewFrame();
  ImGui::NewFrame();
  const ui::UiActions actions = ui::draw_main_window(f.vm, f.fonts.fonts(), f.textures);
  ImGui::Render();
  ui::end_display_frame();
  ui::end_field_frame();
  if (f.fonts.waiting()) glfwPostEmptyEvent();             // the next frame draws the new emoji
  f.controller.apply_all(actions);                         // 5d. the user's actions
  const double ui_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  int width = 0, height = 0;                               // 5e. render, capture, swap
  glfwGetFramebufferSize(f.window, &width, &height);
  glViewport(0, 0, width, height);
  const ImVec4 background = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];   // the main window has none of its own
  glClearColor(background.x, background.y, background.z, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  capture_if_asked(f, width, height);
  glfwSwapBuffers(f.window);
  if (f.controller.quit_requested() || glfwWindowShouldClose(f.window)) f.done = true;
  return ui_ms;
}

int run(const gui::AppOptions& options) {
  // 1. The script first: a bad one fails before any window opens.
  std::optional<gui::Script> script;
  if (!options.script_path.empty()) script = gui::Script::load(options.script_path, options.screenshot_dir, options.script_timeout_s);
  // 2. Window and GL context.
  GLFWwindow* window = create_window(options);
  if (!window) {
    std::fprintf(stderr, "kvdesk: cannot open a window (no display? under CI use xvfb-run)\n");
    glfwTerminate();
    return 1;
  }
  // 3. ImGui (the fonts wait for the remembered font size).
  ui::ViewModel vm;
  init_imgui(window);
  gui::FrameStats frame_stats;      // every frame
  gui::FrameStats streaming_stats;  // frames while an answer streams
  gui::FrameStats streaming_ui;     // their part before GL rendering
  int exit_code = 0;
  {
    // 4. Controller: database, preferences, model. Its engine wakes the loop on events.
    gui::Controller controller(vm, [] { glfwPostEmptyEvent(); });
    controller.start(options);
    restore_window_size(window, options, vm.ui.layout_prefs);
    WindowEvents events;
    glfwSetWindowUserPointer(window, &events);
    glfwSetDropCallback(window, on_drop);
    glfwSetWindowContentScaleCallback(window, on_content_scale);
    float x_scale = 1, y_scale = 1;
    glfwGetWindowContentScale(window, &x_scale, &y_scale);
    events.content_scale = std::max(x_scale, y_scale);
    // The fonts at the remembered size for this monitor, built before the first frame (the Korean
    // atlas is turned into a texture on the first frame).
    gui::FontAtlas fonts;
    if (!fonts.colour_emoji()) std::fprintf(stderr, "kvdesk: %s\n", fonts.emoji_note().c_str());
    fonts.build(ui::font_pixels(events.content_scale, vm.ui.layout_prefs.font_size));
    vm.status.font_note = fonts.note();
    Frame frame{window, vm, fonts, 1.0f, controller, script ? &*script : nullptr, events, {}, {}};
    // 5. Frame loop.
    auto last_start = Clock::now() - kMinFrameInterval;
    while (!frame.done) {
      std::this_thread::sleep_until(last_start + kMinFrameInterval);
      glfwWaitEventsTimeout(script || controller.streaming() ? kBusyWaitS : kIdleWaitS);
      const auto start = Clock::now();
      last_start = start;
      const bool streaming = controller.streaming();
      const double ui_ms = run_frame(frame);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      frame_stats.add(ms);
      if (streaming) {
        streaming_stats.add(ms);
        streaming_ui.add(ui_ms);
      }
    }
    exit_code = frame.exit_code;
    if (options.frame_stats) {
      std::printf("kvdesk: font atlas: last built in %.1f ms (%.1f ms of it drawing emoji); %zu emoji met\n", fonts.build_ms(),
                  fonts.emoji_ms(), ui::emoji_table().size());
    }
    int width = 0, height = 0;
    glfwGetWindowSize(window, &width, &height);
    controller.remember_layout(width, height);
    glfwSetWindowUserPointer(window, nullptr);
  }
  // 6. Shutdown (the controller, and with it the engine thread, is gone by now).
  if (options.frame_stats) {
    std::printf("kvdesk: frame time, all frames: %s\n", frame_stats.summary().c_str());
    std::printf("kvdesk: frame time, while streaming: %s\n", streaming_stats.summary().c_str());
    std::printf("kvdesk: frame time, while streaming, before GL rendering: %s\n", streaming_ui.summary().c_str());
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  const gui::ParsedOptions parsed = gui::parse_app_options(argc, argv);
  if (parsed.exit_code) return *parsed.exit_code;
  try {
    return run(parsed.options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvdesk: error: %s\n", e.what());
    return 1;
  }
}
