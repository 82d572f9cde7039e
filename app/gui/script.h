// Scripted mode (tests, screenshots, measurements): kvdesk --script FILE replays one action
// per line through the same UiActions a user's clicks make. Lines: new_chat, system TEXT,
// send TEXT, wait_answer, regenerate, edit_last TEXT, stop, wait_model, sleep SECONDS,
// open_panel NAME, select_conversation N (1 = top of the list), screenshot NAME.png,
// kv_type NAME (K and V storage type; the pool is re-created), layout_report NAME.txt (the last
// frame's widths needed vs had, ui/layout_report.h, beside the screenshots), key CHORD (pressed
// for one frame, as ui/shortcuts.h spells it: ctrl+n, shift+enter, esc), export md|json PATH (the
// selected conversation), import PATH (a JSON export, then selected), set_context N and
// set_max_tokens N (the selected conversation's own context length and max new tokens, as
// its Conversation settings would set them), model_info [NAME.txt] (opens the Model tab once the
// model is loaded, prints its text, and writes it beside the screenshots when named), resize W H
// (the window's size in screen pixels, waited for), drop PATH (a file dropped on the window: the
// frame loop hands it to the same callback GLFW calls), expect_status TEXT (waits for the status
// line to contain TEXT; fails saying what it holds at the timeout), delete_message N (the Nth
// message shown, 1 = the first, with the replies under it), continue_last (the last answer, which
// must have stopped at its token limit, carried on), font_size N (the Settings font size, pixels
// at a content scale of 1: the fonts are rebuilt before the next frame), cancel_load (the model
// being loaded, as its Cancel button; fails when none is), serve on PORT [NAME.txt] (serve over
// HTTP at the address in Settings on PORT, 0 for any free one, and write the URL it listens on
// beside the screenshots) and serve off, wait_served N (until the HTTP server has ended N
// requests), connect URL [KEY] (chat through that server), kv_report NAME.txt (the KV panels'
// figures as text, ui/kv_report.h, beside the screenshots; with a remote server, once its
// statistics were read again after the line began), library (the middle column shows the model
// library), variants N (N new answers to the last question at once, as Variants: N under it), library_folder PATH (a folder the library also searches), wait_library (until its
// scan has finished), browse PATH (the file browser open at PATH, choosing a model), type TEXT
// (TEXT typed into the composer character by character, as the keyboard delivers it), quit.
// Blank lines and lines starting with # are skipped. A failing line ends the run.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/controller.h"
#include "ui/shortcuts.h"
#include "ui/view_model.h"

namespace kvdesk::gui {

// What the script asks of the frame loop: a screenshot after the next render.
struct ScriptFrameRequest {
  std::string screenshot_path;   // non-empty: save the back buffer here, then clear it
  bool screenshot_done = false;
  std::string screenshot_error;
  int resize_width = 0;          // > 0: set the window to this size, then set resize_done
  int resize_height = 0;
  bool resize_done = false;
  std::string drop_path;         // non-empty: dropped on the window in this frame, then cleared
};

class Script {
 public:
  enum class Status { Running, Done, Failed };

  // Reads and checks every line (unknown commands are errors here, before anything runs).
  // Throws kvdesk::Error naming the file and line.
  static Script load(const std::string& path, const std::string& screenshot_dir, double timeout_s);

  // Advances as far as it can in this frame.
  Status step(Controller& controller, ui::ViewModel& vm, ScriptFrameRequest& frame);
  // "FILE:LINE: TEXT: why", once step() returned Failed.
  const std::string& failure() const { return failure_; }

 private:
  struct Line {
    int number = 0;
    std::string command;
    std::string argument;
  };
  using Clock = std::chrono::steady_clock;
  enum class Outcome { Wait, Next, Quit };

  Outcome run(const Line& line, Controller& controller, ui::ViewModel& vm, ScriptFrameRequest& frame);
  Outcome wait_for_model(const ui::ViewModel& vm);
  Outcome press_key(const ui::KeyChord& chord);
  Outcome type_text(const std::string& text, ui::ViewModel& vm);
  Outcome show_model_info(const Line& line, ui::ViewModel& vm);
  Outcome expect_status(const std::string& text, const ui::ViewModel& vm);
  Outcome resize_window(std::pair<int, int> size, ScriptFrameRequest& frame);
  Outcome serve(const std::string& argument, Controller& controller, ui::ViewModel& vm);
  Outcome write_kv_report(const std::string& name, const ui::ViewModel& vm);
  void fail(const Line& line, const std::string& why);

  std::string path_;
  std::string screenshot_dir_;
  double timeout_s_ = 120;
  std::vector<Line> lines_;
  size_t next_ = 0;
  bool line_started_ = false;
  Clock::time_point line_start_;
  int settle_frames_ = 0;
  bool screenshot_requested_ = false;
  bool key_down_ = false;
  int typing_frames_ = 0;   // type: frames since the composer was asked for the focus
  bool resize_requested_ = false;
  std::optional<uint64_t> stats_reads_at_start_;   // kv_report: the remote's reads when the line began
  std::string failure_;
};

}  // namespace kvdesk::gui
