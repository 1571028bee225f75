// PNG through libpng: palette and low-bit grey expanded to 8 bits, 16-bit samples to their
// high byte (png_set_strip_16, as stb_image), alpha and tRNS dropped, grey replicated to RGB,
// Adam7 handled by libpng. No gamma or colour-profile correction (neither does stb_image).
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include <png.h>

#include "image/decoders.h"

namespace minfer::image_detail {
namespace {

struct Reader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  char message[256] = {0};
};

void on_read(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->bytes.size() - r->pos) png_error(png, "truncated (the data ends early)");
  std::memcpy(out, r->bytes.data() + r->pos, n);
  r->pos += n;
}

[[noreturn]] void on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof r->message, "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

struct PngJob {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const ImageLimits* limits = nullptr;
  Image* img = nullptr;
  std::vector<png_bytep>* rows = nullptr;
  Status* size_ok = nullptr;
};

// false: the reader's message (or *size_ok) says why. No local with a destructor lives across
// libpng's longjmp.
bool run_png(PngJob* job) {
  png_structp png = job->png;
  png_infop info = job->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_user_limits(png, ImageLimits::kMaxSide, ImageLimits::kMaxSide);
  png_set_chunk_malloc_max(png, 8u << 20);  // text, ICC profile and other ancillary chunks
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  *job->size_ok = check_image_size("PNG", w, h, *job->limits);
  if (!*job->size_ok) return false;
  const int color = png_get_color_type(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_expand_gray_1_2_4_to_8(png);
    png_set_gray_to_rgb(png);
  }
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(w) * 3) png_error(png, "unexpected row layout after conversion to RGB");
  Image& img = *job->img;
  img.width = int(w);
  img.height = int(h);
  img.rgb.resize(size_t(w) * h * 3);
  job->rows->resize(h);
  for (png_uint_32 y = 0; y < h; ++y) (*job->rows)[y] = img.rgb.data() + size_t(y) * w * 3;
  png_read_image(png, job->rows->data());
  png_read_end(png, nullptr);
  return true;
}

}  // namespace

Expected<Image> decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  Image img;
  std::vector<png_bytep> rows;
  Status size_ok;
  Reader reader;
  reader.bytes = bytes;
  PngJob job;
  job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error, on_warning);
  if (job.png) job.info = png_create_info_struct(job.png);
  if (!job.png || !job.info) {
    png_destroy_read_struct(&job.png, nullptr, nullptr);
    return make_error("image: PNG: out of memory");
  }
  png_set_read_fn(job.png, &reader, on_read);
  job.limits = &limits;
  job.img = &img;
  job.rows = &rows;
  job.size_ok = &size_ok;
  const bool ok = run_png(&job);
  png_destroy_read_struct(&job.png, &job.info, nullptr);
  if (!size_ok) return size_ok.error();
  if (!ok) return make_error("image: PNG: {}", reader.message);
  return img;
}

}  // namespace minfer::image_detail
