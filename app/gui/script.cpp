// Scripted mode: parse once, then run one line at a time, waiting (up to the timeout) where
// a line needs the model, an answer, a screenshot or time. Each action is followed by a few
// frames so the window has laid itself out before anything is captured.
#include "app/gui/script.h"

#include <climits>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>
#include <set>

#include "app/gui/emoji_input.h"
#include "engine/error.h"
#include "ui/emoji_clusters.h"
#include "ui/keyboard.h"
#include "ui/kv_report.h"
#include "ui/model_info.h"
#include "ui/panels.h"

namespace kvdesk::gui {
namespace {

constexpr int kSettleFrames = 3;

const std::set<std::string>& known_commands() {
  static const std::set<std::string> commands = {
      "new_chat", "system", "send", "wait_answer", "regenerate", "edit_last", "stop", "wait_model",
      "sleep", "open_panel", "select_conversation", "screenshot", "kv_type", "layout_report", "key", "export", "import", "set_context", "set_max_tokens", "model_info", "resize", "drop", "expect_status", "delete_message", "continue_last", "font_size", "cancel_load",
      "serve", "wait_served", "connect", "kv_report", "library", "library_folder", "wait_library", "browse", "variants", "type", "quit"};
  return commands;
}

const std::set<std::string>& commands_with_argument() {
  static const std::set<std::string> commands = {"system", "send", "edit_last", "sleep", "open_panel",
                                                 "select_conversation", "screenshot", "kv_type",
                                                 "layout_report", "key", "export", "import", "set_context",
                                                 "set_max_tokens", "resize", "drop", "expect_status", "delete_message", "font_size",
                                                 "serve", "wait_served", "connect", "kv_report", "library_folder", "browse", "variants", "type"};
  return commands;
}

// A decimal number in [1, 2^31).
bool positive_number(const std::string& text) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const long long value = std::stoll(text);
  return value >= 1 && value <= INT32_MAX;
}

// "W H" with each in [200, 8192].
std::optional<std::pair<int, int>> window_size(const std::string& text) {
  const size_t space = text.find(' ');
  if (space == std::string::npos) return std::nullopt;
  const std::string w = text.substr(0, space), h = text.substr(space + 1);
  if (!positive_number(w) || !positive_number(h)) return std::nullopt;
  const int width = std::stoi(w), height = std::stoi(h);
  if (width < 200 || height < 200 || width > 8192 || height > 8192) return std::nullopt;
  return std::pair{width, height};
}

// "off", or "on PORT [FILE]" with PORT in [0, 65535]: the port and the file ("" when none).
struct ServeArgument {
  bool on = false;
  int port = 0;
  std::string file;
};

std::optional<ServeArgument> serve_argument(const std::string& text) {
  if (text == "off") return ServeArgument{};
  if (text.rfind("on ", 0) != 0) return std::nullopt;
  const std::string rest = text.substr(3);
  const size_t space = rest.find(' ');
  const std::string port = rest.substr(0, space);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  if (std::stoi(port) > 65535) return std::nullopt;
  return ServeArgument{true, std::stoi(port), space == std::string::npos ? "" : rest.substr(space + 1)};
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw Error("cannot write '" + path + "'");
}

// Sets one of the selected conversation's own settings as its field in the chat panel would.
ui::UiAction conversation_setting(ui::ViewModel& vm, ui::SettingField field, int32_t value) {
  if (vm.chat.conversation_id == 0) throw Error("no conversation is selected (new_chat first)");
  ui::ConversationSettingsView& s = vm.chat.settings;
  if (field == ui::SettingField::ContextLength) {
    s.values.context_length = value;
  } else {
    s.values.max_tokens = value;
  }
  s.set_own(field, true);
  return {ui::ActionKind::SetConversationSettings};
}

}  // namespace

Script Script::load(const std::string& path, const std::string& screenshot_dir, double timeout_s) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the script '" + path + "'");
  Script script;
  script.path_ = path;
  script.screenshot_dir_ = screenshot_dir;
  script.timeout_s_ = timeout_s;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty() || text[0] == '#') continue;
    const size_t space = text.find(' ');
    Line line{number, text.substr(0, space), space == std::string::npos ? "" : text.substr(space + 1)};
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (!known_commands().count(line.command)) throw Error(where + "unknown command '" + line.command + "'");
    if (commands_with_argument().count(line.command) && line.argument.empty()) {
      throw Error(where + "'" + line.command + "' needs an argument");
    }
    if (line.command == "open_panel" && !ui::panel_from_name(line.argument)) {
      throw Error(where + "no panel named '" + line.argument + "'");
    }
    if (line.command == "key" && !ui::parse_key_chord(line.argument)) {
      throw Error(where + "'" + line.argument + "' is not a key chord (e.g. ctrl+n, shift+enter, esc)");
    }
    if ((line.command == "set_context" || line.command == "set_max_tokens" || line.command == "delete_message") &&
        !positive_number(line.argument)) {
      throw Error(where + "'" + line.command + "' needs a whole number above 0, not '" + line.argument + "'");
    }
    if (line.command == "resize" && !window_size(line.argument)) {
      throw Error(where + "resize needs a width and a height in pixels: resize W H (each 200 to 8192)");
    }
    if (line.command == "serve" && !serve_argument(line.argument)) {
      throw Error(where + "serve needs 'on PORT [NAME.txt]' (PORT 0 to 65535) or 'off'");
    }
    if (line.command == "wait_served" && !positive_number(line.argument)) {
      throw Error(where + "wait_served needs a whole number above 0, not '" + line.argument + "'");
    }
    if (line.command == "export" && line.argument.find(' ') == std::string::npos) {
      throw Error(where + "export needs a format and a path: export md|json PATH");
    }
    script.lines_.push_back(std::move(line));
  }
  return script;
}

Script::Status Script::step(Controller& controller, ui::ViewModel& vm, ScriptFrameRequest& frame) {
  if (!failure_.empty()) return Status::Failed;
  if (settle_frames_ > 0) {
    --settle_frames_;
    return Status::Running;
  }
  if (next_ >= lines_.size()) return Status::Done;
  const Line& line = lines_[next_];
  if (!line_started_) {
    line_started_ = true;
    line_start_ = Clock::now();
  }
  const Outcome outcome = run(line, controller, vm, frame);
  if (!failure_.empty()) return Status::Failed;
  if (outcome == Outcome::Quit) return Status::Done;
  if (outcome == Outcome::Wait) {
    if (std::chrono::duration<double>(Clock::now() - line_start_).count() > timeout_s_) {
      fail(line, "timed out after " + std::to_string(int(timeout_s_)) + " s");
      return Status::Failed;
    }
    return Status::Running;
  }
  ++next_;
  line_started_ = false;
  settle_frames_ = kSettleFrames;
  return Status::Running;
}

Script::Outcome Script::wait_for_model(const ui::ViewModel& vm) {
  if (vm.model.state == ui::ModelState::Failed) throw Error("the model failed to load: " + vm.model.error);
  if (vm.model.state == ui::ModelState::None) throw Error("no model is open (pass --model)");
  return vm.model.state == ui::ModelState::Loaded ? Outcome::Next : Outcome::Wait;
}

Script::Outcome Script::run(const Line& line, Controller& controller, ui::ViewModel& vm, ScriptFrameRequest& frame) {
  using ui::ActionKind;
  const std::string& c = line.command;
  const std::string& arg = line.argument;
  auto act = [&](ui::UiAction action) {
    if (!controller.apply(action)) throw Error(vm.status.message);
    return Outcome::Next;
  };
  try {
    if (c == "quit") return Outcome::Quit;
    if (c == "new_chat") return act({ActionKind::NewChat});
    if (c == "system") return act({ActionKind::SetSystemPrompt, 0, arg});
    if (c == "stop") return act({ActionKind::Stop});
    if (c == "wait_model") return wait_for_model(vm);
    if (c == "send" || c == "regenerate" || c == "variants" || c == "edit_last") {
      if (wait_for_model(vm) == Outcome::Wait) return Outcome::Wait;
      if (c == "send") return act({ActionKind::Send, 0, arg});
      if (c == "regenerate") return act({ActionKind::Regenerate});
      if (c == "variants") return act({ActionKind::Variants, std::stoll(arg)});
      for (auto it = vm.chat.messages.rbegin(); it != vm.chat.messages.rend(); ++it) {
        if (it->role == ui::MessageRole::User) return act({ActionKind::EditResend, it->id, arg});
      }
      throw Error("no user message to edit");
    }
    if (c == "continue_last") {
      if (wait_for_model(vm) == Outcome::Wait) return Outcome::Wait;
      if (vm.chat.messages.empty()) throw Error("no answer to continue");
      return act({ActionKind::ContinueAnswer, vm.chat.messages.back().id});
    }
    if (c == "delete_message") {
      const size_t n = size_t(std::stoul(arg));
      if (n > vm.chat.messages.size()) {
        throw Error("the conversation shows " + std::to_string(vm.chat.messages.size()) + " messages");
      }
      return act({ActionKind::DeleteMessage, vm.chat.messages[n - 1].id});
    }
    if (c == "wait_answer") {
      if (controller.streaming()) return Outcome::Wait;
      if (!controller.last_failure().empty()) throw Error("the answer failed: " + controller.last_failure());
      return Outcome::Next;
    }
    if (c == "sleep") {
      return std::chrono::duration<double>(Clock::now() - line_start_).count() < std::stod(arg) ? Outcome::Wait
                                                                                             : Outcome::Next;
    }
    if (c == "kv_type") {
      if (wait_for_model(vm) == Outcome::Wait) return Outcome::Wait;
      vm.ui.kv_edit.k_type = vm.ui.kv_edit.v_type = arg;
      return act({ActionKind::ReconfigureKv});
    }
    if (c == "open_panel") {
      vm.ui.panel = *ui::panel_from_name(arg);
      vm.ui.panel_requested = true;
      return Outcome::Next;
    }
    if (c == "select_conversation") {
      const size_t n = size_t(std::stoul(arg));
      if (n < 1 || n > vm.conversations.size()) {
        throw Error("there are " + std::to_string(vm.conversations.size()) + " conversations");
      }
      return act({ActionKind::SelectConversation, vm.conversations[n - 1].id});
    }
    if (c == "key") return press_key(*ui::parse_key_chord(arg));
    if (c == "type") return type_text(arg, vm);
    if (c == "export") {
      const size_t space = arg.find(' ');
      return act({ActionKind::ExportConversation, 0, arg.substr(0, space), arg.substr(space + 1)});
    }
    if (c == "import") return act({ActionKind::ImportConversation, 0, arg});
    if (c == "set_context" || c == "set_max_tokens") {
      return act(conversation_setting(vm, c == "set_context" ? ui::SettingField::ContextLength : ui::SettingField::MaxTokens,
                                      std::stoi(arg)));
    }
    if (c == "model_info") return show_model_info(line, vm);
    if (c == "font_size") return act({ActionKind::SetFontSize, 0, arg});
    if (c == "cancel_load") return act({ActionKind::CancelModelLoad});
    if (c == "drop") {
      frame.drop_path = arg;
      return Outcome::Next;
    }
    if (c == "expect_status") return expect_status(arg, vm);
    if (c == "resize") return resize_window(*window_size(arg), frame);
    if (c == "serve") return serve(arg, controller, vm);
    if (c == "wait_served") return vm.serve.served >= std::stoull(arg) ? Outcome::Next : Outcome::Wait;
    if (c == "connect") {
      const size_t space = arg.find(' ');
      return act({ActionKind::ConnectRemote, 0, arg.substr(0, space), space == std::string::npos ? "" : arg.substr(space + 1)});
    }
    if (c == "kv_report") return write_kv_report(arg, vm);
    if (c == "library") {
      vm.ui.show_library = true;
      return Outcome::Next;
    }
    if (c == "library_folder") return act({ActionKind::AddLibraryFolder, 0, arg});
    if (c == "wait_library") return vm.library.scanning || vm.library.summary.empty() ? Outcome::Wait : Outcome::Next;
    if (c == "browse") {
      vm.ui.browser_purpose = ui::BrowsePurpose::OpenModel;
      return act({ActionKind::BrowseFolder, 0, arg});
    }
    if (c == "layout_report") {
      write_text_file(screenshot_dir_ + "/" + arg, vm.ui.layout.text());
      return Outcome::Next;
    }
    if (c == "screenshot") {
      if (!screenshot_requested_) {
        screenshot_requested_ = true;
        frame = ScriptFrameRequest{};
        frame.screenshot_path = screenshot_dir_ + "/" + arg;
        return Outcome::Wait;
      }
      if (!frame.screenshot_done) return Outcome::Wait;
      screenshot_requested_ = false;
      if (!frame.screenshot_error.empty()) throw Error(frame.screenshot_error);
      return Outcome::Next;
    }
  } catch (const std::exception& e) {   // kvdesk::Error, or a number that did not parse
    fail(line, e.what());
    return Outcome::Wait;
  }
  fail(line, "unknown command");
  return Outcome::Wait;
}

// Opens the Model tab once the model is loaded; prints its text, and writes it to ARG beside the
// screenshots when the line names a file.
Script::Outcome Script::show_model_info(const Line& line, ui::ViewModel& vm) {
  if (wait_for_model(vm) == Outcome::Wait || vm.model.weight_types.empty()) return Outcome::Wait;
  vm.ui.panel = ui::Panel::Model;
  vm.ui.panel_requested = true;
  const std::string text = ui::model_info_text(vm);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!line.argument.empty()) write_text_file(screenshot_dir_ + "/" + line.argument, text);
  return Outcome::Next;
}

// Serves over HTTP at Settings' host on the line's port (or stops), writing the URL it listens
// on to the named file beside the screenshots; the file appears only once the port is bound.
Script::Outcome Script::serve(const std::string& argument, Controller& controller, ui::ViewModel& vm) {
  const ServeArgument a = *serve_argument(argument);
  if (a.on) vm.ui.serve_edit.port = a.port;
  if (!controller.apply({ui::ActionKind::ServeHttp, a.on ? 1 : 0})) throw Error(vm.status.message);
  if (!a.file.empty()) {   // whole or not there: written aside, then renamed
    const std::string path = screenshot_dir_ + "/" + a.file;
    write_text_file(path + ".part", vm.serve.url + "\n");
    std::filesystem::rename(path + ".part", path);
  }
  return Outcome::Next;
}

// A remote server's figures are read on a thread of their own: the report waits for two reads
// more than there were when the line began, so the one it shows began after the line did.
Script::Outcome Script::write_kv_report(const std::string& name, const ui::ViewModel& vm) {
  if (vm.remote.connected) {
    if (!stats_reads_at_start_) stats_reads_at_start_ = vm.remote.stats_reads;
    if (vm.model.state != ui::ModelState::Loaded || vm.remote.stats_reads < *stats_reads_at_start_ + 2) return Outcome::Wait;
    stats_reads_at_start_.reset();
  }
  write_text_file(screenshot_dir_ + "/" + name, ui::kv_report_text(vm));
  return Outcome::Next;
}

// Waits (up to the line timeout) for the status line to say `text`: what an action or a model
// load reported may arrive a few frames later, from the engine.
Script::Outcome Script::expect_status(const std::string& text, const ui::ViewModel& vm) {
  if (vm.status.message.find(text) != std::string::npos) return Outcome::Next;
  if (std::chrono::duration<double>(Clock::now() - line_start_).count() > timeout_s_) {
    throw Error("the status line says '" + vm.status.message + "'");
  }
  return Outcome::Wait;
}

// Asks the frame loop for the new window size, then waits until the window has it.
Script::Outcome Script::resize_window(std::pair<int, int> size, ScriptFrameRequest& frame) {
  if (!resize_requested_) {
    resize_requested_ = true;
    frame.resize_width = size.first;
    frame.resize_height = size.second;
    frame.resize_done = false;
    return Outcome::Wait;
  }
  if (!frame.resize_done) return Outcome::Wait;
  resize_requested_ = false;
  return Outcome::Next;
}

// The chord is held down for one frame (the panels see it pressed), then let go; the actions it
// asked for are carried out by the frame loop like a user's.
Script::Outcome Script::press_key(const ui::KeyChord& chord) {
  if (!key_down_) {
    ui::set_chord_down(chord, true);
    key_down_ = true;
    return Outcome::Wait;
  }
  ui::set_chord_down(chord, false);
  key_down_ = false;
  return Outcome::Next;
}

// The composer is given the keyboard focus, which takes hold over the next two frames (ImGui
// reads no typed characters in the frame a field becomes active); then the text arrives one
// character at a time as GLFW reports typing (what is not valid UTF-8 is left out: a keyboard
// never sends it).
Script::Outcome Script::type_text(const std::string& text, ui::ViewModel& vm) {
  constexpr int kFocusFrames = 2;
  if (typing_frames_ == 0) vm.ui.focus_composer = true;
  if (typing_frames_ < kFocusFrames) {
    ++typing_frames_;
    return Outcome::Wait;
  }
  typing_frames_ = 0;
  for (size_t i = 0; i < text.size();) {
    const DecodedChar c = decode_utf8(text, i);
    if (c.valid) add_typed_character(c.code_point);
    i += c.length;
  }
  return Outcome::Next;
}

void Script::fail(const Line& line, const std::string& why) {
  failure_ = path_ + ":" + std::to_string(line.number) + ": " + line.command +
             (line.argument.empty() ? "" : " " + line.argument) + ": " + why;
}

}  // namespace kvdesk::gui
