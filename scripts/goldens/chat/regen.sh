#!/usr/bin/env bash
# Regenerates algorithms/chat/testdata/{goldens.json,<family>/tokenizer_config.json}: renders by
# @huggingface/jinja (make.mjs), checked against and completed by Python Jinja2 set up as
# transformers does (crosscheck.py, Debian's python3-jinja2), then ids by @huggingface/tokenizers.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
node make.mjs
/usr/bin/python3 crosscheck.py
node ids.mjs
/usr/bin/python3 features.py
