#!/usr/bin/python3
"""Cross-checks the @huggingface/jinja goldens against Python Jinja2 set up as transformers'
apply_chat_template sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, a tojson with ensure_ascii=False, raise_exception, strftime_now; the special tokens
that are set, and tools=None when there are none).

transformers (Python) is the reference implementation: where @huggingface/jinja fails but Python
renders (it lacks some filters, e.g. `reject`), or renders other text (its str.lstrip('\n') strips a
leading space too), Python's text becomes the golden, marked "source": "jinja2", with the npm
error or text kept as "npm_error" / "npm_text". Where both fail, both must fail. Run with Debian's python3-jinja2:
/usr/bin/python3 crosscheck.py (make.mjs first, ids.mjs after; regen.sh runs all three).
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "../../../algorithms/chat/testdata"))


class Generation(Extension):
    """transformers' AssistantTracker, reduced to rendering its body ({% generation %})."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(source):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def token(v):
    if v is None:
        return None
    return v if isinstance(v, str) else v.get("content")


def main():
    convs = json.load(open(os.path.join(OUT, "conversations.json"), encoding="utf-8"))
    goldens = json.load(open(os.path.join(OUT, "goldens.json"), encoding="utf-8"))
    bad = 0
    for family, cases in goldens.items():
        config = json.load(open(os.path.join(OUT, family, "tokenizer_config.json"), encoding="utf-8"))
        tmpl = compile_template(config["chat_template"])
        for c in convs["cases"]:
            if c["name"] not in cases:
                continue
            g = cases[c["name"]]
            kw = {}
            for k in ("bos_token", "eos_token", "pad_token", "unk_token"):
                if token(config.get(k)) is not None:
                    kw[k] = token(config[k])
            kw.update(c.get("kwargs", {}))
            tools = [convs["tools"][t] for t in c["tools"]] if c.get("tools") else None
            try:
                text, err = tmpl.render(messages=c["messages"], tools=tools, documents=None,
                                        add_generation_prompt=c.get("add_generation_prompt", False), **kw), None
            except jinja2.exceptions.TemplateError as e:
                text, err = None, str(e)
            if "error" in g and text is not None and g.get("source") != "jinja2":
                g.pop("ids", None)
                g.update({"text": text, "source": "jinja2", "npm_error": g.pop("error")})
                print(f"{family}/{c['name']}: @huggingface/jinja failed ({g['npm_error']}); golden from jinja2")
            elif g.get("source") == "jinja2":
                if text != g["text"]:
                    print(f"{family}/{c['name']}: jinja2 golden changed"); bad += 1
            elif text is not None and text != g.get("text"):
                g.pop("ids", None)
                g.update({"text": text, "source": "jinja2", "npm_text": g.pop("text")})
                print(f"{family}/{c['name']}: @huggingface/jinja renders other text; golden from jinja2")
            elif ("error" in g) != (err is not None):
                print(f"{family}/{c['name']}: jinja2 fails ({err!r}), @huggingface/jinja does not")
                bad += 1
    json.dump(goldens, open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    open(os.path.join(OUT, "goldens.json"), "a").write("\n")
    print("crosscheck:", "ok" if bad == 0 else f"{bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
