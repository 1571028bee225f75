#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace minfer {
namespace {

constexpr int kPrecisionBits = 22;  // 32 - 8 (pixel) - 2 (headroom for sums of weights > 1)

double filter_support(ResizeFilter f) {
  switch (f) {
    case ResizeFilter::kBilinear: return 1.0;
    case ResizeFilter::kBicubic: return 2.0;
    case ResizeFilter::kLanczos: return 3.0;
  }
  return 1.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  const double px = x * 3.141592653589793238462643383279502884;
  return std::sin(px) / px;
}

double filter_weight(ResizeFilter f, double x) {
  switch (f) {
    case ResizeFilter::kLanczos:
      return (x >= -3.0 && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0;
    case ResizeFilter::kBilinear:
      x = std::fabs(x);
      return x < 1.0 ? 1.0 - x : 0.0;
    case ResizeFilter::kBicubic: {
      constexpr double a = -0.5;  // Pillow's; PyTorch and ggml use -0.75
      x = std::fabs(x);
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
  }
  return 0.0;
}

// The taps of one axis: output i reads inputs [first[i], first[i] + count[i]) with
// weights[i * ksize + k].
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

Taps make_taps(int in_size, int out_size, ResizeFilter f) {
  const double scale = double(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);  // widen only when shrinking
  const double support = filter_support(f) * filterscale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weights.assign(size_t(out_size) * size_t(t.ksize), 0);
  std::vector<double> w(size_t(t.ksize));
  const double fixed_one = std::ldexp(1.0, kPrecisionBits);
  const double ss = 1.0 / filterscale;  // a product, not a quotient: the rounding is Pillow's
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(int(center - support + 0.5), 0);
    const int hi = std::min(int(center + support + 0.5), in_size);
    const int n = hi - lo;
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
      w[size_t(k)] = filter_weight(f, (k + lo - center + 0.5) * ss);
      sum += w[size_t(k)];
    }
    for (int k = 0; k < n; ++k) {
      const double v = sum != 0.0 ? w[size_t(k)] / sum : w[size_t(k)];
      // Pillow rounds half away from zero, then truncates.
      t.weights[size_t(i) * t.ksize + k] = int32_t(v * fixed_one + (v < 0 ? -0.5 : 0.5));
    }
    t.first[size_t(i)] = lo;
    t.count[size_t(i)] = n;
  }
  return t;
}

uint8_t clamp8(int32_t v) { return uint8_t(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// src [rows][in_w][3] -> [rows][out_w][3]
std::vector<uint8_t> pass_horizontal(const uint8_t* src, int in_w, int rows, int out_w, const Taps& t) {
  std::vector<uint8_t> out(size_t(out_w) * rows * 3);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = src + size_t(y) * in_w * 3;
    uint8_t* dst = out.data() + size_t(y) * out_w * 3;
    for (int x = 0; x < out_w; ++x) {
      const int32_t* k = &t.weights[size_t(x) * t.ksize];
      const uint8_t* p = row + size_t(t.first[size_t(x)]) * 3;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int j = 0; j < t.count[size_t(x)]; ++j, p += 3) {
        s0 += p[0] * k[j];
        s1 += p[1] * k[j];
        s2 += p[2] * k[j];
      }
      dst[x * 3 + 0] = clamp8(s0 >> kPrecisionBits);
      dst[x * 3 + 1] = clamp8(s1 >> kPrecisionBits);
      dst[x * 3 + 2] = clamp8(s2 >> kPrecisionBits);
    }
  }
  return out;
}

// src [in_h][width][3] -> [out_h][width][3]
std::vector<uint8_t> pass_vertical(const uint8_t* src, int width, int out_h, const Taps& t) {
  const size_t row_len = size_t(width) * 3;
  std::vector<uint8_t> out(row_len * out_h);
  std::vector<int32_t> acc(row_len);
  for (int y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    const int32_t* k = &t.weights[size_t(y) * t.ksize];
    for (int j = 0; j < t.count[size_t(y)]; ++j) {
      const uint8_t* row = src + size_t(t.first[size_t(y)] + j) * row_len;
      for (size_t i = 0; i < row_len; ++i) acc[i] += row[i] * k[j];
    }
    uint8_t* dst = out.data() + size_t(y) * row_len;
    for (size_t i = 0; i < row_len; ++i) dst[i] = clamp8(acc[i] >> kPrecisionBits);
  }
  return out;
}

}  // namespace

Image resize_image(const Image& src, int width, int height, ResizeFilter filter) {
  MINFER_ASSERT(width > 0 && height > 0 && src.width > 0 && src.height > 0);
  Image out;
  out.width = width;
  out.height = height;
  if (width == src.width && height == src.height) {
    out.rgb = src.rgb;
    return out;
  }
  const uint8_t* p = src.rgb.data();
  std::vector<uint8_t> tmp;
  if (width != src.width) {
    tmp = pass_horizontal(p, src.width, src.height, width, make_taps(src.width, width, filter));
    p = tmp.data();
  }
  if (height != src.height) {
    out.rgb = pass_vertical(p, width, height, make_taps(src.height, height, filter));
  } else {
    out.rgb = std::move(tmp);
  }
  return out;
}

Image resize_fit(const Image& src, int width, int height, ResizeFilter filter, FitPad fit,
                 std::array<uint8_t, 3> pad) {
  if (width == src.width && height == src.height) return src;
  if (fit == FitPad::kNone) return resize_image(src, width, height, filter);
  // float, as mtmd computes the scale
  const float scale = std::min(float(width) / float(src.width), float(height) / float(src.height));
  int w, h, off_x, off_y;
  if (fit == FitPad::kNearest) {
    w = std::min(int(std::round(float(src.width) * scale)), width);
    h = std::min(int(std::round(float(src.height) * scale)), height);
    off_x = int(std::round(float(width - w) / 2.0f));
    off_y = int(std::round(float(height - h) / 2.0f));
  } else {
    w = std::min(int(std::ceil(float(src.width) * scale)), width);
    h = std::min(int(std::ceil(float(src.height) * scale)), height);
    off_x = (width - w) / 2;
    off_y = (height - h) / 2;
  }
  const Image inner = resize_image(src, std::max(w, 1), std::max(h, 1), filter);
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(size_t(width) * height * 3);
  for (size_t i = 0; i < out.rgb.size(); i += 3) out.rgb[i] = pad[0], out.rgb[i + 1] = pad[1], out.rgb[i + 2] = pad[2];
  for (int y = 0; y < inner.height; ++y) {
    const int dy = y + off_y;
    if (dy < 0 || dy >= height) continue;
    for (int x = 0; x < inner.width; ++x) {
      const int dx = x + off_x;
      if (dx < 0 || dx >= width) continue;
      const uint8_t* s = &inner.rgb[(size_t(y) * inner.width + x) * 3];
      uint8_t* d = &out.rgb[(size_t(dy) * width + dx) * 3];
      d[0] = s[0], d[1] = s[1], d[2] = s[2];
    }
  }
  return out;
}

Image crop_image(const Image& src, int x, int y, int w, int h) {
  MINFER_ASSERT(x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= src.width && y + h <= src.height);
  Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(size_t(w) * h * 3);
  for (int r = 0; r < h; ++r)
    std::copy_n(&src.rgb[(size_t(y + r) * src.width + x) * 3], size_t(w) * 3, &out.rgb[size_t(r) * w * 3]);
  return out;
}

}  // namespace minfer
