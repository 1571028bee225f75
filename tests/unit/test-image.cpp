// The image library: format sniffing, decoders on files written by the format libraries
// themselves (libpng's simplified API, libjpeg, libwebp) and on hand-made BMPs, the limits and
// the errors for bad input, Pillow-style resizing and the per-family preprocessing. Decoded
// pixels and preprocessed floats are checked against llama.cpp's mtmd in tests/oracle/vision.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include "image/image.h"
#include "image/preprocess.h"
#include "image/resize.h"

namespace minfer {
namespace {

Image gradient(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.rgb[(size_t(y) * w + x) * 3];
      p[0] = uint8_t(x * 255 / (w > 1 ? w - 1 : 1));
      p[1] = uint8_t(y * 255 / (h > 1 ? h - 1 : 1));
      p[2] = uint8_t((x * 7 + y * 13) % 256);
    }
  return img;
}

std::vector<uint8_t> encode_png(const Image& img) {
  png_image pi;
  std::memset(&pi, 0, sizeof pi);
  pi.version = PNG_IMAGE_VERSION;
  pi.width = uint32_t(img.width);
  pi.height = uint32_t(img.height);
  pi.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&pi, nullptr, &size, 0, img.rgb.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&pi, out.data(), &size, 0, img.rgb.data(), 0, nullptr));
  out.resize(size);
  return out;
}

std::vector<uint8_t> encode_jpeg(const Image& img, int quality) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = JDIMENSION(img.width);
  c.image_height = JDIMENSION(img.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&img.rgb[size_t(c.next_scanline) * img.width * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

std::vector<uint8_t> encode_webp_lossless(const Image& img) {
  uint8_t* buf = nullptr;
  const size_t n = WebPEncodeLosslessRGB(img.rgb.data(), img.width, img.height, img.width * 3, &buf);
  std::vector<uint8_t> out(buf, buf + n);
  WebPFree(buf);
  return out;
}

void put16(std::vector<uint8_t>& b, uint32_t v) { b.push_back(uint8_t(v)), b.push_back(uint8_t(v >> 8)); }
void put32(std::vector<uint8_t>& b, uint32_t v) { put16(b, v & 0xFFFF), put16(b, v >> 16); }

// A BMP with a 40-byte header; rows as given (already padded), masks after the header when set.
std::vector<uint8_t> make_bmp(int w, int h, int bpp, uint32_t compression, const std::vector<uint32_t>& masks,
                              const std::vector<uint8_t>& palette, const std::vector<uint8_t>& rows) {
  std::vector<uint8_t> b;
  const uint32_t offset = uint32_t(14 + 40 + masks.size() * 4 + palette.size());
  b.push_back('B'), b.push_back('M');
  put32(b, uint32_t(offset + rows.size()));
  put32(b, 0);
  put32(b, offset);
  put32(b, 40);
  put32(b, uint32_t(w));
  put32(b, uint32_t(h));
  put16(b, 1);
  put16(b, uint32_t(bpp));
  put32(b, compression);
  put32(b, uint32_t(rows.size()));
  put32(b, 2835), put32(b, 2835);
  put32(b, uint32_t(palette.size() / 4));
  put32(b, 0);
  for (uint32_t m : masks) put32(b, m);
  b.insert(b.end(), palette.begin(), palette.end());
  b.insert(b.end(), rows.begin(), rows.end());
  return b;
}

TEST(ImageDecode, SniffsFormatsByMagic) {
  using namespace std::string_literals;
  auto sniff = [](const std::string& s) {
    return sniff_image_format(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  };
  EXPECT_EQ(sniff("\xFF\xD8\xFF\xE0"s), ImageFormat::kJpeg);
  EXPECT_EQ(sniff("\x89PNG\r\n\x1a\n...."s), ImageFormat::kPng);
  EXPECT_EQ(sniff("RIFF\x10\0\0\0WEBPVP8L"s), ImageFormat::kWebp);
  EXPECT_EQ(sniff("GIF89a"s), ImageFormat::kGif);
  EXPECT_EQ(sniff("BM...."s), ImageFormat::kBmp);
  EXPECT_EQ(sniff("RIFF\x10\0\0\0WAVE"s), ImageFormat::kUnknown);
  EXPECT_EQ(sniff(""s), ImageFormat::kUnknown);
}

TEST(ImageDecode, PngAndLosslessWebpRoundTrip) {
  const Image src = gradient(37, 23);
  for (const auto& bytes : {encode_png(src), encode_webp_lossless(src)}) {
    auto img = decode_image(bytes);
    ASSERT_TRUE(img) << img.error().message;
    EXPECT_EQ(img->width, 37);
    EXPECT_EQ(img->height, 23);
    EXPECT_EQ(img->rgb, src.rgb);
  }
}

TEST(ImageDecode, JpegIsCloseToTheSource) {
  Image src = gradient(64, 48);
  for (size_t i = 2; i < src.rgb.size(); i += 3) src.rgb[i] = uint8_t(255 - src.rgb[i - 2] / 2);  // smooth
  auto img = decode_image(encode_jpeg(src, 100));
  ASSERT_TRUE(img) << img.error().message;
  ASSERT_EQ(img->rgb.size(), src.rgb.size());
  int worst = 0;
  for (size_t i = 0; i < src.rgb.size(); ++i) worst = std::max(worst, std::abs(int(img->rgb[i]) - int(src.rgb[i])));
  EXPECT_LE(worst, 12);
}

TEST(ImageDecode, BmpVariants) {
  // 2x2, 24-bit, bottom-up: the first row in the file is the bottom one. Rows pad to 4 bytes.
  const std::vector<uint8_t> rows24 = {0, 0, 255, 0, 255, 0, 0, 0,       // bottom: red, green
                                       255, 0, 0, 255, 255, 255, 0, 0};  // top: blue, white
  auto a = decode_image(make_bmp(2, 2, 24, 0, {}, {}, rows24));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->rgb, (std::vector<uint8_t>{0, 0, 255, 255, 255, 255, 255, 0, 0, 0, 255, 0}));
  // Top-down (negative height).
  auto b = decode_image(make_bmp(2, -2, 24, 0, {}, {}, rows24));
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->rgb, (std::vector<uint8_t>{255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255}));
  // 16-bit 5-6-5 bit fields: 5 and 6-bit channels widen by bit replication.
  const std::vector<uint8_t> rows16 = {0xFF, 0xFF, 0x1F, 0x00};  // white, pure blue
  auto c = decode_image(make_bmp(2, 1, 16, 3, {0xF800, 0x07E0, 0x001F}, {}, rows16));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->rgb, (std::vector<uint8_t>{255, 255, 255, 0, 0, 255}));
  // 1-bit palette.
  const std::vector<uint8_t> pal = {0, 0, 0, 0, 10, 20, 30, 0};  // BGRX: black, (30, 20, 10)
  auto d = decode_image(make_bmp(3, 1, 1, 0, {}, pal, {0b01000000, 0, 0, 0}));
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->rgb, (std::vector<uint8_t>{0, 0, 0, 30, 20, 10, 0, 0, 0}));
}

TEST(ImageDecode, ErrorsNameTheProblem) {
  auto msg = [](std::vector<uint8_t> bytes, ImageLimits lim = {}) {
    auto r = decode_image(bytes, lim);
    EXPECT_FALSE(r);
    return r ? std::string() : r.error().message;
  };
  EXPECT_NE(msg({'h', 'e', 'l', 'l', 'o'}).find("unknown format (first bytes 68 65 6c 6c 6f)"), std::string::npos);
  EXPECT_NE(msg({}).find("empty"), std::string::npos);
  const std::vector<uint8_t> png = encode_png(gradient(40, 30));
  ImageLimits small;
  small.max_bytes = 100;
  EXPECT_NE(msg(png, small).find(fmt::format("{} bytes, over the limit of 100 bytes", png.size())), std::string::npos);
  ImageLimits few;
  few.max_pixels = 1000;
  EXPECT_NE(msg(png, few).find("PNG: 40x30 is 1200 pixels, over the limit of 1000 pixels"), std::string::npos);
  // A BMP header that claims 30000x30000: refused before any pixel memory.
  EXPECT_NE(msg(make_bmp(30000, 30000, 24, 0, {}, {}, {})).find("over the limit of 50000000 pixels"), std::string::npos);
  EXPECT_NE(msg(make_bmp(40000, 1, 24, 0, {}, {}, {})).find("limit of 32768 pixels per side"), std::string::npos);
  EXPECT_NE(msg(make_bmp(2, 2, 24, 1, {}, {}, {})).find("RLE8"), std::string::npos);
  // Truncated files of every library-decoded format.
  const std::vector<uint8_t> jpg = encode_jpeg(gradient(40, 30), 90);
  const std::vector<uint8_t> webp = encode_webp_lossless(gradient(40, 30));
  for (const auto* bytes : {&png, &jpg, &webp}) {
    std::vector<uint8_t> half(bytes->begin(), bytes->begin() + long(bytes->size() / 2));
    const std::string m = msg(half);
    EXPECT_TRUE(m.find("PNG") != std::string::npos || m.find("JPEG") != std::string::npos ||
                m.find("WebP") != std::string::npos)
        << m;
  }
  // A BMP whose rows run past the end.
  EXPECT_NE(msg(make_bmp(4, 4, 24, 0, {}, {}, {1, 2, 3})).find("pixel rows at"), std::string::npos);
}

TEST(ImageDecode, MissingFileNamesThePath) {
  auto r = load_image_file("/nonexistent/cat.png");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/cat.png"), std::string::npos);
}

TEST(ImageResize, ConstantStaysConstantUnderEveryFilter) {
  Image img;
  img.width = 13, img.height = 7;
  img.rgb.assign(13 * 7 * 3, 77);
  for (ResizeFilter f : {ResizeFilter::kBilinear, ResizeFilter::kBicubic, ResizeFilter::kLanczos})
    for (auto [w, h] : {std::pair{5, 3}, std::pair{40, 29}, std::pair{13, 20}}) {
      const Image r = resize_image(img, w, h, f);
      ASSERT_EQ(r.rgb.size(), size_t(w) * h * 3);
      for (uint8_t v : r.rgb) ASSERT_EQ(v, 77);
    }
}

TEST(ImageResize, FitPadsCentredWithTheColour) {
  const Image r = resize_fit(gradient(20, 10), 40, 40, ResizeFilter::kBilinear, FitPad::kCeil, {1, 2, 3});
  ASSERT_EQ(r.width, 40);
  // 20x10 scales to 40x20, centred: rows 0..9 and 30..39 are padding.
  EXPECT_EQ(r.rgb[0], 1);
  EXPECT_EQ(r.rgb[(size_t(39) * 40 + 39) * 3 + 2], 3);
  EXPECT_NE(r.rgb[(size_t(20) * 40 + 39) * 3 + 0], 1);
}

TEST(ImagePreprocess, SmartResizeAsQwen) {
  // Qwen2.5-VL: multiples of 28, 8..4096 tokens of 28x28 pixels.
  const int lo = 8 * 784, hi = 4096 * 784;
  ImageSize s = smart_resize_size(317, 211, 28, lo, hi, 0);
  EXPECT_EQ(s.width, 308);
  EXPECT_EQ(s.height, 224);
  s = smart_resize_size(10, 10, 28, lo, hi, 0);  // too small: scaled up to the minimum
  EXPECT_GE(s.width * s.height, lo);
  s = smart_resize_size(8000, 6000, 28, lo, hi, 0);  // too large: scaled down under the maximum
  EXPECT_LE(s.width * s.height, hi);
  EXPECT_EQ(s.width % 28, 0);
}

TEST(ImagePreprocess, FamiliesShapes) {
  PreprocessParams g;  // Gemma 3
  g.kind = PreprocessKind::kFixedSize;
  g.image_size = 896, g.patch_size = 14, g.n_merge = 4;
  g.filter = ResizeFilter::kBilinear;
  for (int c = 0; c < 3; ++c) g.mean[c] = 0.5f, g.std[c] = 0.5f;
  auto pg = preprocess_image(gradient(317, 211), g);
  ASSERT_TRUE(pg) << pg.error().message;
  ASSERT_EQ(pg->tiles.size(), 1u);
  EXPECT_EQ(pg->tiles[0].width, 896);
  EXPECT_EQ(pg->tiles[0].data[0], -1.0f);  // black padding: (0 - 0.5) / 0.5
  EXPECT_FALSE(pg->has_overview());

  PreprocessParams s = g;  // SmolVLM
  s.kind = PreprocessKind::kIdefics3;
  s.image_size = 512, s.patch_size = 16, s.longest_edge = 2048;
  s.filter = ResizeFilter::kLanczos;
  auto ps = preprocess_image(gradient(317, 211), s);
  ASSERT_TRUE(ps) << ps.error().message;
  EXPECT_EQ(ps->grid_x, 4);
  EXPECT_EQ(ps->grid_y, 3);
  EXPECT_EQ(ps->tiles.size(), 12u);
  EXPECT_TRUE(ps->has_overview());
  // A 1-pixel strip would resize to nothing under the longest-edge rule: an error, not a crash.
  auto strip = preprocess_image(gradient(5000, 1), s);
  ASSERT_FALSE(strip);
  EXPECT_NE(strip.error().message.find("2048x0"), std::string::npos) << strip.error().message;

  PreprocessParams q = g;  // Qwen2.5-VL
  q.kind = PreprocessKind::kDynamicSize;
  q.image_size = 560, q.n_merge = 2, q.min_pixels = 8 * 784, q.max_pixels = 4096 * 784;
  auto pq = preprocess_image(gradient(317, 211), q);
  ASSERT_TRUE(pq) << pq.error().message;
  EXPECT_EQ(pq->tiles[0].width, 308);
  EXPECT_EQ(pq->tiles[0].height, 224);
}

}  // namespace
}  // namespace minfer
