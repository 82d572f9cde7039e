#!/usr/bin/env python3
"""Python's Jinja2 rendering chat templates exactly as Hugging Face transformers does
(transformers/utils/chat_template_utils.py): an ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loop controls, its tojson, raise_exception and strftime_now, and
the variables messages, tools, documents, add_generation_prompt, the special tokens and the
template kwargs. It is the semantics kvdesk's Jinja engine follows, and the arbiter of the
comparison where the JavaScript engines disagree with it.

Reads a JSON array of jobs on stdin: {"template": path, "conversation": path, "bos": str,
"eos": str, "date": "YYYY-MM-DD", "add_generation_prompt": bool, "kwargs": {...}}; writes a JSON
array of {"ok": true, "text": str} or {"ok": false, "error": str, "sandbox": bool} on stdout.
"""
import datetime
import json
import sys

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %} tag: renders its body as it is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment(date):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return date.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(job):
    date = datetime.datetime.strptime(job["date"], "%Y-%m-%d")
    with open(job["template"], encoding="utf-8") as f:
        source = f.read()
    with open(job["conversation"], encoding="utf-8") as f:
        conversation = json.load(f)
    variables = {k: v for k, v in conversation.items() if k != "messages"}
    variables.setdefault("tools", None)
    variables.setdefault("documents", None)
    variables.update(
        messages=conversation["messages"],
        add_generation_prompt=job["add_generation_prompt"],
        bos_token=job["bos"],
        eos_token=job["eos"],
    )
    variables.update(job.get("kwargs") or {})
    try:
        return {"ok": True, "text": environment(date).from_string(source).render(**variables)}
    except jinja2.exceptions.SecurityError as e:
        return {"ok": False, "error": str(e), "sandbox": True}
    except Exception as e:  # a template's own error (raise_exception, a type error): it refuses
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "sandbox": False}


def main():
    json.dump([render(job) for job in json.load(sys.stdin)], sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
