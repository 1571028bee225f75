// Resampling of RGB8 images as Pillow's Image.resize does it (the convolution resampler of
// libImaging/Resample.c): a separable filter, horizontal pass then vertical, each output pixel a
// weighted sum of the input pixels under a filter widened by the scale when shrinking, weights
// normalised to 1 and held as fixed-point integers with 22 fractional bits, sums rounded by
// adding one half and shifting. llama.cpp's mtmd resizes the same way, so the two agree to the
// byte (tests/oracle/vision).
//
//   Image small = resize_image(img, 224, 224, ResizeFilter::kBicubic);
//   Image boxed = resize_fit(img, 896, 896, ResizeFilter::kBilinear, FitPad::kCeil, {0, 0, 0});
#pragma once

#include <array>
#include <cstdint>

#include "image/image.h"

namespace minfer {

enum class ResizeFilter { kBilinear, kBicubic, kLanczos };  // support 1, 2, 3 (Pillow's a = -0.5)

// How resize_fit places an image that keeps its aspect ratio inside a box:
//   kNone    stretch to the box (no padding)
//   kCeil    scale so the image fits, sides rounded up, centred with the offset rounded down
//   kNearest scale so the image fits, sides and offset rounded to nearest
enum class FitPad { kNone, kCeil, kNearest };

// Stretches `src` to width x height (an image of the same size is copied). Both sides >= 1.
Image resize_image(const Image& src, int width, int height, ResizeFilter filter);

// Resizes into a width x height box: stretched (kNone), or scaled to fit and centred on `pad`.
Image resize_fit(const Image& src, int width, int height, ResizeFilter filter, FitPad fit,
                 std::array<uint8_t, 3> pad);

// The w x h rectangle at (x, y); it must lie inside `src`.
Image crop_image(const Image& src, int x, int y, int w, int h);

}  // namespace minfer
