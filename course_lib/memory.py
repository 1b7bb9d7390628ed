"""Memory: the bytes of the weights and of the KV cache, and how many requests fit.

Units are bytes throughout (convert with ``units.gib``).  Source for the cache formula: each
layer keeps one key and one value vector per key/value head per token (Pope et al. 2022,
"Efficiently Scaling Transformer Inference", arxiv.org/abs/2211.05102):

    cache bytes = 2 × n_layers × n_kv_heads × d_head × tokens × bytes per number

Layers differ in what they keep (``kv_cache_by_layer_kind``): a full-attention layer keeps
every token; a sliding-window layer at most ``sliding_window`` of them (Beltagy et al. 2020,
arxiv.org/abs/2004.05150; Mistral, Gemma 2 and 3, gpt-oss); a latent-attention layer keeps the
latent and the rotary key, kv_lora_rank + d_head_rope numbers a token (DeepSeek-V2,
arxiv.org/abs/2405.04434, section 2.1.2), in place of a key and a value per head.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .params import count_params
from .shapes import ModelShape
from .units import dtype_bytes


def _dtype_of(s: ModelShape, dtype: str | None) -> str:
    # The card's own dtype when none is asked for; float32 (transformers' default) otherwise.
    return dtype or s.dtype or "fp32"


def weight_bytes(s: ModelShape, dtype: str | None = None) -> int:
    """Bytes to hold every parameter (total, not active) at ``dtype``.

    ``dtype`` defaults to the card's ``torch_dtype``, else fp32.  Raises ValueError for an
    unknown dtype."""
    return math.ceil(count_params(s).total * dtype_bytes(_dtype_of(s, dtype)))


def kv_cache_bytes_per_token(s: ModelShape, dtype: str | None = None) -> int:
    """Bytes of keys and values one token adds to the cache: 2·n_layers·n_kv_heads·d_head·bytes
    (n_layers·``s.kv_cache_width``·bytes: for latent attention the latent and rotary key).

    Grouped-query attention enters through ``n_kv_heads``; the sliding window does not change
    the per-token figure, only how many tokens are kept (see ``kv_cache_bytes_per_sequence``)."""
    return math.ceil(s.n_layers * s.kv_cache_width * dtype_bytes(_dtype_of(s, dtype)))


def cached_tokens(s: ModelShape, n_tokens: int) -> int:
    """Tokens a sequence of ``n_tokens`` keeps in the cache of a layer with the sliding window:
    all, or the last ``sliding_window``.  (Layers without it, ``s.n_layers - s.sliding_layers``
    of them, keep all ``n_tokens``.)"""
    if n_tokens < 0:
        raise ValueError(f"n_tokens={n_tokens} must be non-negative")
    return n_tokens if s.sliding_window is None else min(n_tokens, s.sliding_window)


def cached_token_layers(s: ModelShape, n_tokens: int) -> int:
    """Tokens kept summed over layers: windowed layers keep ``cached_tokens``, the others all."""
    return ((s.n_layers - s.sliding_layers) * n_tokens
            + s.sliding_layers * cached_tokens(s, n_tokens))


def kv_cache_bytes_per_sequence(s: ModelShape, n_tokens: int, dtype: str | None = None) -> int:
    """Bytes of KV cache for one sequence of ``n_tokens`` (a sliding window caps the tokens kept).

    Example: a 7B-class shape (32 layers, 32 kv heads of 128) at 8,192 tokens in 16-bit
    holds 4.0 GiB."""
    return math.ceil(s.kv_cache_width * cached_token_layers(s, n_tokens)
                     * dtype_bytes(_dtype_of(s, dtype)))


def requests_that_fit(s: ModelShape, n_tokens: int, memory_bytes: int,
                      dtype: str | None = None, kv_dtype: str | None = None) -> int:
    """How many sequences of ``n_tokens`` fit in the cache beside the weights.

    floor((memory − weight bytes) / cache bytes per sequence); 0 when the weights alone do not
    fit.  Activations, fragmentation and the runtime's own memory are left out, so this is an
    upper bound.  ``kv_dtype`` defaults to ``dtype``.

    Raises:
        ValueError: non-positive ``memory_bytes`` or ``n_tokens``.
    """
    if memory_bytes <= 0:
        raise ValueError(f"memory_bytes={memory_bytes} must be positive")
    if n_tokens <= 0:
        raise ValueError(f"n_tokens={n_tokens} must be positive")
    free = memory_bytes - weight_bytes(s, dtype)
    if free <= 0:
        return 0
    return int(free // kv_cache_bytes_per_sequence(s, n_tokens, kv_dtype or dtype))


LAYER_KINDS = ("full_attention", "sliding_attention", "latent_attention")
"""The kinds of layer a cache distinguishes (the names of transformers' ``layer_types``, and
latent attention)."""


@dataclass(frozen=True)
class LayerKindCache:
    """The cache of the layers of one kind, for one sequence.

    Fields:
        kind: one of ``LAYER_KINDS``.
        n_layers: layers of this kind.
        numbers_per_token: numbers one layer keeps per cached token (``kv_cache_width``).
        tokens_kept: tokens one layer keeps for the sequence (all, or ``min(n, window)``).
        bytes_per_token: bytes a new token adds across these layers (before any window fills).
        bytes_per_sequence: bytes these layers hold for the sequence.
    """

    kind: str
    n_layers: int
    numbers_per_token: int
    tokens_kept: int
    bytes_per_token: int
    bytes_per_sequence: int


def kv_cache_by_layer_kind(s: ModelShape, n_tokens: int,
                           dtype: str | None = None) -> list[LayerKindCache]:
    """The cache of one sequence of ``n_tokens``, one row per kind of layer the shape has
    (full, sliding window, latent), in bytes at ``dtype`` (default: the card's, else fp32).

    The rows add up to ``kv_cache_bytes_per_token`` and ``kv_cache_bytes_per_sequence``.
    Raises ValueError for a negative ``n_tokens`` or an unknown dtype."""
    nbytes = dtype_bytes(_dtype_of(s, dtype))
    width = s.kv_cache_width
    windowed = cached_tokens(s, n_tokens)  # validates n_tokens
    kinds = [("latent_attention" if s.mla is not None else "full_attention",
              s.n_layers - s.sliding_layers, n_tokens),
             ("sliding_attention", s.sliding_layers, windowed)]
    return [LayerKindCache(kind=kind, n_layers=n, numbers_per_token=width, tokens_kept=kept,
                           bytes_per_token=math.ceil(n * width * nbytes),
                           bytes_per_sequence=math.ceil(n * width * kept * nbytes))
            for kind, n, kept in kinds if n]
