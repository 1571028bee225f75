"""Slot files on `minfer serve` (POST /slots/ID?action=save|restore|erase, --slot-save-path;
docs/server-api.md#slots): a slot's cache saved, restored into another slot or another server
process, reused without a prefill, with the same greedy reply; erase; a save that waits for a
busy slot; files that are not ours, corrupt, of another model, or outside the folder."""
import json
import os
import threading
import time
import urllib.request

import pytest

from conftest import post_json as call, ServerProcess

GEMMA3 = os.environ.get("MINFER_GEMMA3", os.path.expanduser("~/.cache/minfer/models/gemma3-270m-Q4_K_M.gguf"))
PROMPT = "The history of the printing press begins in the fifteenth century, when"


def complete(url, prompt, slot, n=16):
    st, body = call(url, "/completion", {"prompt": prompt, "id_slot": slot, "n_predict": n, "temperature": 0, "cache_prompt": True})
    assert st == 200, body
    return body


@pytest.fixture
def folder(tmp_path):
    return tmp_path


def start(folder, *extra, model=None):
    return ServerProcess("-np", "2", "-c", "4096", "-t", "2", "--slot-save-path", str(folder), *extra, model=model)


def test_save_restore_across_slots_and_restarts(folder):
    srv = start(folder)
    try:
        first = complete(srv.url, PROMPT, 1)
        n_prompt = first["tokens_evaluated"]
        st, saved = call(srv.url, "/slots/1?action=save", {"filename": "one.bin"})
        assert st == 200, saved
        assert saved["id_slot"] == 1 and saved["filename"] == "one.bin"
        assert n_prompt <= saved["n_saved"] <= n_prompt + first["tokens_predicted"]
        assert saved["n_written"] == os.path.getsize(folder / "one.bin") and saved["timings"]["save_ms"] >= 0
        slots = json.loads(urllib.request.urlopen(srv.url + "/slots").read())
        assert slots[1]["n_cached"] == saved["n_saved"]
        # Restored into slot 0: the next prompt sharing the saved prefix prefills only the rest,
        # and the reply is the one slot 1 gives.
        st, restored = call(srv.url, "/slots/0?action=restore", {"filename": "one.bin"})
        assert st == 200, restored
        assert restored["n_restored"] == saved["n_saved"] and restored["n_read"] == saved["n_written"]
        follow = PROMPT + first["content"] + " and then"
        on0 = complete(srv.url, follow, 0)
        assert on0["timings"]["cache_n"] >= n_prompt, on0["timings"]
        on1 = complete(srv.url, follow, 1)
        assert on0["content"] == on1["content"]
        # Erase: the slot forgets; the same prompt is prefilled in full.
        n_cached = json.loads(urllib.request.urlopen(srv.url + "/slots").read())[0]["n_cached"]
        st, erased = call(srv.url, "/slots/0?action=erase")
        assert st == 200 and erased == {"id_slot": 0, "n_erased": n_cached} and n_cached > 0, erased
        assert json.loads(urllib.request.urlopen(srv.url + "/slots").read())[0]["n_cached"] == 0
        assert call(srv.url, "/slots/1?action=erase")[0] == 200  # else slot 1's prefix would be copied over
        again = complete(srv.url, follow, 0)
        assert again["timings"]["cache_n"] == 0 and again["content"] == on0["content"]
    finally:
        assert srv.stop() == 0
    # Another process: the file restores and its prefix is reused.
    srv = start(folder)
    try:
        st, restored = call(srv.url, "/slots/1?action=restore", {"filename": "one.bin"})
        assert st == 200 and restored["n_restored"] == saved["n_saved"], restored
        again = complete(srv.url, follow, 1)
        assert again["timings"]["cache_n"] >= n_prompt and again["content"] == on0["content"]
    finally:
        assert srv.stop() == 0


def test_a_quantized_cache_round_trips_and_is_refused_by_another_type(folder):
    srv = start(folder, "-ctk", "q8_0", "-ctv", "q8_0")
    try:
        first = complete(srv.url, PROMPT, 1)
        st, saved = call(srv.url, "/slots/1?action=save", {"filename": "q8.bin"})
        assert st == 200, saved
        st, restored = call(srv.url, "/slots/0?action=restore", {"filename": "q8.bin"})
        assert st == 200 and restored["n_restored"] == saved["n_saved"], restored
        follow = PROMPT + first["content"] + " and then"
        on0, on1 = complete(srv.url, follow, 0), complete(srv.url, follow, 1)
        assert on0["timings"]["cache_n"] >= first["tokens_evaluated"] and on0["content"] == on1["content"]
    finally:
        assert srv.stop() == 0
    srv = start(folder)  # f16
    try:
        st, body = call(srv.url, "/slots/0?action=restore", {"filename": "q8.bin"})
        assert st >= 400 and "holds a q8_0 cache, this context uses f16" in json.dumps(body), (st, body)
    finally:
        assert srv.stop() == 0


def test_save_waits_for_a_busy_slot(folder):
    srv = start(folder)
    try:
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("r", complete(srv.url, PROMPT, 0, n=96)))
        t.start()
        while json.loads(urllib.request.urlopen(srv.url + "/slots").read())[0]["is_processing"] is False and t.is_alive():
            pass
        st, saved = call(srv.url, "/slots/0?action=save", {"filename": "busy.bin"})
        t.join()
        assert st == 200, saved
        r = done["r"]
        # Saved after the reply ended: the prompt and the reply's tokens.
        assert saved["n_saved"] >= r["tokens_evaluated"] + r["tokens_predicted"] - 1, (saved, r["tokens_predicted"])
    finally:
        assert srv.stop() == 0


def test_bad_requests(folder):
    srv = start(folder)
    try:
        complete(srv.url, PROMPT, 0, n=2)
        for name in ["../escape.bin", ".hidden", "a/b.bin", "", "x\\y", "\u0001"]:
            st, body = call(srv.url, "/slots/0?action=save", {"filename": name})
            assert st == 400 and "Invalid filename" in body["error"]["message"], (name, body)
        assert not (folder.parent / "escape.bin").exists()
        st, body = call(srv.url, "/slots/0?action=save", {})
        assert st == 400 and "filename" in body["error"]["message"]
        st, body = call(srv.url, "/slots/0?action=restore", {"filename": "missing.bin"})
        assert st == 404 and "missing.bin" in body["error"]["message"], body
        st, body = call(srv.url, "/slots/0?action=fly", {"filename": "a.bin"})
        assert st == 400 and "fly" in body["error"]["message"]
        st, body = call(srv.url, "/slots/7?action=save", {"filename": "a.bin"})
        assert st == 400 and "slot 7" in body["error"]["message"]
        (folder / "junk.bin").write_bytes(b"not a cache file at all" * 10)
        st, body = call(srv.url, "/slots/0?action=restore", {"filename": "junk.bin"})
        assert st == 400 and "not a minfer KV file" in body["error"]["message"], body
        st, body = call(srv.url, "/slots/0?action=save", {"filename": "good.bin"})
        assert st == 200
        data = bytearray((folder / "good.bin").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (folder / "bad.bin").write_bytes(bytes(data))
        st, body = call(srv.url, "/slots/0?action=restore", {"filename": "bad.bin"})
        assert st == 400 and "checksum" in body["error"]["message"], body
        (folder / "short.bin").write_bytes(bytes(data[:100]))
        st, body = call(srv.url, "/slots/0?action=restore", {"filename": "short.bin"})
        assert st == 400 and "truncated" in body["error"]["message"], body
        # Huge files are refused from their header, quickly, with nothing allocated (sparse here).
        for name, head in [("huge.bin", b""), ("huge-header.bin", bytes(data[:68]))]:
            with open(folder / name, "wb") as f:
                f.write(head)
                f.truncate(3 << 30)
            t0 = time.monotonic()
            st, body = call(srv.url, "/slots/0?action=restore", {"filename": name})
            assert st == 400 and time.monotonic() - t0 < 5, (name, body)
            assert str(folder) not in body["error"]["message"], body  # the file is named, not the folder
        # A failed restore leaves the slot as it was: its prefix still serves.
        r = complete(srv.url, PROMPT, 0, n=2)
        assert r["timings"]["cache_n"] > 0
    finally:
        assert srv.stop() == 0
    # Another model's file.
    srv = start(folder, model=GEMMA3)
    try:
        st, body = call(srv.url, "/slots/0?action=restore", {"filename": "good.bin"})
        assert st == 400 and "another model" in body["error"]["message"], body
    finally:
        assert srv.stop() == 0


def test_without_slot_save_path():
    srv = ServerProcess("-t", "2")
    try:
        st, body = call(srv.url, "/slots/0?action=save", {"filename": "a.bin"})
        assert st == 501 and "--slot-save-path" in body["error"]["message"]
        st, body = call(srv.url, "/slots/0?action=erase")
        assert st == 200 and body["n_erased"] == 0
    finally:
        assert srv.stop() == 0
