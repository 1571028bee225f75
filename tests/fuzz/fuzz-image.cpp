// libFuzzer target for the image path: any byte string must decode or fail cleanly under small
// limits, and a decoded image must be consistent and survive every family's preprocessing.
// The first byte picks the preprocessing; the rest is the file (seeds: tests/fuzz/corpus/image,
// one small file per format and variant).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "image/image.h"
#include "image/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  minfer::ImageLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_pixels = 1 << 20;  // keeps a run's memory and time bounded
  auto img = minfer::decode_image(std::span<const uint8_t>(data + 1, size - 1), limits);
  if (!img) return 0;
  if (img->width <= 0 || img->height <= 0 || img->rgb.size() != size_t(img->width) * img->height * 3) std::abort();
  minfer::PreprocessParams p;
  p.patch_size = 14;
  p.image_size = 56;
  p.n_merge = 2;
  switch (data[0] % 3) {
    case 0:
      p.kind = minfer::PreprocessKind::kFixedSize;
      p.filter = minfer::ResizeFilter::kBilinear;
      break;
    case 1:
      p.kind = minfer::PreprocessKind::kDynamicSize;
      p.min_pixels = 4 * 784, p.max_pixels = 64 * 784;
      break;
    default:
      p.kind = minfer::PreprocessKind::kIdefics3;
      p.filter = minfer::ResizeFilter::kLanczos;
      p.longest_edge = 112;
      break;
  }
  auto pre = minfer::preprocess_image(*img, p);
  size_t sum = 0;
  if (pre)
    for (const auto& t : pre->tiles) sum += t.data.size();
  return sum == 0xdeadbeef;
}
