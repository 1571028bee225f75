"""minfer download / list / rm and hf: / ollama: names, against loopback mocks of the Hub,
the Ollama registry and a CDN on a second loopback address (mock_registry.py)."""
import hashlib
import json
import os
import re
import resource
import signal
import subprocess
import time

import pytest

from conftest import MINFER, SMOLLM2, Blob, fake_gguf
from mock_registry import sha256_file


def last_line(s):
    lines = [l for l in s.splitlines() if l.strip()]
    return lines[-1] if lines else ""


def sha256(path):
    return sha256_file(path)


def listing(env):
    r = env.run("list", "--json", check=True)
    return {m["name"]: m for m in json.loads(r.stdout)}


# -- the mock against the real client ------------------------------------------------------

def test_mock_is_a_hub_for_huggingface_hub(mocks, env_factory, smol_blob, monkeypatch):
    """huggingface_hub 2.x, unmodified, downloads from the mock, pages its tree and maps its errors."""
    hub, _, cdn = mocks
    env = env_factory(hub)
    sha = hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob, "README.md": b"# a model card\n" * 10,
                                     "sub/notes.txt": b"x" * 3000})
    hub.add_repo("test/private", {"m-Q8_0.gguf": fake_gguf("p")}, private=True)
    hub.add_repo("test/gated", {"m-Q8_0.gguf": fake_gguf("g")}, gated=True)
    code = f"""
import json, os, sys
from huggingface_hub import HfApi, hf_hub_download, errors
api = HfApi(endpoint={hub.endpoint!r})
out = {{}}
out["sha"] = api.model_info("test/smol").sha
out["files"] = sorted(api.list_repo_files("test/smol"))
tree = list(api.list_repo_tree("test/smol", recursive=True))
out["lfs"] = [t.path for t in tree if getattr(t, "lfs", None)]
out["gguf"] = hf_hub_download("test/smol", "smol-Q4_1.gguf")
out["readme"] = hf_hub_download("test/smol", "README.md")
for name, call in [("missing_repo", lambda: hf_hub_download("test/nope", "x.gguf")),
                   ("private", lambda: hf_hub_download("test/private", "m-Q8_0.gguf")),
                   ("gated", lambda: hf_hub_download("test/gated", "m-Q8_0.gguf")),
                   ("entry", lambda: hf_hub_download("test/smol", "nope.gguf")),
                   ("revision", lambda: hf_hub_download("test/smol", "README.md", revision="v9"))]:
    try:
        call(); out[name] = None
    except Exception as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""
    r = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env.vars, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(last_line(r.stdout))
    assert out["sha"] == sha
    assert out["files"] == ["README.md", "smol-Q4_1.gguf", "sub/notes.txt"]  # three pages of two entries
    assert out["lfs"] == ["smol-Q4_1.gguf", "sub/notes.txt"]
    assert out["gguf"] == os.path.join(env.hf_cache, "models--test--smol", "snapshots", sha, "smol-Q4_1.gguf")
    assert sha256(out["gguf"]) == smol_blob.sha256
    assert os.path.islink(out["gguf"]) and os.readlink(out["gguf"]) == f"../../blobs/{smol_blob.sha256}"
    assert open(out["readme"], "rb").read() == b"# a model card\n" * 10
    assert out["missing_repo"] == "RepositoryNotFoundError"
    assert out["private"] == "RepositoryNotFoundError"
    assert out["gated"] == "GatedRepoError"
    assert out["entry"] == "RemoteEntryNotFoundError"
    assert out["revision"] == "RevisionNotFoundError"
    assert cdn.requests(smol_blob.sha256), "the LFS file came from the CDN host"


# -- a user's session ----------------------------------------------------------------------

def test_session_download_list_run_rm(mocks, env_factory, smol_blob):
    hub, _, cdn = mocks
    env = env_factory(hub)
    env.vars["HF_TOKEN"] = hub.token
    sha = hub.add_repo("test/smol", {"SmolLM2-135M-Instruct-Q4_1.gguf": smol_blob, "README.md": b"card"})
    r = env.run("download", "hf:test/smol:Q4_1", check=True)
    path = last_line(r.stdout)
    assert path == os.path.join(env.hf_cache, "models--test--smol", "snapshots", sha, "SmolLM2-135M-Instruct-Q4_1.gguf")
    assert sha256(path) == smol_blob.sha256
    assert "downloaded" in r.stderr and "MB" in r.stderr, r.stderr
    assert open(os.path.join(env.hf_cache, "models--test--smol", "refs", "main")).read() == sha
    # The token went to the Hub, never to the CDN.
    assert all(q["headers"].get("authorization") == f"Bearer {hub.token}" for q in hub.requests())
    assert cdn.requests() and not any("authorization" in q["headers"] for q in cdn.requests())

    models = listing(env)
    assert models["hf:test/smol:Q4_1"]["size"] == smol_blob.size
    assert models["hf:test/smol:Q4_1"]["path"] == path
    table = env.run("list", check=True).stdout
    assert re.search(r"hf:test/smol:Q4_1\s+98\.4 MB\s+hf", table), table

    # Cached: no network at all (the mocks are gone), for the main command and the others.
    hub.close(), cdn.close()
    r = env.run("hf:test/smol:Q4_1", "What is 2+2?", "-n", "8", "--temp", "0", check=True)
    assert r.stdout.strip()
    env.run("info", "hf:test/smol:Q4_1", check=True)
    r = env.run("tokenize", "hf:test/smol", "hello", check=True)  # no tag, no Hub: the rule over the cached files
    assert "hf:test/smol: the Hub is unreachable; using the cached SmolLM2-135M-Instruct-Q4_1.gguf" in r.stderr, r.stderr
    again = env.run("download", "hf:test/smol:Q4_1", check=True)
    assert last_line(again.stdout) == path and "already cached" in again.stderr

    r = env.run("rm", "hf:test/smol:Q4_1", check=True)
    assert f"removed {path}" in r.stdout
    assert not os.path.exists(os.path.join(env.hf_cache, "models--test--smol"))
    assert "hf:test/smol:Q4_1" not in listing(env)


def test_tag_selection_on_the_hub(mocks, env_factory):
    """llama.cpp's rules through the whole path: listing, pick, download of the picked file only."""
    hub, _, _ = mocks
    env = env_factory(hub)
    files = {p: fake_gguf(p) for p in ["model-BF16.gguf", "model-Q4_K_M.gguf", "model-Q8_0.gguf", "mmproj-model-Q8_0.gguf",
                                       "mtp-model-Q4_0.gguf", "Q3_K_M/model-Q3_K_M-00001-of-00002.gguf",
                                       "Q3_K_M/model-Q3_K_M-00002-of-00002.gguf"]}
    files["README.md"] = b"card"
    sha = hub.add_repo("test/flat", files)
    snap = os.path.join(env.hf_cache, "models--test--flat", "snapshots", sha)
    for name, want in [("hf:test/flat", "model-Q4_K_M.gguf"), ("hf:test/flat:q8_0", "model-Q8_0.gguf"),
                       ("hf:test/flat:BF16", "model-BF16.gguf"), ("hf:test/flat:model-Q8_0.gguf", "model-Q8_0.gguf"),
                       ("hf:test/flat:Q3_K_M", "Q3_K_M/model-Q3_K_M-00001-of-00002.gguf")]:
        r = env.run("download", name, check=True)
        assert last_line(r.stdout) == os.path.join(snap, want), (name, r.stderr)
    assert os.path.isfile(os.path.join(snap, "Q3_K_M/model-Q3_K_M-00002-of-00002.gguf"))
    assert not os.path.exists(os.path.join(snap, "mmproj-model-Q8_0.gguf"))
    r = env.run("download", "hf:test/flat:Q4_0", check=False)
    assert r.returncode == 1 and "no GGUF model file matches the tag 'Q4_0'" in r.stderr and "model-BF16.gguf" in r.stderr
    assert "mtp-model-Q4_0.gguf" not in r.stderr  # a draft head is not a model
    names = listing(env)
    assert {"hf:test/flat:Q4_K_M", "hf:test/flat:Q8_0", "hf:test/flat:BF16", "hf:test/flat:Q3_K_M"} <= set(names)
    assert len(names["hf:test/flat:Q3_K_M"]["files"]) == 2


def test_no_tag_means_the_listing_default_whatever_is_cached(mocks, env_factory):
    """hf:ORG/REPO is the listing's default file even when another quant is cached; without the
    Hub the same rule runs over the cached files, quickly, and says so."""
    hub, _, cdn = mocks
    env = env_factory(hub)
    sha = hub.add_repo("test/two", {p: fake_gguf(p) for p in ["model-BF16.gguf", "model-Q4_K_M.gguf", "model-Q8_0.gguf"]})
    snap = os.path.join(env.hf_cache, "models--test--two", "snapshots", sha)
    env.run("download", "hf:test/two:Q8_0", check=True)
    hub.clear_log()
    r = env.run("download", "hf:test/two", check=True)
    assert last_line(r.stdout) == os.path.join(snap, "model-Q4_K_M.gguf"), r.stderr
    assert "already cached" not in r.stderr and "unreachable" not in r.stderr, r.stderr
    assert hub.requests("/tree/"), "the listing was asked for"

    hub.close(), cdn.close()
    slow = {"MINFER_HTTP_RETRY_MS": "1000"}  # a retry loop would take seconds
    for rm, want in [(None, "model-Q4_K_M.gguf"), ("hf:test/two:Q4_K_M", "model-Q8_0.gguf")]:
        if rm:
            env.run("rm", rm, check=True)
        t0 = time.time()
        r = env.run("download", "hf:test/two", env=slow, check=True)
        assert time.time() - t0 < 3 and "retrying" not in r.stderr, r.stderr
        assert last_line(r.stdout) == os.path.join(snap, want), r.stderr
        assert f"hf:test/two: the Hub is unreachable; using the cached {want} by the default-file rule over cached files" \
            in r.stderr, r.stderr
    r = env.run("download", "hf:test/two:BF16", check=False)
    assert r.returncode == 1 and "unreachable" not in r.stderr  # a tag that is not cached: no fallback


@pytest.fixture(scope="module")
def split_smol(tmp_path_factory):
    d = tmp_path_factory.mktemp("split")
    out = str(d / "smol-Q8_0.gguf")
    r = subprocess.run([MINFER, "quantize", SMOLLM2, out, "Q8_0", "--split-max-tensors", "120", "-t", "2", "--allow-requantize"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    parts = sorted(p for p in os.listdir(d) if "-of-" in p)
    assert len(parts) == 3, parts
    return [str(d / p) for p in parts]


def test_split_model_fetches_every_part_and_runs(mocks, env_factory, split_smol):
    hub, _, cdn = mocks
    env = env_factory(hub)
    sha = hub.add_repo("test/split", {f"Q8_0/{os.path.basename(p)}": p for p in split_smol})
    r = env.run("download", "hf:test/split:Q8_0", check=True)
    first = last_line(r.stdout)
    assert first.endswith("Q8_0/smol-Q8_0-00001-of-00003.gguf")
    for p in split_smol:
        link = os.path.join(env.hf_cache, "models--test--split", "snapshots", sha, "Q8_0", os.path.basename(p))
        assert sha256(link) == sha256(p)
        assert os.readlink(link).startswith("../../../blobs/")
    hub.close(), cdn.close()
    r = env.run("hf:test/split:Q8_0", "Hi", "-n", "4", "--temp", "0", check=True)
    assert r.stdout.strip()


# -- transfers that go wrong ---------------------------------------------------------------

def test_resume_after_dropped_connections(mocks, env_factory, smol_blob):
    hub, _, cdn = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    cdn.fault(smol_blob.sha256, drops=2, drop_after=smol_blob.size // 3)
    r = env.run("download", "hf:test/smol", check=True)
    assert sha256(last_line(r.stdout)) == smol_blob.sha256
    gets = [q for q in cdn.requests(smol_blob.sha256) if q["method"] == "GET"]
    ranges = [q["headers"].get("range") for q in gets]
    third = smol_blob.size // 3
    assert ranges == [None, f"bytes={third}-", f"bytes={2 * third}-"], ranges
    assert "retrying" in r.stderr
    # Every try went through resolve/ again (a signed CDN link may have expired meanwhile).
    assert len([q for q in hub.requests("/resolve/") if q["method"] == "GET"]) == 3


def test_server_that_ignores_range_restarts_cleanly(mocks, env_factory, smol_blob):
    hub, _, cdn = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    cdn.fault(smol_blob.sha256, drops=1, drop_after=smol_blob.size // 2, ignore_range=True)
    r = env.run("download", "hf:test/smol", check=True)
    assert sha256(last_line(r.stdout)) == smol_blob.sha256
    gets = [q for q in cdn.requests(smol_blob.sha256) if q["method"] == "GET"]
    assert [q["headers"].get("range") for q in gets] == [None, f"bytes={smol_blob.size // 2}-"]
    assert "starting over" in r.stderr


def test_interrupt_keeps_the_partial_file_and_the_next_run_resumes(mocks, env_factory, smol_blob):
    hub, _, cdn = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    cdn.fault(smol_blob.sha256, rate=20_000_000)  # 20 MB/s: about 5 s for the file
    p = env.popen("download", "hf:test/smol")
    partial = os.path.join(env.hf_cache, "models--test--smol", "blobs", smol_blob.sha256 + ".incomplete")
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(partial) or os.path.getsize(partial) < 10_000_000):
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err and partial in err
    kept = os.path.getsize(partial)
    assert 10_000_000 <= kept < smol_blob.size
    cdn.faults.clear()
    cdn.clear_log()
    r = env.run("download", "hf:test/smol", check=True)
    assert sha256(last_line(r.stdout)) == smol_blob.sha256
    gets = [q for q in cdn.requests(smol_blob.sha256) if q["method"] == "GET"]
    assert gets[0]["headers"].get("range") == f"bytes={kept}-"
    assert not os.path.exists(partial)


def test_wrong_checksum_deletes_the_partial_file(mocks, env_factory, smol_blob):
    hub, _, cdn = mocks
    env = env_factory(hub)
    sha = hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    cdn.fault(smol_blob.sha256, corrupt=True)
    r = env.run("download", "hf:test/smol", check=False)
    assert r.returncode == 1
    assert "checksum mismatch" in r.stderr and smol_blob.sha256 in r.stderr and "deleted" in r.stderr
    repo = os.path.join(env.hf_cache, "models--test--smol")
    assert os.listdir(os.path.join(repo, "blobs")) == []
    assert not os.path.exists(os.path.join(repo, "snapshots", sha, "smol-Q4_1.gguf"))
    assert "hf:test/smol:Q4_1" not in listing(env)


def test_transient_5xx_is_retried_and_a_lasting_one_reported(mocks, env_factory):
    hub, _, cdn = mocks
    env = env_factory(hub)
    b = Blob(fake_gguf("t", 100_000))
    hub.add_repo("test/flaky", {"m-Q8_0.gguf": b})
    cdn.fault(b.sha256, fail=2)
    r = env.run("download", "hf:test/flaky", check=True)
    assert sha256(last_line(r.stdout)) == b.sha256 and r.stderr.count("HTTP 503") == 2
    hub.add_repo("test/down", {"m-Q8_0.gguf": (c := Blob(fake_gguf("d", 100_000)))})
    cdn.fault(c.sha256, fail=100)
    r = env.run("download", "hf:test/down", check=False)
    assert r.returncode == 1 and "cannot download m-Q8_0.gguf: HTTP 503" in r.stderr


def test_hub_errors_in_plain_words(mocks, env_factory):
    hub, _, cdn = mocks
    env = env_factory(hub)
    hub.add_repo("test/private", {"m-Q8_0.gguf": fake_gguf("p")}, private=True)
    hub.add_repo("test/gated", {"m-Q8_0.gguf": fake_gguf("g")}, gated=True)
    hub.add_repo("test/denied", {"m-Q8_0.gguf": fake_gguf("d")}, gated="denied")
    hub.add_repo("test/ok", {"m-Q8_0.gguf": fake_gguf("o")})
    cases = [
        ({}, "hf:test/nope", "hf:test/nope: repository not found", "set HF_TOKEN"),
        ({}, "hf:test/private", "hf:test/private: repository not found", "HTTP 401"),
        ({}, "hf:test/gated", "hf:test/gated is a gated repository", "accept its conditions"),
        ({"HF_TOKEN": hub.token}, "hf:test/denied", "hf:test/denied is a gated repository", "HTTP 403"),
        ({"HF_TOKEN": "hf_wrong"}, "hf:test/ok", "the Hub rejected the token in HF_TOKEN", "HTTP 401"),
        ({}, "hf:test/ok@v2", "hf:test/ok has no revision 'v2'", "HTTP 404"),
        ({}, "hf:test/ok:other.gguf", "no file 'other.gguf' in the repository", "m-Q8_0.gguf"),
        ({}, "hf:not-a-repo", "expected hf:ORG/REPO", ""),
    ]
    for extra, name, want, also in cases:
        r = env.run("download", name, env=extra, check=False)
        assert r.returncode == 1, (name, r.stdout)
        assert want in r.stderr and also in r.stderr, (name, r.stderr)
    # A private repo with the token (from $HF_HOME/token, as `hf auth login` writes it) works.
    os.makedirs(os.path.join(env.home, ".cache", "huggingface"), exist_ok=True)
    with open(os.path.join(env.home, ".cache", "huggingface", "token"), "w") as f:
        f.write(hub.token + "\n")
    env.run("download", "hf:test/private", check=True)
    assert not any("authorization" in q["headers"] for q in cdn.requests())


def test_offline_mode(mocks, env_factory, smol_blob):
    hub, _, _ = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    r = env.run("download", "hf:test/smol", env={"HF_HUB_OFFLINE": "1"}, check=False)
    assert r.returncode == 1 and "HF_HUB_OFFLINE" in r.stderr and "not in the Hugging Face cache" in r.stderr
    assert hub.requests() == []
    path = last_line(env.run("download", "hf:test/smol", check=True).stdout)
    hub.clear_log()
    r = env.run("download", "hf:test/smol:Q4_1", env={"HF_HUB_OFFLINE": "1"}, check=True)
    assert last_line(r.stdout) == path and hub.requests() == []


def test_concurrent_downloads_share_one_transfer(mocks, env_factory, smol_blob):
    hub, _, cdn = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    cdn.fault(smol_blob.sha256, rate=50_000_000)
    procs = [env.popen("download", "hf:test/smol") for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1] for o in outs]
    paths = {last_line(o[0]) for o in outs}
    assert len(paths) == 1 and sha256(paths.pop()) == smol_blob.sha256
    assert cdn.served[smol_blob.sha256] == 1, "one process downloaded, the others waited on the lock"
    assert sum("waiting for another process" in o[1] for o in outs) >= 1


def test_unwritable_cache_and_full_disk_are_clear_errors(mocks, env_factory, tmp_path):
    hub, _, _ = mocks
    env = env_factory(hub)
    hub.add_repo("test/big", {"m-Q8_0.gguf": Blob(fake_gguf("b", 3_000_000))})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    r = env.run("download", "hf:test/big", env={"HF_HUB_CACHE": str(blocker / "hub")}, check=False)
    assert r.returncode == 1 and str(blocker) in r.stderr and "Not a directory" in r.stderr, r.stderr

    def limit_file_size():  # a write past 1 MB fails like a full disk would
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))
    r = env.run("download", "hf:test/big", check=False, preexec_fn=limit_file_size)
    assert r.returncode == 1 and "cannot write" in r.stderr and "File too large" in r.stderr, r.stderr
    assert "hf:test/big:Q8_0" not in listing(env)


# -- interop with huggingface_hub's cache --------------------------------------------------

def test_huggingface_hub_sees_what_minfer_fetched(mocks, env_factory, smol_blob):
    hub, _, _ = mocks
    env = env_factory(hub)
    sha = hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    path = last_line(env.run("download", "hf:test/smol", check=True).stdout)
    # The `hf` CLI: its cache listing, and its checksum verification against the Hub's tree.
    r = subprocess.run(["hf", "cache", "ls", "--json"], capture_output=True, text=True, env=env.vars, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [(e["repo_id"], e["refs"]) for e in json.loads(r.stdout)] == [("test/smol", ["main"])], r.stdout
    r = subprocess.run(["hf", "cache", "verify", "test/smol", "--fail-on-missing-files"], capture_output=True, text=True,
                       env=env.vars, timeout=120)
    assert r.returncode == 0 and "All checksums match" in r.stdout, r.stdout + r.stderr
    hub.close()
    code = """
import json
from huggingface_hub import hf_hub_download, scan_cache_dir, try_to_load_from_cache
p = hf_hub_download("test/smol", "smol-Q4_1.gguf", local_files_only=True)
info = scan_cache_dir()
repos = [{"id": r.repo_id, "size": r.size_on_disk, "revs": [v.commit_hash for v in r.revisions],
          "files": sorted(f.file_name for v in r.revisions for f in v.files), "refs": sorted(x for v in r.revisions for x in v.refs)}
         for r in info.repos]
print(json.dumps({"path": p, "cached": try_to_load_from_cache("test/smol", "smol-Q4_1.gguf"), "repos": repos,
                  "warnings": [str(w) for w in info.warnings]}))
"""
    r = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env={**env.vars, "HF_HUB_OFFLINE": "1"},
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(last_line(r.stdout))
    assert out["path"] == path and out["cached"] == path
    assert out["warnings"] == []
    assert out["repos"] == [{"id": "test/smol", "size": smol_blob.size, "revs": [sha], "files": ["smol-Q4_1.gguf"],
                             "refs": ["main"]}]


def test_minfer_sees_what_huggingface_hub_fetched(mocks, env_factory, smol_blob):
    hub, _, _ = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"SmolLM2-Q4_1.gguf": smol_blob})
    code = "from huggingface_hub import hf_hub_download; print(hf_hub_download('test/smol', 'SmolLM2-Q4_1.gguf'))"
    r = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env.vars, timeout=300)
    assert r.returncode == 0, r.stderr
    path = last_line(r.stdout)
    hub.close()
    assert listing(env)["hf:test/smol:Q4_1"]["path"] == path
    r = env.run("download", "hf:test/smol:Q4_1", check=True)
    assert last_line(r.stdout) == path and "already cached" in r.stderr
    r = env.run("hf:test/smol", "Hi", "-n", "4", "--temp", "0", check=True)
    assert r.stdout.strip()


# -- Ollama --------------------------------------------------------------------------------

def test_ollama_registry_download_list_run_rm(mocks, env_factory, smol_blob):
    _, ollama, cdn = mocks
    env = env_factory(None, ollama)
    ollama.add_model("smollm2", "135m", smol_blob)
    ollama.add_model("smollm2", "latest", smol_blob)
    cdn.fault(smol_blob.sha256, drops=1, drop_after=smol_blob.size // 4)
    store = os.path.join(env.home, ".cache", "minfer", "ollama")
    r = env.run("download", "ollama:smollm2:135m", check=True)
    blob = os.path.join(store, "blobs", "sha256-" + smol_blob.sha256)
    assert last_line(r.stdout) == blob and sha256(blob) == smol_blob.sha256
    host = f"127.0.0.1:{ollama.port}"
    manifest = os.path.join(store, "manifests", host, "library", "smollm2", "135m")
    assert json.load(open(manifest))["layers"][0]["digest"] == "sha256:" + smol_blob.sha256
    gets = [q for q in cdn.requests(smol_blob.sha256) if q["method"] == "GET"]
    assert [q["headers"].get("range") for q in gets] == [None, f"bytes={smol_blob.size // 4}-"]
    # Tag default "latest"; the blob is shared, not fetched again.
    r = env.run("download", "ollama:smollm2", check=True)
    assert last_line(r.stdout) == blob and len([q for q in cdn.requests(smol_blob.sha256) if q["method"] == "GET"]) == 2
    names = listing(env)
    assert names["ollama:smollm2:135m"]["size"] == smol_blob.size and "ollama:smollm2:latest" in names
    ollama.close(), cdn.close()
    r = env.run("ollama:smollm2:135m", "Hi", "-n", "4", "--temp", "0", check=True)
    assert r.stdout.strip()
    r = env.run("rm", "ollama:smollm2:135m", check=True)
    assert blob not in r.stdout and os.path.exists(blob)  # still used by :latest
    r = env.run("rm", "ollama:smollm2", check=True)
    assert f"removed {blob}" in r.stdout and not os.path.exists(blob)
    assert not any(n.startswith("ollama:") for n in listing(env))


def test_ollama_registry_errors(mocks, env_factory):
    _, ollama, _ = mocks
    env = env_factory(None, ollama)
    r = env.run("download", "ollama:nothing:7b", check=False)
    assert r.returncode == 1 and "ollama:nothing:7b: not found in the Ollama registry" in r.stderr
    assert "MANIFEST_UNKNOWN" in r.stderr
    r = env.run("download", "ollama:bad/na/me", check=False)
    assert r.returncode == 1 and "expected ollama:[NAMESPACE/]MODEL[:TAG]" in r.stderr


def test_existing_ollama_store_is_used_in_place(env_factory, smol_blob, tmp_path):
    env = env_factory()
    env.vars["MINFER_OLLAMA_REGISTRY"] = "http://127.0.0.1:9"  # nothing listens: no network needed
    models = os.path.join(env.home, ".ollama", "models")
    os.makedirs(os.path.join(models, "blobs"))
    blob = os.path.join(models, "blobs", "sha256-" + smol_blob.sha256)
    os.symlink(SMOLLM2, blob) if os.stat(SMOLLM2).st_dev != os.stat(models).st_dev else os.link(SMOLLM2, blob)
    tmpl = b"{{ .Prompt }}"
    tsha = hashlib.sha256(tmpl).hexdigest()
    open(os.path.join(models, "blobs", "sha256-" + tsha), "wb").write(tmpl)
    mdir = os.path.join(models, "manifests", "registry.ollama.ai", "library", "smollm2")
    os.makedirs(mdir)
    json.dump({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
               "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + tsha, "size": len(tmpl)},
               "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + smol_blob.sha256, "size": smol_blob.size},
                          {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + tsha, "size": len(tmpl)}]},
              open(os.path.join(mdir, "135m"), "w"))
    entry = listing(env)["ollama:smollm2:135m"]
    assert entry["path"] == blob and entry["read_only"] and entry["source"] == "ollama"
    r = env.run("download", "ollama:smollm2:135m", check=True)
    assert last_line(r.stdout) == blob  # in place, no copy
    assert not os.path.exists(os.path.join(env.home, ".cache", "minfer", "ollama", "blobs"))
    r = env.run("ollama:smollm2:135m", "Hi", "-n", "4", "--temp", "0", check=True)
    assert r.stdout.strip()
    r = env.run("rm", "ollama:smollm2:135m", check=False)
    assert r.returncode == 1 and "ollama rm smollm2:135m" in r.stderr and os.path.exists(blob)
    # OLLAMA_MODELS moves the store.
    env.vars["OLLAMA_MODELS"] = str(tmp_path / "elsewhere")
    assert "ollama:smollm2:135m" not in listing(env)


def test_local_names_still_work(env_factory, smol_blob):
    env = env_factory()
    os.makedirs(env.vars["MINFER_MODEL_DIR"])
    os.symlink(SMOLLM2, os.path.join(env.vars["MINFER_MODEL_DIR"], "SmolLM2-135M-Instruct-Q4_1.gguf"))
    assert "SmolLM2-135M-Instruct-Q4_1" in listing(env)
    r = env.run("download", "SmolLM2", check=True)
    assert last_line(r.stdout).endswith("SmolLM2-135M-Instruct-Q4_1.gguf")
    r = env.run("rm", SMOLLM2, check=False)
    assert r.returncode == 1 and "outside minfer's caches" in r.stderr and os.path.exists(SMOLLM2)
    r = env.run("nope-model", "hi", check=False)
    assert r.returncode == 1 and "no model named 'nope-model'" in r.stderr and "hf:ORG/REPO" in r.stderr


# -- a hostile or broken server ------------------------------------------------------------

def test_hostile_hub_cannot_leak_the_token_or_write_outside_the_cache(mocks, env_factory, tmp_path):
    hub, _, cdn = mocks
    env = env_factory(hub)
    env.vars["HF_TOKEN"] = hub.token
    # The tree's next page on another host: not followed, the token not sent there.
    hub.add_repo("test/many", {f"m{i}-Q8_0.gguf": fake_gguf(str(i)) for i in range(5)})
    hub.link_base = cdn.url
    r = env.run("download", "hf:test/many:m4-Q8_0.gguf", check=False)
    assert r.returncode == 1 and "continues on another host" in r.stderr, r.stderr
    assert not any("authorization" in q["headers"] for q in cdn.requests())
    hub.link_base = None
    # Paths that would leave the snapshot are never file names.
    outside = tmp_path / "evil-Q4_K_M.gguf"
    hub.add_repo("test/evil", {"../../../../../../../../.." + str(outside): fake_gguf("e"), str(tmp_path / "abs-Q8_0.gguf"): fake_gguf("a")})
    r = env.run("download", "hf:test/evil", check=False)
    assert r.returncode == 1 and "no GGUF model file" in r.stderr, r.stderr
    assert not outside.exists() and not (tmp_path / "abs-Q8_0.gguf").exists()
    # A redirect to a non-HTTP URL, and an ETag that is not a digest.
    hub.add_repo("test/odd", {"a-Q8_0.gguf": fake_gguf("x"), "b-Q8_0.gguf": fake_gguf("y")})
    hub.lies = {"a-Q8_0.gguf": {"location": "file:///dev/zero"}, "b-Q8_0.gguf": {"etag": "."}}
    r = env.run("download", "hf:test/odd:a-Q8_0.gguf", check=False)
    assert r.returncode == 1 and "refusing a redirect to 'file:///dev/zero'" in r.stderr, r.stderr
    r = env.run("download", "hf:test/odd:b-Q8_0.gguf", check=False)
    assert r.returncode == 1 and "neither a sha256 nor a git sha1" in r.stderr, r.stderr
    r = env.run("download", "hf:test/odd@/tmp/x", check=False)
    assert r.returncode == 1 and "bad revision" in r.stderr


def test_wrong_size_and_endless_error_bodies_end(mocks, env_factory):
    hub, _, cdn = mocks
    env = env_factory(hub)
    b = Blob(fake_gguf("s", 50_000))
    hub.add_repo("test/short", {"m-Q8_0.gguf": b})
    for lie in (+1000, -1000):  # the CDN sends fewer / more bytes than the file has
        cdn.fault(b.sha256, **({"short": 1000} if lie > 0 else {"extra": 1000}))
        cdn.clear_log()
        t0 = time.time()
        r = env.run("download", "hf:test/short", check=False, timeout=60)
        assert r.returncode == 1 and time.time() - t0 < 30, r.stderr
        assert len(cdn.requests(b.sha256)) <= 8, len(cdn.requests(b.sha256))
        assert ("ended at 49000 of 50000" if lie > 0 else "more than the 50000 bytes") in r.stderr, r.stderr
    c = Blob(fake_gguf("z", 50_000))
    hub.add_repo("test/endless", {"m-Q8_0.gguf": c})
    cdn.fault(c.sha256, endless_error=True)
    r = env.run("download", "hf:test/endless", check=False, timeout=60)
    assert r.returncode == 1 and "HTTP 500" in r.stderr


def test_ctrl_c_while_waiting_for_the_lock(mocks, env_factory, smol_blob):
    import fcntl
    hub, _, _ = mocks
    env = env_factory(hub)
    hub.add_repo("test/smol", {"smol-Q4_1.gguf": smol_blob})
    lock = os.path.join(env.hf_cache, ".locks", "models--test--smol", smol_blob.sha256 + ".lock")
    os.makedirs(os.path.dirname(lock))
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another process is downloading it
        p = env.popen("download", "hf:test/smol")
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    assert p.returncode == 130 and "waiting for another process" in err and "interrupted while waiting for the lock" in err


def test_a_broken_cache_entry_does_not_break_list(env_factory):
    env = env_factory()
    os.makedirs(env.hf_cache)
    os.symlink("loop", os.path.join(env.hf_cache, "models--x--loop"))
    os.symlink(os.path.join(env.hf_cache, "models--x--loop"), os.path.join(env.hf_cache, "loop"))
    os.makedirs(os.path.join(env.hf_cache, "models--x--y", "refs"))
    os.symlink("self", os.path.join(env.hf_cache, "models--x--y", "refs", "self"))
    r = env.run("list", "--json", check=True)
    assert json.loads(r.stdout) == []


def test_rm_needs_the_exact_name(env_factory):
    env = env_factory()
    d = env.vars["MINFER_MODEL_DIR"]
    os.makedirs(d)
    for n in ("SmolLM2-135M-Q4_1.gguf", "big-00001-of-00002.gguf", "big-00002-of-00002.gguf"):
        open(os.path.join(d, n), "wb").write(b"GGUF")
    r = env.run("rm", "S", check=False)
    assert r.returncode == 1 and "no model named exactly 'S'" in r.stderr and os.path.exists(os.path.join(d, "SmolLM2-135M-Q4_1.gguf"))
    r = env.run("rm", "big-00002-of-00002.gguf", check=False)
    assert r.returncode == 1 and "first part" in r.stderr
    r = env.run("rm", "big-00001-of-00002", check=True)
    assert r.stdout.count("removed") == 2 and os.listdir(d) == ["SmolLM2-135M-Q4_1.gguf"]
