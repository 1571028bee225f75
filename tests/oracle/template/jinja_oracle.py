"""Python jinja2 configured the way transformers' apply_chat_template configures it: the
oracle every minfer template test compares against.

- ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with loopcontrols and
  transformers' {% generation %} block (AssistantTracker: renders its body like a call block);
  `mutable=True` uses SandboxedEnvironment instead (what llama.cpp's test-jinja uses);
- tojson = json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False);
- raise_exception(msg) raises TemplateError; strftime_now(fmt) formats a fixed date;
- render arguments as transformers passes them: messages, tools (None by default),
  documents (None), add_generation_prompt (False), then every other field of the case.
"""
import copy
import json
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

FIXED_NOW = "2025-03-14T15:09:26"


class GenerationBlock(jinja2.ext.Extension):
    """transformers' {% generation %}...{% endgeneration %}: the body is rendered as a caller."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env(mutable=False, now=FIXED_NOW):
    cls = SandboxedEnvironment if mutable else ImmutableSandboxedEnvironment
    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    fixed = datetime.fromisoformat(now)

    def strftime_now(fmt):
        return fixed.strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def chat_vars(case):
    """The keyword arguments transformers' render_jinja_template passes for a CASE.json."""
    v = {"messages": case.get("messages", []), "tools": None, "documents": None, "add_generation_prompt": False}
    v.update(case)
    return v


def render(source, case, mutable=False, now=FIXED_NOW):
    """Returns (True, text) or (False, 'ExceptionType: message')."""
    try:
        env = make_env(mutable=mutable, now=now)
        text = env.from_string(source).render(**chat_vars(copy.deepcopy(case)))
        text.encode("utf-8")  # lone surrogates cannot be printed
        return True, text
    except Exception as e:  # noqa: BLE001 - any jinja2/Python error means "must fail in minfer too"
        return False, f"{type(e).__name__}: {e}"
