#!/usr/bin/env python3
"""Writes the small hand-made snapshots in fixtures/, each pinning one feature
of the format, with their expected figures (worked out by hand below and
cross-checked against the definitions in golden_stats.py).

Run: python3 scripts/make_fixtures.py
"""
import base64, gzip, json, os, pickle, sys

here = os.path.dirname(os.path.abspath(__file__))
fx = os.path.join(here, "..", "fixtures")
sys.path.insert(0, here)
from golden_stats import figures  # noqa: E402

MiB = 1 << 20
STREAM = 94_000_000_000_000  # a cudaStream_t pointer as int (> 2^31: LONG1)
BASE = 139_637_976_727_552   # 0x7f00_0000_0000-ish device address (LONG1)

train = [{"filename": "/work/train.py", "line": 42, "name": "forward"},
         {"filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1518, "name": "_call_impl"},
         {"filename": "/work/train.py", "line": 90, "name": "main"}]
# One list object shared by every record with this stack: pickled once, then BINGET.
STACK = train


def seg(addr, blocks, stream=0, pool=(0, 0), expandable=False, seg_type="large", device=0):
    total = sum(b["size"] for b in blocks)
    off = addr
    for b in blocks:
        b.setdefault("address", off)
        off += b["size"]
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    req = sum(b.get("requested_size", 0) for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": addr, "total_size": total, "allocated_size": alloc,
            "active_size": active, "requested_size": req, "stream": stream, "segment_type": seg_type,
            "segment_pool_id": pool, "is_expandable": expandable, "frames": STACK, "blocks": blocks}


def blk(size, state, req=None):
    b = {"size": size, "state": state, "frames": STACK if state != "inactive" else []}
    b["requested_size"] = req if req is not None else (size if state != "inactive" else 0)
    return b


def write(name, data):
    with open(os.path.join(fx, name), "wb") as f:
        f.write(data)


expected = {}

# 1. The worked example of the spec: 1 500 000 B in a fresh 20 MiB segment,
#    protocol 2 as PyTorch's C++ pickler writes it (BINUNICODE strings, memo).
s1 = {"segments": [seg(BASE, [blk(1_500_160, "active_allocated", 1_500_000), blk(19_471_360, "inactive")])],
      "device_traces": [[
          {"action": "segment_alloc", "addr": BASE, "size": 20 * MiB, "stream": 0, "time_us": 1_700_000_000_000_000, "frames": STACK},
          {"action": "alloc", "addr": BASE, "size": 1_500_000, "stream": 0, "time_us": 1_700_000_000_000_010, "frames": STACK},
      ]]}
write("worked_example_proto2.pickle", pickle.dumps(s1, protocol=2))
expected["worked_example_proto2.pickle"] = dict(segments=1, blocks=2, reserved_bytes=20 * MiB, allocated_bytes=1_500_000,
    active_bytes=1_500_160, internal_free_bytes=160, external_free_bytes=19_471_360, inactive_bytes=19_471_360,
    pending_free_bytes=0, largest_free_block_bytes=19_471_360, fragmentation=0.0, trace_events=[2])

# 2. Fragmented: 3 x 20 MiB segments, each pinned by one small live block in the
#    middle, so 57+ MiB are free but the largest gap is 12 MiB. JSON form.
segs = []
for i in range(3):
    segs.append(seg(BASE + i * 32 * MiB, [blk(8 * MiB, "inactive"), blk(512, "active_allocated", 100),
                                          blk(12 * MiB - 512, "inactive")]))
s2 = {"segments": segs, "device_traces": [[]]}
write("fragmented.json", json.dumps(s2, indent=1).encode())
expected["fragmented.json"] = dict(segments=3, blocks=9, reserved_bytes=60 * MiB, allocated_bytes=300,
    active_bytes=1536, internal_free_bytes=1236, external_free_bytes=60 * MiB - 1536, inactive_bytes=60 * MiB - 1536,
    pending_free_bytes=0, largest_free_block_bytes=12 * MiB - 512, fragmentation=1 - (12 * MiB - 512) / (60 * MiB - 1536),
    trace_events=[0])

# 3. 1.13 / memory_snapshot(): a bare list of segments whose blocks carry
#    `history` and no `address`; protocol 3.
legacy = [{"device": 0, "address": BASE, "total_size": 2 * MiB, "allocated_size": 1024, "active_size": 1024,
           "stream": 0, "segment_type": "small",
           "blocks": [{"size": 1024, "state": "active_allocated",
                       "history": [{"addr": BASE, "real_size": 1000, "frames": train}]},
                      {"size": 2 * MiB - 1024, "state": "inactive", "history": []}]}]
write("legacy_history_list_proto3.pickle", pickle.dumps(legacy, protocol=3))
expected["legacy_history_list_proto3.pickle"] = dict(segments=1, blocks=2, reserved_bytes=2 * MiB, allocated_bytes=1000,
    active_bytes=1024, internal_free_bytes=24, external_free_bytes=2 * MiB - 1024, inactive_bytes=2 * MiB - 1024,
    pending_free_bytes=0, largest_free_block_bytes=2 * MiB - 1024, fragmentation=0.0, trace_events=[])

# 4. Private pools, a second stream and both spellings of the pending state
#    (the docs' active_awaiting_free and the emitters' active_pending_free); protocol 4.
s4 = {"segments": [
    seg(BASE, [blk(4 * MiB, "active_pending_free", 4 * MiB), blk(16 * MiB, "inactive")], stream=STREAM, pool=(1, 7)),
    seg(BASE + 64 * MiB, [blk(2 * MiB, "active_awaiting_free", 2 * MiB - 100), blk(18 * MiB, "active_allocated", 18 * MiB - 4096)]),
], "device_traces": [[]], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
    "garbage_collection_threshold": 0.0, "expandable_segments": False,
    "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}, "external_annotations": []}
write("pools_pending_proto4.pickle", pickle.dumps(s4, protocol=4))
expected["pools_pending_proto4.pickle"] = dict(segments=2, blocks=4, reserved_bytes=40 * MiB, allocated_bytes=18 * MiB - 4096,
    active_bytes=18 * MiB, internal_free_bytes=4096, external_free_bytes=22 * MiB, inactive_bytes=16 * MiB,
    pending_free_bytes=6 * MiB, largest_free_block_bytes=16 * MiB, fragmentation=0.0, trace_events=[0])

# 5. Protocol 5 (Python 3.14's default), expandable segments, an oom event,
#    annotations and a top-level key newer than this reader knows.
s5 = {"segments": [seg(BASE, [blk(40 * MiB, "active_allocated", 40 * MiB), blk(20 * MiB, "inactive")], expandable=True)],
      "device_traces": [[
          {"action": "segment_map", "addr": BASE, "size": 60 * MiB, "stream": 0, "time_us": 1, "frames": STACK},
          {"action": "alloc", "addr": BASE, "size": 40 * MiB, "stream": 0, "time_us": 2, "frames": STACK,
           "compile_context": "N/A", "user_metadata": ""},
          {"action": "oom", "size": 2048 * MiB, "stream": 0, "time_us": 3, "device_free": 100 * MiB, "frames": STACK},
      ]],
      "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "expandable_segments": True,
                             "max_split_size": -1, "garbage_collection_threshold": 0.0},
      "external_annotations": [{"name": "ProfilerStep#1", "stage": "START", "device": 0, "time_us": 1}],
      "host_segments": []}
write("expandable_oom_proto5.pickle", pickle.dumps(s5, protocol=5))
expected["expandable_oom_proto5.pickle"] = dict(segments=1, blocks=2, reserved_bytes=60 * MiB, allocated_bytes=40 * MiB,
    active_bytes=40 * MiB, internal_free_bytes=0, external_free_bytes=20 * MiB, inactive_bytes=20 * MiB,
    pending_free_bytes=0, largest_free_block_bytes=20 * MiB, fragmentation=0.0, trace_events=[3],
    oom_events=[{"device": 0, "size": 2048 * MiB, "device_free": 100 * MiB}])

# 6. 2.0: trace entries with `cpp_frames`, protocol 0 text opcodes.
s6 = {"segments": [seg(BASE, [blk(2 * MiB, "inactive")], seg_type="small")],
      "device_traces": [[{"action": "alloc", "addr": BASE, "size": 4, "stream": 0, "frames": train,
                          "cpp_frames": ["at::empty_cuda", "c10::cuda::CUDACachingAllocator::malloc"]},
                         {"action": "free_requested", "addr": BASE, "size": 4, "stream": 0},
                         {"action": "free_completed", "addr": BASE, "size": 4, "stream": 0}]]}
write("cpp_frames_2_0_proto0.pickle", pickle.dumps(s6, protocol=0))
expected["cpp_frames_2_0_proto0.pickle"] = dict(segments=1, blocks=1, reserved_bytes=2 * MiB, allocated_bytes=0,
    active_bytes=0, internal_free_bytes=0, external_free_bytes=2 * MiB, inactive_bytes=2 * MiB, pending_free_bytes=0,
    largest_free_block_bytes=2 * MiB, fragmentation=0.0, trace_events=[3])

# 7. The page torch.cuda._memory_viz.trace_plot writes (NUL-padded base64 pickle).
buf = pickle.dumps(s1, protocol=4)
buf += b"\x00" * (3 - len(buf) % 3)
page = ("<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n<script type=\"module\">\n"
        "import {add_local_files} from \"https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js\"\n"
        "const local_files = " + json.dumps([{"name": "snapshot.pickle", "base64": base64.b64encode(buf).decode()}]) +
        "\nadd_local_files(local_files, 'Active Memory Timeline')\n</script>\n</body>\n")
write("memory_viz_page.html", page.encode())
expected["memory_viz_page.html"] = expected["worked_example_proto2.pickle"]

# 8. A pickle named .json and gzip-compressed (content decides, never the name).
write("pickle_named.json.gz", gzip.compress(pickle.dumps(s2, protocol=4), mtime=0))
expected["pickle_named.json.gz"] = expected["fragmented.json"]

# Cross-check the hand-worked figures against the definitions.
for name, exp in expected.items():
    src = {"worked_example_proto2.pickle": s1, "fragmented.json": s2, "legacy_history_list_proto3.pickle": legacy,
           "pools_pending_proto4.pickle": s4, "expandable_oom_proto5.pickle": s5, "cpp_frames_2_0_proto0.pickle": s6,
           "memory_viz_page.html": s1, "pickle_named.json.gz": s2}[name]
    segs = src if isinstance(src, list) else src["segments"]
    got = figures(segs)
    for k, v in got.items():
        assert abs(exp[k] - v) < 1e-12, (name, k, exp[k], v)

with open(os.path.join(fx, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", len(expected), "fixtures")
