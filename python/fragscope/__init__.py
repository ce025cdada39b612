"""Record PyTorch CUDA memory snapshots for the ``fragscope`` command.

This module only records; every analysis is done by the ``fragscope``
command installed with it::

    from fragscope import record

    with record("snapshot.pickle"):
        train_steps()

    # then, in a shell:  fragscope stats snapshot.pickle

The snapshot is written even when the block raises (an out-of-memory error is
exactly when it is wanted), and recording is switched off afterwards.
"""

import contextlib

__all__ = ["record"]


@contextlib.contextmanager
def record(path="snapshot.pickle", max_entries=100000, stacks="python"):
    """Record allocator history around a block, then dump it to ``path``.

    ``max_entries`` bounds the trace ring buffer (older events are dropped);
    ``stacks="all"`` adds C++ frames (slower). Needs PyTorch with CUDA.
    """
    import torch  # late, so that importing fragscope never needs torch

    memory = torch.cuda.memory
    try:
        memory._record_memory_history(
            enabled="all", context="all", stacks=stacks, max_entries=max_entries
        )
        legacy = False
    except TypeError:
        # PyTorch 2.0: the boolean signature.
        memory._record_memory_history(
            True,
            trace_alloc_max_entries=max_entries,
            trace_alloc_record_context=True,
            record_context_cpp=stacks == "all",
        )
        legacy = True
    try:
        yield path
    finally:
        try:
            memory._dump_snapshot(path)
        finally:
            memory._record_memory_history(False if legacy else None)
