"""Record PyTorch CUDA memory snapshots for the ``fragscope`` command.

This module only records; every analysis is done by the ``fragscope``
command installed with it::

    from fragscope import record

    with record("snapshot.pickle"):
        train_steps()

    # then, in a shell:  fragscope stats snapshot.pickle

The snapshot is written even when the block raises (an out-of-memory error is
exactly when it is wanted), and recording is switched off afterwards.

In a Jupyter notebook, ``fragscope.show("snapshot.pickle")`` displays the
interactive page of ``fragscope view`` inline (the self-contained page, no
server, no network).
"""

import contextlib
import html
import os
import shutil
import subprocess
import tempfile

__all__ = ["record", "show"]


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


def _command():
    """The fragscope command: $FRAGSCOPE_BIN, else the one on PATH (the
    wheel installs it next to this module's interpreter)."""
    explicit = os.environ.get("FRAGSCOPE_BIN")
    if explicit:
        return explicit
    found = shutil.which("fragscope")
    if found is None:
        raise FileNotFoundError(
            "the fragscope command is not on PATH (pip install fragscope installs it)"
        )
    return found


def page(path, *args):
    """The self-contained page of ``fragscope view PATH -o page.html`` as a
    string; ``args`` are more options of ``fragscope view``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "page.html")
        r = subprocess.run(
            [_command(), "view", os.fspath(path), "-o", out, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip() or "fragscope view failed")
        with open(out, encoding="utf-8") as f:
            return f.read()


def show(path, *args, height=900):
    """Displays the interactive page of ``path`` inline in a notebook (an
    iframe whose ``srcdoc`` is the self-contained page) and returns the
    page's HTML. Without IPython nothing is displayed; the HTML is returned
    all the same (write it to a file and open it in a browser)."""
    text = page(path, *args)
    try:
        from IPython.display import HTML, display
    except ImportError:
        return text
    frame = '<iframe srcdoc="{}" style="width: 100%; height: {}px; border: 0" sandbox="allow-scripts"></iframe>'.format(
        html.escape(text, quote=True), int(height)
    )
    display(HTML(frame))
    return text
