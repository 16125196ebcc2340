#!/usr/bin/python3
"""Golden renders of small templates that exercise the Jinja features algorithms/chat implements
(whitespace control, filters, tests, str methods, slicing, loops, scoping, macros, tojson), by
Python Jinja2 set up as transformers' apply_chat_template sets it up (crosscheck.compile_template).
Writes algorithms/chat/testdata/features_goldens.json: {"name": {"text": ...} or {"error": ...}}."""
import json
import os

import jinja2

from crosscheck import OUT, compile_template


def main():
    spec = json.load(open(os.path.join(OUT, "features.json"), encoding="utf-8"))
    out = {}
    for c in spec["cases"]:
        try:
            out[c["name"]] = {"text": compile_template(c["template"]).render(**spec["vars"])}
        except jinja2.exceptions.TemplateError as e:
            out[c["name"]] = {"error": str(e)}
    with open(os.path.join(OUT, "features_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", len(out), "feature goldens")


if __name__ == "__main__":
    main()
