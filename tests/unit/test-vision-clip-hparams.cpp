// The mmproj reader (vision/clip-hparams.h): clip.* keys of each family to hyperparameters and
// to mtmd's preprocessing parameters; the errors for files that are not vision projectors.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "vision/clip-hparams.h"

namespace minfer {
namespace {

GgufWriter clip_writer(const std::string& projector) {
  GgufWriter w;
  w.add_string("general.architecture", "clip");
  w.add_bool("clip.has_vision_encoder", true);
  w.add_string("clip.projector_type", projector);
  w.add_u32("clip.vision.embedding_length", 768);
  w.add_u32("clip.vision.feed_forward_length", 3072);
  w.add_u32("clip.vision.block_count", 12);
  w.add_u32("clip.vision.attention.head_count", 12);
  w.add_u32("clip.vision.projection_dim", 576);
  w.add_f32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
  w.add_u32("clip.vision.image_size", 512);
  w.add_u32("clip.vision.patch_size", 16);
  w.add("clip.vision.image_mean", GgufValue(GgufValue::Storage(GgufArray::of<float>({0.5f, 0.25f, 0.125f}))));
  w.add("clip.vision.image_std", GgufValue(GgufValue::Storage(GgufArray::of<float>({0.5f, 0.5f, 0.5f}))));
  return w;
}

Expected<ClipVisionHparams> read_back(const GgufWriter& w) {
  const std::string path = ::testing::TempDir() + "/clip-hparams-test.gguf";
  EXPECT_TRUE(w.write(path));
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f) << (f ? "" : f.error().message);
  auto hp = read_clip_vision_hparams(*f);
  std::remove(path.c_str());
  return hp;
}

TEST(ClipHparams, Idefics3) {
  GgufWriter w = clip_writer("idefics3");
  w.add_u32("clip.vision.projector.scale_factor", 4);
  w.add_u32("clip.vision.preproc_image_size", 2048);
  auto hp = read_back(w);
  ASSERT_TRUE(hp) << hp.error().message;
  EXPECT_EQ(hp->projector, ClipProjector::kIdefics3);
  EXPECT_EQ(hp->n_merge, 4);
  EXPECT_EQ(hp->image_mean[1], 0.25f);
  const PreprocessParams p = clip_preprocess_params(*hp);
  EXPECT_EQ(p.kind, PreprocessKind::kIdefics3);
  EXPECT_EQ(p.longest_edge, 2048);
  EXPECT_EQ(p.filter, ResizeFilter::kLanczos);
  EXPECT_EQ(p.min_pixels, -1);
}

TEST(ClipHparams, Gemma3AndQwenDefaults) {
  auto g = read_back(clip_writer("gemma3"));
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->n_merge, 4);
  EXPECT_EQ(clip_preprocess_params(*g).filter, ResizeFilter::kBilinear);

  GgufWriter qw = clip_writer("qwen2.5vl_merger");
  qw.add_u32("clip.vision.n_wa_pattern", 8);
  auto q = read_back(qw);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->n_merge, 2);
  const PreprocessParams p = clip_preprocess_params(*q, -1, 1024);
  EXPECT_EQ(p.kind, PreprocessKind::kDynamicSize);
  EXPECT_EQ(p.min_pixels, 8 * 16 * 16 * 4);
  EXPECT_EQ(p.max_pixels, 1024 * 16 * 16 * 4);
}

TEST(ClipHparams, ErrorsNameTheKeyOrType) {
  auto unknown = read_back(clip_writer("llama4"));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("projector type 'llama4' is not supported"), std::string::npos);

  GgufWriter no_wa = clip_writer("qwen2.5vl_merger");  // Qwen2.5-VL requires its window pattern
  auto q = read_back(no_wa);
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("clip.vision.n_wa_pattern"), std::string::npos);

  GgufWriter text;
  text.add_string("general.architecture", "llama");
  auto t = read_back(text);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("no vision encoder"), std::string::npos);

  GgufWriter huge = clip_writer("gemma3");  // a file's sizes are not trusted
  huge.add_u32("clip.vision.image_size", 1000000);
  auto h = read_back(huge);
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("image_size 1000000 must be in 1..32768"), std::string::npos) << h.error().message;

  GgufWriter missing = clip_writer("gemma3");
  missing.remove("clip.vision.patch_size");
  auto m = read_back(missing);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("missing key 'clip.vision.patch_size'"), std::string::npos);
}

}  // namespace
}  // namespace minfer
