"""Extracts the conformance cases of llama.cpp's tests/test-jinja.cpp as data:
test_template(t, NAME, TEMPLATE, VARS, EXPECT) calls whose arguments are literals.

VARS use llama.cpp's common_json dialect: a braced list {{"k", v}, ...} is an object (keys in
order), json::array({...}) an array, json::object() / json({...}) an object. String literals
are C++ literals (adjacent ones concatenated; \\n, \\xNN, \\uNNNN escapes; UTF-8 source).

    python3 extract_test_jinja.py path/to/test-jinja.cpp > cases.json
"""
import json
import re
import sys


class Unextractable(Exception):
    pass


TOKEN_RE = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/'
    r'|(?P<raw>R"(?P<delim>[^(]*)\((?P<rawbody>.*?)\)(?P=delim)")'
    r'|(?P<str>"(?:[^"\\\n]|\\.)*")'
    r'|(?P<num>-?\d+\.\d*(?:[eE][-+]?\d+)?f?|-?\d+(?:[uUlL]*))'
    r'|(?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)'
    r'|(?P<punct>[{}(),])',
    re.S,
)


def unescape_cpp(body):
    out = bytearray()
    i = 0
    raw = body.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        e = chr(raw[i + 1])
        i += 2
        simple = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11, "?": 63}
        if e == "\n":  # line continuation
            continue
        if e == "x":
            m = re.match(rb"[0-9a-fA-F]+", raw[i:])
            out.append(int(m.group(0), 16) & 0xFF)
            i += len(m.group(0))
        elif e in ("u", "U"):
            n = 4 if e == "u" else 8
            out += chr(int(raw[i:i + n], 16)).encode("utf-8")
            i += n
        elif e in simple:
            out.append(simple[e])
        else:
            raise Unextractable(f"escape \\{e}")
    return bytes(out)


def tokenize(src):
    toks = []
    pos = 0
    while pos < len(src):
        m = TOKEN_RE.match(src, pos)
        if not m:
            raise Unextractable(f"unexpected {src[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("raw") is not None:
            toks.append(("str", m.group("rawbody").encode("utf-8")))
        elif m.group("str") is not None:
            toks.append(("str", unescape_cpp(m.group("str")[1:-1])))
        elif m.group("num") is not None:
            t = m.group("num").rstrip("uUlLf")
            toks.append(("num", float(t) if "." in t or "e" in t.lower() else int(t)))
        elif m.group("ident") is not None:
            toks.append(("ident", m.group("ident")))
        elif m.group("punct") is not None:
            toks.append(("punct", m.group("punct")))
    return toks


class Parser:
    def __init__(self, toks):
        self.t = toks
        self.i = 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("eof", None)

    def take(self, kind=None, value=None):
        tok = self.peek()
        if (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise Unextractable(f"expected {kind} {value}, got {tok}")
        self.i += 1
        return tok

    def string(self):
        parts = [self.take("str")[1]]
        while self.peek()[0] == "str":
            parts.append(self.take("str")[1])
        data = b"".join(parts)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Unextractable("string literal is not valid UTF-8")

    def obj(self):
        self.take("punct", "{")
        out = {}
        while self.peek() != ("punct", "}"):
            self.take("punct", "{")
            key = self.string()
            self.take("punct", ",")
            out[key] = self.value()
            self.take("punct", "}")
            if self.peek() == ("punct", ","):
                self.take()
        self.take("punct", "}")
        return out

    def value(self):
        kind, v = self.peek()
        if kind == "str":
            return self.string()
        if kind == "num":
            self.take()
            return v
        if kind == "punct" and v == "{":
            return self.obj()
        if kind == "ident":
            self.take()
            if v == "true":
                return True
            if v == "false":
                return False
            if v == "nullptr":
                return None
            if v in ("json::object", "json::array", "json", "std::string"):
                self.take("punct", "(")
                if self.peek() == ("punct", ")"):
                    self.take()
                    return {} if v == "json::object" else [] if v == "json::array" else ""
                if v == "json::array":
                    self.take("punct", "{")
                    items = []
                    while self.peek() != ("punct", "}"):
                        items.append(self.value())
                        if self.peek() == ("punct", ","):
                            self.take()
                    self.take("punct", "}")
                    out = items
                elif v == "std::string":
                    out = self.string()
                else:
                    out = self.obj()
                self.take("punct", ")")
                return out
        raise Unextractable(f"value {kind} {v}")


def strip_comments(src):
    """Blanks // and /* */ comments (keeping newlines), leaving string literals alone."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_calls(src):
    """Yields (line, argument text) of each test_template(t, ...) call."""
    for m in re.finditer(r"\btest_template\(t,", src):
        depth, j = 1, m.end()
        in_str = False
        while depth and j < len(src):
            c = src[j]
            if in_str:
                if c == "\\":
                    j += 1
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            j += 1
        yield src.count("\n", 0, m.start()) + 1, src[m.end():j - 1]


def extract(path):
    src = strip_comments(open(path, encoding="utf-8").read())
    cases, skipped = [], []
    for line, args in split_calls(src):
        try:
            p = Parser(tokenize(args))
            name = p.string()
            p.take("punct", ",")
            tmpl = p.string()
            p.take("punct", ",")
            vars_ = p.value()
            p.take("punct", ",")
            expect = p.string()
            if p.peek()[0] != "eof":
                raise Unextractable("trailing tokens")
            if not isinstance(vars_, dict):
                raise Unextractable("vars are not an object")
            cases.append({"line": line, "name": name, "template": tmpl, "vars": vars_, "llama_expect": expect})
        except (Unextractable, IndexError, ValueError) as e:
            skipped.append({"line": line, "reason": str(e)})
    return cases, skipped


if __name__ == "__main__":
    c, s = extract(sys.argv[1])
    json.dump({"cases": c, "skipped": s}, sys.stdout, ensure_ascii=False, indent=1)
