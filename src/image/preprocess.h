// From a decoded image to the float tiles a vision encoder reads, per family, as llama.cpp's
// mtmd prepares them (tests/oracle/vision compares the floats bit for bit):
//   kFixedSize    (Gemma 3, SigLIP): scale to fit image_size x image_size keeping the aspect
//                 ratio, centred on black (mtmd pads; Hugging Face's processor stretches)
//   kDynamicSize  (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): "smart resize": each side rounded to a
//                 multiple of patch_size * n_merge, the area brought within [min, max] pixels
//   kIdefics3     (SmolVLM, Idefics3): longest side to longest_edge, then up to whole
//                 image_size tiles, cut into a grid of tiles plus a whole-image overview
// Every tile is normalised per channel: (v / 255 - mean) / std, in float.
//
//   PreprocessParams p = ...;   // vision/clip-hparams.h reads them from an mmproj GGUF
//   auto pre = preprocess_image(img, p);
//   if (!pre) return pre.error();
//   for (const FloatImage& t : pre->tiles) encode(t);
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "image/image.h"
#include "image/resize.h"

namespace minfer {

enum class PreprocessKind { kFixedSize, kDynamicSize, kIdefics3 };

struct PreprocessParams {
  PreprocessKind kind = PreprocessKind::kFixedSize;
  int image_size = 0;    // the square side (fixed size), the tile side (Idefics3)
  int patch_size = 0;
  int n_merge = 1;       // patches merged per side by the projector
  int longest_edge = 0;  // Idefics3: the long side after the first resize (0: none)
  int min_pixels = -1;   // dynamic size (and Idefics3 with token limits): -1 = none
  int max_pixels = -1;
  ResizeFilter filter = ResizeFilter::kBicubic;
  FitPad pad = FitPad::kCeil;
  std::array<uint8_t, 3> pad_color = {0, 0, 0};
  // Idefics3 without longest_edge, or with token limits: the overview and the refined image
  ResizeFilter filter_overview = ResizeFilter::kBicubic;
  ResizeFilter filter_refined = ResizeFilter::kBicubic;
  FitPad pad_overview = FitPad::kNone;
  FitPad pad_refined = FitPad::kCeil;
  float mean[3] = {0.0f, 0.0f, 0.0f};
  float std[3] = {1.0f, 1.0f, 1.0f};
};

struct FloatImage {
  int width = 0;
  int height = 0;
  std::vector<float> data;  // [height][width][3], normalised
};

struct PreprocessedImage {
  std::vector<FloatImage> tiles;  // row-major over the grid (one image when there is no grid)
  FloatImage overview;            // Idefics3: the whole image at tile size; empty otherwise
  int grid_x = 0;                 // tiles per row and column (0: no grid)
  int grid_y = 0;
  bool has_overview() const { return overview.width > 0; }
};

// An error when the parameters are unusable (a zero size) or the image would resize to nothing
// (a 1 x 5000 strip under Idefics3's longest-edge rule).
Expected<PreprocessedImage> preprocess_image(const Image& img, const PreprocessParams& p);

// "Smart resize" (Qwen2-VL's processor, mtmd's calc_size_preserved_ratio): the size an image
// of width x height resizes to, sides multiples of align, area within [min_pixels, max_pixels]
// (<= 0: no bound); longest_edge > 0 first scales the long side to it. Float arithmetic as mtmd.
struct ImageSize {
  int width = 0;
  int height = 0;
};
ImageSize smart_resize_size(int width, int height, int align, int min_pixels, int max_pixels, int longest_edge);

// v / 255, then (v - mean[c]) / std[c], in float.
FloatImage normalize_image(const Image& img, const float mean[3], const float std[3]);

}  // namespace minfer
