// Layout report: what the panels needed against what they had in the last frame, recorded as
// they draw (the status line, table columns, the chat's messages). Scripts dump it and tests
// read it to check that nothing overlaps or clips at a window size, from the app's own layout
// data rather than pixels.
#pragma once
#include <string>
#include <vector>

namespace kvdesk::ui {

struct LayoutEntry {
  std::string where;   // "status line", "waste table: waste", ...
  float needed = 0;    // pixels the content needs
  float had = 0;       // pixels it was given
};

struct LayoutReport {
  float window_width = 0;
  float window_height = 0;
  std::vector<LayoutEntry> entries;

  void clear(float width, float height);
  void record(std::string where, float needed, float had);
  // The entries whose content did not fit (needed more than had, beyond half a pixel).
  std::vector<LayoutEntry> overflows() const;
  // One line per entry, "WHERE: needed N px, had M px[ OVERFLOW]", after a "window WxH" line.
  std::string text() const;
};

}  // namespace kvdesk::ui
