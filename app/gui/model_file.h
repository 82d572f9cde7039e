// A file the user hands the app as a model (typed in the model picker, or dropped on the
// window): what is wrong with it, said before the engine lets go of the model it has, and which
// of several dropped files to open.
#pragma once
#include <string>
#include <vector>

namespace kvdesk::gui {

// "" when `path` is a readable file that starts with GGUF's magic; else why not, for the status
// line. A file that passes can still fail the engine's full check as it loads.
std::string model_file_problem(const std::string& path);

// Of the paths dropped on the window together: the first named .gguf, else the first (whose
// problem the status line then explains); "" when none.
std::string dropped_model_path(const std::vector<std::string>& paths);

}  // namespace kvdesk::gui
