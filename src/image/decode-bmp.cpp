// BMP, our own reader (no maintained Debian library decodes it): the Windows BITMAPINFOHEADER
// family (40, 52, 56, 108 and 124 bytes) and the OS/2 core header (12), 1/4/8-bit palettes,
// 16/24/32-bit direct colour with default or BI_BITFIELDS masks, bottom-up and top-down rows.
// RLE-compressed files are refused, as stb_image refuses them. A mask channel of n < 8 bits is
// widened by bit replication (31 -> 255), of more than 8 bits by taking its top 8 bits, which is
// what stb_image computes.
//
// File layout (little-endian):
//   0  "BM", u32 file size, u32 reserved, u32 offset of the pixel rows
//   14 u32 header size, then (core) u16 width, u16 height, u16 planes, u16 bpp
//                          (info) i32 width, i32 height (< 0: top-down), u16 planes, u16 bpp,
//                                 u32 compression, u32 image size, 2 x i32 resolution,
//                                 u32 colours used, u32 important, [masks R G B (A) from 52/56]
//   palette after the header (core: 3 bytes BGR per entry, info: 4 bytes BGRX)
//   rows padded to 4 bytes
#include <algorithm>
#include <bit>
#include <cstring>

#include "image/decoders.h"

namespace minfer::image_detail {
namespace {

constexpr uint32_t kBiRgb = 0, kBiRle8 = 1, kBiRle4 = 2, kBiBitfields = 3, kBiAlphaBitfields = 6;

uint32_t u16_at(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t u32_at(const uint8_t* p) { return u16_at(p) | u16_at(p + 2) << 16; }

// One colour channel described by a mask: 8 bits out of a pixel value.
struct Channel {
  int shift = 0;  // of the mask's lowest bit
  int bits = 0;
  explicit Channel(uint32_t mask = 0) {
    if (!mask) return;
    shift = std::countr_zero(mask);
    bits = std::popcount(mask);
  }
  uint8_t operator()(uint32_t v) const {
    if (bits == 0) return 0;
    uint32_t x = (v >> shift) & ((bits >= 32) ? 0xFFFFFFFFu : ((1u << bits) - 1));
    if (bits >= 8) return uint8_t(x >> (bits - 8));
    uint32_t out = 0;
    for (int have = 0; have < 8; have += bits) out |= (8 - have >= bits) ? x << (8 - have - bits) : x >> (have + bits - 8);
    return uint8_t(out);
  }
};

}  // namespace

Expected<Image> decode_bmp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  const uint8_t* b = bytes.data();
  const size_t n = bytes.size();
  if (n < 26) return make_error("image: BMP: truncated header ({} bytes)", n);
  const uint32_t data_offset = u32_at(b + 10);
  const uint32_t hsz = u32_at(b + 14);
  if (hsz != 12 && hsz != 40 && hsz != 52 && hsz != 56 && hsz != 108 && hsz != 124)
    return make_error("image: BMP: header size {} is not one of 12, 40, 52, 56, 108, 124", hsz);
  if (14 + uint64_t(hsz) > n) return make_error("image: BMP: truncated header ({} of {} bytes)", n - 14, hsz);
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = kBiRgb, n_colors = 0;
  uint32_t masks[4] = {0, 0, 0, 0};
  size_t palette_at = 14 + hsz;
  int palette_entry = 4;
  if (hsz == 12) {
    width = u16_at(b + 18);
    height = u16_at(b + 20);
    bpp = u16_at(b + 24);
    palette_entry = 3;
  } else {
    width = int32_t(u32_at(b + 18));
    height = int32_t(u32_at(b + 22));
    bpp = u16_at(b + 28);
    compression = u32_at(b + 30);
    n_colors = u32_at(b + 46);
    if (compression == kBiBitfields || compression == kBiAlphaBitfields) {
      const int n_masks = compression == kBiAlphaBitfields ? 4 : 3;
      size_t at = 54;  // masks are in the header from 52 bytes on, after a 40-byte one otherwise
      if (hsz == 40) {
        palette_at += size_t(n_masks) * 4;
        if (palette_at > n) return make_error("image: BMP: truncated colour masks");
      }
      // Within the header (or the 40-byte header's masks, checked above): a 52-byte header
      // holds 3 masks, not the alpha one BI_ALPHABITFIELDS names.
      const int n_read = hsz == 40 ? n_masks : std::min<int>(n_masks, int((hsz - 40) / 4));
      for (int i = 0; i < n_read; ++i) masks[i] = u32_at(b + at + size_t(i) * 4);
    }
  }
  const bool top_down = height < 0;
  if (top_down) height = -height;
  MINFER_TRY(check_image_size("BMP", uint64_t(width < 0 ? 0 : width), uint64_t(height), limits));
  if (compression == kBiRle8 || compression == kBiRle4)
    return make_error("image: BMP: RLE compression ({}) is not read", compression == kBiRle8 ? "RLE8" : "RLE4");
  if (compression != kBiRgb && compression != kBiBitfields && compression != kBiAlphaBitfields)
    return make_error("image: BMP: compression {} is not read (only uncompressed and bit fields)", compression);
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    return make_error("image: BMP: {} bits per pixel is not one of 1, 4, 8, 16, 24, 32", bpp);
  if (compression != kBiRgb && bpp != 16 && bpp != 32)
    return make_error("image: BMP: bit-field masks with {} bits per pixel", bpp);

  // Palette (1/4/8 bpp).
  uint8_t palette[256][3] = {};
  if (bpp <= 8) {
    uint32_t count = n_colors ? n_colors : (1u << bpp);
    if (count > 256) return make_error("image: BMP: {} palette colours, over the limit of 256", count);
    if (palette_at + uint64_t(count) * palette_entry > n) return make_error("image: BMP: truncated palette");
    for (uint32_t i = 0; i < count; ++i) {
      const uint8_t* p = b + palette_at + size_t(i) * palette_entry;
      palette[i][0] = p[2], palette[i][1] = p[1], palette[i][2] = p[0];
    }
  }
  if (compression == kBiRgb && bpp == 16) masks[0] = 0x7C00, masks[1] = 0x03E0, masks[2] = 0x001F;
  if (compression == kBiRgb && bpp == 32) masks[0] = 0xFF0000, masks[1] = 0xFF00, masks[2] = 0xFF;
  const Channel red(masks[0]), green(masks[1]), blue(masks[2]);

  const uint64_t row_bytes = ((uint64_t(width) * bpp + 31) / 32) * 4;
  if (data_offset < 14 + hsz || data_offset + row_bytes * uint64_t(height) > n)
    return make_error("image: BMP: pixel rows at {} need {} bytes, the file has {}", data_offset,
                      row_bytes * uint64_t(height), n < data_offset ? 0 : n - data_offset);
  Image img;
  img.width = int(width);
  img.height = int(height);
  img.rgb.resize(size_t(width) * size_t(height) * 3);
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = b + data_offset + size_t(row_bytes) * size_t(y);
    uint8_t* out = img.rgb.data() + size_t(top_down ? y : height - 1 - y) * size_t(width) * 3;
    for (int64_t x = 0; x < width; ++x, out += 3) {
      if (bpp <= 8) {
        const uint32_t bit = uint32_t(x) * bpp;
        const uint32_t idx = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
        std::memcpy(out, palette[idx], 3);
      } else if (bpp == 24) {
        const uint8_t* p = row + x * 3;
        out[0] = p[2], out[1] = p[1], out[2] = p[0];
      } else {
        const uint32_t v = bpp == 16 ? u16_at(row + x * 2) : u32_at(row + x * 4);
        out[0] = red(v), out[1] = green(v), out[2] = blue(v);
      }
    }
  }
  return img;
}

}  // namespace minfer::image_detail
