#!/usr/bin/env python3
"""Writes the synthetic seeds of fuzz/seeds/: small snapshots in every shape
and encoding fragscope reads (pickle protocols 0-5, the 1.13 bare segment
list with `history`, 2.0 `cpp_frames`, JSON, memory_viz HTML, gzip), so the
fuzzers start from the rarer code paths the real files under shared/real do
not exercise. Deterministic: rerunning rewrites identical bytes."""
import base64, gzip, io, json, os, pickle, sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fuzz", "seeds")
os.makedirs(out, exist_ok=True)

frame = {"filename": "train.py", "line": 12, "name": "forward"}
frame2 = {"filename": "/usr/lib/python3/torch/nn/linear.py", "line": 125, "name": "forward"}
stack = [frame, frame2]

def block(addr, size, state, req=None, frames=stack):
    b = {"address": addr, "size": size, "state": state, "frames": frames}
    if req is not None:
        b["requested_size"] = req
    return b

seg = {
    "device": 0, "address": 139_637_976_727_552, "total_size": 20_971_520,
    "allocated_size": 8_388_608, "active_size": 8_388_608, "requested_size": 8_000_000,
    "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
    "frames": stack,
    "blocks": [
        block(139_637_976_727_552, 8_388_608, "active_allocated", 8_000_000),
        block(139_637_985_116_160, 2_097_152, "active_pending_free", 2_000_000),
        block(139_637_987_213_312, 10_485_760, "inactive", 7, []),
    ],
}
small = {
    "device": 1, "address": 139_000_000_000_000, "total_size": 2_097_152, "stream": 94_000_000_000,
    "segment_type": "small", "segment_pool_id": (1, 2), "frames": [],
    "blocks": [block(139_000_000_000_000, 512, "active_allocated", 4), block(139_000_000_000_512, 2_096_640, "inactive", 0, [])],
}
trace = [
    {"action": "segment_alloc", "addr": seg["address"], "size": 20_971_520, "stream": 0, "time_us": 1_700_000_000_000_000, "frames": stack},
    {"action": "alloc", "addr": seg["address"], "size": 8_000_000, "stream": 0, "time_us": 1_700_000_000_000_100, "frames": stack,
     "compile_context": "N/A", "user_metadata": "step 3"},
    {"action": "free_requested", "addr": 139_637_985_116_160, "size": 2_000_000, "stream": 0, "time_us": 1_700_000_000_000_200, "frames": stack},
    {"action": "oom", "size": 1 << 33, "stream": 0, "device_free": 95_682_560, "time_us": 1_700_000_000_000_300, "frames": []},
    {"action": "snapshot", "addr": 0, "size": 8_388_608, "stream": 0},
    {"action": "segment_map", "addr": 1 << 46, "size": 2_097_152, "stream": 0, "pool_id": (0, 1), "category": "ACTIVATION"},
    {"action": "some_future_action", "addr": 5, "size": 6, "stream": 7},
]
snap = {
    "segments": [seg, small],
    "device_traces": [trace, []],
    "allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,garbage_collection_threshold:0.6",
        "max_split_size": -1, "garbage_collection_threshold": 0.6, "expandable_segments": True,
        "last_allocator_settings": None,
        "roundup_power2_divisions": {1: 4, 2: 4, 1024: 8},
    },
    "external_annotations": [{"device": 0, "time_us": 1_700_000_000_000_150, "stage": "START", "name": "fwd"}],
    "a_key_from_a_future_version": [1, 2.5, "x", None, {"nested": [True]}],
}
legacy_block = {"size": 1_048_576, "state": "active_allocated",
                "history": [{"addr": 1, "real_size": 1_000_000, "frames": stack,
                             "cpp_frames": ["c10::alloc", "at::empty"]}]}
legacy = [{"device": 0, "address": 1 << 40, "total_size": 2_097_152, "allocated_size": 1_048_576,
           "active_size": 1_048_576, "stream": 0, "segment_type": "large",
           "blocks": [legacy_block, {"size": 1_048_576, "state": "inactive", "history": []}]}]

def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)

for p in range(6):
    write(f"snapshot_p{p}.pickle", pickle.dumps(snap, protocol=p))
write("legacy_segment_list_p2.pickle", pickle.dumps(legacy, protocol=2))
write("legacy_segment_list_p0.pickle", pickle.dumps(legacy, protocol=0))
write("traces_key_only_p4.pickle", pickle.dumps({"device_traces": [trace]}, protocol=4))
js = json.dumps(snap).encode()
write("snapshot.json", js)
write("legacy_segment_list.json", json.dumps(legacy).encode())
write("snapshot.json.gz", gzip.compress(js, mtime=0))
p4 = pickle.dumps(snap, protocol=4)
pad = 3 - len(p4) % 3
b64 = base64.b64encode(p4 + b"\0" * pad).decode()
write("memory_viz.html", (
    "<!DOCTYPE html>\n<html><head></head><body><script type=\"module\">\n"
    "import {add_local_files} from \"https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js\"\n"
    f"const local_files = [{{\"name\": \"snapshot.pickle\", \"base64\": \"{b64}\"}}]\n"
    "add_local_files(local_files, \"Active Memory Timeline\")\n</script></body></html>\n").encode())
write("chrome_trace_min.json", json.dumps({"traceEvents": [
    {"ph": "i", "name": "[memory]", "ts": 10, "pid": 1, "tid": 1,
     "args": {"Addr": 1234, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 2097152,
              "Device Type": 1, "Device Id": 0}}]}).encode())
write("memory_timeline_min.json", json.dumps([[-1, 1, 512, 0], [10, 2, 1024, 4], [20, 4, 1024, 4]]).encode())

# `check` configurations (fragscope.toml), for the check_config target.
write("check_full.toml", b'''[check]
max_fragmentation = 0.5
min_largest_gap = "512MiB"
max_peak_reserved = "70GiB"
max_peak_allocated = 64424509440
max_internal_waste = "5%"
max_oom_events = 0
baseline = "baselines/main.json"

[check.max_regression]
peak_reserved = "5%"
peak_allocated = "1GiB"
fragmentation = 0.05
oom_events = 1
''')
write("check_min.toml", b'[check]\nmax_oom_events = 2\n')
write("check_bad.toml", b'max_fragmentation = 0.5\n[check]\nmax_fragmentation = "150%"\n')
