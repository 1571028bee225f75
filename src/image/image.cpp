#include "image/image.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "image/decoders.h"

namespace minfer {

std::string_view image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  auto starts = [&](const char* magic, size_t at = 0) {
    const size_t n = std::strlen(magic);
    return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
  };
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (starts("RIFF") && starts("WEBP", 8)) return ImageFormat::kWebp;
  if (starts("GIF87a") || starts("GIF89a")) return ImageFormat::kGif;
  if (starts("BM")) return ImageFormat::kBmp;
  return ImageFormat::kUnknown;
}

namespace image_detail {

Status check_image_size(const char* format, uint64_t width, uint64_t height, const ImageLimits& limits) {
  if (width == 0 || height == 0) return make_error("image: {}: empty image ({}x{})", format, width, height);
  if (width > uint64_t(ImageLimits::kMaxSide) || height > uint64_t(ImageLimits::kMaxSide))
    return make_error("image: {}: {}x{} is over the limit of {} pixels per side", format, width, height,
                      ImageLimits::kMaxSide);
  if (width * height > limits.max_pixels)
    return make_error("image: {}: {}x{} is {} pixels, over the limit of {} pixels", format, width, height,
                      width * height, limits.max_pixels);
  return Status::ok();
}

}  // namespace image_detail

Expected<Image> decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.size() > limits.max_bytes)
    return make_error("image: {} bytes, over the limit of {} bytes", bytes.size(), limits.max_bytes);
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kJpeg: return image_detail::decode_jpeg(bytes, limits);
    case ImageFormat::kPng: return image_detail::decode_png(bytes, limits);
    case ImageFormat::kWebp: return image_detail::decode_webp(bytes, limits);
    case ImageFormat::kGif: return image_detail::decode_gif(bytes, limits);
    case ImageFormat::kBmp: return image_detail::decode_bmp(bytes, limits);
    case ImageFormat::kUnknown: break;
  }
  std::string head;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) head += fmt::format("{}{:02x}", i ? " " : "", bytes[i]);
  if (bytes.empty()) return make_error("image: empty input (0 bytes)");
  return make_error("image: unknown format (first bytes {}); JPEG, PNG, WebP, GIF and BMP are read", head);
}

Expected<Image> load_image_file(const std::string& path, const ImageLimits& limits) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_error("image '{}': cannot open: {}", path, std::strerror(errno));
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return make_error("image '{}': cannot seek", path);
  const long size = std::ftell(f.get());
  if (size < 0) return make_error("image '{}': cannot tell its size", path);
  if (uint64_t(size) > limits.max_bytes)
    return make_error("image '{}': {} bytes, over the limit of {} bytes", path, size, limits.max_bytes);
  std::rewind(f.get());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return make_error("image '{}': short read", path);
  auto img = decode_image(bytes, limits);
  if (!img) return make_error("image '{}': {}", path, img.error().message.substr(7));  // drop "image: "
  return img;
}

}  // namespace minfer
