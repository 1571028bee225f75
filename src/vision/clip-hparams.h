// The vision half of an mmproj GGUF as llama.cpp writes it (the `clip.*` keys of
// tools/mtmd/clip-impl.h): which projector, the encoder's shape, and what its preprocessing needs.
//
//   auto f = GgufFile::open("mmproj-model-f16.gguf");
//   auto hp = read_clip_vision_hparams(*f);
//   if (!hp) return hp.error();          // names the key or the projector type
//   PreprocessParams pp = clip_preprocess_params(*hp);
//   auto tiles = preprocess_image(img, pp);
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "gguf/reader.h"
#include "image/preprocess.h"

namespace minfer {

enum class ClipProjector { kGemma3, kIdefics3, kQwen2VL, kQwen25VL, kQwen3VL };

struct ClipVisionHparams {
  std::string projector_type;  // clip.projector_type (or clip.vision.projector_type)
  ClipProjector projector = ClipProjector::kGemma3;
  // clip.vision.*
  int n_embd = 0;          // embedding_length
  int n_ff = 0;            // feed_forward_length
  int n_layer = 0;         // block_count
  int n_head = 0;          // attention.head_count
  int projection_dim = 0;  // the language model's n_embd
  float eps = 1e-6f;       // attention.layer_norm_epsilon
  int image_size = 0;
  int patch_size = 0;
  float image_mean[3] = {0, 0, 0};
  float image_std[3] = {1, 1, 1};
  int n_merge = 1;            // projector.scale_factor (Gemma 3: 4, Idefics3) / spatial_merge_size (Qwen: 2)
  int preproc_image_size = 0; // Idefics3: the longest edge before tiling
  int n_wa_pattern = 0;       // Qwen2.5-VL: every n-th layer attends globally
  int window_size = 0;        // Qwen2.5-VL: window attention side in pixels
  bool use_gelu = false;
  bool use_silu = false;
};

// Errors name the file, the key and the value: a missing key, a projector type minfer does not
// run, a file without a vision encoder, image_mean/image_std shorter than 3.
Expected<ClipVisionHparams> read_clip_vision_hparams(const GgufFile& f);

// mtmd's preprocessing for the projector (filters, padding, pixel limits). min_tokens /
// max_tokens > 0 override the family's image token limits (llama.cpp's --image-min-tokens /
// --image-max-tokens), where the family has them.
PreprocessParams clip_preprocess_params(const ClipVisionHparams& hp, int min_tokens = -1, int max_tokens = -1);

}  // namespace minfer
