#!/usr/bin/env python3
"""Writes the small inputs in fixtures/ that pin how fragscope words an edge
case: a profiler trace with CPU memory events only, the HTML page of
export_memory_timeline (an image, no data), and two snapshots whose traces
tell a full moment from a fragmented one for `check --min-largest-gap`.
Their expected figures are worked out below and listed in fixtures/README.md.

Run: python3 scripts/make_edge_fixtures.py (deterministic: same bytes each run)
"""
import base64, gzip, json, os, struct, zlib

here = os.path.dirname(os.path.abspath(__file__))
fx = os.path.join(here, "..", "fixtures")

MiB = 1 << 20
BASE = 139_637_976_727_552  # a device address above 2^31, as in make_fixtures.py
FRAMES = [{"filename": "/work/train.py", "line": 42, "name": "forward"}]


def write(name, data):
    with open(os.path.join(fx, name), "wb") as f:
        f.write(data)


# 1. A torch.profiler trace (modern schema: Addr, Total Allocated, Total
#    Reserved, finished) whose [memory] events are all CPU memory (Device
#    Type 0, Device Id -1), in the shape of the tracelens bert-small trace:
#    what profiling a model on the CPU with profile_memory=True records.
#    One 1 MiB allocation that lives to the end, then 50 steps of two 64 KiB
#    and one 64 B temporaries. 301 [memory] events, 151 operators.
PID = 4242
events = []
t = 1_000_000.0
idx = 0
total = 0
peak = 0


def op(name, ts, dur):
    global idx
    idx += 1
    events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": PID, "ts": ts, "dur": dur,
                   "args": {"External id": idx, "Ev Idx": idx}})


def mem(ts, nbytes, addr):
    global idx, total, peak
    idx += 1
    total += nbytes
    peak = max(peak, total)
    events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": PID, "tid": PID,
                   "ts": ts, "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": nbytes, "Addr": addr,
                                      "Device Id": -1, "Device Type": 0, "finished": False, "Ev Idx": idx}})


op("aten::empty", t, 5.0)
mem(t + 1.0, MiB, 0x10000000)
t += 10
for step in range(50):
    op("aten::linear", t, 8.0)
    mem(t + 1.0, 65536, 0x20000000)
    op("aten::relu", t + 10, 8.0)
    mem(t + 11.0, 65536, 0x20010000)
    mem(t + 20.0, -65536, 0x20000000)
    op("aten::sum", t + 22, 4.0)
    mem(t + 23.0, 64, 0x20020000)
    mem(t + 30.0, -65536, 0x20010000)
    mem(t + 31.0, -64, 0x20020000)
    t += 40
events.append({"ph": "X", "cat": "Trace", "ts": 999_990.0, "dur": t - 999_990.0, "pid": "Spans",
               "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
doc = {"schemaVersion": 1, "traceEvents": events, "profile_memory": 1, "displayTimeUnit": "ms",
       "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceName": "cpu_only.pt.trace.json"}
assert sum(e["name"] == "[memory]" for e in events) == 301
assert peak == MiB + 2 * 65536 and total == MiB
write("cpu_only_trace.json.gz", gzip.compress(json.dumps(doc).encode(), mtime=0))


# 2. The page torch.profiler's export_memory_timeline("x.html") writes
#    (torch/profiler/_memory_profiler.py, export_memory_timeline_html): the
#    matplotlib plot as a base64 PNG, here a valid 1x1 image.
def png_1x1():
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\xff\xff", 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


encoded = base64.b64encode(png_1x1()).decode("ascii")
page = f"""<html>
<head><meta charset="utf-8" /><title>GPU Memory Timeline HTML</title></head>
<body>
  <img src='data:image/png;base64,{encoded}'>
</body>
</html>"""
write("memory_timeline_image.html", page.encode())


# 3. Snapshots with a trace for `check --min-largest-gap`. Each event is a
#    moment; "under pressure" = reserved at least half its peak.
def block(addr, size, state):
    b = {"address": addr, "size": size, "state": state, "requested_size": size if state != "inactive" else 0,
         "frames": FRAMES if state != "inactive" else []}
    return b


def segment(addr, blocks):
    total = sum(b["size"] for b in blocks)
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": 0, "address": addr, "total_size": total, "allocated_size": alloc, "active_size": alloc,
            "requested_size": alloc, "stream": 0, "segment_type": "large", "segment_pool_id": [0, 0],
            "is_expandable": False, "frames": FRAMES, "blocks": blocks}


def ev(action, addr, size, k):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1_700_000_000_000_000 + 10 * k,
            "frames": FRAMES}


def trace(steps):
    return [ev(a, addr, size, k) for k, (a, addr, size) in enumerate(steps)]


def free(addr, size):
    return [("free_requested", addr, size), ("free_completed", addr, size)]


# 3a. A full moment: one 40 MiB segment filled by two 20 MiB blocks (reserved
#     = allocated, nothing free), then one is freed. "Free" is inactive bytes:
#     a block whose free is requested but not completed is pending, not free.
#     Moments under pressure, (free, largest gap) in MiB: 40/40 (event 0),
#     20/20, 0/0 (events 2 and 3), 20/20 (event 4) and the final state 20/20. The smallest largest gap under pressure is 0 B (the
#     full moment), but whenever 16 MiB were free one gap held them all:
#     `--min-largest-gap 16MiB` holds, with 20 MiB as the gap that counts.
A, B = BASE, BASE + 20 * MiB
full = {"segments": [segment(BASE, [block(A, 20 * MiB, "active_allocated"), block(B, 20 * MiB, "inactive")])],
        "device_traces": [trace([("segment_alloc", BASE, 40 * MiB), ("alloc", A, 20 * MiB),
                                 ("alloc", B, 20 * MiB)] + free(B, 20 * MiB))]}
write("gap_full_moment.json", json.dumps(full, indent=1).encode())

# 3b. Fragmented: a 20 MiB segment S1 holds a (8 MiB), a 4 MiB pin and b
#     (8 MiB); freeing a and b leaves 16 MiB free in two 8 MiB gaps (event 7),
#     so the next 16 MiB request maps a second 20 MiB segment S2 (event 8) and
#     takes 16 MiB of it (event 9). Moments under pressure (reserved >= 20
#     MiB, all from event 0), as (free, largest gap) MiB: 20/20, 12/12, 8/8,
#     0/0 (S1 full, events 3 and 4), 8/8, 8/8, 16/8 (event 7), 36/20, 20/8
#     (event 9) and the final state 20/8. With 16 MiB the gate fails: at event
#     9, 20 MiB were free and the largest gap was 8 MiB. Nowhere were 40 MiB
#     free, so `--min-largest-gap 40MiB` holds.
S1, S2 = BASE, BASE + 32 * MiB
frag = {"segments": [
    segment(S1, [block(S1, 8 * MiB, "inactive"), block(S1 + 8 * MiB, 4 * MiB, "active_allocated"),
                 block(S1 + 12 * MiB, 8 * MiB, "inactive")]),
    segment(S2, [block(S2, 16 * MiB, "active_allocated"), block(S2 + 16 * MiB, 4 * MiB, "inactive")])],
    "device_traces": [trace([("segment_alloc", S1, 20 * MiB), ("alloc", S1, 8 * MiB),
                             ("alloc", S1 + 8 * MiB, 4 * MiB), ("alloc", S1 + 12 * MiB, 8 * MiB)]
                            + free(S1, 8 * MiB) + free(S1 + 12 * MiB, 8 * MiB)
                            + [("segment_alloc", S2, 20 * MiB), ("alloc", S2, 16 * MiB)])]}
write("gap_fragmented_moment.json", json.dumps(frag, indent=1).encode())
print("wrote 4 fixtures")
