#!/usr/bin/env python3
"""Writes the small hand-made inputs in fixtures/ whose answers come from a
trace (or a timeline) rather than from a final state alone. Each is worked
out by hand below; fixtures/README.md repeats the figures and names the
tests that assert them.

Run: python3 scripts/make_trace_fixtures.py
"""
import json, os

here = os.path.dirname(os.path.abspath(__file__))
fx = os.path.join(here, "..", "fixtures")

MiB = 1 << 20
BASE = 139_637_976_727_552  # 0x7f00_0000_0000-ish device address
T0 = 1_700_000_000_000_000
FRAMES = [{"filename": "/work/train.py", "line": 42, "name": "forward"}]


def write_json(name, obj):
    with open(os.path.join(fx, name), "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def ev(i, action, addr, size, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream,
            "time_us": T0 + 1000 * i, "frames": FRAMES}


def block(addr, size, state, req=None):
    return {"address": addr, "size": size, "state": state,
            "requested_size": req if req is not None else (size if state != "inactive" else 0),
            "frames": FRAMES if state != "inactive" else []}


def segment(addr, blocks, stream=0):
    total = sum(b["size"] for b in blocks)
    assert [b["address"] for b in blocks] == [addr + sum(b["size"] for b in blocks[:k]) for k in range(len(blocks))]
    live = [b for b in blocks if b["state"] != "inactive"]
    return {"device": 0, "address": addr, "total_size": total,
            "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
            "active_size": sum(b["size"] for b in live),
            "requested_size": sum(b["requested_size"] for b in live),
            "stream": stream, "segment_type": "large", "segment_pool_id": [0, 0],
            "is_expandable": False, "frames": FRAMES, "blocks": blocks}


# 1. Pending frees (record_stream): a block counts as allocated until
#    free_requested for fragscope, until free_completed for memory_viz.
#    One 20 MiB segment; A (4 MiB - 100 requested, 4 MiB block), B (2 MiB),
#    C (6 MiB) and D (2 MiB) in the large pool, whose remainders over 1 MiB
#    are split off. Running figures after each event (requested bytes):
#      event  action                 allocated       incl. pending
#      0      segment_alloc 20 MiB   0               0
#      1      alloc A                4 MiB - 100     4 MiB - 100
#      2      alloc B                6 MiB - 100     6 MiB - 100
#      3      free_requested A       2 MiB           6 MiB - 100   (A pending)
#      4      alloc C                8 MiB           12 MiB - 100  <- peak incl. pending
#      5      free_completed A       8 MiB           8 MiB
#      6      alloc D (A's place)    10 MiB          10 MiB        <- peak allocated
#      7      free_requested B       8 MiB           10 MiB
#      8      free_completed B       8 MiB           8 MiB
#      9      free_requested D       6 MiB           8 MiB         (D pending at the end)
A, B, C, D = BASE, BASE + 4 * MiB, BASE + 6 * MiB, BASE
pending = {
    "segments": [segment(BASE, [
        block(D, 2 * MiB, "active_pending_free"),
        block(BASE + 2 * MiB, 4 * MiB, "inactive"),
        block(C, 6 * MiB, "active_allocated"),
        block(BASE + 12 * MiB, 8 * MiB, "inactive"),
    ])],
    "device_traces": [[
        ev(0, "segment_alloc", BASE, 20 * MiB),
        ev(1, "alloc", A, 4 * MiB - 100),
        ev(2, "alloc", B, 2 * MiB),
        ev(3, "free_requested", A, 4 * MiB - 100),
        ev(4, "alloc", C, 6 * MiB),
        ev(5, "free_completed", A, 4 * MiB - 100),
        ev(6, "alloc", D, 2 * MiB),
        ev(7, "free_requested", B, 2 * MiB),
        ev(8, "free_completed", B, 2 * MiB),
        ev(9, "free_requested", D, 2 * MiB),
    ]],
}
write_json("pending_frees_trace.json", pending)

# 2. A trace that starts mid-run with more reserved than it ever reaches
#    later: the start state (inherited from before the trace) holds 120 MiB,
#    a free 100 MiB segment X and a 20 MiB segment Y pinned by an older 8 MiB
#    block O. The trace opens with empty_cache (X released), frees O, then
#    allocates A (22 MiB, new segment S1), B (12 MiB, into Y), frees A and
#    allocates C (30 MiB: S1 is too small, new segment S2). Recorded
#    reserved after each event (MiB):
#      0 segment_free X   20      5 alloc B            42
#      1 free_requested O 20      6 free_requested A   42
#      2 free_completed O 20      7 free_completed A   42
#      3 segment_alloc S1 42      8 segment_alloc S2   72
#      4 alloc A          42      9 alloc C            72
#    Peak reserved 120 MiB (the start) under every setting; peak during the
#    trace 72 MiB as recorded (and in the model under the recorded defaults).
X, Y, S1, S2 = BASE + 512 * MiB, BASE, BASE + 64 * MiB, BASE + 128 * MiB
O, Bk, Ak, Ck = Y, Y, S1, S2
inherited = {
    "segments": [
        segment(Y, [block(Bk, 12 * MiB, "active_allocated"), block(Y + 12 * MiB, 8 * MiB, "inactive")]),
        segment(S1, [block(S1, 22 * MiB, "inactive", 0)]),
        segment(S2, [block(Ck, 30 * MiB, "active_allocated")]),
    ],
    "device_traces": [[
        ev(0, "segment_free", X, 100 * MiB),
        ev(1, "free_requested", O, 8 * MiB),
        ev(2, "free_completed", O, 8 * MiB),
        ev(3, "segment_alloc", S1, 22 * MiB),
        ev(4, "alloc", Ak, 22 * MiB),
        ev(5, "alloc", Bk, 12 * MiB),
        ev(6, "free_requested", Ak, 22 * MiB),
        ev(7, "free_completed", Ak, 22 * MiB),
        ev(8, "segment_alloc", S2, 30 * MiB),
        ev(9, "alloc", Ck, 30 * MiB),
    ]],
}
write_json("inherited_peak_trace.json", inherited)

# 3. Two export_memory_timeline raw exports ([t_ns, action, bytes, category]
#    rows; action 1 PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION, 4 DESTROY;
#    category 0 parameter, 1 optimizer state, 2 input, 3 temporary,
#    4 activation, 5 gradient), one step a millisecond. Live bytes (MiB)
#    after each step:
#      before profiling  parameter 100, optimizer state 50       total 150
#      1 ms  input +8                                            158
#      2 ms  activation +300                                     458
#      3 ms  temporary +20                                       478
#      4 ms  temporary -20                                       458
#      5 ms  gradient +100                                       558 <- peak total
#      6 ms  activation -300                                     258
#      7 ms  optimizer state version bump (-50, +50)             258
#      8 ms  input -8                                            250
#    Peaks: total 558, parameter 100, optimizer state 50, input 8,
#    temporary 20, activation 300, gradient 100, autograd detail 0,
#    unknown 0. The "after" export holds 450 MiB of activations instead of
#    300: activation 450 (+50 %), total 708 (+150 MiB, +26.9 %).
MS = 1_000_000  # a millisecond in the export's nanoseconds


def timeline(act):
    return [
        [-1, 1, 100 * MiB, 0], [-1, 1, 50 * MiB, 1],
        [1 * MS, 2, 8 * MiB, 2], [2 * MS, 2, act, 4], [3 * MS, 2, 20 * MiB, 3],
        [4 * MS, 4, -20 * MiB, 3], [5 * MS, 2, 100 * MiB, 5], [6 * MS, 4, -act, 4],
        [7 * MS, 3, -50 * MiB, 1], [7 * MS, 3, 50 * MiB, 1], [8 * MS, 4, -8 * MiB, 2],
    ]
with open(os.path.join(fx, "memory_timeline_before.raw.json"), "w") as f:
    json.dump(timeline(300 * MiB), f)
    f.write("\n")
with open(os.path.join(fx, "memory_timeline_after.raw.json"), "w") as f:
    json.dump(timeline(450 * MiB), f)
    f.write("\n")

# 4. A torch.profiler trace of GPU memory (modern schema: Addr, Total
#    Allocated, Total Reserved; Device Type 1, Device Id 0), as profiling a
#    model on CUDA with profile_memory=True records: four operators, seven
#    [memory] events, each inside the operator that made it. Running totals
#    (MiB) after each [memory] event:
#      event  operator      bytes   allocated  reserved
#      0      aten::empty   +4      4          20    (parameters, live to the end)
#      1      aten::linear  +8      12         20    (A)
#      2      aten::relu    +8      20         40    (B; a second 20 MiB segment)
#      3      aten::relu    -8      12         40    (A freed)
#      4      aten::matmul  +16     28         40    (C) <- peak allocated
#      5      aten::matmul  -8      20         40    (B freed)
#      6      aten::matmul  -16     4          40    (C freed)
#    Peak allocated 28 MiB after event 4, where aten::matmul holds 16 MiB
#    (57.1 %), aten::empty 4 MiB and aten::relu 8 MiB; peak reserved
#    40 MiB (first after event 2); 4 MiB allocated and 40 MiB reserved at
#    the end. No out-of-memory event.
GPU_PID = 4243
gpu_events = []
gpu_total = 0


def gpu_op(name, ts, dur, k):
    gpu_events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": GPU_PID, "tid": GPU_PID, "ts": ts,
                       "dur": dur, "args": {"External id": k, "Ev Idx": k}})


def gpu_mem(ts, nbytes, addr, reserved, k):
    global gpu_total
    gpu_total += nbytes
    gpu_events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": GPU_PID,
                       "tid": GPU_PID, "ts": ts,
                       "args": {"Total Reserved": reserved, "Total Allocated": gpu_total, "Bytes": nbytes,
                                "Addr": addr, "Device Id": 0, "Device Type": 1, "Ev Idx": k}})


P, GA, GB, GC = BASE, BASE + 4 * MiB, BASE + 20 * MiB, BASE + 4 * MiB
gpu_op("aten::empty", 1000.0, 10.0, 1)
gpu_mem(1001.0, 4 * MiB, P, 20 * MiB, 2)
gpu_op("aten::linear", 1020.0, 10.0, 3)
gpu_mem(1021.0, 8 * MiB, GA, 20 * MiB, 4)
gpu_op("aten::relu", 1040.0, 10.0, 5)
gpu_mem(1041.0, 8 * MiB, GB, 40 * MiB, 6)
gpu_mem(1045.0, -8 * MiB, GA, 40 * MiB, 7)
gpu_op("aten::matmul", 1060.0, 20.0, 8)
gpu_mem(1061.0, 16 * MiB, GC, 40 * MiB, 9)
gpu_mem(1065.0, -8 * MiB, GB, 40 * MiB, 10)
gpu_mem(1075.0, -16 * MiB, GC, 40 * MiB, 11)
gpu_events.append({"ph": "X", "cat": "Trace", "ts": 990.0, "dur": 100.0, "pid": "Spans",
                   "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
assert gpu_total == 4 * MiB
write_json("gpu_memory_trace.json", {"schemaVersion": 1, "traceEvents": gpu_events, "profile_memory": 1,
                                     "displayTimeUnit": "ms", "traceName": "gpu_memory.pt.trace.json"})

print("wrote the trace fixtures")
