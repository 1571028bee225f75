"""minfer's image decoding and vision preprocessing against llama.cpp's mtmd (ctest vision.*).

vision.decode: our decoders (libjpeg-turbo, libpng, libwebp, giflib, our BMP reader) against
stb_image as mtmd-helper calls it (mtmd-preprocess-oracle --rgb): identical pixels for PNG, GIF
and BMP; JPEG within the measured IDCT/upsampling difference; WebP (stb has no WebP) against the
lossless source and Pillow's libwebp.
vision.preprocess.token_limits: llama.cpp's --image-min/max-tokens on Qwen2.5-VL and Idefics3.
vision.preprocess.<family>: for every test image, the float tiles from the same RGB pixels
(--raw) must be bit-identical, and from the file itself (each side's own decoder) identical
wherever the decoders agree. Images are written by Pillow at odd sizes; mmproj files by
tools/make-test-mmproj.py (one block: preprocessing reads no weights).
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ORACLE = os.environ.get("MINFER_MTMD_ORACLE", "build/tests/mtmd-preprocess-oracle")
OURS = os.environ.get("MINFER_VISION_PREPROCESS", "build/bin/minfer-vision-preprocess")
MAKE_MMPROJ = os.environ.get("MINFER_MAKE_TEST_MMPROJ", "tools/make-test-mmproj.py")
MTMD_IMAGE = os.environ.get("MINFER_MTMD_TEST_IMAGE", ".deps/llama.cpp/tools/mtmd/test-1.jpeg")
TMP = Path(os.environ.get("MINFER_TEST_TMPDIR", "/tmp")) / "vision-oracle"

# test name -> tools/make-test-mmproj.py arguments
FAMILIES = {
    "gemma3": ["--preset", "gemma3"],
    "smolvlm": ["--preset", "smolvlm"],
    # older Idefics3 files without preproc_image_size: mtmd's smart-resize path to whole tiles
    "idefics3_legacy": ["--preset", "smolvlm", "--preproc-image-size", "0"],
    "qwen25vl": ["--preset", "qwen2.5vl"],
}
# The images each family's preprocessing is compared on (vision.decode reads them all): wide,
# tall, tiny (upscaled), llama.cpp's own photo, and one of each other decoder. SmolVLM's 13
# tiles of 512x512 per image make it the slowest; it gets the three shapes only.
FAMILY_IMAGES = {
    "gemma3": ["png-rgb", "png-palette", "bmp-1", "jpeg-mtmd-test-1", "gif-anim", "webp-lossless"],
    "qwen25vl": ["png-rgb", "png-palette", "bmp-1", "jpeg-mtmd-test-1", "gif-anim", "webp-lossless"],
    "smolvlm": ["png-rgb", "png-palette", "bmp-1"],
    "idefics3_legacy": ["png-rgb", "png-palette", "bmp-1", "jpeg-mtmd-test-1"],
}
# The largest JPEG pixel difference measured between libjpeg-turbo (ISLOW, fancy upsampling)
# and stb_image on these images (docs/vision.md); a change beyond it is a regression.
JPEG_MAX_DIFF = 3


def base_pixels(w, h, seed):
    """Gradients, hard edges and a block of noise: smooth areas and every 8x8 DCT case."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), ((x + 2 * y) * 7) % 256], -1).astype(np.uint8)
    a[h // 4:h // 2, w // 5:w // 2] = rng.integers(0, 256, (h // 2 - h // 4, w // 2 - w // 5, 3), dtype=np.uint8)
    a[h // 2:, w // 2:w // 2 + 3] = (255, 0, 0)
    return a


def bmp_file(w, h, header, palette, rows_bottom_up):
    """BITMAPFILEHEADER + the given info header, palette and rows (Pillow writes neither the OS/2
    core header nor 16-bit bit fields)"""
    off = 14 + len(header) + len(palette)
    rows = b"".join(rows_bottom_up)
    return b"BM" + struct.pack("<IHHI", off + len(rows), 0, 0, off) + header + palette + rows


def lzw_literal(indices, min_code=8):
    """LZW stream of literal codes only: a clear code every 254 codes keeps the width at 9 bits"""
    clear, eoi = 1 << min_code, (1 << min_code) + 1
    codes = [clear]
    n = 0
    for i in indices:
        if n == 254:
            codes.append(clear); n = 0
        codes.append(i); n += 1
    codes.append(eoi)
    bits, acc, out = 0, 0, bytearray()
    for c in codes:
        acc |= c << bits; bits += 9
        while bits >= 8:
            out.append(acc & 0xFF); acc >>= 8; bits -= 8
    if bits: out.append(acc & 0xFF)
    blocks = bytearray([min_code])
    for i in range(0, len(out), 255):
        chunk = out[i:i + 255]; blocks += bytes([len(chunk)]) + chunk
    return bytes(blocks + b"\0")

def gif_file(sw, sh, palette, bg, frame_xywh, indices, transparent=None):
    """a GIF whose one frame covers part of the screen (Pillow always writes full first frames)"""
    n = 256
    pal = b"".join(bytes(c) for c in palette) + b"\0\0\0" * (n - len(palette))
    g = b"GIF89a" + struct.pack("<HHBBB", sw, sh, 0xF7, bg, 0) + pal
    if transparent is not None:
        g += b"\x21\xF9\x04" + bytes([1]) + b"\0\0" + bytes([transparent]) + b"\0"
    x, y, w, h = frame_xywh
    g += b"\x2C" + struct.pack("<HHHHB", x, y, w, h, 0) + lzw_literal(indices)
    return g + b"\x3B"


def make_images(d: Path):
    """name -> (path, source RGB or None when the format is lossy)"""
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    a = base_pixels(317, 211, 1)
    Image.fromarray(a).save(d / "rgb-317x211.png")
    out["png-rgb"] = (d / "rgb-317x211.png", a)
    rgba = np.dstack([a, (np.arange(317 * 211) % 256).reshape(211, 317).astype(np.uint8)])
    Image.fromarray(rgba, "RGBA").save(d / "rgba.png")
    out["png-rgba"] = (d / "rgba.png", a)
    g16 = (base_pixels(123, 77, 2)[..., 0].astype(np.uint16) * 257 + 3)
    Image.fromarray(g16.astype(np.int32), "I").convert("I;16").save(d / "gray16.png")
    out["png-gray16"] = (d / "gray16.png", None)
    pal = Image.fromarray(base_pixels(97, 301, 3)).quantize(colors=37)
    pal.save(d / "palette.png")
    out["png-palette"] = (d / "palette.png", np.asarray(pal.convert("RGB")))
    Image.fromarray(a).save(d / "q90-420.jpg", quality=90)
    out["jpeg-420"] = (d / "q90-420.jpg", None)
    Image.fromarray(a).save(d / "q95-444.jpg", quality=95, subsampling=0)
    out["jpeg-444"] = (d / "q95-444.jpg", None)
    Image.fromarray(base_pixels(211, 317, 4)).save(d / "progressive.jpg", quality=80, progressive=True)
    out["jpeg-progressive"] = (d / "progressive.jpg", None)
    Image.fromarray(a[..., 1]).save(d / "gray.jpg", quality=85)
    out["jpeg-gray"] = (d / "gray.jpg", None)
    if Path(MTMD_IMAGE).exists():
        out["jpeg-mtmd-test-1"] = (Path(MTMD_IMAGE), None)
    Image.fromarray(a).save(d / "lossless.webp", lossless=True)
    out["webp-lossless"] = (d / "lossless.webp", a)
    Image.fromarray(a).save(d / "lossy.webp", quality=80)
    out["webp-lossy"] = (d / "lossy.webp", None)
    frames = [Image.fromarray(base_pixels(201, 133, 5 + i)).quantize(colors=64) for i in range(2)]
    frames[0].info["transparency"] = 5
    frames[0].save(d / "anim.gif", save_all=True, append_images=frames[1:], transparency=5, interlace=True)
    first = np.asarray(frames[0].convert("RGB")).copy()
    first[np.asarray(frames[0]) == 5] = 0  # transparent pixels decode black (as stb_image)
    out["gif-anim"] = (d / "anim.gif", first)
    gpal = [(10 * i % 256, 255 - i, i * 37 % 256) for i in range(256)]
    gidx = [(i * 7) % 256 for i in range(23 * 17)]
    for bg in (0, 9):  # background index 0: uncovered pixels black; 9: its colour
        (d / f"part-bg{bg}.gif").write_bytes(gif_file(41, 30, gpal, bg, (5, 7, 23, 17), gidx, transparent=gidx[3]))
        out[f"gif-part-bg{bg}"] = (d / f"part-bg{bg}.gif", None)
    Image.fromarray(a).save(d / "rgb24.bmp")
    out["bmp-24"] = (d / "rgb24.bmp", a)
    pal.save(d / "pal8.bmp")
    out["bmp-8"] = (d / "pal8.bmp", np.asarray(pal.convert("RGB")))
    Image.fromarray(rgba, "RGBA").save(d / "rgba32.bmp")
    out["bmp-32"] = (d / "rgba32.bmp", a)
    c = base_pixels(131, 77, 9)
    Image.fromarray(c).convert("CMYK").save(d / "cmyk.jpg", quality=92)
    out["jpeg-cmyk"] = (d / "cmyk.jpg", None)
    h, w = c.shape[:2]
    v = (c[..., 0].astype(np.uint32) >> 3) << 11 | (c[..., 1].astype(np.uint32) >> 2) << 5 | c[..., 2] >> 3
    stride = (w * 16 + 31) // 32 * 4
    (d / "rgb565.bmp").write_bytes(bmp_file(
        w, h, struct.pack("<IiiHHIIiiII", 40, w, h, 1, 16, 3, stride * h, 2835, 2835, 0, 0)
        + struct.pack("<3I", 0xF800, 0x07E0, 0x001F), b"",
        [v[y].astype("<u2").tobytes().ljust(stride, b"\0") for y in range(h - 1, -1, -1)]))
    out["bmp-16-bitfields"] = (d / "rgb565.bmp", None)
    q = Image.fromarray(c).quantize(colors=50)
    idx, pal50 = np.asarray(q), np.array(q.getpalette()[:150]).reshape(50, 3)
    stride = (w + 3) // 4 * 4
    (d / "core8.bmp").write_bytes(bmp_file(
        w, h, struct.pack("<IHHHH", 12, w, h, 1, 8), b"".join(bytes([b_, g_, r_]) for r_, g_, b_ in pal50)
        + b"\0" * 3 * (256 - 50), [idx[y].astype(np.uint8).tobytes().ljust(stride, b"\0") for y in range(h - 1, -1, -1)]))
    out["bmp-8-os2"] = (d / "core8.bmp", np.asarray(q.convert("RGB")))
    one = Image.fromarray(base_pixels(45, 29, 6)[..., 0] > 128)
    one.save(d / "mono.bmp")
    out["bmp-1"] = (d / "mono.bmp", np.asarray(one.convert("RGB")))
    return out


@pytest.fixture(scope="session")
def images():
    # per process: ctest runs these entries in parallel
    TMP.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="images-", dir=TMP))
    yield make_images(d)
    shutil.rmtree(d, ignore_errors=True)


def mmproj(key):
    """the family's random-weight mmproj, written once (one block: preprocessing reads no weights)"""
    p = TMP / f"mmproj-{key}.gguf"
    if not p.exists():
        TMP.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")  # parallel entries may write it at once
        subprocess.run([sys.executable, MAKE_MMPROJ, *FAMILIES[key], "--n-layer", "1", "--out", str(tmp)], check=True)
        tmp.rename(p)
    return p


@pytest.fixture
def scratch():
    """a folder for the float dumps (tens of MB each): in memory where /dev/shm exists"""
    d = Path(tempfile.mkdtemp(prefix="minfer-vision-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert r.returncode == 0, f"{cmd[0]} failed ({r.returncode}):\n{r.stderr[-3000:]}"


def read_rgb(path):
    b = Path(path).read_bytes()
    w, h = np.frombuffer(b[:8], dtype="<i4")
    return np.frombuffer(b[8:], dtype=np.uint8).reshape(h, w, 3)


def read_pre(path):
    b = Path(path).read_bytes()
    assert b[:4] == b"MPRE", path
    n, gx, gy, ov = np.frombuffer(b[4:20], dtype="<i4")
    pos, imgs = 20, []
    for _ in range(n):
        w, h = np.frombuffer(b[pos:pos + 8], dtype="<i4")
        pos += 8
        imgs.append(np.frombuffer(b[pos:pos + 12 * w * h], dtype="<f4").reshape(h, w, 3))
        pos += 12 * w * h
    return (int(gx), int(gy), int(ov)), imgs


def compare_pre(ours, theirs):
    """(max |difference|, number of differing floats); shapes must match"""
    (meta_a, a), (meta_b, b) = read_pre(ours), read_pre(theirs)
    assert meta_a == meta_b, f"grid/overview {meta_a} vs mtmd {meta_b}"
    assert [x.shape for x in a] == [x.shape for x in b], f"tile shapes {[x.shape for x in a]} vs mtmd {[x.shape for x in b]}"
    worst, n_diff = 0.0, 0
    for x, y in zip(a, b):
        worst = max(worst, float(np.max(np.abs(x - y))))
        n_diff += int(np.count_nonzero(x.view(np.uint32) != y.view(np.uint32)))
    return worst, n_diff, [x.shape for x in a]


def decode_both(images, name, d):
    """our RGB and stb's (None where stb cannot read the format)"""
    path, _ = images[name]
    mm = "-"  # decode only
    run([OURS, mm, path, d / f"{name}.ours.bin", "--rgb", d / f"{name}.ours.rgb"])
    ours = read_rgb(d / f"{name}.ours.rgb")
    if name.startswith("webp"):
        return ours, None
    run([ORACLE, mm, path, d / f"{name}.stb.bin", "--rgb", d / f"{name}.stb.rgb"])
    return ours, read_rgb(d / f"{name}.stb.rgb")


def test_decode(images, scratch):
    d = scratch
    lines = []
    for name, (path, source) in images.items():
        ours, stb = decode_both(images, name, d)
        if source is not None:
            assert ours.shape == source.shape and np.array_equal(ours, source), f"{name}: differs from the source pixels"
        if name == "webp-lossy":
            pil = np.asarray(Image.open(path).convert("RGB"))
            assert np.array_equal(ours, pil), f"{name}: differs from Pillow's libwebp"
        if stb is None:
            lines.append(f"{name:18s} {ours.shape[1]}x{ours.shape[0]}: no stb decoder (source/Pillow identical)")
            continue
        assert ours.shape == stb.shape, f"{name}: {ours.shape} vs stb {stb.shape}"
        diff = np.abs(ours.astype(int) - stb.astype(int))
        lines.append(f"{name:18s} {ours.shape[1]}x{ours.shape[0]}: max |ours - stb| {diff.max()}, "
                     f"{np.count_nonzero(diff)} of {diff.size} values differ")
        if name.startswith("jpeg"):
            assert diff.max() <= JPEG_MAX_DIFF, f"{name}: JPEG difference {diff.max()} > {JPEG_MAX_DIFF}"
        elif name == "gif-part-bg9":
            # stb_image writes the background colour with red and blue swapped (docs/vision.md):
            # the pixels outside the frame differ exactly so, the frame itself is identical.
            outside = np.ones(ours.shape[:2], bool)
            outside[7:7 + 17, 5:5 + 23] = False
            assert np.array_equal(ours[~outside], stb[~outside]), f"{name}: the frame differs from stb"
            assert np.array_equal(ours[outside], stb[outside][:, ::-1]), f"{name}: not stb's red/blue swap"
            lines[-1:] = []
            lines.append(f"{name:18s} {ours.shape[1]}x{ours.shape[0]}: frame identical; the {np.count_nonzero(outside)} "
                         "background pixels are stb's with red and blue swapped")
            continue
        else:
            assert diff.max() == 0, f"{name}: pixels differ from stb_image (max {diff.max()})"
    print("\n" + "\n".join(lines))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_preprocess(family, images, scratch):
    d = scratch
    mm = mmproj(family)
    lines = []
    for name in FAMILY_IMAGES[family]:
        if name not in images:
            continue  # llama.cpp's test-1.jpeg where the tree lacks it
        path = images[name][0]
        # 1. The same pixels on both sides: preprocessing alone, bit for bit.
        run([OURS, mm, path, d / f"{name}.file.bin", "--rgb", d / f"{name}.rgb"])
        rgb = read_rgb(d / f"{name}.rgb")
        raw = d / f"{name}.raw"
        raw.write_bytes(rgb.tobytes())
        h, w = rgb.shape[:2]
        run([OURS, mm, "--raw", w, h, raw, d / f"{name}.ours.bin"])
        run([ORACLE, mm, "--raw", w, h, raw, d / f"{name}.mtmd.bin"])
        worst, n_diff, shapes = compare_pre(d / f"{name}.ours.bin", d / f"{name}.mtmd.bin")
        assert n_diff == 0, f"{family} {name}: {n_diff} floats differ from mtmd (max {worst})"
        line = f"{family:8s} {name:18s} {w}x{h} -> {len(shapes)} x {shapes[0][1]}x{shapes[0][0]}: identical"
        # 2. From the file, each with its own decoder (stb has no WebP).
        if not name.startswith("webp"):
            run([ORACLE, mm, path, d / f"{name}.mtmd-file.bin"])
            worst, n_diff, _ = compare_pre(d / f"{name}.file.bin", d / f"{name}.mtmd-file.bin")
            line += f"; from the file: max |diff| {worst:.3g} ({n_diff} floats differ)"
            if not name.startswith("jpeg"):
                assert n_diff == 0, f"{family} {name}: file path differs from mtmd (max {worst})"
        lines.append(line)
        for f in d.glob(f"{name}.*"):
            f.unlink()
    print("\n" + "\n".join(lines))


# llama.cpp's --image-min-tokens / --image-max-tokens (clip's image_min/max_tokens) against
# clip_preprocess_params' arguments: Qwen's pixel bounds move, Idefics3 takes its smart-resize
# path with the longest edge.
TOKEN_CASES = [
    ("qwen25vl", "", "64", "jpeg-mtmd-test-1"),   # 640x488 scaled down under 64 tokens
    ("qwen25vl", "1024", "", "bmp-1"),            # 45x29 scaled up to 1024 tokens
    ("smolvlm", "", "100", "png-rgb"),
    ("smolvlm", "16", "400", "png-palette"),      # clip refuses a minimum without a maximum here
]


@pytest.mark.parametrize("family,min_tokens,max_tokens,name", TOKEN_CASES)
def test_token_limits(family, min_tokens, max_tokens, name, images, scratch):
    env = dict(os.environ, MINFER_IMAGE_MIN_TOKENS=min_tokens, MINFER_IMAGE_MAX_TOKENS=max_tokens)
    mm, d = mmproj(family), scratch
    run([OURS, "-", images[name][0], d / "x.bin", "--rgb", d / "x.rgb"])
    rgb = read_rgb(d / "x.rgb")
    (d / "x.raw").write_bytes(rgb.tobytes())
    h, w = rgb.shape[:2]
    for tool, out in ((OURS, "ours.bin"), (ORACLE, "mtmd.bin")):
        r = subprocess.run([str(c) for c in [tool, mm, "--raw", w, h, d / "x.raw", d / out]], capture_output=True,
                           text=True, env=env)
        assert r.returncode == 0, f"{tool} failed:\n{r.stderr[-2000:]}"
    worst, n_diff, shapes = compare_pre(d / "ours.bin", d / "mtmd.bin")
    print(f"\n{family} tokens [{min_tokens or '-'}, {max_tokens or '-'}] {name} {w}x{h} -> {len(shapes)} x "
          f"{shapes[0][1]}x{shapes[0][0]}: max |diff| {worst} ({n_diff} floats differ)")
    assert n_diff == 0
