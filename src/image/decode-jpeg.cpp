// JPEG through libjpeg-turbo: the accurate integer IDCT (JDCT_ISLOW) and "fancy" (triangle
// filter) chroma upsampling, the pair closest to stb_image's decoder (measured in
// docs/vision.md). libjpeg reports errors through a callback that must not return; it
// longjmps back here, and only trivially destructible locals live between setjmp and the jump.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "image/decoders.h"

namespace minfer::image_detail {
namespace {

constexpr int kMaxScans = 1000;  // progressive files with more scans are a known CPU bomb

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (msg_level -1) mean corrupt or truncated data, which libjpeg would paper over with
// grey; they are errors here, except bytes between markers that decoders everywhere skip.
void on_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0 || cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
  on_error(cinfo);
}

void on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->progressive_mode && d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof err->message, "%d scans, over the limit of %d", d->input_scan_number,
                  kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

// CMYK as Adobe stores it (inverted): each channel times K / 255, rounded as stb_image does.
uint8_t mul255(int a, int b) {
  const int t = a * b + 128;
  return uint8_t((t + (t >> 8)) >> 8);
}

// Everything the decode touches lives here, outside the frame that calls setjmp, so nothing
// with a destructor is live across the jump.
struct JpegJob {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  jpeg_progress_mgr progress;
  const ImageLimits* limits;
  Image* img;
  std::vector<uint8_t>* row_buf;  // CMYK rows
  Status* size_ok;
};

// false: err.message says why (or *size_ok does).
bool run_jpeg(JpegJob* job, std::span<const uint8_t> bytes) {
  j_decompress_ptr cinfo = &job->cinfo;
  if (setjmp(job->err.jump)) return false;
  jpeg_create_decompress(cinfo);
  cinfo->progress = &job->progress;
  jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  *job->size_ok = check_image_size("JPEG", cinfo->image_width, cinfo->image_height, *job->limits);
  if (!*job->size_ok) return false;
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->mem->max_memory_to_use = long(job->limits->max_pixels) * 16 + (64l << 20);
  jpeg_start_decompress(cinfo);
  Image& img = *job->img;
  img.width = int(cinfo->output_width);
  img.height = int(cinfo->output_height);
  img.rgb.resize(size_t(img.width) * img.height * 3);
  if (cmyk) job->row_buf->resize(size_t(img.width) * 4);
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* out = img.rgb.data() + size_t(cinfo->output_scanline) * img.width * 3;
    JSAMPROW row = cmyk ? job->row_buf->data() : out;
    jpeg_read_scanlines(cinfo, &row, 1);
    if (cmyk) {
      for (int x = 0; x < img.width; ++x) {
        const uint8_t* p = job->row_buf->data() + size_t(x) * 4;
        out[x * 3 + 0] = mul255(p[0], p[3]);
        out[x * 3 + 1] = mul255(p[1], p[3]);
        out[x * 3 + 2] = mul255(p[2], p[3]);
      }
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

Expected<Image> decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  Image img;
  std::vector<uint8_t> row_buf;
  Status size_ok;
  auto job = std::make_unique<JpegJob>();
  std::memset(&job->cinfo, 0, sizeof job->cinfo);
  job->cinfo.err = jpeg_std_error(&job->err.pub);
  job->err.pub.error_exit = on_error;
  job->err.pub.emit_message = on_message;
  job->err.message[0] = '\0';
  job->progress.progress_monitor = on_progress;
  job->limits = &limits;
  job->img = &img;
  job->row_buf = &row_buf;
  job->size_ok = &size_ok;
  const bool ok = run_jpeg(job.get(), bytes);
  jpeg_destroy_decompress(&job->cinfo);
  if (!size_ok) return size_ok.error();
  if (!ok) return make_error("image: JPEG: {}", job->err.message);
  return img;
}

}  // namespace minfer::image_detail
