"""Tiled attention against torch's scaled_dot_product_attention and a naive softmax(QKᵀ/√d)V,
the online-softmax step on its own, bad inputs, and the memory it does (not) use."""
import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from course_lib.profiling import measure_peak_extra_memory
from course_lib.tiled_attention import (SoftmaxState, initial_state, online_softmax_update,
                                        tiled_attention)


# Tiles are tiny: on a shared 2-core machine two threads mostly wait for each other.
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def naive_attention(q, k, v, causal=False):
    """softmax(q kᵀ / sqrt(d_head)) v with the full score matrix; causal aligns the last query
    with the last key (query i sits at position n_k - n_q + i)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    if causal:
        future = torch.ones(n_q, n_k, dtype=torch.bool).triu(diagonal=n_k - n_q + 1)
        scores = scores.masked_fill(future, -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def torch_reference(q, k, v, causal=False):
    """torch's own attention.  Its is_causal aligns the *first* query with the first key, so for
    n_q != n_k the bottom-right causal mask is passed explicitly (True = may attend)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    if causal and n_q != n_k:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def random_case(rng: random.Random, causal: bool):
    batch, heads = rng.randint(1, 3), rng.randint(1, 3)
    n_k = rng.randint(1, 40)
    n_q = rng.randint(1, n_k) if causal else rng.randint(1, 40)
    d_head, d_v = rng.randint(1, 16), rng.randint(1, 16)
    block_q, block_k = rng.randint(1, 24), rng.randint(1, 24)
    return batch, heads, n_q, n_k, d_head, d_v, block_q, block_k


def make_qkv(batch, heads, n_q, n_k, d_head, d_v, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, n_q, d_head, generator=gen, dtype=dtype)
    k = torch.randn(batch, heads, n_k, d_head, generator=gen, dtype=dtype)
    v = torch.randn(batch, heads, n_k, d_v, generator=gen, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
def test_matches_references_float64_random_shapes(causal):
    rng = random.Random(1234 + causal)
    divides = 0
    for i in range(60):
        batch, heads, n_q, n_k, d_head, d_v, block_q, block_k = random_case(rng, causal)
        if i % 4 == 0:  # a quarter of the cases with block sizes that divide n_q and n_k
            block_q = rng.choice([b for b in range(1, n_q + 1) if n_q % b == 0])
            block_k = rng.choice([b for b in range(1, n_k + 1) if n_k % b == 0])
        divides += n_q % block_q == 0 and n_k % block_k == 0
        q, k, v = make_qkv(batch, heads, n_q, n_k, d_head, d_v, torch.float64, seed=i)
        got = tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
        case = dict(batch=batch, heads=heads, n_q=n_q, n_k=n_k, d_head=d_head, d_v=d_v,
                    block_q=block_q, block_k=block_k)
        assert got.shape == (batch, heads, n_q, d_v), case
        torch.testing.assert_close(got, torch_reference(q, k, v, causal), rtol=0, atol=1e-6,
                                   msg=lambda m: f"{case}: {m}")
        torch.testing.assert_close(got, naive_attention(q, k, v, causal), rtol=0, atol=1e-6,
                                   msg=lambda m: f"{case}: {m}")
    assert 15 <= divides < 60  # both kinds of block size were exercised


@pytest.mark.parametrize("n_q, n_k, block_q, block_k", [
    (1, 1, 1, 1), (1, 37, 8, 8),           # a single query (decoding one token)
    (16, 16, 4, 4), (16, 16, 16, 16),      # blocks divide n; one block
    (17, 33, 5, 7), (33, 33, 100, 100),    # blocks that do not divide n; blocks larger than n
    (5, 40, 1, 3), (40, 40, 3, 1),         # block size 1
])
@pytest.mark.parametrize("causal", [False, True])
def test_edge_shapes_float64(n_q, n_k, block_q, block_k, causal):
    q, k, v = make_qkv(2, 2, n_q, n_k, 8, 8, torch.float64, seed=n_q * 100 + n_k)
    got = tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(got, torch_reference(q, k, v, causal), rtol=0, atol=1e-6)


def test_causal_decoding_convention():
    # One new query against a cache of 10 keys sees all 10 keys (it is the last position), so
    # causal and non-causal agree; the first of 3 queries sees the first 8 keys only.
    q, k, v = make_qkv(1, 1, 3, 10, 4, 4, torch.float64, seed=7)
    last = q[..., -1:, :]
    torch.testing.assert_close(tiled_attention(last, k, v, causal=True, block_k=3),
                               tiled_attention(last, k, v, causal=False, block_k=3))
    first = tiled_attention(q, k, v, causal=True, block_q=2, block_k=3)[..., 0, :]
    sees_8 = naive_attention(q[..., :1, :], k[..., :8, :], v[..., :8, :])[..., 0, :]
    torch.testing.assert_close(first, sees_8)
    # torch's is_causal (first query aligned with the first key) is a different answer here:
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)[..., 0, :]
    assert not torch.allclose(first, top_left)


def test_broadcast_leading_dimensions():
    # One key/value head shared by 4 query heads (multi-query attention) broadcasts.
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 9, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 1, 11, 8, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 1, 11, 8, generator=gen, dtype=torch.float64)
    got = tiled_attention(q, k, v, block_q=4, block_k=4)
    torch.testing.assert_close(got, naive_attention(q, k, v), rtol=0, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_float32_close_to_float64(causal):
    # float32 rounding: compare both tiled and torch's float32 attention to a float64 answer.
    q, k, v = make_qkv(2, 3, 100, 100, 32, 32, torch.float32, seed=11)
    exact = torch_reference(q.double(), k.double(), v.double(), causal)
    tiled = tiled_attention(q, k, v, causal=causal, block_q=16, block_k=24)
    torch_err = (torch_reference(q, k, v, causal).double() - exact).abs().max().item()
    tiled_err = (tiled.double() - exact).abs().max().item()
    assert tiled.dtype == torch.float32
    assert tiled_err < 1e-5, tiled_err
    assert tiled_err < 10 * torch_err + 1e-6, (tiled_err, torch_err)


def test_large_scores_do_not_overflow():
    # Scores around 1,000: exp would overflow without subtracting the running max.
    q, k, v = make_qkv(1, 1, 20, 30, 4, 4, torch.float32, seed=5)
    q, k = q * 40, k * 40
    got = tiled_attention(q, k, v, block_q=7, block_k=6)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, torch_reference(q, k, v), rtol=1e-4, atol=1e-5)


# ---- the online softmax step on its own (lesson 4) ---------------------------------------------

def test_online_update_folds_tiles_into_softmax():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 5, 23, generator=gen, dtype=torch.float64) * 3  # (batch, bq, n_k)
    v = torch.randn(2, 23, 6, generator=gen, dtype=torch.float64)           # (batch, n_k, d_v)
    expected = torch.softmax(scores, dim=-1) @ v
    for cuts in ([0, 23], [0, 1, 23], [0, 10, 11, 20, 23], list(range(24))):
        state = initial_state((2,), 5, 6, dtype=torch.float64)
        for a, b in zip(cuts, cuts[1:]):
            state = online_softmax_update(state, scores[..., a:b], v[:, a:b])
        assert isinstance(state, SoftmaxState)
        torch.testing.assert_close(state.m, scores.amax(-1))
        denominator = torch.exp(scores - scores.amax(-1, keepdim=True)).sum(-1)
        torch.testing.assert_close(state.l, denominator)
        torch.testing.assert_close(state.acc / state.l[..., None], expected, rtol=0, atol=1e-12)


def test_online_update_rows_that_see_nothing_yet():
    # A tile where row 0 is fully masked: row 0 keeps m = -inf, l = 0, acc = 0 (no NaN), then
    # the next tile gives it a normal softmax.
    scores = torch.tensor([[-math.inf, -math.inf], [1.0, 2.0]], dtype=torch.float64)
    v = torch.tensor([[1.0], [3.0]], dtype=torch.float64)
    state = online_softmax_update(initial_state((), 2, 1, dtype=torch.float64), scores, v)
    assert state.m[0] == -math.inf and state.l[0] == 0 and state.acc[0, 0] == 0
    assert not torch.isnan(state.acc).any()
    state = online_softmax_update(state, torch.tensor([[0.5], [0.0]], dtype=torch.float64),
                                  torch.tensor([[5.0]], dtype=torch.float64))
    torch.testing.assert_close(state.acc[0] / state.l[0], torch.tensor([5.0], dtype=torch.float64))
    row1 = torch.softmax(torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64), 0) @ \
        torch.tensor([1.0, 3.0, 5.0], dtype=torch.float64)
    torch.testing.assert_close(state.acc[1, 0] / state.l[1], row1)


# ---- bad inputs ----------------------------------------------------------------------------------

def test_bad_inputs_raise_value_error_naming_the_problem():
    q, k, v = make_qkv(1, 2, 4, 6, 8, 8, torch.float32, seed=0)
    with pytest.raises(ValueError, match=r"d_head of q \(8\) and k \(5\)"):
        tiled_attention(q, k[..., :5], v)
    with pytest.raises(ValueError, match="k has 6 positions but v has 5"):
        tiled_attention(q, k, v[..., :5, :])
    for name in ("block_q", "block_k"):
        for bad in (0, -3, 2.5, True, None):
            with pytest.raises(ValueError, match=rf"{name}={bad!r} must be a positive integer"):
                tiled_attention(q, k, v, **{name: bad})
    with pytest.raises(ValueError, match="causal attention needs n_q <= n_k"):
        tiled_attention(k, q, q, causal=True)
    with pytest.raises(ValueError, match="dtypes differ"):
        tiled_attention(q.double(), k, v)
    with pytest.raises(ValueError, match="do not broadcast"):
        tiled_attention(q, torch.randn(1, 3, 6, 8), v)
    with pytest.raises(ValueError, match="no positions"):
        tiled_attention(q, k[..., :0, :], v[..., :0, :])
    with pytest.raises(ValueError, match="q must have shape"):
        tiled_attention(q[0, 0, 0], k, v)


# ---- memory --------------------------------------------------------------------------------------

class TensorSizes(TorchDispatchMode):
    """Records (numel, shape, storage pointer) of every tensor any aten op returns, views included.

    Every intermediate tensor of a torch computation is some op's output, so the largest one
    recorded bounds the largest tensor ever created.  This is deliberately cruder than
    course_lib.profiling (no frees, no storages): it is an independent check."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor):
                self.seen.append((t.numel(), tuple(t.shape), t.untyped_storage().data_ptr()))
        return out


def largest_intermediate(fn, *args, **kwargs):
    """numel of the largest tensor made while running fn, the output's storage left out."""
    with torch.no_grad(), TensorSizes() as sizes:
        out = fn(*args, **kwargs)
    out_ptr = out.untyped_storage().data_ptr()
    return max(numel for numel, _, ptr in sizes.seen if ptr != out_ptr)


@pytest.mark.parametrize("causal", [False, True])
def test_never_makes_an_n_by_n_tensor(causal):
    batch, heads, n, d_head, block_q, block_k = 2, 3, 256, 8, 16, 32
    q, k, v = make_qkv(batch, heads, n, n, d_head, d_head, torch.float32, seed=1)
    tile = batch * heads * block_q * block_k  # 3,072 elements; d_head <= block_k, so a
    # (block_q, d_head) accumulator is smaller than a tile
    full = batch * heads * n * n               # 393,216 elements
    assert largest_intermediate(tiled_attention, q, k, v, causal=causal,
                                block_q=block_q, block_k=block_k) <= tile
    # The check can fail: the same recorder sees the full score matrix in naive attention.
    assert largest_intermediate(naive_attention, q, k, v, causal=causal) >= full


def test_extra_memory_is_constant_in_n_for_tiled_and_quadratic_for_naive():
    # course_lib.profiling: peak bytes of live tensors beyond inputs and output.
    tiled, naive = {}, {}
    for n in (128, 256, 512):
        q, k, v = make_qkv(1, 1, n, n, 16, 16, torch.float32, seed=n)
        tiled[n] = measure_peak_extra_memory(tiled_attention, q, k, v, block_q=32, block_k=64)
        naive[n] = measure_peak_extra_memory(naive_attention, q, k, v)
    assert tiled[128].extra_bytes == tiled[256].extra_bytes == tiled[512].extra_bytes
    assert tiled[512].extra_bytes <= 8 * 32 * 64 * 4  # a few float32 tiles of 32 × 64
    assert tiled[512].output_bytes == 512 * 16 * 4
    for n in naive:  # scores and softmax weights, both (n, n) float32, alive at once
        assert naive[n].extra_bytes >= 2 * n * n * 4
        assert naive[n].largest_bytes == n * n * 4
    assert naive[512].extra_bytes == 4 * naive[256].extra_bytes == 16 * naive[128].extra_bytes


def test_measure_peak_extra_memory_counts_exactly():
    x = torch.randn(1000)  # 4,000 bytes
    temp = measure_peak_extra_memory(lambda x: x * 2 + 1, x)  # x*2 is alive while +1 allocates
    assert (temp.peak_bytes, temp.output_bytes, temp.extra_bytes) == (8000, 4000, 4000)
    view = measure_peak_extra_memory(lambda x: x.view(10, 100)[:3], x)  # views allocate nothing
    assert (view.peak_bytes, view.extra_bytes) == (0, 0)
    inplace = measure_peak_extra_memory(lambda x: x.clone().mul_(2).add_(1), x)
    assert (inplace.peak_bytes, inplace.extra_bytes) == (4000, 0)

    def temporaries(x):
        a = x * 2                  # 4,000 bytes, freed on the next line
        del a
        b = torch.cat([x, x])      # 8,000 bytes
        return b.sum()             # 4 bytes, made while b is alive

    freed = measure_peak_extra_memory(temporaries, x)
    assert (freed.peak_bytes, freed.output_bytes, freed.extra_bytes) == (8004, 4, 8000)
