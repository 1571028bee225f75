#!/usr/bin/env python3
"""make-test-mmproj: writes a random-weight vision projector (mmproj GGUF) in a real family's
shapes and clip.* metadata, as llama.cpp's convert_hf_to_gguf.py lays them out, with gguf-py
(an independent writer). The mmproj half of minfer-make-test-model: real vision weights are
not reachable here (no registry carries them), so llama.cpp's mtmd and minfer load the same
random file.

  tools/make-test-mmproj.py --preset gemma3 --out mmproj-gemma3.gguf
  tools/make-test-mmproj.py --preset smolvlm --n-layer 1 --type f32 --out small.gguf

Presets (the encoder of): gemma3 (Gemma 3 4B: SigLIP so400m, 896 px), smolvlm (SmolVLM-256M:
SigLIP base, 512 px tiles, scale factor 4), qwen2.5vl (Qwen2.5-VL-3B: 1280 wide, window
attention). --n-layer keeps every tensor's real shape but fewer blocks (preprocessing tests read
no weights). Weights are deterministic from --seed and the tensor name.
"""
import argparse
import hashlib
import sys

import numpy as np
import gguf

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

PRESETS = {
    "gemma3": dict(projector="gemma3", n_embd=1152, n_ff=4304, n_layer=27, n_head=16, image_size=896,
                   patch_size=14, proj_dim=2560, eps=1e-6, mean=[0.5] * 3, std=[0.5] * 3, act="gelu"),
    "smolvlm": dict(projector="idefics3", n_embd=768, n_ff=3072, n_layer=12, n_head=12, image_size=512,
                    patch_size=16, proj_dim=576, eps=1e-6, mean=[0.5] * 3, std=[0.5] * 3, act="gelu",
                    scale_factor=4, preproc_image_size=2048),
    "qwen2.5vl": dict(projector="qwen2.5vl_merger", n_embd=1280, n_ff=3420, n_layer=32, n_head=16,
                      image_size=560, patch_size=14, proj_dim=2048, eps=1e-6, mean=CLIP_MEAN, std=CLIP_STD,
                      act="silu", n_wa_pattern=8, window_size=112, spatial_merge_size=2),
}


def tensor_rng(seed, name):
    h = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", required=True, choices=sorted(PRESETS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-layer", type=int, default=0, help="blocks to write (default: the real count)")
    ap.add_argument("--type", choices=["f16", "f32"], default="f16", help="matrix weights (norms, biases: f32)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--preproc-image-size", type=int, default=None,
                    help="Idefics3: clip.vision.preproc_image_size (0: leave the key out, as older files do)")
    args = ap.parse_args()
    p = dict(PRESETS[args.preset])
    if args.preproc_image_size is not None:
        p["preproc_image_size"] = args.preproc_image_size
    n_layer = args.n_layer or p["n_layer"]
    E, F, P = p["n_embd"], p["n_ff"], p["patch_size"]
    mat_type = np.float16 if args.type == "f16" else np.float32

    w = gguf.GGUFWriter(args.out, "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name(f"minfer test mmproj ({args.preset}, random weights)")
    w.add_file_type(1 if args.type == "f16" else 0)
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type(p["projector"])
    w.add_vision_embedding_length(E)
    w.add_vision_feed_forward_length(F)
    w.add_vision_block_count(n_layer)
    w.add_vision_head_count(p["n_head"])
    w.add_vision_projection_dim(p["proj_dim"])
    w.add_vision_attention_layernorm_eps(p["eps"])
    w.add_vision_image_size(p["image_size"])
    w.add_vision_patch_size(P)
    w.add_vision_image_mean(p["mean"])
    w.add_vision_image_std(p["std"])
    if p["act"] == "gelu":
        w.add_vision_use_gelu(True)
    else:
        w.add_vision_use_silu(True)
    if "scale_factor" in p:
        w.add_vision_projector_scale_factor(p["scale_factor"])
    if p.get("preproc_image_size"):
        w.add_vision_preproc_image_size(p["preproc_image_size"])
    if "n_wa_pattern" in p:
        w.add_vision_n_wa_pattern(p["n_wa_pattern"])
        w.add_vision_window_size(p["window_size"])
    if "spatial_merge_size" in p:
        w.add_vision_spatial_merge_size(p["spatial_merge_size"])

    def add(name, shape, scale=None, dtype=None, fill=None):
        """shape in numpy (row-major) order: the last axis is ggml's ne[0]"""
        if fill is not None:
            a = np.full(shape, fill, dtype=np.float32)
        else:
            fan_in = shape[-1] if len(shape) > 1 else 1
            s = scale if scale is not None else (1.0 / np.sqrt(fan_in) if len(shape) > 1 else 0.02)
            a = (tensor_rng(args.seed, name).standard_normal(shape) * s).astype(np.float32)
        w.add_tensor(name, a.astype(dtype or (mat_type if len(shape) > 1 else np.float32)))

    add("v.patch_embd.weight", (E, 3, P, P), scale=1.0 / np.sqrt(3 * P * P))
    is_qwen = p["projector"].startswith("qwen")
    if is_qwen:
        add("v.patch_embd.weight.1", (E, 3, P, P), scale=1.0 / np.sqrt(3 * P * P))
    else:
        add("v.patch_embd.bias", (E,))
        n_pos = (p["image_size"] // P) ** 2
        add("v.position_embd.weight", (n_pos, E), scale=0.02, dtype=np.float32)
    for il in range(n_layer):
        b = f"v.blk.{il}"
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add(f"{b}.{t}.weight", (E, E))
            add(f"{b}.{t}.bias", (E,))
        add(f"{b}.ln1.weight", (E,), fill=1.0)
        add(f"{b}.ln2.weight", (E,), fill=1.0)
        if not is_qwen:
            add(f"{b}.ln1.bias", (E,))
            add(f"{b}.ln2.bias", (E,))
        if is_qwen:
            add(f"{b}.ffn_gate.weight", (F, E))
            add(f"{b}.ffn_gate.bias", (F,))
        add(f"{b}.ffn_up.weight", (F, E))
        add(f"{b}.ffn_up.bias", (F,))
        add(f"{b}.ffn_down.weight", (E, F))
        add(f"{b}.ffn_down.bias", (E,))
    add("v.post_ln.weight", (E,), fill=1.0)
    if p["projector"] == "gemma3":
        add("v.post_ln.bias", (E,))
        add("mm.input_projection.weight", (E, p["proj_dim"]), scale=1.0 / np.sqrt(E))
        add("mm.soft_emb_norm.weight", (E,), fill=0.0)
    elif p["projector"] == "idefics3":
        add("v.post_ln.bias", (E,))
        k = E * p["scale_factor"] ** 2
        add("mm.model.fc.weight", (p["proj_dim"], k))
    else:
        m = E * p["spatial_merge_size"] ** 2
        add("mm.0.weight", (m, m))
        add("mm.0.bias", (m,))
        add("mm.2.weight", (p["proj_dim"], m))
        add("mm.2.bias", (p["proj_dim"],))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
