"""fragscope.record against a stand-in for torch.cuda.memory (no torch
needed): the calls it makes on the current and the 2.0 signatures, and that
the snapshot is written and recording stopped even when the block raises.

Run: python3 tests/python/test_record.py  (tests/it/packaging.rs does)."""

import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


class FakeMemory:
    def __init__(self, legacy):
        self.legacy = legacy
        self.calls = []

    def _record_memory_history(self, enabled=None, **kw):
        if self.legacy and set(kw) - {
            "record_context",
            "trace_alloc_max_entries",
            "trace_alloc_record_context",
            "device",
            "record_context_cpp",
        }:
            raise TypeError("unexpected keyword argument")
        self.calls.append(("record", enabled, kw))

    def _dump_snapshot(self, filename="dump_snapshot.pickle"):
        self.calls.append(("dump", filename))


def install(legacy):
    mem = FakeMemory(legacy)
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(memory=mem)
    sys.modules["torch"] = torch
    return mem


class RecordTest(unittest.TestCase):
    def tearDown(self):
        sys.modules.pop("torch", None)

    def test_import_needs_no_torch(self):
        sys.modules.pop("torch", None)
        sys.modules.pop("fragscope", None)
        import fragscope

        self.assertTrue(callable(fragscope.record))
        self.assertNotIn("torch", sys.modules)

    def test_current_signature(self):
        mem = install(legacy=False)
        import fragscope

        with fragscope.record("out.pickle", max_entries=7) as p:
            self.assertEqual(p, "out.pickle")
            self.assertEqual(len(mem.calls), 1)
        self.assertEqual(
            mem.calls,
            [
                (
                    "record",
                    "all",
                    {"context": "all", "stacks": "python", "max_entries": 7},
                ),
                ("dump", "out.pickle"),
                ("record", None, {}),
            ],
        )

    def test_legacy_signature(self):
        mem = install(legacy=True)
        import fragscope

        with fragscope.record("old.pickle", max_entries=5):
            pass
        self.assertEqual(mem.calls[0][1], True)
        self.assertEqual(mem.calls[0][2]["trace_alloc_max_entries"], 5)
        self.assertEqual(mem.calls[1:], [("dump", "old.pickle"), ("record", False, {})])

    def test_dumps_when_the_block_raises(self):
        mem = install(legacy=False)
        import fragscope

        with self.assertRaises(MemoryError):
            with fragscope.record("oom.pickle"):
                raise MemoryError("CUDA out of memory")
        self.assertEqual(mem.calls[1:], [("dump", "oom.pickle"), ("record", None, {})])


if __name__ == "__main__":
    unittest.main()
