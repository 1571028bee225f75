// GIF through giflib: the first frame only, composed on the logical screen as stb_image does
// it: the canvas starts black, the frame's transparent pixels stay black, pixels outside the
// frame take the background colour when the background index is not 0. (stb_image writes that
// background colour with red and blue swapped; this decoder does not: docs/vision.md.)
// Records are read one by one and decoding stops after the first image, so later frames cost
// nothing (giflib's DGifSlurp would decode them all).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <gif_lib.h>

#include "image/decoders.h"

namespace minfer::image_detail {
namespace {

struct Reader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
};

int on_read(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<Reader*>(gif->UserData);
  const size_t k = std::min(size_t(n < 0 ? 0 : n), r->bytes.size() - r->pos);
  std::memcpy(out, r->bytes.data() + r->pos, k);
  r->pos += k;
  return int(k);
}

struct GifCloser {
  void operator()(GifFileType* g) const {
    int err = 0;
    DGifCloseFile(g, &err);
  }
};

Error gif_error(int code) {
  const char* msg = GifErrorString(code);
  return make_error("image: GIF: {}", msg ? msg : "decode error");
}

}  // namespace

Expected<Image> decode_gif(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  Reader reader{bytes, 0};
  int err = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&reader, on_read, &err));
  if (!gif) return gif_error(err);
  MINFER_TRY(check_image_size("GIF", uint64_t(gif->SWidth), uint64_t(gif->SHeight), limits));
  const int sw = gif->SWidth, sh = gif->SHeight;
  int transparent = -1;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) return gif_error(gif->Error);
    if (type == TERMINATE_RECORD_TYPE) return make_error("image: GIF: no image in the file");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) return gif_error(gif->Error);
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4) transparent = (ext[1] & 1) ? ext[4] : -1;
      while (ext) {
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) return gif_error(gif->Error);
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) return gif_error(gif->Error);
    const GifImageDesc& d = gif->Image;
    if (d.Left < 0 || d.Top < 0 || d.Width <= 0 || d.Height <= 0 || d.Left + d.Width > sw || d.Top + d.Height > sh)
      return make_error("image: GIF: frame {}x{} at ({}, {}) lies outside the {}x{} screen", d.Width, d.Height,
                        d.Left, d.Top, sw, sh);
    const ColorMapObject* cmap = d.ColorMap ? d.ColorMap : gif->SColorMap;
    if (!cmap) return make_error("image: GIF: no colour table for the first frame");
    Image img;
    img.width = sw;
    img.height = sh;
    img.rgb.assign(size_t(sw) * sh * 3, 0);
    const bool covers = d.Left == 0 && d.Top == 0 && d.Width == sw && d.Height == sh;
    if (!covers && gif->SBackGroundColor > 0 && gif->SColorMap && gif->SBackGroundColor < gif->SColorMap->ColorCount) {
      const GifColorType bg = gif->SColorMap->Colors[gif->SBackGroundColor];
      for (int y = 0; y < sh; ++y)
        for (int x = 0; x < sw; ++x) {
          if (y >= d.Top && y < d.Top + d.Height && x >= d.Left && x < d.Left + d.Width) continue;
          uint8_t* p = &img.rgb[(size_t(y) * sw + x) * 3];
          p[0] = bg.Red, p[1] = bg.Green, p[2] = bg.Blue;
        }
    }
    std::vector<GifPixelType> line(size_t(d.Width));
    auto put_row = [&](int row) {
      uint8_t* out = &img.rgb[(size_t(d.Top + row) * sw + d.Left) * 3];
      for (int x = 0; x < d.Width; ++x) {
        const int i = line[size_t(x)];
        if (i == transparent || i >= cmap->ColorCount) continue;  // stays black
        out[x * 3 + 0] = cmap->Colors[i].Red;
        out[x * 3 + 1] = cmap->Colors[i].Green;
        out[x * 3 + 2] = cmap->Colors[i].Blue;
      }
    };
    static constexpr int kPassStart[4] = {0, 4, 2, 1}, kPassStep[4] = {8, 8, 4, 2};
    for (int pass = 0; pass < (d.Interlace ? 4 : 1); ++pass) {
      const int start = d.Interlace ? kPassStart[pass] : 0, step = d.Interlace ? kPassStep[pass] : 1;
      for (int row = start; row < d.Height; row += step) {
        if (DGifGetLine(gif.get(), line.data(), d.Width) == GIF_ERROR) return gif_error(gif->Error);
        put_row(row);
      }
    }
    return img;
  }
}

}  // namespace minfer::image_detail
