// mtmd-preprocess-oracle: llama.cpp's own image path, for measuring ours against it. Compiled
// from the tools/mtmd sources of the llama.cpp tree that scripts/setup.sh unpacks (clip.cpp,
// mtmd-image.cpp, models/*.cpp) against the prebuilt libggml of the same version; nothing of it
// is linked into minfer.
//
//   mtmd-preprocess-oracle MMPROJ IMAGE OUT.bin [--rgb OUT.rgb]
//   mtmd-preprocess-oracle MMPROJ --raw W H FILE.rgb OUT.bin
//
// IMAGE is decoded as mtmd-helper does (stb_image, 3 channels); --raw feeds RGB8 bytes instead
// (our decoder's output, or formats stb does not read). The preprocessor is the one mtmd's
// init_vision picks for the projector type. OUT.bin (little-endian):
//   "MPRE" u32 n_images, i32 grid_x, i32 grid_y, u32 has_overview,
//   then per image (the overview first when present, then the entries in order):
//   i32 width, i32 height, f32 pixels[height][width][3]
// OUT.rgb: i32 width, i32 height, u8 pixels[height][width][3] (the decoded image).
// MMPROJ "-" only decodes (OUT.bin is not written). MINFER_IMAGE_MIN_TOKENS /
// MINFER_IMAGE_MAX_TOKENS set clip's image_min_tokens / image_max_tokens (llama.cpp's
// --image-min-tokens / --image-max-tokens).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-backend.h"

#include "clip.h"
#include "clip-impl.h"
#include "clip-model.h"
#include "mtmd-image.h"

#ifndef MINFER_LLAMA_BINS_DEFAULT
#define MINFER_LLAMA_BINS_DEFAULT ""
#endif

#define STB_IMAGE_IMPLEMENTATION
#include "stb/stb_image.h"

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void put_i32(std::FILE* f, int32_t v) { std::fwrite(&v, 4, 1, f); }

void put_image(std::FILE* f, const clip_image_f32& img) {
  put_i32(f, img.nx());
  put_i32(f, img.ny());
  const std::vector<float>& buf = img.get_ro_buf();
  std::fwrite(buf.data(), sizeof(float), buf.size(), f);
}

std::unique_ptr<mtmd_image_preprocessor> make_preprocessor(clip_ctx* ctx) {
  switch (clip_get_projector_type(ctx)) {
    case PROJECTOR_TYPE_GEMMA3:
      return std::make_unique<mtmd_image_preprocessor_fixed_size>(ctx);
    case PROJECTOR_TYPE_IDEFICS3:
      return std::make_unique<mtmd_image_preprocessor_idefics3>(ctx);
    case PROJECTOR_TYPE_QWEN2VL:
    case PROJECTOR_TYPE_QWEN25VL:
    case PROJECTOR_TYPE_QWEN3VL:
      return std::make_unique<mtmd_image_preprocessor_dyn_size>(ctx);
    default:
      throw std::runtime_error("projector type not handled by this oracle");
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 4) {
      std::fprintf(stderr, "usage: %s MMPROJ IMAGE OUT.bin [--rgb OUT.rgb] | MMPROJ --raw W H FILE.rgb OUT.bin\n", argv[0]);
      return 2;
    }
    const std::string mmproj = argv[1];
    clip_image_u8 img;
    std::string out_path, rgb_path;
    if (std::string(argv[2]) == "--raw") {
      if (argc < 7) throw std::runtime_error("--raw W H FILE.rgb OUT.bin");
      const int w = std::stoi(argv[3]), h = std::stoi(argv[4]);
      std::vector<uint8_t> rgb = read_file(argv[5]);
      if (rgb.size() != size_t(w) * h * 3) throw std::runtime_error("raw size mismatch");
      img.set_size({w, h}, false);
      img.cpy_buf(rgb);
      out_path = argv[6];
    } else {
      std::vector<uint8_t> bytes = read_file(argv[2]);
      int nx = 0, ny = 0, nc = 0;
      uint8_t* data = stbi_load_from_memory(bytes.data(), int(bytes.size()), &nx, &ny, &nc, 3);
      if (!data) throw std::runtime_error(std::string("stb_image: ") + stbi_failure_reason());
      std::vector<uint8_t> rgb(data, data + size_t(nx) * ny * 3);
      stbi_image_free(data);
      img.set_size({nx, ny}, false);
      img.cpy_buf(rgb);
      out_path = argv[3];
      if (argc >= 6 && std::string(argv[4]) == "--rgb") rgb_path = argv[5];
    }
    if (!rgb_path.empty()) {
      std::FILE* f = std::fopen(rgb_path.c_str(), "wb");
      if (!f) throw std::runtime_error("cannot write " + rgb_path);
      put_i32(f, img.get_size().width);
      put_i32(f, img.get_size().height);
      std::fwrite(img.get_ro_buf().data(), 1, img.get_ro_buf().size(), f);
      std::fclose(f);
    }

    if (mmproj == "-") return 0;
    // ggml's CPU backends are loadable modules beside libggml.
    const char* bins = std::getenv("MINFER_LLAMA_BINS");
    ggml_backend_load_all_from_path(bins && *bins ? bins : MINFER_LLAMA_BINS_DEFAULT);
    if (ggml_backend_dev_count() == 0) throw std::runtime_error("no ggml backend could be loaded");
    clip_context_params params{};
    params.use_gpu = false;
    params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
    const char* min_tokens = std::getenv("MINFER_IMAGE_MIN_TOKENS");
    const char* max_tokens = std::getenv("MINFER_IMAGE_MAX_TOKENS");
    params.image_min_tokens = min_tokens && *min_tokens ? std::atoi(min_tokens) : -1;
    params.image_max_tokens = max_tokens && *max_tokens ? std::atoi(max_tokens) : -1;
    params.warmup = false;
    params.no_alloc = true;  // preprocessing reads no weights
    clip_init_result res = clip_init(mmproj.c_str(), params);
    if (!res.ctx_v) throw std::runtime_error("no vision encoder in " + mmproj);
    std::unique_ptr<mtmd_image_preprocessor> pre = make_preprocessor(res.ctx_v);
    mtmd_image_preproc_out out = pre->preprocess(img);

    std::FILE* f = std::fopen(out_path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + out_path);
    std::fwrite("MPRE", 1, 4, f);
    const bool ov = out.has_overview();
    put_i32(f, int32_t(out.entries.size() + (ov ? 1 : 0)));
    put_i32(f, out.grid_x);
    put_i32(f, out.grid_y);
    put_i32(f, ov ? 1 : 0);
    if (ov) put_image(f, out.overview);
    for (const clip_image_f32& e : out.entries) put_image(f, e);
    std::fclose(f);
    clip_free(res.ctx_v);
    if (res.ctx_a) clip_free(res.ctx_a);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mtmd-preprocess-oracle: %s\n", e.what());
    return 1;
  }
}
