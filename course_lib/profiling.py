"""Measuring the memory a torch computation needs: the most bytes of tensors it holds at once.

Python's ``tracemalloc`` does not see torch's allocations (they are made in C++), and the
process's resident memory (RSS) is blurred by the allocator keeping freed pages.  So we watch
torch itself: a ``TorchDispatchMode`` sees every aten operation as it runs.  Each output whose
storage is not one of the operation's inputs' is a new allocation (views and in-place ops share
an input's storage, so they cost nothing); a weak reference to the storage tells when it is
freed.  The peak of the bytes alive is taken after every operation.

What this counts: every tensor storage made by an aten op while ``fn`` runs, alive or not at the
end.  What it does not count: scratch memory inside a single kernel (e.g. a matrix multiply's
packing buffers), Python objects, and the inputs, which exist before the call.

    import torch, course_lib.profiling as prof
    q = k = v = torch.randn(1, 1024, 64)                                     # (batch, n, d_head)
    naive = lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 8, dim=-1) @ v
    prof.measure_peak_extra_memory(naive, q, k, v).extra_bytes  # 8,388,608 = 2 · 1024² · 4 bytes
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode


def _tensors(x):
    """The tensors in an op's arguments or results (tensors, lists/tuples of them, dicts)."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for item in x:
            yield from _tensors(item)
    elif isinstance(x, dict):
        for item in x.values():
            yield from _tensors(item)


class AllocationTracker(TorchDispatchMode):
    """Inside ``with AllocationTracker() as t:``, records the tensors aten ops allocate and free.

    Attributes (bytes unless said otherwise):
        live_bytes: bytes of tracked storages alive now (updated at every op).
        peak_bytes: the most that were alive at once.
        largest_bytes, largest_shape, largest_op: the single largest allocation and the op that
            made it (shape of the tensor the op returned).
        most_numbers, most_numbers_shape, most_numbers_dtype: the allocation holding the most
            numbers (elements), whatever their dtype: a 1-byte bool mask counts as fully as a
            float32 matrix of the same shape.
        blocks: one ``[data_ptr, nbytes, op index allocated, op index freed or None]`` per
            allocation, in order; ``peak_bytes_without`` replays them.
    """

    def __init__(self):
        super().__init__()
        self._live: dict[int, tuple[StorageWeakRef, int]] = {}  # data_ptr -> (weak ref, block)
        self.blocks: list[list] = []
        self.n_ops = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        self.largest_bytes = 0
        self.largest_shape: tuple = ()
        self.largest_op = ""
        self.most_numbers = 0
        self.most_numbers_shape: tuple = ()
        self.most_numbers_dtype: torch.dtype | None = None

    def purge(self):
        """Forget storages freed since the last op."""
        for ptr, (ref, block) in list(self._live.items()):
            if ref.expired():
                del self._live[ptr]
                block[3] = self.n_ops
                self.live_bytes -= block[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.purge()  # frees since the last op happened before this allocation
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
        out = func(*args, **kwargs)
        for t in _tensors(out):
            storage = t.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or ptr in inputs or ptr in self._live:
                continue  # a view, an in-place result or an empty tensor: nothing new
            block = [ptr, nbytes, self.n_ops, None]
            self.blocks.append(block)
            self._live[ptr] = (StorageWeakRef(storage), block)
            self.live_bytes += nbytes
            if nbytes > self.largest_bytes:
                self.largest_bytes, self.largest_shape = nbytes, tuple(t.shape)
                self.largest_op = str(func)
            if nbytes // t.element_size() > self.most_numbers:
                self.most_numbers = nbytes // t.element_size()
                self.most_numbers_shape, self.most_numbers_dtype = tuple(t.shape), t.dtype
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        self.n_ops += 1
        return out

    def is_tracked(self, t: torch.Tensor) -> bool:
        """True if ``t``'s storage was allocated while tracking and is still alive."""
        return t.untyped_storage().data_ptr() in self._live

    def peak_bytes_without(self, tensors=()) -> int:
        """The peak of live bytes, replayed leaving out the storages of ``tensors`` (e.g. the
        result, to get the working memory beyond it whenever it was allocated)."""
        skip = {t.untyped_storage().data_ptr() for t in tensors if self.is_tracked(t)}
        events = []  # (op index, 0 for a free / 1 for an allocation, bytes): frees go first
        for ptr, nbytes, start, end in self.blocks:
            if ptr in skip and end is None:
                continue
            events.append((start, 1, nbytes))
            if end is not None:
                events.append((end, 0, -nbytes))
        live = peak = 0
        for _, _, delta in sorted(events):
            live += delta
            peak = max(peak, live)
        return peak


class PeakMemory(NamedTuple):
    """What :func:`measure_peak_extra_memory` measured, in bytes."""
    extra_bytes: int
    """Most bytes alive at once, not counting the result: the working memory beyond the inputs
    and the output."""
    peak_bytes: int
    """Most bytes of tensors allocated during the call that were alive at once (result included)."""
    output_bytes: int
    """Bytes of the tensors returned (those allocated during the call)."""
    largest_bytes: int
    """The single largest tensor allocated during the call."""
    largest_shape: tuple
    """Its shape."""
    most_numbers: int = 0
    """Elements of the allocation holding the most numbers, in any dtype."""
    most_numbers_shape: tuple = ()
    """Its shape."""
    most_numbers_dtype: torch.dtype | None = None
    """Its dtype."""


def measure_peak_extra_memory(fn: Callable, *args, **kwargs) -> PeakMemory:
    """Run ``fn(*args, **kwargs)`` under an :class:`AllocationTracker` and report its memory.

    Runs under ``torch.no_grad()`` so that no autograd graph is kept.  Deterministic: the same
    call gives the same bytes every time (unlike RSS).
    Returns:
        PeakMemory; ``extra_bytes`` is the number to compare between two ways of computing the
        same result (the inputs and the result are the same size for both).
    """
    with torch.no_grad(), AllocationTracker() as tracker:
        result = fn(*args, **kwargs)
    returned = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in _tensors(result) if tracker.is_tracked(t)}  # once per storage
    return PeakMemory(tracker.peak_bytes_without(list(_tensors(result))), tracker.peak_bytes,
                      sum(returned.values()), tracker.largest_bytes, tracker.largest_shape,
                      tracker.most_numbers, tracker.most_numbers_shape, tracker.most_numbers_dtype)


def attention_memory_vs_n(fns: dict, ns: Sequence[int], d_head: int = 64,
                          dtype=torch.float32, seed: int = 0) -> list[dict]:
    """Peak extra memory of each attention function at each sequence length.

    Args:
        fns: ``{name: fn}``, each ``fn(q, k, v)`` with q, k, v of shape (1, 1, n, d_head)
            (one sequence, one head).
        ns: sequence lengths (n_q = n_k = n).
    Returns:
        One row per n: ``{"n": n, "<name>": extra bytes, ..., "inputs_bytes": bytes of q, k, v}``.
    Raises:
        ValueError: an n or d_head that is not a positive integer.
    """
    for name, value in [("d_head", d_head)] + [("n", n) for n in ns]:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer")
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for n in ns:
        # q, k, v: (1, 1, n, d_head) each (batch, heads, positions, d_head)
        q, k, v = torch.randn(3, 1, 1, n, d_head, generator=gen, dtype=dtype)
        row = {"n": n, "inputs_bytes": 3 * q.numel() * q.element_size()}
        for name, fn in fns.items():
            row[name] = measure_peak_extra_memory(fn, q, k, v).extra_bytes
        rows.append(row)
    return rows


def plot_memory_vs_n(rows: list[dict], names: Sequence[str] | None = None, ax=None):
    """Log-log plot of peak extra memory (MiB) against n, from :func:`attention_memory_vs_n`.

    Draws one line per method and, dashed, the bytes of the inputs q, k, v (linear in n) for
    scale.  On log-log axes a quadratic cost climbs two decades per decade of n, a linear one
    climbs one, a constant one is flat.
    Args:
        rows: the rows of :func:`attention_memory_vs_n`.
        names: which methods to draw (default: every one in the rows).
        ax: a matplotlib Axes to draw on; a new figure when None.
    Returns:
        The Axes.
    Raises:
        ValueError: no rows.
    """
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("rows is empty: measure at least one n")
    names = list(names) if names is not None else [key for key in rows[0]
                                                   if key not in ("n", "inputs_bytes")]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4.5))
    ns = [r["n"] for r in rows]
    colours = ["#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00"]
    for name, colour in zip(names, colours * (len(names) // len(colours) + 1)):
        ax.plot(ns, [r[name] / 2**20 for r in rows], "o-", color=colour, label=name)
    ax.plot(ns, [r["inputs_bytes"] / 2**20 for r in rows], "--", color="#999999",
            label="inputs q, k, v (for scale)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns, [f"{n:,}" for n in ns])
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("peak extra memory (MiB)")
    ax.set_title("Working memory of attention, one head")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return ax
