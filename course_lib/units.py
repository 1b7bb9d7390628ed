"""Units: bytes per number for each dtype, and binary (GiB = 2^30 bytes) vs decimal
(GB = 10^9 bytes) sizes.  Vendors quote accelerator memory in GB of 10^9 bytes on their
data sheets but an "80GB" part exposes 80 GiB (2^30-byte units) to software; the course says
which one it means every time."""
from __future__ import annotations

import re

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
