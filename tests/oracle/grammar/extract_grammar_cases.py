"""Extracts the accept/reject cases of llama.cpp's tests/test-grammar-integration.cpp as data:
test_grammar(DESC, GRAMMAR, {PASSING...}, {FAILING...}) calls whose arguments are literals, and
test_schema(DESC, SCHEMA, {PASSING...}, {FAILING...}) calls alike (extract(src, "test_schema")).

    python3 extract_grammar_cases.py path/to/test-grammar-integration.cpp [test_schema] > cases.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "template"))
from extract_test_jinja import TOKEN_RE, Unextractable, unescape_cpp  # noqa: E402


def call_tokens(src, pos):
    """The tokens of the call whose '(' is at or after pos, up to its matching ')'."""
    toks, depth = [], 0
    while True:
        m = TOKEN_RE.match(src, pos)
        if not m:
            raise Unextractable(f"unexpected {src[pos:pos + 30]!r}")
        pos = m.end()
        if m.group("raw") is not None:
            toks.append(("str", m.group("rawbody").encode("utf-8")))
        elif m.group("str") is not None:
            toks.append(("str", unescape_cpp(m.group("str")[1:-1])))
        elif m.group("punct") is not None:
            p = m.group("punct")
            if p == "(":
                depth += 1
                if depth == 1:
                    continue
            elif p == ")":
                depth -= 1
                if depth == 0:
                    return toks
            toks.append(("punct", p))
        elif m.group("ident") is not None or m.group("num") is not None:
            toks.append(("other", m.group(0)))


def strings(toks, i):
    """Adjacent string literals from toks[i]: (text, next index)."""
    parts = []
    while i < len(toks) and toks[i][0] == "str":
        parts.append(toks[i][1])
        i += 1
    if not parts:
        raise Unextractable(f"expected a string at {toks[i:i + 2]}")
    return b"".join(parts).decode("utf-8"), i


def string_list(toks, i):
    if toks[i] != ("punct", "{"):
        raise Unextractable("expected {")
    i += 1
    out = []
    while toks[i] != ("punct", "}"):
        s, i = strings(toks, i)
        out.append(s)
        if toks[i] == ("punct", ","):
            i += 1
    return out, i + 1


def extract(src, fn="test_grammar"):
    """[{desc, grammar (the GBNF or the schema text), passing, failing}], [{at, why}]."""
    cases, skipped = [], []
    start = 0
    while True:
        at = src.find(fn + "(", start)
        if at < 0:
            break
        start = at + 1
        if src[max(0, at - 12):at].strip().endswith("void"):
            continue  # the definition
        try:
            toks = call_tokens(src, at + len(fn))
            desc, i = strings(toks, 0)
            i += 1
            grammar, i = strings(toks, i)
            i += 1
            passing, i = string_list(toks, i)
            i += 1
            failing, i = string_list(toks, i)
            cases.append({"desc": desc, "grammar": grammar, "passing": passing, "failing": failing})
        except (Unextractable, IndexError, UnicodeDecodeError) as e:
            skipped.append({"at": src.count("\n", 0, at) + 1, "why": str(e)})
    return cases, skipped


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        cases, skipped = extract(f.read(), *sys.argv[2:3])
    json.dump({"cases": cases, "skipped": skipped}, sys.stdout, ensure_ascii=False, indent=1)
