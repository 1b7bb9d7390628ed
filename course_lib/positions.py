"""Position: attention alone is blind to order, so order has to be added (lesson 4).

Two ways that need no parameters:

* ``sinusoidal_positions``: a fixed table of sines and cosines added to the token embeddings
  (Vaswani et al. 2017, arxiv.org/abs/1706.03762, section 3.5).
* ``rotary_cos_sin`` and ``apply_rotary``: rotary position embedding, RoPE (Su et al. 2021,
  RoFormer, arxiv.org/abs/2104.09864), which rotates each query and key by an angle that grows
  with its position, so the score between two tokens depends only on how far apart they are.
  Written in the convention of Llama in Hugging Face ``transformers`` ("rotate_half").

Angles are always computed in float64 and only then cast to the dtype asked for.  Checked in
tests/test_positions.py against ``transformers`` (XLM's sinusoidal table, Llama's rotary
embedding) and against the rotation matrices written out as in the papers.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import torch

__all__ = ["sinusoidal_positions", "rotary_cos_sin", "apply_rotary"]


def _positive_int(name: str, value) -> int:
    """``value`` as an int, or ValueError naming ``name`` if it is not a positive whole number."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise ValueError(f"{name} must be a positive integer, got {n}")
    return n


def _check_base(base) -> float:
    try:
        b = float(base)
    except (TypeError, ValueError):
        raise ValueError(f"base must be a number greater than 1, got {base!r}") from None
    if not math.isfinite(b) or b <= 1.0:
        raise ValueError(f"base must be a finite number greater than 1, got {base!r}")
    return b


def _check_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a torch floating-point dtype, got {dtype!r}")
    return dtype


def sinusoidal_positions(n_ctx: int, d_model: int, base: float = 10000.0,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The fixed position table of the original transformer, one row per position.

    For position ``pos`` and pair index ``i``::

        PE[pos, 2i]     = sin(pos / base^(2i / d_model))
        PE[pos, 2i + 1] = cos(pos / base^(2i / d_model))

    so the wavelengths run geometrically from 2π (i = 0) towards base · 2π.  For any fixed
    offset k, row pos + k is a rotation of row pos that does not depend on pos (the paper's
    reason for the choice).  An odd ``d_model`` is allowed: the last column is then a sine
    without its cosine (as in ``transformers``' XLM).  Every value lies in [-1, 1].

    Args:
        n_ctx: number of positions (rows), a positive integer; positions are 0 ... n_ctx - 1.
        d_model: width of the residual stream (columns), a positive integer.
        base: the wavelength base, 10000 in the paper; a finite number > 1.
        dtype: floating-point dtype of the result (computed in float64, then cast).
    Returns:
        (n_ctx, d_model) tensor, added to the (pos, d_model) token embeddings.
    Raises:
        ValueError: ``n_ctx`` or ``d_model`` not a positive integer, ``base`` not > 1, or a
            dtype that is not floating point.
    Source: Vaswani et al. 2017, "Attention is all you need", section 3.5.
    """
    n_ctx = _positive_int("n_ctx", n_ctx)
    d_model = _positive_int("d_model", d_model)
    base = _check_base(base)
    dtype = _check_dtype(dtype)
    pos = torch.arange(n_ctx, dtype=torch.float64)                  # (n_ctx,)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)        # (ceil(d_model / 2),)
    inv_wavelength = base ** (-two_i / d_model)                     # 1 / base^(2i / d_model)
    angles = pos[:, None] * inv_wavelength[None, :]                 # (n_ctx, ceil(d_model/2))
    pe = torch.empty(n_ctx, d_model, dtype=torch.float64)
    pe[:, 0::2] = angles.sin()                                      # even columns: sin
    pe[:, 1::2] = angles[:, : d_model // 2].cos()                   # odd columns: cos
    return pe.to(dtype)


def rotary_cos_sin(positions, d_head: int, base: float = 10000.0,
                   dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of the rotary angles, laid out for ``apply_rotary``.

    Feature i of a head (i < d_head / 2) is paired with feature i + d_head / 2, and the pair at
    position m is rotated by the angle m · θ_i with θ_i = base^(-2i / d_head): the fastest pair
    turns 1 radian per position, the slowest about base^-1.  Both halves of the last dimension
    hold the same angles, as in ``LlamaRotaryEmbedding`` in ``transformers``.

    Args:
        positions: the token positions, a tensor or a sequence of numbers, of shape (pos,) or
            (batch, pos); usually ``torch.arange(start, start + pos)``.  Fractional positions
            are allowed (position interpolation uses them).
        d_head: width of one query/key head, a positive even integer.
        base: θ base (``rope_theta`` in a Hugging Face config), 10000 by default (RoFormer,
            Llama 2); Llama 3 uses 500000.  A finite number > 1.
        dtype: floating-point dtype of the result (angles in float64, then cast).
    Returns:
        (cos, sin), each of shape positions.shape + (d_head,), e.g. (pos, d_head).
        Angles are in radians.
    Raises:
        ValueError: ``d_head`` odd or not a positive integer, ``base`` not > 1, positions that
            are not real numbers, or a dtype that is not floating point.
    Source: Su et al. 2021, RoFormer, section 3.2.2 (θ_i = 10000^(-2(i-1)/d), i = 1 ... d/2).
    """
    d_head = _positive_int("d_head", d_head)
    if d_head % 2:
        raise ValueError(f"d_head must be even for rotary positions (features are rotated in "
                         f"pairs), got {d_head}")
    base = _check_base(base)
    dtype = _check_dtype(dtype)
    if not isinstance(positions, torch.Tensor):
        if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence):
            raise ValueError(f"positions must be a tensor or a sequence of numbers, "
                             f"got {type(positions).__name__}")
        try:
            positions = torch.tensor(positions)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ValueError(f"positions must be numbers, got {positions!r:.60}: {e}") from None
    if positions.dtype == torch.bool or positions.is_complex():
        raise ValueError(f"positions must be real numbers, got dtype {positions.dtype}")
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d_head/2,)
    angles = positions.to(torch.float64)[..., None] * inv_freq        # (..., pos, d_head/2)
    angles = torch.cat([angles, angles], dim=-1)                      # (..., pos, d_head)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension (Llama's rotate_half)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (..., half) each
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate queries or keys by their positions: x · cos + rotate_half(x) · sin.

    For each pair (a, b) = (x[..., i], x[..., i + d_head/2]) this is the 2-D rotation
    (a cos φ - b sin φ, b cos φ + a sin φ) by the pair's angle φ.  Rotations keep the norm of
    every pair (so of every head vector), and the dot product of a query rotated for position m
    with a key rotated for position n equals that of the query rotated for m - n with the
    unrotated key: the score depends only on the offset m - n.

    Args:
        x: (..., pos, d_head) queries or keys, e.g. (batch, n_heads, pos, d_head); d_head even.
        cos, sin: from ``rotary_cos_sin``, of one shape that broadcasts to ``x`` and ends in
            d_head: (pos, d_head), or (batch, 1, pos, d_head) for per-sequence positions with
            heads on dimension 1.  Cast to ``x.dtype``.
    Returns:
        tensor of the shape and dtype of ``x``.
    Raises:
        ValueError: ``x`` not floating point, d_head odd, ``cos`` and ``sin`` of different
            shapes, a last dimension that differs from d_head, or a shape that does not
            broadcast to ``x``.
    Source: Su et al. 2021, RoFormer, section 3.4.2 (the element-wise form, which pairs
    neighbouring features 2i and 2i + 1); here the pairs are (i, i + d_head/2), as in
    ``apply_rotary_pos_emb`` in ``transformers.models.llama.modeling_llama``.  The two
    pairings give the same scores up to a fixed reordering of the weights' features.
    """
    if not x.is_floating_point():
        raise ValueError(f"x must be floating point, got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"d_head (last dimension of x) must be even for rotary positions, "
                         f"got x of shape {tuple(x.shape)}")
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} "
                         f"and {tuple(sin.shape)}")
    if cos.ndim == 0 or cos.shape[-1] != x.shape[-1]:
        raise ValueError(f"cos/sin end in {tuple(cos.shape)[-1:]} but x has d_head = "
                         f"{x.shape[-1]}")
    try:
        fits = torch.broadcast_shapes(x.shape, cos.shape) == x.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"cos/sin of shape {tuple(cos.shape)} do not broadcast to x of shape "
                         f"{tuple(x.shape)}; for x (batch, heads, pos, d_head) and positions "
                         f"(batch, pos), use cos[:, None] and sin[:, None]")
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + _rotate_half(x) * sin  # (..., pos, d_head)
