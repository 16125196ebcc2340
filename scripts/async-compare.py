#!/usr/bin/env python3
"""Compare RL phases from their metrics logs (docs/async.md, "Measured on the demo").

usage: scripts/async-compare.py LABEL=runs/RUN/grpo/metrics.jsonl ...

For each log: the policy steps logged, seconds per iteration over the wall-clock window in which
every given phase was stepping (runs started side by side share the machine alike), held-out exact
match and pass@8 at each evaluation, reward_mean over the last ten steps that every phase reached,
and the staleness histogram of the last such step.
"""
import json
import sys


def load(path):
    recs = [json.loads(line) for line in open(path) if line.strip()]
    steps = sorted((r for r in recs if r["kind"] == "train"), key=lambda r: r["step"])
    evals = [r for r in recs if r["kind"] != "train" and "heldout_exact_match" in r.get("metrics", {})]
    return steps, evals


def main(args):
    runs = [(a.split("=", 1)[0], *load(a.split("=", 1)[1])) for a in args]
    lo = max(s[0]["time"] for _, s, _ in runs)
    hi = min(s[-1]["time"] for _, s, _ in runs)
    common = min(s[-1]["step"] for _, s, _ in runs)
    for label, steps, evals in runs:
        w = [r for r in steps if lo <= r["time"] <= hi]
        print(f"{label}: {len(steps)} policy steps")
        if len(w) > 1:
            print(f"  {(w[-1]['time'] - w[0]['time']) / (len(w) - 1):.2f} s/iteration over {len(w)} steps in the common window")
        for e in evals:
            m = e["metrics"]
            print(f"  iteration {e['step']}: heldout_exact_match {m['heldout_exact_match']:.3f}, pass@8 {m.get('heldout_pass@8', float('nan')):.3f}")
        last = [r for r in steps if common - 9 <= r["step"] <= common]
        print(f"  reward_mean, iterations {common - 9}-{common}: {sum(r['metrics']['reward_mean'] for r in last) / len(last):.3f}")
        hist = {k: v for k, v in last[-1]["metrics"].items() if k.startswith("staleness")}
        print(f"  staleness at iteration {last[-1]['step']}: {hist}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
