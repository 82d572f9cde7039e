// Emoji raster: FreeType faces opened once (the colour font at its largest bitmap strike, with a
// HarfBuzz font over it for shaping), glyph bitmaps composed side by side on a premultiplied
// canvas and filtered down to the cell.
#include "ui/emoji_raster.h"

#include <ft2build.h>
#include FT_FREETYPE_H
#include <hb-ft.h>
#include <hb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "ui/emoji_clusters.h"

namespace kvdesk::ui {
namespace {

// Premultiplied RGBA, 4 floats a pixel in 0..1, row after row.
struct Canvas {
  int width = 0;
  int height = 0;
  std::vector<float> pixels;
};

// The length of [i, i + 1) inside [a, b).
float overlap(int i, float a, float b) { return std::max(0.0f, std::min(float(i + 1), b) - std::max(float(i), a)); }

// Area filter: each destination pixel averages the source area it covers (premultiplied, so
// transparent pixels do not darken the edges).
Canvas shrink(const Canvas& src, int width, int height) {
  Canvas dst{width, height, std::vector<float>(size_t(width) * size_t(height) * 4, 0.0f)};
  const float sx = float(src.width) / float(width);
  const float sy = float(src.height) / float(height);
  for (int y = 0; y < height; ++y) {
    const float y0 = float(y) * sy, y1 = y0 + sy;
    for (int x = 0; x < width; ++x) {
      const float x0 = float(x) * sx, x1 = x0 + sx;
      float sum[4] = {0, 0, 0, 0};
      float area = 0;
      for (int v = int(y0); v < std::min(src.height, int(std::ceil(y1))); ++v) {
        const float wy = overlap(v, y0, y1);
        for (int u = int(x0); u < std::min(src.width, int(std::ceil(x1))); ++u) {
          const float w = wy * overlap(u, x0, x1);
          const float* p = &src.pixels[(size_t(v) * size_t(src.width) + size_t(u)) * 4];
          for (int k = 0; k < 4; ++k) sum[k] += w * p[k];
          area += w;
        }
      }
      float* d = &dst.pixels[(size_t(y) * size_t(width) + size_t(x)) * 4];
      for (int k = 0; k < 4; ++k) d[k] = area > 0 ? sum[k] / area : 0.0f;
    }
  }
  return dst;
}

EmojiBitmap empty_cell(int width, int height) {
  EmojiBitmap cell;
  cell.width = std::max(width, 1);
  cell.height = std::max(height, 1);
  cell.rgba.assign(size_t(cell.width) * size_t(cell.height) * 4, 0);
  return cell;
}

void put(EmojiBitmap& cell, int x, int y, uint8_t r, uint8_t g, uint8_t b, uint8_t a) {
  if (x < 0 || y < 0 || x >= cell.width || y >= cell.height) return;
  uint8_t* p = &cell.rgba[(size_t(y) * size_t(cell.width) + size_t(x)) * 4];
  p[0] = r, p[1] = g, p[2] = b, p[3] = a;
}

// A canvas scaled to fit the cell (never up), centred, premultiplied alpha made straight.
EmojiBitmap fit_into_cell(const Canvas& canvas, int width, int height) {
  EmojiBitmap cell = empty_cell(width, height);
  const float scale = std::min({float(cell.width) / float(canvas.width), float(cell.height) / float(canvas.height), 1.0f});
  const int w = std::max(1, int(std::lround(float(canvas.width) * scale)));
  const int h = std::max(1, int(std::lround(float(canvas.height) * scale)));
  const Canvas small = shrink(canvas, w, h);
  const int left = (cell.width - w) / 2, top = (cell.height - h) / 2;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float* p = &small.pixels[(size_t(y) * size_t(w) + size_t(x)) * 4];
      const float a = p[3];
      if (a <= 0) continue;
      const auto channel = [a](float v) { return uint8_t(std::lround(std::clamp(v / a, 0.0f, 1.0f) * 255.0f)); };
      put(cell, left + x, top + y, channel(p[0]), channel(p[1]), channel(p[2]), uint8_t(std::lround(std::min(a, 1.0f) * 255.0f)));
    }
  }
  cell.colour = true;
  return cell;
}

EmojiBitmap box(int width, int height) {
  EmojiBitmap cell = empty_cell(width, height);
  const int x0 = cell.width / 6, x1 = cell.width - 1 - cell.width / 6;
  const int y0 = cell.height / 6, y1 = cell.height - 1 - cell.height / 6;
  for (int x = x0; x <= x1; ++x) put(cell, x, y0, 255, 255, 255, 255), put(cell, x, y1, 255, 255, 255, 255);
  for (int y = y0; y <= y1; ++y) put(cell, x0, y, 255, 255, 255, 255), put(cell, x1, y, 255, 255, 255, 255);
  return cell;
}

}  // namespace

const char* default_emoji_font() { return "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"; }

const std::vector<std::string>& default_fallback_fonts() {
  static const std::vector<std::string> paths = {
      "/usr/share/fonts/truetype/noto/NotoSansSymbols2-Regular.ttf",
      "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
      "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf",
      "/usr/share/fonts/truetype/nanum/NanumGothic.ttf",
      "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
  };
  return paths;
}

struct EmojiRaster::Fonts {
  FT_Library library = nullptr;
  FT_Face colour = nullptr;
  hb_font_t* shaper = nullptr;
  std::vector<FT_Face> fallbacks;
  std::string note;

  ~Fonts() {
    if (shaper) hb_font_destroy(shaper);
    if (colour) FT_Done_Face(colour);
    for (FT_Face face : fallbacks) FT_Done_Face(face);
    if (library) FT_Done_FreeType(library);
  }

  FT_Face open(const std::string& path) const {
    std::error_code ec;
    if (!library || !std::filesystem::is_regular_file(path, ec)) return nullptr;
    FT_Face face = nullptr;
    if (FT_New_Face(library, path.c_str(), 0, &face) != 0) return nullptr;
    return face;
  }

  // The colour font at its largest bitmap strike; false (and nothing kept) when it is not one.
  bool open_colour(const std::string& path) {
    FT_Face face = open(path);
    if (!face) return false;
    if (!FT_HAS_COLOR(face) || face->num_fixed_sizes < 1) {
      FT_Done_Face(face);
      return false;
    }
    int best = 0;
    for (int i = 1; i < face->num_fixed_sizes; ++i) {
      if (face->available_sizes[i].height > face->available_sizes[best].height) best = i;
    }
    if (FT_Select_Size(face, best) != 0) {
      FT_Done_Face(face);
      return false;
    }
    colour = face;
    shaper = hb_ft_font_create_referenced(face);
    return true;
  }

  // The cluster's glyphs in the colour font; empty when the font lacks any of them.
  std::vector<unsigned> shape(std::string_view cluster) const {
    hb_buffer_t* buffer = hb_buffer_create();
    hb_buffer_set_flags(buffer, HB_BUFFER_FLAG_REMOVE_DEFAULT_IGNORABLES);
    hb_buffer_add_utf8(buffer, cluster.data(), int(cluster.size()), 0, int(cluster.size()));
    hb_buffer_guess_segment_properties(buffer);
    hb_shape(shaper, buffer, nullptr, 0);
    unsigned count = 0;
    const hb_glyph_info_t* info = hb_buffer_get_glyph_infos(buffer, &count);
    std::vector<unsigned> glyphs;
    for (unsigned i = 0; i < count; ++i) {
      if (info[i].codepoint == 0) {
        glyphs.clear();
        break;
      }
      glyphs.push_back(info[i].codepoint);
    }
    hb_buffer_destroy(buffer);
    return glyphs;
  }

  // The glyphs' colour bitmaps side by side; an empty canvas when one cannot be loaded.
  Canvas compose(const std::vector<unsigned>& glyphs) const {
    struct Piece {
      int width, height;
      std::vector<float> pixels;
    };
    std::vector<Piece> pieces;
    for (unsigned glyph : glyphs) {
      if (FT_Load_Glyph(colour, glyph, FT_LOAD_COLOR) != 0) return {};
      const FT_Bitmap& bitmap = colour->glyph->bitmap;
      if (bitmap.width == 0 || bitmap.rows == 0) continue;
      if (bitmap.pixel_mode != FT_PIXEL_MODE_BGRA) return {};
      Piece piece{int(bitmap.width), int(bitmap.rows), std::vector<float>(size_t(bitmap.width) * bitmap.rows * 4)};
      for (unsigned y = 0; y < bitmap.rows; ++y) {
        const unsigned char* row = bitmap.buffer + std::ptrdiff_t(y) * bitmap.pitch;
        for (unsigned x = 0; x < bitmap.width; ++x) {
          float* p = &piece.pixels[(size_t(y) * bitmap.width + x) * 4];
          p[0] = float(row[x * 4 + 2]) / 255.0f;
          p[1] = float(row[x * 4 + 1]) / 255.0f;
          p[2] = float(row[x * 4 + 0]) / 255.0f;
          p[3] = float(row[x * 4 + 3]) / 255.0f;
        }
      }
      pieces.push_back(std::move(piece));
    }
    Canvas canvas;
    for (const Piece& piece : pieces) {
      canvas.width += piece.width;
      canvas.height = std::max(canvas.height, piece.height);
    }
    if (canvas.width == 0) return {};
    canvas.pixels.assign(size_t(canvas.width) * size_t(canvas.height) * 4, 0.0f);
    int left = 0;
    for (const Piece& piece : pieces) {
      const int top = (canvas.height - piece.height) / 2;
      for (int y = 0; y < piece.height; ++y) {
        std::copy_n(&piece.pixels[size_t(y) * size_t(piece.width) * 4], size_t(piece.width) * 4,
                    &canvas.pixels[(size_t(top + y) * size_t(canvas.width) + size_t(left)) * 4]);
      }
      left += piece.width;
    }
    return canvas;
  }

  // The first character in the first fallback font that has it, white with its coverage as alpha.
  bool draw_monochrome(char32_t c, EmojiBitmap& cell, int baseline) const {
    for (FT_Face face : fallbacks) {
      const FT_UInt index = FT_Get_Char_Index(face, c);
      if (index == 0 || FT_Set_Pixel_Sizes(face, 0, FT_UInt(cell.height)) != 0) continue;
      if (FT_Load_Glyph(face, index, FT_LOAD_RENDER) != 0) continue;
      const FT_GlyphSlot slot = face->glyph;
      if (slot->bitmap.pixel_mode != FT_PIXEL_MODE_GRAY) continue;
      const int left = (cell.width - int(slot->bitmap.width)) / 2;
      const int top = baseline - slot->bitmap_top;
      for (unsigned y = 0; y < slot->bitmap.rows; ++y) {
        const unsigned char* row = slot->bitmap.buffer + std::ptrdiff_t(y) * slot->bitmap.pitch;
        for (unsigned x = 0; x < slot->bitmap.width; ++x) {
          if (row[x]) put(cell, left + int(x), top + int(y), 255, 255, 255, row[x]);
        }
      }
      return true;
    }
    return false;
  }
};

EmojiRaster::EmojiRaster(const std::string& colour_font, const std::vector<std::string>& fallback_fonts)
    : fonts_(std::make_unique<Fonts>()) {
  if (FT_Init_FreeType(&fonts_->library) != 0) fonts_->library = nullptr;
  for (const std::string& path : fallback_fonts) {
    if (FT_Face face = fonts_->open(path)) fonts_->fallbacks.push_back(face);
  }
  if (fonts_->open_colour(colour_font)) {
    fonts_->note = "emoji: " + std::filesystem::path(colour_font).stem().string();
  } else {
    fonts_->note = "no colour emoji font at " + colour_font + " (install fonts-noto-color-emoji): emoji in one colour";
  }
}

EmojiRaster::~EmojiRaster() = default;

bool EmojiRaster::has_colour_font() const { return fonts_->shaper != nullptr; }

const std::string& EmojiRaster::note() const { return fonts_->note; }

EmojiBitmap EmojiRaster::draw(std::string_view cluster, int width, int height, int baseline) {
  const bool text_style = cluster.find("\xEF\xB8\x8E") != std::string_view::npos;   // U+FE0E
  const DecodedChar first = cluster.empty() ? DecodedChar{} : decode_utf8(cluster, 0);
  if (has_colour_font() && !text_style && first.valid) {
    const std::vector<unsigned> glyphs = fonts_->shape(cluster);
    if (!glyphs.empty()) {
      const Canvas canvas = fonts_->compose(glyphs);
      if (canvas.width > 0) return fit_into_cell(canvas, width, height);
    }
  }
  EmojiBitmap cell = empty_cell(width, height);
  if (first.valid && fonts_->draw_monochrome(first.code_point, cell, baseline)) return cell;
  return box(width, height);
}

}  // namespace kvdesk::ui
