"""minfer's GGUF reader and writer against gguf-py (PyPI `gguf`, the reference implementation).

- files written by gguf-py (every metadata type, nested arrays, alignment, tensor types, split
  output) read by `minfer info --json` give the same keys, types, values and tensor table;
- SmolLM2-135M-Instruct: every key and tensor agrees;
- files written by minfer (`minfer quantize`, also split) read back by gguf-py agree;
- truncated and corrupted files are refused with an error naming the file, never a crash.
"""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
import gguf

MINFER = os.environ.get("MINFER_BIN", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")

TYPE_NAMES = {
    gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8", gguf.GGUFValueType.UINT16: "u16",
    gguf.GGUFValueType.INT16: "i16", gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
    gguf.GGUFValueType.FLOAT32: "f32", gguf.GGUFValueType.BOOL: "bool", gguf.GGUFValueType.STRING: "string",
    gguf.GGUFValueType.ARRAY: "array", gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64",
    gguf.GGUFValueType.FLOAT64: "f64",
}


def minfer_info(path):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not a built minfer binary"
    out = subprocess.run([MINFER, "info", path, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def same_value(ours, ref, vtype):
    if isinstance(ref, list):
        return isinstance(ours, list) and len(ours) == len(ref) and all(
            same_value(a, b, None) for a, b in zip(ours, ref))
    if vtype == gguf.GGUFValueType.FLOAT32 or (isinstance(ref, float) and vtype is None):
        return np.float32(ours) == np.float32(ref) or (np.isnan(ours) and np.isnan(ref))
    if isinstance(ref, float):
        return ours == ref or (np.isnan(ours) and np.isnan(ref))
    return ours == ref


def nested_contents(field):
    """Decodes an array of arrays from gguf-py's raw field parts (key len, key, type, then the
    value's parts in file order)."""
    parts = field.parts[3:]
    pos = 0

    def take():
        nonlocal pos
        pos += 1
        return parts[pos - 1]

    def value(vtype):
        if vtype == gguf.GGUFValueType.STRING:
            take()  # length
            return bytes(take()).decode("utf-8")
        if vtype == gguf.GGUFValueType.ARRAY:
            elem = gguf.GGUFValueType(int(take()[0]))
            n = int(take()[0])
            return [value(elem) for _ in range(n)]
        v = take()[0]
        return bool(v) if vtype == gguf.GGUFValueType.BOOL else v.item()

    return value(gguf.GGUFValueType.ARRAY)


def compare_file(path, expect_parts=1):
    """Compares minfer's view of `path` (all parts) with gguf-py's, key by key, tensor by tensor."""
    ours = minfer_info(path)
    assert len(ours["parts"]) == expect_parts
    part_paths = [p["path"] for p in ours["parts"]]
    readers = [gguf.GGUFReader(p) for p in part_paths]
    first = readers[0]
    n_keys = 0
    for key, field in first.fields.items():
        if key.startswith("GGUF."):
            continue
        assert key in ours["metadata"], f"key {key} missing"
        want_type = TYPE_NAMES[field.types[0]]
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            want_type += "[" + TYPE_NAMES[field.types[1]] + "]" if len(field.types) > 1 else "[u8]"
        got_type = ours["metadata_types"][key]
        if len(field.types) > 1 or field.types[0] != gguf.GGUFValueType.ARRAY:
            assert got_type == want_type, f"{key}: type {got_type} != {want_type}"
        ref = field.contents()
        if len(field.types) > 1 and field.types[1] == gguf.GGUFValueType.ARRAY:
            ref = nested_contents(field)  # gguf-py's contents() flattens arrays of arrays
        assert same_value(ours["metadata"][key], ref, field.types[-1]), f"{key}: {ours['metadata'][key]!r} != {ref!r}"
        n_keys += 1
    assert n_keys == len(ours["metadata"]), "minfer shows keys gguf-py does not"
    ref_tensors = []
    for part_index, r in enumerate(readers):
        for t in r.tensors:
            ref_tensors.append((part_index, r, t))
    assert len(ref_tensors) == len(ours["tensors"])
    for (part_index, r, t), o in zip(ref_tensors, ours["tensors"]):
        assert o["name"] == t.name
        assert o["type"] == gguf.GGMLQuantizationType(t.tensor_type).name
        assert o["shape"] == [int(x) for x in t.shape]
        assert o["part"] == part_index
        assert o["data_offset"] == int(t.data_offset)
        assert o["offset"] == int(t.data_offset) - int(r.data_offset)
        assert o["n_bytes"] == int(t.n_bytes)
    return n_keys, len(ref_tensors)


def write_reference_file(path, alignment=None, split_max_tensors=0):
    w = gguf.GGUFWriter(path, "llama", split_max_tensors=split_max_tensors)
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 1e-5)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 0.1)
    w.add_bool("t.bool", False)
    w.add_string("t.str", "héllo ✓ \n tab\t")
    w.add_array("t.strs", ["a", "", "漢字", "<|im_start|>"])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -1.25])
    w.add_array("t.nested", [[1, 2, 3], [4], ["x", "y"]])
    w.add_array("t.empty", [])
    rng = np.random.default_rng(7)
    w.add_tensor("a.f32", rng.standard_normal((3, 64)).astype(np.float32))
    w.add_tensor("b.f16", rng.standard_normal((2, 32)).astype(np.float16))
    for name, qt in [("c.q4_0", gguf.GGMLQuantizationType.Q4_0), ("d.q8_0", gguf.GGMLQuantizationType.Q8_0),
                     ("e.q6_k", gguf.GGMLQuantizationType.Q6_K), ("f.iq4_xs", gguf.GGMLQuantizationType.IQ4_XS)]:
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        raw = rng.integers(0, 255, size=(4, 512 // bs * ts), dtype=np.uint8)
        w.add_tensor(name, raw, raw_dtype=qt)  # byte shape (4, row bytes) -> (4, 512) elements
    w.add_tensor("g.norm", np.ones(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tmp():
    d = tempfile.mkdtemp(prefix="minfer-gguf-oracle-")
    yield d
    shutil.rmtree(d)


def test_reference_written_file(tmp):
    p = os.path.join(tmp, "ref.gguf")
    write_reference_file(p)
    keys, tensors = compare_file(p)
    print(f"\ngguf-py-written file: {keys} keys, {tensors} tensors agree")


def test_reference_written_file_alignment_64(tmp):
    p = os.path.join(tmp, "ref64.gguf")
    write_reference_file(p, alignment=64)
    keys, tensors = compare_file(p)
    assert minfer_info(p)["alignment"] == 64
    print(f"\ngguf-py-written file, alignment 64: {keys} keys, {tensors} tensors agree")


def test_reference_written_split(tmp):
    base = os.path.join(tmp, "split.gguf")
    write_reference_file(base, split_max_tensors=2)
    first = os.path.join(tmp, "split-00001-of-00004.gguf")
    assert os.path.isfile(first), os.listdir(tmp)
    keys, tensors = compare_file(first, expect_parts=4)
    print(f"\ngguf-py-written split (4 parts): {keys} keys, {tensors} tensors agree")


def test_smollm2_every_key_and_tensor():
    assert SMOLLM2 and os.path.isfile(SMOLLM2), f"MINFER_SMOLLM2={SMOLLM2!r} missing (scripts/setup.sh fetches it)"
    keys, tensors = compare_file(SMOLLM2)
    print(f"\nSmolLM2-135M-Instruct: {keys} keys, {tensors} tensors agree with gguf-py")


def test_minfer_written_files_read_by_gguf_py(tmp):
    src = os.path.join(tmp, "src.gguf")
    write_reference_file(src)
    for args, name in [(["Q8_0"], "q8.gguf"), (["Q8_0", "--split-max-tensors", "3"], "q8s.gguf")]:
        out = os.path.join(tmp, name)
        r = subprocess.run([MINFER, "quantize", src, out, *args, "-t", "2"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        first = out if "--split-max-tensors" not in args else out[:-5] + "-00001-of-00003.gguf"
        n_parts = 1 if first == out else 3
        keys, tensors = compare_file(first, expect_parts=n_parts)
        ref = gguf.GGUFReader(first)
        assert ref.fields["general.file_type"].contents() == 7  # MOSTLY_Q8_0
        print(f"\nminfer-written {name}: {keys} keys, {tensors} tensors agree with gguf-py")


def test_corrupt_files_are_refused(tmp):
    assert SMOLLM2 and os.path.isfile(SMOLLM2)
    data = open(SMOLLM2, "rb").read()
    ref = gguf.GGUFReader(SMOLLM2)
    cuts = [0, 3, 4, 8, 23, 100, 1000, 100_000, int(ref.data_offset) - 1, int(ref.data_offset) + 10, len(data) - 1]
    for n in cuts:
        p = os.path.join(tmp, f"cut{n}.gguf")
        with open(p, "wb") as f:
            f.write(data[:n])
        r = subprocess.run([MINFER, "info", p], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, f"cut at {n}: exit {r.returncode}\n{r.stderr}"
        assert p in r.stderr, f"cut at {n}: error does not name the file: {r.stderr}"
        os.remove(p)
    # Corrupt a tensor's type id and the tensor count.
    bad = bytearray(data)
    bad[16:24] = (10**12).to_bytes(8, "little")  # n_kv
    p = os.path.join(tmp, "badkv.gguf")
    open(p, "wb").write(bad)
    r = subprocess.run([MINFER, "info", p], capture_output=True, text=True)
    assert r.returncode == 1 and "metadata count" in r.stderr, r.stderr
    print(f"\n{len(cuts) + 1} corrupt variants of SmolLM2 refused with errors naming the file")
