// Images in memory and the decoders that make them: JPEG (libjpeg-turbo), PNG (libpng), WebP
// (libwebp), GIF (giflib; the first frame) and BMP (ours), each to 8-bit RGB. Every length,
// offset and dimension of the input is checked; bad input is an Error naming the format, the
// value and the limit, never a crash (tests/fuzz/fuzz-image.cpp).
//
//   auto img = load_image_file("cat.jpg");            // or decode_image(bytes)
//   if (!img) { fprintf(stderr, "%s\n", img.error().message.c_str()); return 1; }
//   uint8_t red = img->rgb[(y * img->width + x) * 3 + 0];
//
// Pixel values follow stb_image (what llama.cpp's mtmd decodes with) wherever the formats leave
// a choice: alpha is dropped (not blended), 16-bit samples keep their high byte, gamma and
// colour profiles are ignored, a GIF's transparent pixels are black. docs/vision.md lists the
// few differences (JPEG's IDCT and chroma upsampling).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace minfer {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3], rows top to bottom
};

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kGif, kBmp };
std::string_view image_format_name(ImageFormat f);  // "JPEG", "PNG", ... "unknown"

// The format from the first bytes (magic numbers), whatever the file name says.
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// What a decoder accepts. The defaults admit a 48-megapixel photo and refuse a decompression
// bomb before any pixel memory is allocated (the dimensions are checked from the header).
struct ImageLimits {
  static constexpr int kMaxSide = 32768;  // each side; keeps width * height * 3 in range
  uint64_t max_bytes = 64ull << 20;       // the encoded file
  uint64_t max_pixels = 50'000'000;       // width * height of the decoded image
};

Expected<Image> decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});
// Reads the file (refusing one over limits.max_bytes before reading it) and decodes it; errors
// name the path.
Expected<Image> load_image_file(const std::string& path, const ImageLimits& limits = {});

}  // namespace minfer
