// The per-format decoders behind decode_image() (image.h); each checks the dimensions with
// check_image_size() before it allocates pixels. Not part of the library's interface.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "image/image.h"

namespace minfer::image_detail {

// "JPEG: 40000x30000 is 1200000000 pixels, over the limit of 50000000 pixels" and the like.
Status check_image_size(const char* format, uint64_t width, uint64_t height, const ImageLimits& limits);

Expected<Image> decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);
Expected<Image> decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits);
Expected<Image> decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits);
Expected<Image> decode_gif(std::span<const uint8_t> bytes, const ImageLimits& limits);
Expected<Image> decode_bmp(std::span<const uint8_t> bytes, const ImageLimits& limits);

}  // namespace minfer::image_detail
