"""Units: bytes per number for each dtype, binary (GiB = 2^30 bytes) and decimal (GB = 10^9
bytes) sizes, and the accelerators the course sizes against.

The course's one convention for memory (every lesson, check and card follows it):

* **An accelerator's memory is the figure on its vendor's data sheet, in GB of 10^9 bytes.**
  An H100 SXM "80 GB" is ``80 × 10^9`` bytes (:data:`H100_SXM_BYTES`), an A100 SXM 80GB the
  same, an H200 SXM "141 GB" ``141 × 10^9`` (:data:`H200_SXM_BYTES`); :data:`ACCELERATORS`
  holds each data sheet's memory, bandwidth and dense 16-bit peak (``accelerators.json``).
* That figure is a budget, a little below what software is shown: on an H100 SXM the driver
  reports about 79.6 GiB (81,559 MiB, ``nvidia-smi --query-gpu=memory.total``), about
  85.5 × 10^9 bytes, of which the CUDA context and the serving software take part. Sizing with
  the data-sheet bytes leaves that margin unspent instead of guessing it, and anyone can check
  the figure against the data sheet. Never read "80 GB" as 80 GiB.
* What the course computes (weights, KV caches, score matrices) is counted in bytes and
  reported in the unit the lesson names: GiB (2^30) where it says GiB, GB (10^9) where it says
  GB, TiB/KiB likewise. A message or a figure never mixes the two without saying so.
* Bandwidth and FLOP/s are decimal as on the data sheets: TB/s = 10^12 bytes per second,
  TFLOP/s = 10^12 FLOPs per second.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12

DTYPE_BYTES = {
    "fp32": 4, "float32": 4,
    "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2,
    "int8": 1, "fp8": 1,
    "int4": 0.5,
}
"""Bytes per stored number.  int4 packs two numbers per byte."""

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"B": 1, "KB": KB, "MB": MB, "GB": GB, "TB": TB,
          "KIB": KiB, "MIB": MiB, "GIB": GiB, "TIB": TiB}


def dtype_bytes(dtype: str) -> float:
    """Bytes per number for ``dtype`` (``fp32``, ``bf16``/``fp16``, ``int8``, ``int4``, or
    the ``torch_dtype`` spellings ``float32``, ``bfloat16``, ``float16``).

    Raises:
        ValueError: an unknown dtype, naming the known ones.
    """
    key = str(dtype).replace("torch.", "").lower()
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; known: fp32, bf16, fp16, int8, int4")
    return DTYPE_BYTES[key]


def parse_size(text: str | int | float) -> int:
    """Bytes in a size such as ``"80GiB"``, ``"80 GB"`` or ``"141GB"`` (a bare number is bytes).

    Raises:
        ValueError: text that is not a number with an optional B/KB/MB/GB/TB/KiB/MiB/GiB/TiB unit.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text <= 0:
            raise ValueError(f"size must be positive, got {text!r}")
        return int(text)
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 80GiB or 80GB")
    value = float(m.group(1)) * _UNITS[(m.group(2) or "B").upper()]
    if value <= 0:
        raise ValueError(f"size must be positive, got {text!r}")
    return int(value)


def gib(n_bytes: float) -> float:
    """Bytes to GiB (2^30 bytes)."""
    return n_bytes / GiB


def gb(n_bytes: float) -> float:
    """Bytes to GB (10^9 bytes)."""
    return n_bytes / GB


class Accelerator(NamedTuple):
    """One accelerator's data-sheet figures (dense, no sparsity)."""

    name: str
    memory_bytes: int
    """Memory as the data sheet states it, in bytes (GB × 10^9: the course's convention)."""
    memory: str
    """Memory as the data sheet writes it, e.g. ``"80 GB HBM3"``."""
    bandwidth: float
    """Memory bandwidth, bytes per second (TB/s × 10^12)."""
    peak_bf16: float
    """Dense 16-bit (bf16) peak, FLOP/s (TFLOP/s × 10^12)."""
    source: str
    """The data sheet the figures come from."""


def _load_accelerators() -> dict[str, Accelerator]:
    data = json.loads((Path(__file__).with_name("accelerators.json")).read_text())
    return {name: Accelerator(name, int(a["memory_gb"] * GB), a["memory"],
                              float(round(a["bandwidth_tb_s"] * 1e12)),
                              float(round(a["peak_bf16_tflops"] * 1e12)), a["source"])
            for name, a in data.items() if not name.startswith("_")}


ACCELERATORS: dict[str, Accelerator] = _load_accelerators()
"""Name -> :class:`Accelerator`, from NVIDIA's data sheets (``accelerators.json``): the A100
Tensor Core GPU (80GB SXM), the H100 Tensor Core GPU (SXM) and the H200 Tensor Core GPU (SXM)."""

A100_SXM_80GB_BYTES = ACCELERATORS["A100 SXM 80GB"].memory_bytes
"""80 × 10^9 bytes: an A100 SXM 80GB's memory by the course's convention."""
H100_SXM_BYTES = ACCELERATORS["H100 SXM 80GB"].memory_bytes
"""80 × 10^9 bytes: an H100 SXM's memory by the course's convention (the driver shows about
79.6 GiB, 85.5 × 10^9 bytes)."""
H200_SXM_BYTES = ACCELERATORS["H200 SXM"].memory_bytes
"""141 × 10^9 bytes: an H200 SXM's memory by the course's convention."""


def accelerator(name: str) -> Accelerator:
    """The data-sheet figures of accelerator ``name`` (a key of :data:`ACCELERATORS`).

    Raises:
        ValueError: an unknown name, naming the known ones.
    """
    if name not in ACCELERATORS:
        raise ValueError(f"unknown accelerator {name!r}; known: {', '.join(ACCELERATORS)}")
    return ACCELERATORS[name]
