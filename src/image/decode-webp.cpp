// WebP (lossy and lossless, still images) through libwebp; alpha is dropped. Animated files
// are refused: libwebp's simple API decodes still images only.
#include <webp/decode.h>

#include "image/decoders.h"

namespace minfer::image_detail {

Expected<Image> decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode st = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (st == VP8_STATUS_NOT_ENOUGH_DATA) return make_error("image: WebP: truncated header");
  if (st != VP8_STATUS_OK) return make_error("image: WebP: not a valid header (libwebp status {})", int(st));
  if (features.has_animation) return make_error("image: WebP: animated WebP is not read (still images only)");
  MINFER_TRY(check_image_size("WebP", uint64_t(features.width), uint64_t(features.height), limits));
  Image img;
  img.width = features.width;
  img.height = features.height;
  img.rgb.resize(size_t(img.width) * img.height * 3);
  const int stride = img.width * 3;
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), img.rgb.data(), img.rgb.size(), stride))
    return make_error("image: WebP: corrupt or truncated data");
  return img;
}

}  // namespace minfer::image_detail
