#include "image/preprocess.h"

#include <algorithm>
#include <cmath>

namespace minfer {

FloatImage normalize_image(const Image& img, const float mean[3], const float std[3]) {
  FloatImage out;
  out.width = img.width;
  out.height = img.height;
  out.data.resize(img.rgb.size());
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    for (size_t c = 0; c < 3; ++c) {
      const float v = float(img.rgb[i + c]) / 255.0f;
      out.data[i + c] = (v - mean[c]) / std[c];
    }
  }
  return out;
}

ImageSize smart_resize_size(int width, int height, int align, int min_pixels, int max_pixels, int longest_edge) {
  if (width <= 0 || height <= 0 || align <= 0) return {};
  const float f = float(align);
  auto round_to = [&](float x) { return int(std::round(x / f)) * align; };
  auto ceil_to = [&](float x) { return int(std::ceil(x / f)) * align; };
  auto floor_to = [&](float x) { return int(std::floor(x / f)) * align; };
  int w, h;
  if (longest_edge > 0) {
    const float scale = std::min(float(longest_edge) / float(width), float(longest_edge) / float(height));
    w = ceil_to(float(width) * scale);
    h = ceil_to(float(height) * scale);
  } else {
    w = std::max(align, round_to(float(width)));
    h = std::max(align, round_to(float(height)));
  }
  if (max_pixels > 0 && int64_t(h) * w > max_pixels) {
    const float beta = std::sqrt(float(height) * float(width) / float(max_pixels));
    h = std::max(align, floor_to(float(height) / beta));
    w = std::max(align, floor_to(float(width) / beta));
  } else if (min_pixels > 0 && int64_t(h) * w < min_pixels) {
    const float beta = std::sqrt(float(min_pixels) / (float(height) * float(width)));
    h = ceil_to(float(height) * beta);
    w = ceil_to(float(width) * beta);
  }
  return {w, h};
}

namespace {

// What preprocessing may create, whatever an mmproj's keys say (real models stay under 5
// megapixels: SmolVLM's 2048 x 2048, Qwen2.5-VL's 3.2 M).
constexpr int64_t kMaxPreprocessPixels = 64ll << 20;

Status check_size(const char* what, int w, int h) {
  if (w <= 0 || h <= 0 || w > ImageLimits::kMaxSide || h > ImageLimits::kMaxSide)
    return make_error("image: the {} would be {}x{} (sides 1..{} allowed)", what, w, h, ImageLimits::kMaxSide);
  if (int64_t(w) * h > kMaxPreprocessPixels)
    return make_error("image: the {} would be {}x{}, over the limit of {} pixels", what, w, h, kMaxPreprocessPixels);
  return Status::ok();
}

void add_tiles_of(PreprocessedImage& out, const Image& refined, int tile, const PreprocessParams& p) {
  for (int y = 0; y < refined.height; y += tile)
    for (int x = 0; x < refined.width; x += tile) {
      const Image t = crop_image(refined, x, y, std::min(tile, refined.width - x), std::min(tile, refined.height - y));
      out.tiles.push_back(normalize_image(t, p.mean, p.std));
    }
}

Expected<PreprocessedImage> idefics3(const Image& img, const PreprocessParams& p) {
  PreprocessedImage out;
  const int tile = p.image_size;
  if (p.longest_edge > 0 && p.min_pixels <= 0 && p.max_pixels <= 0) {
    // Longest side to longest_edge (the other side truncated, then made even), then each side
    // up to whole tiles, stretched; the overview is the refined image brought down to one tile.
    const double aspect = double(img.width) / img.height;
    int w, h;
    if (img.width >= img.height) {
      w = p.longest_edge;
      h = int(p.longest_edge / aspect);
      h += h % 2;
    } else {
      h = p.longest_edge;
      w = int(p.longest_edge * aspect);
      w += w % 2;
    }
    MINFER_TRY(check_size("resized image", w, h));
    out.grid_x = (w + tile - 1) / tile;
    out.grid_y = (h + tile - 1) / tile;
    MINFER_TRY(check_size("refined image", out.grid_x * tile, out.grid_y * tile));
    MINFER_TRY(check_size("overview", tile, tile));
    const Image resized = resize_image(img, w, h, p.filter);
    const Image refined = resize_image(resized, out.grid_x * tile, out.grid_y * tile, p.filter);
    out.overview = normalize_image(resize_image(refined, tile, tile, p.filter), p.mean, p.std);
    add_tiles_of(out, refined, tile, p);
    return out;
  }
  // Older files (no longest edge) or token limits: a smart resize to multiples of the tile.
  const ImageSize r = smart_resize_size(img.width, img.height, tile, std::max(0, p.min_pixels),
                                        std::max(0, p.max_pixels), p.longest_edge);
  MINFER_TRY(check_size("refined image", r.width, r.height));
  MINFER_TRY(check_size("overview", tile, tile));
  out.grid_x = int(std::ceil(float(r.width) / float(tile)));
  out.grid_y = int(std::ceil(float(r.height) / float(tile)));
  out.overview = normalize_image(resize_fit(img, tile, tile, p.filter_overview, p.pad_overview, {0, 0, 0}), p.mean,
                                 p.std);
  add_tiles_of(out, resize_fit(img, r.width, r.height, p.filter_refined, p.pad_refined, {0, 0, 0}), tile, p);
  return out;
}

}  // namespace

Expected<PreprocessedImage> preprocess_image(const Image& img, const PreprocessParams& p) {
  if (img.width <= 0 || img.height <= 0 || img.rgb.size() != size_t(img.width) * img.height * 3)
    return make_error("image: empty or inconsistent image ({}x{}, {} bytes)", img.width, img.height, img.rgb.size());
  if (p.image_size <= 0 || p.patch_size <= 0 || p.n_merge <= 0 || p.image_size > ImageLimits::kMaxSide ||
      int64_t(p.patch_size) * p.n_merge > ImageLimits::kMaxSide)
    return make_error("image: preprocessing needs image_size and patch_size * n_merge in 1..{} (got {}, {}, {})",
                      ImageLimits::kMaxSide,
                      p.image_size, p.patch_size, p.n_merge);
  switch (p.kind) {
    case PreprocessKind::kFixedSize: {
      MINFER_TRY(check_size("resized image", p.image_size, p.image_size));
      PreprocessedImage out;
      const Image r = resize_fit(img, p.image_size, p.image_size, p.filter, p.pad, p.pad_color);
      out.tiles.push_back(normalize_image(r, p.mean, p.std));
      return out;
    }
    case PreprocessKind::kDynamicSize: {
      if (p.min_pixels <= 0 || p.max_pixels <= 0)
        return make_error("image: dynamic-size preprocessing needs min and max pixels > 0 (got {}, {})", p.min_pixels,
                          p.max_pixels);
      const ImageSize s = smart_resize_size(img.width, img.height, p.patch_size * p.n_merge, p.min_pixels,
                                            p.max_pixels, 0);
      MINFER_TRY(check_size("resized image", s.width, s.height));
      PreprocessedImage out;
      out.tiles.push_back(normalize_image(resize_fit(img, s.width, s.height, p.filter, p.pad, p.pad_color), p.mean, p.std));
      return out;
    }
    case PreprocessKind::kIdefics3:
      return idefics3(img, p);
  }
  return make_error("image: unknown preprocessing kind");
}

}  // namespace minfer
