"""Runs `minfer chat-template --template T --input CASE.json` and returns its result."""
import json
import os
import subprocess
import tempfile

MINFER = os.environ.get("MINFER_BIN", "")


def run_minfer(template_path, case, mutable=False, now="2025-03-14T15:09:26"):
    """Returns (True, stdout text) or (False, stderr text)."""
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not a built minfer binary"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(case, f, ensure_ascii=False)
        case_path = f.name
    try:
        cmd = [MINFER, "chat-template", "--template", template_path, "--input", case_path, "--now", now]
        if mutable:
            cmd.append("--mutable")
        p = subprocess.run(cmd, capture_output=True, timeout=60)
    finally:
        os.unlink(case_path)
    if p.returncode != 0:
        return False, p.stderr.decode("utf-8", "replace")
    try:
        return True, p.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return True, p.stdout.decode("utf-8", "surrogateescape")


# jinja2 exception -> the kinds of minfer error message ("template: line N: KIND: ...") it maps to.
ERROR_KINDS = {
    "TemplateError": ("raise_exception",),
    "UndefinedError": ("undefined value",),
    "SecurityError": ("refused by the sandbox",),
    "TemplateSyntaxError": ("syntax error", "unsupported", "limit"),
    "TemplateAssertionError": ("syntax error", "unsupported"),
    "SyntaxError": ("syntax error",),  # 'break' outside loop, found when Python compiles it
}
OTHER_KINDS = ("error", "unsupported", "limit")


def error_kind_matches(jinja_error, minfer_stderr):
    """jinja_error is 'ExceptionType: message'; minfer_stderr holds '...: KIND: message'."""
    if jinja_error.startswith("RecursionError"):  # Python's stack limit: any minfer error will do
        return True
    kinds = ERROR_KINDS.get(jinja_error.split(":")[0], OTHER_KINDS)
    return any(f": {k}: " in minfer_stderr for k in kinds)


def compare(expected, ours, check_kind=True):
    """Both are (ok, text); ok results must be equal byte for byte, errors must both be errors
    (of the same kind when check_kind)."""
    if expected[0] != ours[0]:
        return False
    if expected[0]:
        return expected[1] == ours[1]
    return not check_kind or error_kind_matches(expected[1], ours[1])
