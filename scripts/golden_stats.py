#!/usr/bin/env python3
"""Independent reference for `fragscope stats --json`: computes the figures of
every snapshot in ../shared/real from the definitions in docs/json-schema.md,
with Python's own pickle module (these reference files are trusted; fragscope
itself never executes pickles), and writes tests/golden/stats/<file>.json.

Run: python3 scripts/golden_stats.py [SHARED_REAL_DIR]
"""
import json, os, pickle, sys

here = os.path.dirname(os.path.abspath(__file__))
real = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "shared", "real")
out_dir = os.path.join(here, "..", "tests", "golden", "stats")


def requested(b):
    if "requested_size" in b:
        return b["requested_size"]
    h = b.get("history") or []
    if h:
        return h[0]["real_size"]
    return b["size"]


def figures(segs):
    f = dict(segments=0, blocks=0, reserved_bytes=0, allocated_bytes=0, active_bytes=0,
             internal_free_bytes=0, external_free_bytes=0, inactive_bytes=0,
             pending_free_bytes=0, largest_free_block_bytes=0)
    for s in segs:
        f["segments"] += 1
        f["reserved_bytes"] += s["total_size"]
        for b in s["blocks"]:
            f["blocks"] += 1
            st = b["state"]
            if st == "active_allocated":
                r = min(requested(b), b["size"])
                f["allocated_bytes"] += r
                f["active_bytes"] += b["size"]
                f["internal_free_bytes"] += b["size"] - r
            else:
                f["external_free_bytes"] += b["size"]
                if st == "inactive":
                    f["inactive_bytes"] += b["size"]
                    f["largest_free_block_bytes"] = max(f["largest_free_block_bytes"], b["size"])
                else:
                    f["pending_free_bytes"] += b["size"]
    ina = f["inactive_bytes"]
    f["fragmentation"] = 0.0 if ina == 0 else 1 - f["largest_free_block_bytes"] / ina
    return f


def main():
    os.makedirs(out_dir, exist_ok=True)
    for name in sorted(os.listdir(real)):
        if not (name.endswith(".pickle") or name.endswith(".pkl")):
            continue
        with open(os.path.join(real, name), "rb") as fh:
            d = pickle.load(fh)
        segs = d if isinstance(d, list) else d.get("segments", [])
        g = figures(segs)
        devices = sorted({s["device"] for s in segs} | (
            {i for i, t in enumerate(d.get("device_traces", [])) if t} if isinstance(d, dict) else set()))
        g["devices"] = []
        for dev in devices:
            x = figures([s for s in segs if s["device"] == dev])
            x["device"] = dev
            g["devices"].append(x)
        traces = d.get("device_traces", []) if isinstance(d, dict) else []
        g["trace_events"] = [len(t) for t in traces]
        g["oom_events"] = [dict(device=i, size=e["size"], device_free=e.get("device_free"))
                           for i, t in enumerate(traces) for e in t if e["action"] == "oom"]
        with open(os.path.join(out_dir, name + ".json"), "w") as fh:
            json.dump(g, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"{name}: reserved {g['reserved_bytes']} allocated {g['allocated_bytes']}")


if __name__ == "__main__":
    main()
