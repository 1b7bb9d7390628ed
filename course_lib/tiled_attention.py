"""Tiled attention: the same softmax(q kᵀ / sqrt(d_head)) v, computed one tile at a time.

This is the idea of FlashAttention (Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient
Exact Attention with IO-Awareness", arxiv.org/abs/2205.14135, Algorithm 1), written in plain
torch for reading, not for speed.  The answer is exact (up to rounding); only where the numbers
live changes: the n_q × n_k score matrix is never stored, only one block_q × block_k tile of it.

The trick is a softmax that can be computed before all the scores are known (the "online"
softmax, Milakov & Gimelshein 2018, arxiv.org/abs/1805.02867).  For each tile of queries keep
three running values per query row:

    m    the largest score seen so far                  (..., block_q)
    l    the sum of exp(score - m) so far               (..., block_q)
    acc  the sum of exp(score - m) · v so far           (..., block_q, d_v)

and for each new tile of keys, with m_new = max(m, largest score in the tile):

    l   <- l   · exp(m - m_new) + rowsum(exp(scores - m_new))
    acc <- acc · exp(m - m_new) + exp(scores - m_new) @ v_tile

After the last key tile, acc / l is exactly softmax(scores) @ v for those queries.

Forward only in spirit: autograd does run through it, but it saves every tile for the backward
pass, so training through this function would not save memory (FlashAttention recomputes the
tiles in its backward pass instead).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch


class SoftmaxState(NamedTuple):
    """The running values of the online softmax for one tile of queries."""
    m: torch.Tensor
    """(..., block_q): the largest score each query has seen so far (-inf before any)."""
    l: torch.Tensor
    """(..., block_q): sum of exp(score - m) over the keys seen so far."""
    acc: torch.Tensor
    """(..., block_q, d_v): sum of exp(score - m) · v over the keys seen so far."""


def initial_state(batch_shape, block_q, d_v, dtype=torch.float32, device=None) -> SoftmaxState:
    """The state before any key: m = -inf, l = 0, acc = 0, for ``block_q`` queries."""
    shape = tuple(batch_shape) + (block_q,)
    return SoftmaxState(m=torch.full(shape, -math.inf, dtype=dtype, device=device),
                        l=torch.zeros(shape, dtype=dtype, device=device),
                        acc=torch.zeros(shape + (d_v,), dtype=dtype, device=device))


def online_softmax_update(state: SoftmaxState, scores_tile, v_tile) -> SoftmaxState:
    """One step of the running softmax: fold one tile of keys into the state.

    Args:
        state: the SoftmaxState so far (m, l: (..., block_q); acc: (..., block_q, d_v)).
        scores_tile: (..., block_q, block_k) scores of these queries against this tile of keys,
            already scaled by 1/sqrt(d_head) and masked (-inf where a query may not look).
        v_tile: (..., block_k, d_v) the values of this tile of keys.
    Returns:
        The new SoftmaxState.  ``state.acc / state.l[..., None]`` after the last tile is the
        attention output.  A query that has seen only -inf scores keeps m = -inf, l = 0, acc = 0.
    """
    m_new = torch.maximum(state.m, scores_tile.amax(dim=-1))  # (..., block_q)
    # Subtract 0 instead of -inf for rows with nothing visible yet: -inf - (-inf) would be NaN.
    shift = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
    rescale = torch.exp(state.m - shift)                  # (..., block_q); 0 on the first tile
    p = torch.exp(scores_tile - shift[..., None])         # (..., block_q, block_k)
    l = state.l * rescale + p.sum(dim=-1)                 # (..., block_q)
    acc = state.acc * rescale[..., None] + p @ v_tile     # (..., block_q, d_v)
    return SoftmaxState(m_new, l, acc)


def _check_block(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")


def tiled_attention(q, k, v, causal=False, block_q=128, block_k=128):
    """softmax(q kᵀ / sqrt(d_head)) v, one block_q × block_k tile of scores at a time.

    Args:
        q: (..., n_q, d_head) queries.
        k: (..., n_k, d_head) keys.
        v: (..., n_k, d_v) values.  Leading dimensions (batch, heads) broadcast as in torch.
        causal: query i may only see keys up to its own position.  When n_q < n_k (decoding with
            a KV cache) the queries are the *last* n_q positions: the last query lines up with
            the last key, so query i sits at position n_k - n_q + i.  (torch's ``is_causal``
            lines up the *first* query with the first key instead; the two agree when n_q == n_k.)
            Key tiles wholly after a query tile's last position are skipped; the tile that crosses
            the diagonal is masked inside.
        block_q, block_k: tile sizes (positive integers); they need not divide n_q or n_k.
            FlashAttention picks them so a tile fits in a GPU's on-chip memory; 128 is a size
            of that order (a 128 × 128 float32 tile is 64 KiB).
    Returns:
        (..., n_q, d_v), the same as naive attention up to rounding.  Extra memory beyond the
        inputs and output: a few tensors of (..., block_q, block_k) and (..., block_q, d_v),
        whatever n_q and n_k are.
    Raises:
        ValueError: fewer than 2 dimensions, d_head of q and k differ, k and v hold different
            numbers of positions, dtypes differ, leading dimensions do not broadcast, no keys,
            causal with n_q > n_k, a block size that is not a positive integer.
    Source: Dao et al. 2022, arxiv.org/abs/2205.14135, Algorithm 1 (without the dropout and
    the backward pass).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., positions, width), "
                             f"got {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_head of q ({q.shape[-1]}) and k ({k.shape[-1]}) differ")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} positions but v has {v.shape[-2]}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"dtypes differ: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    try:
        batch_shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"leading dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
                         f"v {tuple(v.shape)} do not broadcast") from None
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    n_q, n_k, d_head, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    if n_k == 0:
        raise ValueError("k and v hold no positions: there is nothing to attend to")
    if causal and n_q > n_k:
        raise ValueError(f"causal attention needs n_q <= n_k, got n_q={n_q}, n_k={n_k}")

    offset = n_k - n_q  # with causal, query i sits at key position offset + i
    out = q.new_empty(batch_shape + (n_q, d_v))  # (..., n_q, d_v)
    for q0 in range(0, n_q, block_q):
        q1 = min(q0 + block_q, n_q)
        q_tile = q[..., q0:q1, :]  # (..., bq, d_head), a view: no copy
        state = initial_state(batch_shape, q1 - q0, d_v, dtype=q.dtype, device=q.device)
        # The last query of this tile sits at offset + q1 - 1: keys from offset + q1 on are
        # in the future for every query of the tile, so those tiles are skipped.
        k_end = offset + q1 if causal else n_k
        for k0 in range(0, k_end, block_k):
            k1 = min(k0 + block_k, n_k)
            k_tile = k[..., k0:k1, :]  # (..., bk, d_head), a view
            scores = q_tile @ k_tile.transpose(-2, -1) / math.sqrt(d_head)  # (..., bq, bk)
            if causal and k1 - 1 > offset + q0:  # the tile crosses the diagonal: mask inside
                q_pos = torch.arange(offset + q0, offset + q1, device=q.device)  # (bq,)
                k_pos = torch.arange(k0, k1, device=q.device)                    # (bk,)
                scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], -math.inf)
            state = online_softmax_update(state, scores, v[..., k0:k1, :])
        out[..., q0:q1, :] = state.acc / state.l[..., None]  # (..., bq, d_v)
    return out
