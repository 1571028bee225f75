// minfer-vision-preprocess: minfer's side of tests/oracle/vision: decodes an image, preprocesses
// it for an mmproj's projector and writes the float tiles in the format of
// tests/oracle/vision/mtmd-preprocess-oracle.cpp, so the two can be compared bit for bit.
//
//   minfer-vision-preprocess MMPROJ IMAGE OUT.bin [--rgb OUT.rgb]
//   minfer-vision-preprocess MMPROJ --raw W H FILE.rgb OUT.bin
//
// OUT.bin: "MPRE" u32 n_images, i32 grid_x, i32 grid_y, u32 has_overview, then per image (the
// overview first when present) i32 width, i32 height, f32 [height][width][3].
// OUT.rgb: i32 width, i32 height, u8 [height][width][3] (the decoded image).
// MMPROJ "-" only decodes (OUT.bin is not written). MINFER_IMAGE_MIN_TOKENS /
// MINFER_IMAGE_MAX_TOKENS: the token limits of clip_preprocess_params.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "vision/clip-hparams.h"

namespace {

void put_i32(std::FILE* f, int32_t v) { std::fwrite(&v, 4, 1, f); }

void put_image(std::FILE* f, const minfer::FloatImage& img) {
  put_i32(f, img.width);
  put_i32(f, img.height);
  std::fwrite(img.data.data(), sizeof(float), img.data.size(), f);
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "minfer-vision-preprocess: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace minfer;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MMPROJ IMAGE OUT.bin [--rgb OUT.rgb] | MMPROJ --raw W H FILE.rgb OUT.bin\n", argv[0]);
    return 2;
  }
  Image img;
  std::string out_path, rgb_path;
  if (std::string(argv[2]) == "--raw") {
    if (argc < 7) return fail("--raw W H FILE.rgb OUT.bin");
    img.width = std::stoi(argv[3]);
    img.height = std::stoi(argv[4]);
    std::FILE* f = std::fopen(argv[5], "rb");
    if (!f) return fail(std::string("cannot open ") + argv[5]);
    img.rgb.resize(size_t(img.width) * img.height * 3);
    const size_t got = std::fread(img.rgb.data(), 1, img.rgb.size(), f);
    std::fclose(f);
    if (got != img.rgb.size()) return fail("raw size mismatch");
    out_path = argv[6];
  } else {
    auto decoded = load_image_file(argv[2]);
    if (!decoded) return fail(decoded.error().message);
    img = std::move(*decoded);
    out_path = argv[3];
    if (argc >= 6 && std::string(argv[4]) == "--rgb") rgb_path = argv[5];
  }
  if (!rgb_path.empty()) {
    std::FILE* f = std::fopen(rgb_path.c_str(), "wb");
    if (!f) return fail("cannot write " + rgb_path);
    put_i32(f, img.width);
    put_i32(f, img.height);
    std::fwrite(img.rgb.data(), 1, img.rgb.size(), f);
    std::fclose(f);
  }
  if (std::string(argv[1]) == "-") return 0;
  auto file = GgufFile::open(argv[1]);
  if (!file) return fail(file.error().message);
  auto hp = read_clip_vision_hparams(*file);
  if (!hp) return fail(hp.error().message);
  auto env_int = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : -1;
  };
  auto pre = preprocess_image(
      img, clip_preprocess_params(*hp, env_int("MINFER_IMAGE_MIN_TOKENS"), env_int("MINFER_IMAGE_MAX_TOKENS")));
  if (!pre) return fail(pre.error().message);
  std::FILE* f = std::fopen(out_path.c_str(), "wb");
  if (!f) return fail("cannot write " + out_path);
  std::fwrite("MPRE", 1, 4, f);
  put_i32(f, int32_t(pre->tiles.size() + (pre->has_overview() ? 1 : 0)));
  put_i32(f, pre->grid_x);
  put_i32(f, pre->grid_y);
  put_i32(f, pre->has_overview() ? 1 : 0);
  if (pre->has_overview()) put_image(f, pre->overview);
  for (const FloatImage& t : pre->tiles) put_image(f, t);
  std::fclose(f);
  return 0;
}
