#!/usr/bin/env python3
"""Snapshots of segments, their blocks and odd layouts of them, written by Python's own
pickler: `segment_layouts.py DIR SEGMENTS BLOCKS_PER_SEGMENT` writes one file per layout
into DIR. `bare.pickle` (a list of segments, as `torch.cuda.memory_snapshot()` gives) and
`plain.pickle` (the dict of a 2.x snapshot with empty traces) are the probes of
docs/perf.md; tests/it/blocks.rs reads every layout."""
import pickle, random, sys
out, n_segs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(7)
frames = [{"filename": f"/src/m{i}.py", "line": i, "name": f"f{i}"} for i in range(40)]
stacks = [[frames[(s + j) % 40] for j in range(2 + s % 9)] for s in range(30)]
STATES = ["active_allocated", "inactive", "active_pending_free"]

def segments(n, per, addr=1 << 40):
    segs = []
    for i in range(n):
        blocks, a = [], addr
        for j in range(r.randrange(1, 2 * per)):
            size = 512 * (1 + r.randrange(64))
            st = r.choice(STATES)
            fr = list(stacks[r.randrange(30)]) if st != "inactive" else []
            blocks.append({"address": a, "size": size, "requested_size": size - a % 7,
                           "state": st, "frames": fr})
            a += size
        segs.append({"device": i % 2, "address": addr, "total_size": a - addr,
                     "allocated_size": 0, "active_size": 0, "requested_size": 0,
                     "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                     "is_expandable": False, "frames": [], "blocks": blocks})
        addr = a + (1 << 21)
    return segs

def trace(segs):
    t = []
    for s in segs:
        for b in s["blocks"]:
            if b["state"] != "inactive":
                t.append({"action": "alloc", "addr": b["address"], "size": b["size"],
                          "stream": 0, "time_us": len(t), "frames": b["frames"]})
    return t

def dump(name, obj, protocol=4):
    with open(f"{out}/{name}.pickle", "wb") as f:
        pickle.dump(obj, f, protocol=protocol)

settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1}
segs = segments(n_segs, per)
dump("plain", {"segments": segs, "device_traces": [[], []], "allocator_settings": settings})
dump("plain-p2", {"segments": segs, "device_traces": [[], []]}, 2)
dump("plain-p5", {"segments": segs, "device_traces": [[], []]}, 5)
dump("bare", segs)
dump("with-trace", {"segments": segs, "device_traces": [trace(segs), []]})
# 1.13: blocks with `history` and no address.
old = segments(20, 6)
for s in old:
    for b in s["blocks"]:
        del b["address"]
        b["history"] = [{"addr": 0, "real_size": b["size"] - 1, "frames": b.pop("frames")}]
dump("legacy", old)
# Some blocks the sink leaves to the arena: no address, extra or odd keys,
# a state string it has to look up, a frames tuple.
mixed = segments(40, 8)
for k, b in enumerate(b for s in mixed for b in s["blocks"]):
    if k % 5 == 1: del b["address"]
    if k % 7 == 2: b["extra"] = [1, 2.5, None]
    if k % 11 == 3: b["frames"] = tuple(b["frames"])
    if k % 13 == 4: b["size"] = float(b["size"])
    if k % 17 == 5: b["frames"] = None
dump("mixed", {"segments": mixed, "device_traces": [[]]})
# The same segment, block list or block named twice (memo references).
twice = segments(30, 5)
twice[4]["blocks"] = twice[2]["blocks"]
twice[6]["blocks"] = [twice[5]["blocks"][0]] + twice[6]["blocks"]
dump("twice", {"segments": twice + [twice[0], twice[3]], "device_traces": [[]]})
# A `blocks` key elsewhere than in a segment.
elsewhere = {"segments": segments(10, 5), "device_traces": [[]],
             "allocator_settings": {"blocks": [{"address": 1, "size": 2, "state": "inactive"}]},
             "extra": {"blocks": [{"address": 3, "size": 4, "state": "inactive"}]}}
dump("elsewhere", elsewhere)
# A segment's block named where the model wants something else.
named = segments(5, 4)
dump("block-as-entry", {"segments": named, "device_traces": [named[1]["blocks"]]})
dump("block-in-settings", {"segments": named, "device_traces": [[]],
                           "extra": named[2]["blocks"][0]})
bad = segments(5, 4)
bad[3]["blocks"][1]["state"] = "bogus"
dump("bad-state", {"segments": bad, "device_traces": [[]]})
# A block with `state` twice, the first one bad (only a hand-made file repeats a key:
# written as `statf`, then renamed in the bytes).
twice_key = segments(5, 4)
b = twice_key[2]["blocks"][0]
twice_key[2]["blocks"][0] = {"address": b["address"], "size": b["size"], "statf": "bogus",
                             "state": b["state"], "frames": b["frames"]}
data = pickle.dumps({"segments": twice_key, "device_traces": [[]]}, protocol=4)
with open(f"{out}/state-twice.pickle", "wb") as f:
    f.write(data.replace(b"statf", b"state"))
# One segment of 1 000 blocks named twenty times.
one = segments(1, 1000)
dump("named-20", [one[0]] * 20)
