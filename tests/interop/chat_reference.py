"""Test-only: renders chat templates with jinja2 the way transformers' apply_chat_template does (a sandboxed
environment with trim_blocks and lstrip_blocks, loop controls, raise_exception and strftime_now, the special
tokens passed in),
so tests/interop/test_chat_templates.cpp can compare causal's C++ rendering with it. The product never needs
Python.

  chat_reference.py probe                       (exit 0 when jinja2 imports)
  chat_reference.py render REQUEST.json OUT.json
  chat_reference.py gguf-template F.gguf OUT.txt   (tokenizer.chat_template, read by gguf-py)

REQUEST: {"cases": [{"template": PATH, "messages": [{"role", "content"}...], "add_generation_prompt": bool,
                     "bos_token": str, "eos_token": str}...]}
OUT:     {"results": [{"text": str} or {"error": str}...]}, one per case, in order.
"""
import json
import sys
from datetime import datetime


def environment():
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def render(request_path, out_path):
    import jinja2
    env = environment()
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    compiled = {}
    results = []
    for case in request["cases"]:
        path = case["template"]
        if path not in compiled:
            with open(path, encoding="utf-8") as f:
                compiled[path] = env.from_string(f.read())
        try:
            text = compiled[path].render(messages=case["messages"],
                                         add_generation_prompt=case["add_generation_prompt"],
                                         bos_token=case["bos_token"], eos_token=case["eos_token"])
            results.append({"text": text})
        except jinja2.exceptions.TemplateError as e:
            results.append({"error": f"{type(e).__name__}: {e}"})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"results": results}, f, ensure_ascii=False)


def gguf_template(gguf_path, out_path):
    from gguf import GGUFReader
    field = GGUFReader(gguf_path).fields["tokenizer.chat_template"]
    with open(out_path, "w", encoding="utf-8", newline="") as f:
        f.write(field.contents())


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "probe":
        import jinja2  # noqa: F401  (the probe's whole point)
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "render":
        render(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "gguf-template":
        gguf_template(sys.argv[2], sys.argv[3])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
