#!/usr/bin/env python3
"""A large profiler trace for measuring fragscope's memory on traces: the
`traceEvents` of a real trace repeated COPIES times, each copy shifted in
time past the one before (its other keys kept once).

    python3 scripts/make_big_trace.py ../shared/real/tracelens_h100_qwen1.5-0.5b_profile-memory.json.gz \
        --copies 60 -o target/bench-inputs/trace-qwen-x60.json

The output is gzip-compressed when its name ends in `.gz`.
"""
import argparse
import gzip
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    opener = gzip.open if a.trace.endswith(".gz") else open
    with opener(a.trace, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = (max(times) - min(times) + 1) if times else 1
    out = gzip.open if a.out.endswith(".gz") else open
    with out(a.out, "wt") as f:
        f.write("{")
        for k, v in doc.items():
            f.write(json.dumps(k) + ": " + json.dumps(v) + ",\n")
        f.write('"traceEvents": [\n')
        first = True
        for c in range(a.copies):
            for e in events:
                if isinstance(e.get("ts"), (int, float)):
                    e = dict(e, ts=e["ts"] + c * span)
                f.write(("" if first else ",\n") + json.dumps(e))
                first = False
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
