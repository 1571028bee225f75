#include "vision/clip-hparams.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace minfer {
namespace {

struct ProjectorName {
  std::string_view name;
  ClipProjector projector;
};
constexpr ProjectorName kProjectors[] = {
    {"gemma3", ClipProjector::kGemma3},
    {"idefics3", ClipProjector::kIdefics3},
    {"qwen2vl_merger", ClipProjector::kQwen2VL},
    {"qwen2.5vl_merger", ClipProjector::kQwen25VL},
    {"qwen3vl_merger", ClipProjector::kQwen3VL},
};

Status read_int(const GgufFile& f, std::string_view key, int& out, bool required) {
  if (!f.find(key)) {
    if (required) return make_error("mmproj '{}': missing key '{}'", f.path(), key);
    return Status::ok();
  }
  auto v = f.get_uint(key);
  if (!v) return make_error("mmproj '{}': {}", f.path(), v.error().message);
  if (*v > uint64_t(INT32_MAX)) return make_error("mmproj '{}': '{}' = {} is out of range", f.path(), key, *v);
  out = int(*v);
  return Status::ok();
}

Status read_floats3(const GgufFile& f, std::string_view key, float out[3]) {
  auto a = f.get_array(key);
  if (!a) return make_error("mmproj '{}': {}", f.path(), a.error().message);
  if ((*a)->size() < 3) return make_error("mmproj '{}': '{}' has {} values, 3 needed", f.path(), key, (*a)->size());
  for (size_t i = 0; i < 3; ++i) {
    auto v = (*a)->float_at(i);
    if (!v) return make_error("mmproj '{}': '{}'[{}] is not a number", f.path(), key, i);
    out[i] = float(*v);
  }
  return Status::ok();
}

}  // namespace

Expected<ClipVisionHparams> read_clip_vision_hparams(const GgufFile& f) {
  ClipVisionHparams hp;
  auto has_vision = f.get_bool("clip.has_vision_encoder");
  if (!has_vision || !*has_vision)
    return make_error("mmproj '{}': no vision encoder (clip.has_vision_encoder is {})", f.path(),
                      has_vision ? "false" : "missing");
  auto type = f.get_string("clip.projector_type");
  if (!type) type = f.get_string("clip.vision.projector_type");
  if (!type) return make_error("mmproj '{}': missing key 'clip.projector_type'", f.path());
  hp.projector_type = *type;
  bool known = false;
  for (const ProjectorName& p : kProjectors)
    if (p.name == hp.projector_type) hp.projector = p.projector, known = true;
  if (!known)
    return make_error("mmproj '{}': projector type '{}' is not supported (gemma3, idefics3, qwen2vl_merger, "
                      "qwen2.5vl_merger, qwen3vl_merger)",
                      f.path(), hp.projector_type);
  MINFER_TRY(read_int(f, "clip.vision.embedding_length", hp.n_embd, true));
  MINFER_TRY(read_int(f, "clip.vision.feed_forward_length", hp.n_ff, true));
  MINFER_TRY(read_int(f, "clip.vision.block_count", hp.n_layer, true));
  MINFER_TRY(read_int(f, "clip.vision.attention.head_count", hp.n_head, true));
  MINFER_TRY(read_int(f, "clip.vision.projection_dim", hp.projection_dim, true));
  MINFER_TRY(read_int(f, "clip.vision.image_size", hp.image_size, true));
  MINFER_TRY(read_int(f, "clip.vision.patch_size", hp.patch_size, true));
  if (auto eps = f.get_float("clip.vision.attention.layer_norm_epsilon")) hp.eps = float(*eps);
  else return make_error("mmproj '{}': {}", f.path(), eps.error().message);
  MINFER_TRY(read_floats3(f, "clip.vision.image_mean", hp.image_mean));
  MINFER_TRY(read_floats3(f, "clip.vision.image_std", hp.image_std));
  if (auto g = f.get_bool("clip.use_gelu")) hp.use_gelu = *g;
  if (auto s = f.get_bool("clip.use_silu")) hp.use_silu = *s;
  if (hp.image_size <= 0 || hp.image_size > ImageLimits::kMaxSide || hp.patch_size <= 0 ||
      hp.patch_size > hp.image_size)
    return make_error("mmproj '{}': image_size {} must be in 1..{} and patch_size {} in 1..image_size", f.path(),
                      hp.image_size, ImageLimits::kMaxSide, hp.patch_size);
  switch (hp.projector) {
    case ClipProjector::kGemma3:
      hp.n_merge = 4;  // every Gemma 3 size; tiny test files write the key
      MINFER_TRY(read_int(f, "clip.vision.projector.scale_factor", hp.n_merge, false));
      break;
    case ClipProjector::kIdefics3:
      MINFER_TRY(read_int(f, "clip.vision.projector.scale_factor", hp.n_merge, false));
      MINFER_TRY(read_int(f, "clip.vision.preproc_image_size", hp.preproc_image_size, false));
      break;
    case ClipProjector::kQwen2VL:
    case ClipProjector::kQwen25VL:
    case ClipProjector::kQwen3VL:
      hp.n_merge = 2;
      MINFER_TRY(read_int(f, "clip.vision.spatial_merge_size", hp.n_merge, false));
      MINFER_TRY(read_int(f, "clip.vision.n_wa_pattern", hp.n_wa_pattern, hp.projector == ClipProjector::kQwen25VL));
      MINFER_TRY(read_int(f, "clip.vision.window_size", hp.window_size, false));
      break;
  }
  if (hp.n_merge <= 0 || hp.n_merge > 64)
    return make_error("mmproj '{}': merge factor {} must be in 1..64", f.path(), hp.n_merge);
  if (hp.preproc_image_size < 0 || hp.preproc_image_size > ImageLimits::kMaxSide)
    return make_error("mmproj '{}': preproc_image_size {} must be in 0..{}", f.path(), hp.preproc_image_size, ImageLimits::kMaxSide);
  return hp;
}

PreprocessParams clip_preprocess_params(const ClipVisionHparams& hp, int min_tokens, int max_tokens) {
  PreprocessParams p;
  p.image_size = hp.image_size;
  p.patch_size = hp.patch_size;
  p.n_merge = hp.n_merge;
  for (int c = 0; c < 3; ++c) p.mean[c] = hp.image_mean[c], p.std[c] = hp.image_std[c];
  const int64_t patch_area = int64_t(hp.patch_size) * hp.patch_size * hp.n_merge * hp.n_merge;
  auto pixels = [&](int tokens) { return int(std::min<int64_t>(tokens * patch_area, INT32_MAX)); };
  switch (hp.projector) {
    case ClipProjector::kGemma3:
      p.kind = PreprocessKind::kFixedSize;
      p.filter = ResizeFilter::kBilinear;
      p.pad = FitPad::kCeil;
      break;
    case ClipProjector::kIdefics3:
      p.kind = PreprocessKind::kIdefics3;
      p.filter = ResizeFilter::kLanczos;
      p.longest_edge = hp.preproc_image_size;
      if (min_tokens > 0) p.min_pixels = pixels(min_tokens);
      if (max_tokens > 0) p.max_pixels = pixels(max_tokens);
      break;
    case ClipProjector::kQwen2VL:
    case ClipProjector::kQwen25VL:
    case ClipProjector::kQwen3VL:
      // Qwen2.5-VL's preprocessor_config.json: 8 to 4096 merged tokens
      p.kind = PreprocessKind::kDynamicSize;
      p.filter = ResizeFilter::kBicubic;
      p.pad = FitPad::kCeil;
      p.min_pixels = pixels(min_tokens > 0 ? min_tokens : 8);
      p.max_pixels = pixels(max_tokens > 0 ? max_tokens : 4096);
      break;
  }
  return p;
}

}  // namespace minfer
