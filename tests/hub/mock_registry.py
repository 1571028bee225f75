"""Loopback mocks of the Hugging Face Hub, the Ollama registry and the CDN behind both.

The Hub and the registry listen on 127.0.0.1; the CDN listens on 127.0.0.2 (another host, so a
client must not forward the Hub token there). Files are served from disk or bytes; every request
is logged, and faults can be armed per blob: drop the connection after N bytes, ignore Range,
corrupt a byte, answer 5xx, or throttle.

    cdn = Cdn(); hub = MockHub(cdn); hub.add_repo("test/smol", {"smol-Q4_1.gguf": "/path/file"})
    hub.endpoint  -> "http://127.0.0.1:PORT"   (HF_ENDPOINT)
    ollama = MockOllama(cdn); ollama.add_model("smol", "latest", "/path/file")
"""
import hashlib
import json
import os
import re
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Blob:
    def __init__(self, src):
        if isinstance(src, (bytes, bytearray)):
            self.data, self.path, self.size = bytes(src), None, len(src)
            self.sha256 = hashlib.sha256(self.data).hexdigest()
        else:
            self.data, self.path, self.size = None, src, os.path.getsize(src)
            self.sha256 = sha256_file(src)

    def read(self, start, end):
        if self.data is not None:
            return self.data[start:end]
        with open(self.path, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def git_sha1(self):
        h = hashlib.sha1(b"blob %d\0" % self.size)
        h.update(self.read(0, self.size))
        return h.hexdigest()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Base:
    """One HTTP server on `host` with a request log."""

    def __init__(self, host):
        self.log = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                owner._record(self)
                owner.handle(self, head=False)

            def do_HEAD(self):
                owner._record(self)
                owner.handle(self, head=True)

        self.httpd = _Server((host, 0), Handler)
        self.host, self.port = host, self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _record(self, h):
        with self.lock:
            self.log.append({"method": h.command, "path": h.path, "headers": {k.lower(): v for k, v in h.headers.items()}})

    def requests(self, pattern=""):
        with self.lock:
            return [r for r in self.log if re.search(pattern, r["path"])]

    def clear_log(self):
        with self.lock:
            self.log.clear()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def send(h, status, body=b"", headers=None, head=False, ctype="application/json"):
        h.send_response(status)
        hdrs = dict(headers or {})
        hdrs.setdefault("Content-Type", ctype)
        hdrs["Content-Length"] = str(len(body))
        for k, v in hdrs.items():
            h.send_header(k, v)
        h.send_header("Connection", "close")
        h.end_headers()
        if not head and body:
            h.wfile.write(body)
        h.close_connection = True


class Cdn(_Base):
    """Serves blobs by sha256 at /blob/<sha256>; honours Range unless told not to."""

    def __init__(self, host="127.0.0.2"):
        self.blobs = {}
        self.faults = {}  # sha256 -> dict(drop_after, drops, ignore_range, corrupt, fail, rate)
        self.served = {}  # sha256 -> number of GETs that sent a body
        super().__init__(host)

    def add(self, blob):
        self.blobs[blob.sha256] = blob
        return f"{self.url}/blob/{blob.sha256}"

    def fault(self, sha256, **kw):
        self.faults[sha256] = kw

    def handle(self, h, head):
        m = re.match(r"^/blob/([0-9a-f]{64})", h.path)
        blob = self.blobs.get(m.group(1)) if m else None
        if blob is None:
            return self.send(h, 404, b"NoSuchKey", head=head, ctype="text/plain")
        f = self.faults.get(blob.sha256, {})
        if f.get("endless_error"):  # a 500 whose body never ends
            h.send_response(500)
            h.send_header("Content-Type", "text/plain")
            h.send_header("Connection", "close")
            h.end_headers()
            h.close_connection = True
            try:
                while True:
                    h.wfile.write(b"error " * 10000)
            except OSError:
                return
        if f.get("fail", 0) > 0:
            f["fail"] -= 1
            return self.send(h, 503, b"Service Unavailable", head=head, ctype="text/plain")
        size = blob.size - f.get("short", 0) + f.get("extra", 0)  # a CDN that sends the wrong length
        start, status = 0, 200
        rng = h.headers.get("Range")
        if rng and not f.get("ignore_range"):
            mm = re.match(r"bytes=(\d+)-$", rng)
            if mm:
                start = int(mm.group(1))
                if start >= size:
                    return self.send(h, 416, b"", {"Content-Range": f"bytes */{size}"}, head=head)
                status = 206
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(size - start))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", f'"{blob.sha256}"')
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        if head:
            return
        with self.lock:
            self.served[blob.sha256] = self.served.get(blob.sha256, 0) + 1
        drop_at = None
        if f.get("drops", 0) > 0:
            f["drops"] -= 1
            drop_at = start + int(f.get("drop_after", size // 3))
        pos, chunk = start, 1 << 20
        rate = f.get("rate")
        if rate:
            chunk = max(1, int(rate) // 20)
        try:
            while pos < size:
                end = min(size, pos + chunk)
                if drop_at is not None and end >= drop_at:
                    end = max(pos, drop_at)
                data = bytearray(blob.read(pos, min(end, blob.size))).ljust(end - pos, b"\0")
                if f.get("corrupt") and pos <= size // 2 < end:
                    data[size // 2 - pos] ^= 0xFF
                h.wfile.write(data)
                pos = end
                if drop_at is not None and pos >= drop_at:
                    h.wfile.flush()
                    h.connection.shutdown(socket.SHUT_RDWR)
                    return
                if rate:
                    time.sleep(len(data) / rate)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass


class MockHub(_Base):
    """The Hub's model API: revision info, the paginated tree, resolve/ with LFS redirects."""

    LFS_MIN = 1024  # bigger files (and every .gguf) are LFS: 302 to the CDN, sha256 etag

    def __init__(self, cdn, host="127.0.0.1", page_size=2, token="hf_mock_token"):
        self.cdn, self.page_size, self.token = cdn, page_size, token
        self.repos = {}  # repo_id -> dict(files={path: Blob}, sha, private, gated)
        self.lies = {}   # path -> dict(size=+N, etag=str, location=str): a hostile or broken Hub
        self.link_base = None  # where the tree's next-page links point (default: this server)
        super().__init__(host)
        self.endpoint = self.url

    def add_repo(self, repo_id, files, private=False, gated=False):
        blobs = {p: (src if isinstance(src, Blob) else Blob(src)) for p, src in sorted(files.items())}
        sha = hashlib.sha1(json.dumps([[p, b.sha256] for p, b in blobs.items()]).encode()).hexdigest()
        for b in blobs.values():
            self.cdn.add(b)
        self.repos[repo_id] = {"files": blobs, "sha": sha, "private": private, "gated": gated}
        return sha

    def _lfs(self, path, blob):
        return path.endswith(".gguf") or blob.size >= self.LFS_MIN

    def _error(self, h, status, code, message, head):
        hdrs = {"X-Error-Message": message}
        if code:
            hdrs["X-Error-Code"] = code
        self.send(h, status, json.dumps({"error": message}).encode(), hdrs, head=head)

    def _access(self, h, repo_id, head):
        """None when allowed, else the error already sent."""
        repo = self.repos.get(repo_id)
        auth = h.headers.get("Authorization", "")
        if auth and auth != f"Bearer {self.token}":
            return self._error(h, 401, None, "Invalid credentials in Authorization header", head) or True
        if repo is None or (repo["private"] and not auth):
            return self._error(h, 401, "RepoNotFound", "Repository not found", head) or True
        if repo["gated"] and not auth:
            return self._error(h, 401, "GatedRepo", "Access to model %s is restricted. You must have access to it and be "
                               "authenticated to access it. Please log in." % repo_id, head) or True
        if repo["gated"] == "denied":
            return self._error(h, 403, "GatedRepo", "Access to model %s is restricted and you are not in the authorized "
                               "list." % repo_id, head) or True
        return None

    def _open(self, h, repo_id, rev, head):
        """(repo, commit) when the caller may see this revision, else (None, None) with the error sent."""
        if self._access(h, repo_id, head):
            return None, None
        repo = self.repos[repo_id]
        if rev in ("main", repo["sha"]):
            return repo, repo["sha"]
        self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        return None, None

    def handle(self, h, head):
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        q = urllib.parse.parse_qs(url.query)
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
        if m:
            repo_id, rev = m.group(1), m.group(2) or "main"
            repo, sha = self._open(h, repo_id, rev, head)
            if repo is None:
                return
            body = {"_id": sha[:24], "id": repo_id, "modelId": repo_id, "sha": sha, "private": repo["private"],
                    "gated": "manual" if repo["gated"] else False, "disabled": False, "tags": ["gguf"],
                    "lastModified": "2026-11-30T12:00:00.000Z", "library_name": "gguf",
                    "siblings": [{"rfilename": p} for p in repo["files"]]}
            return self.send(h, 200, json.dumps(body).encode(), head=head)
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?$", path)
        if m:
            repo_id, rev, sub = m.groups()
            repo, sha = self._open(h, repo_id, rev, head)
            if repo is None:
                return
            recursive = q.get("recursive", ["false"])[0].lower() == "true"
            entries, dirs = [], set()
            prefix = (sub or "").strip("/")
            for p, b in repo["files"].items():
                if prefix and not p.startswith(prefix + "/"):
                    continue
                rel = p[len(prefix) + 1:] if prefix else p
                if "/" in rel and not recursive:
                    dirs.add((prefix + "/" if prefix else "") + rel.split("/")[0])
                    continue
                for i in range(rel.count("/")):
                    dirs.add((prefix + "/" if prefix else "") + "/".join(rel.split("/")[: i + 1]))
                e = {"type": "file", "oid": b.git_sha1() if not self._lfs(p, b) else hashlib.sha1(b.sha256.encode()).hexdigest(),
                     "size": b.size, "path": p}
                if self._lfs(p, b):
                    e["lfs"] = {"oid": b.sha256, "size": b.size, "pointerSize": 134}
                entries.append(e)
            entries = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in sorted(dirs)] + entries
            cursor = int(q.get("cursor", ["0"])[0])
            page = entries[cursor:cursor + self.page_size]
            hdrs = {}
            if cursor + self.page_size < len(entries):
                nq = dict((k, v[0]) for k, v in q.items())
                nq["cursor"] = str(cursor + self.page_size)
                hdrs["Link"] = f'<{self.link_base or self.url}{url.path}?{urllib.parse.urlencode(nq)}>; rel="next"'
            return self.send(h, 200, json.dumps(page).encode(), hdrs, head=head)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            repo_id, rev, file = m.groups()
            repo, sha = self._open(h, repo_id, rev, head)
            if repo is None:
                return
            blob = repo["files"].get(file)
            if blob is None:
                return self._error(h, 404, "EntryNotFound", f"{file} does not exist on \"{rev}\"", head)
            if self._lfs(file, blob):
                lie = self.lies.get(file, {})
                loc = f"{self.cdn.url}/blob/{blob.sha256}?response-content-disposition=attachment%3B+filename%3D{urllib.parse.quote(os.path.basename(file))}"
                hdrs = {"Location": lie.get("location", loc), "X-Repo-Commit": sha,
                        "X-Linked-Etag": f'"{lie.get("etag", blob.sha256)}"',
                        "X-Linked-Size": str(blob.size + lie.get("size", 0)),
                        "ETag": f'"{hashlib.sha1(blob.sha256.encode()).hexdigest()}"'}
                return self.send(h, 302, b"Found. Redirecting", hdrs, head=head, ctype="text/plain")
            body = blob.read(0, blob.size)
            hdrs = {"X-Repo-Commit": sha, "ETag": f'"{blob.git_sha1()}"'}
            return self.send(h, 200, body, hdrs, head=head, ctype="text/plain")
        self.send(h, 404, b'{"error":"Not Found"}', head=head)


class MockOllama(_Base):
    """registry.ollama.ai's v2 API: manifests, and blobs redirected to the CDN."""

    def __init__(self, cdn, host="127.0.0.1"):
        self.cdn = cdn
        self.models = {}  # (ns, name, tag) -> manifest bytes
        self.blobs = {}   # "sha256:hex" -> Blob
        super().__init__(host)

    def add_model(self, name, tag, gguf, ns="library", template=b"{{ .Prompt }}"):
        layers = []
        for media, src in (("application/vnd.ollama.image.model", gguf),
                           ("application/vnd.ollama.image.template", template)):
            b = src if isinstance(src, Blob) else Blob(src)
            self.cdn.add(b)
            self.blobs["sha256:" + b.sha256] = b
            layers.append({"mediaType": media, "digest": "sha256:" + b.sha256, "size": b.size})
        config = Blob(json.dumps({"model_format": "gguf", "model_family": "llama"}).encode())
        self.cdn.add(config)
        self.blobs["sha256:" + config.sha256] = config
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                               "digest": "sha256:" + config.sha256, "size": config.size},
                    "layers": layers}
        self.models[(ns, name, tag)] = json.dumps(manifest).encode()
        return manifest

    def handle(self, h, head):
        path = urllib.parse.urlsplit(h.path).path
        m = re.match(r"^/v2/([^/]+)/([^/]+)/manifests/([^/]+)$", path)
        if m:
            body = self.models.get(m.groups())
            if body is None:
                err = {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}
                return self.send(h, 404, json.dumps(err).encode(), head=head)
            return self.send(h, 200, body, {"Docker-Content-Digest": "sha256:" + hashlib.sha256(body).hexdigest()},
                             head=head, ctype="application/vnd.docker.distribution.manifest.v2+json")
        m = re.match(r"^/v2/([^/]+)/([^/]+)/blobs/(sha256:[0-9a-f]{64})$", path)
        if m:
            b = self.blobs.get(m.group(3))
            if b is None:
                err = {"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown to registry"}]}
                return self.send(h, 404, json.dumps(err).encode(), head=head)
            return self.send(h, 307, b"", {"Location": f"{self.cdn.url}/blob/{b.sha256}"}, head=head, ctype="text/plain")
        self.send(h, 404, b"404 page not found", head=head, ctype="text/plain")
