"""Unit tests of course_lib.checks.lesson4: right answers pass, each named mistake gets its
message, answers that call course_lib's (or torch's fused) version are refused, and no message
shows a hidden value.

The right answers here are written independently of the notebook's model answer: rotary
positions as complex multiplication (each pair a + ib times e^(i·m·θ)), tiled attention over
key tiles only, and the counts from the formulas of the lesson (2·n²·d for the scores, 12·n·d² for the weights)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

import course_lib
from course_lib.checks import lesson4 as L4
from notebook_cells import fails, graded_cells
from scans import shows_none_of

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "lesson4" / "lesson4.ipynb"


# --- right answers, written independently -------------------------------------------------------

def commutes_right(block, x, perm):
    with torch.no_grad():
        return bool(((block(x[:, perm]) - block(x)[:, perm]).abs() <= 1e-5).all())


def rotary_right(x, positions, base=10000.0):
    """Each pair (x[i], x[i + d/2]) as the complex number a + ib, times e^(i·m·θ_i)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)          # (d/2,)
    turn = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                       positions.double()[:, None] * theta)                     # (pos, d/2)
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2:].double()) * turn
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rotary_score_right(q, k, m, n):
    qm = rotary_right(q[None], torch.tensor([m]))[0]
    kn = rotary_right(k[None], torch.tensor([n]))[0]
    return float(qm.double() @ kn.double()) / math.sqrt(q.numel())


def block_macs_right(n_tokens, d_model):
    return {"attention_scores": 2 * n_tokens**2 * d_model, "weights": 12 * n_tokens * d_model**2}


def crossover_right(d_model):
    return 6 * d_model


def score_bytes_right(n_tokens, n_heads, bytes_per_number):
    return n_tokens**2 * n_heads * bytes_per_number


def update_right(m, l, acc, s, v):
    m_new = torch.maximum(m, s.max(dim=-1).values)
    p = torch.exp(s - m_new.unsqueeze(-1))
    r = torch.exp(m - m_new)
    return m_new, r * l + p.sum(-1), r.unsqueeze(-1) * acc + torch.einsum("...qk,...kd->...qd", p, v)


def tiled_right(q, k, v, causal=False, block=32):
    """Keys in tiles, all queries at once (the queries tiled too for the memory test)."""
    n, d = q.shape[-2], q.shape[-1]
    outs = []
    for q0 in range(0, n, block):
        qt = q[..., q0:q0 + block, :]
        bq = qt.shape[-2]
        m = torch.full(qt.shape[:-1], -math.inf)
        l = torch.zeros(qt.shape[:-1])
        acc = torch.zeros(qt.shape)
        for k0 in range(0, n, block):
            s = qt @ k[..., k0:k0 + block, :].transpose(-1, -2) * d**-0.5
            if causal:
                qi = torch.arange(q0, q0 + bq)[:, None]
                kj = torch.arange(k0, k0 + s.shape[-1])[None, :]
                s = torch.where(kj <= qi, s, torch.tensor(-math.inf))
            if causal and k0 > q0 + bq - 1:
                break
            m, l, acc = update_right(m, l, acc, s, v[..., k0:k0 + block, :])
        outs.append(acc / l.unsqueeze(-1))
    return torch.cat(outs, dim=-2)


def longest_right(d_model, n_layers, n_heads, n_tokens):
    att, w = 2 * n_tokens**2 * d_model, 12 * n_tokens * d_model**2
    return {"block_flops": 2 * n_layers * (att + w), "attention_share": att / (att + w),
            "score_bytes_per_layer": 2 * n_tokens**2 * n_heads}


PERM_HIDDEN = [dict(d_model=48, n_heads=3, batch=3, pos=11, causal=False, positions="none", seed=5),
               dict(d_model=16, n_heads=2, batch=1, pos=6, causal=False, positions="rotary", seed=6),
               dict(d_model=64, n_heads=8, batch=2, pos=9, causal=True, positions="none", seed=7)]
ROTARY_HIDDEN = [dict(shape=(1, 4, 17, 32), start=100, base=500000.0, seed=3),
                 dict(shape=(5, 2), start=7, base=10000.0, seed=4),
                 dict(shape=(2, 9, 128), start=4000, base=10000.0, seed=5)]
UPDATE_HIDDEN = [dict(batch=(2, 3), block_q=7, block_k=3, d_v=5, first=False, scale=60.0, seed=2),
                 dict(batch=(), block_q=1, block_k=9, d_v=2, first=True, scale=80.0, seed=3)]
TILED_HIDDEN = [dict(shape=(2, 3, 70, 16), causal=True, block=16, seed=2),
                dict(shape=(1, 1, 50, 8), causal=True, block=7, seed=4),
                dict(shape=(3, 19, 4), causal=False, block=5, seed=5)]


# --- right answers pass --------------------------------------------------------------------------

def test_right_answers_pass_on_visible_and_hidden_like_inputs(capsys):
    L4.check_commutes(commutes_right)
    L4.check_commutes(commutes_right, PERM_HIDDEN)
    L4.check_rotary(rotary_right)
    L4.check_rotary(rotary_right, ROTARY_HIDDEN)
    L4.check_rotary_score(rotary_score_right)
    L4.check_rotary_score(rotary_score_right, [dict(d_head=64, m=0, n=40, seed=1),
                                               dict(d_head=128, m=9, n=9, seed=3)])
    L4.check_block_macs(block_macs_right)
    L4.check_block_macs(block_macs_right, [dict(n_tokens=7, d_model=64),
                                           dict(n_tokens=1, d_model=5120)])
    L4.check_crossover(crossover_right, d_models=[64, 768, 4096, 8192])
    L4.check_score_bytes(score_bytes_right)
    L4.check_score_bytes(score_bytes_right, [dict(n_tokens=3, n_heads=1, bytes_per_number=1)])
    L4.check_score_tib(1.0)
    L4.check_softmax_update(update_right)
    L4.check_softmax_update(update_right, UPDATE_HIDDEN)
    L4.check_tiled_attention(tiled_right)
    L4.check_tiled_attention(tiled_right, TILED_HIDDEN)
    L4.check_flash(32, 2**20)
    L4.check_tys_crossover(24_576)
    L4.check_tys_vendor({"a", "b", "c", "d"})
    L4.check_tys_vendor(frozenset({"A", "b ", "c", "d"}))
    L4.check_longest_input(longest_right)
    L4.check_longest_input(longest_right, [dict(d_model=4096, n_layers=32, n_heads=32,
                                                n_tokens=131072)])
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # a check writes nothing (stderr costs the cell)


def test_the_module_figures():
    assert L4.crossover_expected(4096) == 24_576                       # n = 6d
    assert L4.score_bytes_expected(131_072, 32, 2) == 2**40            # 1 TiB per layer
    assert L4.LONG_CONTEXT**2 / L4.FLASH_TILE**2 == 2**20


def test_the_checks_leave_the_global_random_state_alone():
    state = torch.get_rng_state()
    L4.check_commutes(commutes_right)
    L4.check_tiled_attention(tiled_right)
    assert torch.equal(state, torch.get_rng_state())


def test_rotary_reference_is_offset_only_and_independent():
    """The two references (course_lib's and the complex one above) agree, and scores depend on
    the offset only."""
    x = torch.randn(3, 10, 16, dtype=torch.float64)
    pos = torch.arange(5, 15)
    assert torch.allclose(L4.reference_rotary(x, pos), rotary_right(x, pos), atol=1e-12)
    q, k = torch.randn(2, 16, dtype=torch.float64)
    assert math.isclose(L4.reference_rotary_score(q, k, 9, 4), L4.reference_rotary_score(q, k, 105, 100),
                        rel_tol=1e-9)


# --- 1. permutations -----------------------------------------------------------------------------

@pytest.mark.parametrize("fn, phrase", [
    (lambda b, x, p: torch.allclose(b(x[:, p]), b(x)[:, torch.argsort(p)], atol=1e-5), "not its inverse"),
    (lambda b, x, p: torch.equal(b(x[:, p]), b(x)[:, p]), "tolerance"),
    (lambda b, x, p: torch.allclose(b(x[:, p]), b(x), atol=1e-5), "the outputs are permuted too"),
    (lambda b, x, p: torch.allclose(b(x[:, p]), b(x)[:, p], atol=10.0), "causal mask"),
    (lambda b, x, p: True, "causal mask"),
], ids=["inverse", "exact", "output-not-permuted", "loose", "always-true"])
def test_permutation_mistakes_are_named(fn, phrase):
    assert phrase in fails(L4.check_commutes, fn)


def test_rotary_block_must_not_commute():
    msg = fails(L4.check_commutes, lambda b, x, p: True, [PERM_HIDDEN[1]])
    assert "rotary positions" in msg


def test_permutation_answer_must_be_a_bool():
    """The text asks for True or False: a float or a bool tensor is named with its type."""
    assert "expected a Python bool, True or False" in fails(L4.check_commutes, lambda b, x, p: 1.0)
    msg = fails(L4.check_commutes, lambda b, x, p: torch.tensor(commutes_right(b, x, p)))
    assert "expected a Python bool" in msg and "got Tensor tensor(True)" in msg


def test_visible_permutation_is_not_its_own_inverse():
    for case in L4.PERMUTATION_CASES:
        _, _, perm = L4.permutation_case(case)
        assert not torch.equal(perm[perm], torch.arange(len(perm)))


# --- 2. rotary -----------------------------------------------------------------------------------

def _rot(**mistake):
    return lambda x, positions, base=10000.0: L4._rotate(x, positions, base, **mistake).to(x.dtype)


@pytest.mark.parametrize("fn, phrase, cases", [
    (_rot(sign=-1.0), "wrong way", None),
    (_rot(interleaved=True), "neighbouring features", None),
    (_rot(repeat_interleave=True), "(θ0, θ0, θ1, θ1", None),
    (_rot(half_exponent=True), "base^(-i/d_head)", None),
    (lambda x, positions, base=10000.0: x.clone(), "nothing was rotated", None),
    (lambda x, positions, base=10000.0: rotary_right(x, torch.arange(x.shape[-2]), base),
     "positions argument is ignored", ROTARY_HIDDEN[:1]),
    (lambda x, positions, base=10000.0: rotary_right(x, positions), "base argument is ignored",
     ROTARY_HIDDEN[:1]),
    (lambda x, positions, base=10000.0: rotary_right(x, positions + 1, base), "wrong angles", None),
    (lambda x, positions, base=10000.0: 2 * rotary_right(x, positions, base), "length", None),
], ids=["sign", "interleaved", "repeat-interleave", "exponent", "unrotated", "positions",
        "base", "off-by-one-position", "scaled"])
def test_rotary_mistakes_are_named(fn, phrase, cases):
    msg = fails(L4.check_rotary, fn, *([cases] if cases else []))
    assert phrase in msg


def test_rotary_must_be_built_by_hand():
    def lazy(x, positions, base=10000.0):
        return course_lib.positions.apply_rotary(
            x, *course_lib.positions.rotary_cos_sin(positions, x.shape[-1], base))
    assert "course_lib's own positions" in fails(L4.check_rotary, lazy)


def test_rotary_shape_and_dtype():
    assert "shape" in fails(L4.check_rotary, lambda x, p, base=1e4: rotary_right(x, p, base)[..., :2])
    assert "dtype" in fails(L4.check_rotary, lambda x, p, base=1e4: rotary_right(x.double(), p, base))
    assert "expected a torch tensor" in fails(L4.check_rotary, lambda x, p, base=1e4: x.tolist())


@pytest.mark.parametrize("fn, phrase", [
    (lambda q, k, m, n: rotary_score_right(q, k, m, n) * math.sqrt(q.numel()), "scale is missing"),
    (lambda q, k, m, n: rotary_score_right(q, k, m, n) / math.sqrt(q.numel()), "divides by d_head"),
    (lambda q, k, m, n: rotary_score_right(q, k, m, 0), "only the query"),
    (lambda q, k, m, n: rotary_score_right(q, k, n, m), "swapped"),
    (lambda q, k, m, n: rotary_score_right(q, k, m, m), "same position"),
    (lambda q, k, m, n: rotary_score_right(q, k, m, n) if (m, n) == (5, 2) else 0.0,
     "moving both positions"),
    (lambda q, k, m, n: 0.123, "make sure its test passes"),
])
def test_rotary_score_mistakes_are_named(fn, phrase):
    msg = fails(L4.check_rotary_score, fn)
    assert phrase in msg
    q, k = L4.rotary_score_case(L4.ROTARY_SCORE_CASES[0])
    shows_none_of(msg, L4.reference_rotary_score(q, k, 5, 2))


# --- 3. counts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("scores, weights, phrase", [
    ("4*n*n*d", "12*n*d*d", "that is FLOPs"),
    ("n*n*d", "12*n*d*d", "only q·kᵀ"),
    ("n*(n+1)*d", "12*n*d*d", "causal half"),
    ("2*n*d", "12*n*d*d", "one token's scores"),
    ("2*n*n*d", "24*n*d*d", "that is FLOPs"),
    ("2*n*n*d", "4*n*d*d", "four projections only"),
    ("2*n*n*d", "8*n*d*d", "feed-forward layer only"),
    ("2*n*n*d", "12*d*d", "one token"),
    ("2*n*n*d", "6*n*d*d", "4·d_model wide"),
])
def test_block_macs_mistakes_are_named(scores, weights, phrase):
    fn = eval(f"lambda n, d: {{'attention_scores': {scores}, 'weights': {weights}}}")
    msg = fails(L4.check_block_macs, fn)
    assert phrase in msg
    shows_none_of(msg, *block_macs_right(1024, 768).values())


def test_block_macs_wants_the_keys_and_own_work():
    assert "'attention_scores', 'weights'" in fails(L4.check_block_macs, lambda n, d: (1, 2))  # as_keyed's words

    def lazy(n, d):
        m = course_lib.forward_macs(course_lib.gpt2_shape(d_model=d, n_layers=1, n_heads=1), n,
                                    causal=False)
        return {"attention_scores": m.attention_scores, "weights": m.weights}
    assert "course_lib's own counter" in fails(L4.check_block_macs, lazy)


@pytest.mark.parametrize("factor, phrase", [(12, "twice the rest"), (2, "attention's own projections"),
                                            (4, "feed-forward layer only"), (1, "d_model itself")])
def test_crossover_mistakes_are_named(factor, phrase):
    msg = fails(L4.check_crossover, lambda d: factor * d)
    assert phrase in msg
    shows_none_of(msg, 6 * 768)
    assert phrase in fails(L4.check_tys_crossover, factor * 4096)
    shows_none_of(fails(L4.check_tys_crossover, factor * 4096), 24_576)


def test_crossover_hard_coded_fails_other_widths():
    msg = fails(L4.check_crossover, lambda d: 4608)   # the visible test's run-time width
    assert msg.startswith(L4.RANDOM_TAG + "crossover_length(d_model=")
    msg = fails(L4.check_crossover, lambda d: 4608, d_models=[4096])
    assert "crossover_length on a hidden test's input" in msg and "4096" not in msg


@pytest.mark.parametrize("fn, phrase", [
    (lambda n, h, b: n * n * h * 16, "bits"),
    (lambda n, h, b: n * n * b, "one head's"),
    (lambda n, h, b: n * (n + 1) // 2 * h * b, "causal half"),
    (lambda n, h, b: n * n * h, "bytes per number are missing"),
    (lambda n, h, b: n * n * h * b // 2, "half the matrix"),
    (lambda n, h, b: n * h * b, "n_tokens is squared"),
])
def test_score_bytes_mistakes_are_named(fn, phrase):
    msg = fails(L4.check_score_bytes, fn)
    assert phrase in msg
    shows_none_of(msg, score_bytes_right(1024, 12, 2))


@pytest.mark.parametrize("value, phrase", [
    (2**40 / 1e12, "in TB"), (1024.0, "in GiB"), (2**40 / 1e9, "in GB"), (8.0, "bits"),
    (1 / 32, "one head's"), (0.5, "causal half"), (2**40, "convert to TiB"),
])
def test_score_tib_mistakes_are_named(value, phrase):
    assert phrase in fails(L4.check_score_tib, value)


# --- 5. tiled attention --------------------------------------------------------------------------

def _update(kind):
    def fn(m, l, acc, s, v):
        m_new = torch.maximum(m, s.amax(-1))
        r, p = torch.exp(m - m_new), torch.exp(s - m_new[..., None])
        if kind == "acc-not-rescaled":
            return m_new, l * r + p.sum(-1), acc + p @ v
        if kind == "l-not-rescaled":
            return m_new, l + p.sum(-1), acc * r[..., None] + p @ v
        if kind == "inverted":
            inv = torch.exp(m_new - m)
            return m_new, l * inv + p.sum(-1), acc * inv[..., None] + p @ v
        if kind == "normalised":
            l_new = l * r + p.sum(-1)
            return m_new, l_new, (acc * r[..., None] + p @ v) / l_new[..., None]
        if kind == "m-tile-only":
            return s.amax(-1), l * r + p.sum(-1), acc * r[..., None] + p @ v
        if kind == "no-max":
            return m_new, l + torch.exp(s).sum(-1), acc + torch.exp(s) @ v
        raise AssertionError(kind)
    return fn


@pytest.mark.parametrize("kind, phrase, cases", [
    ("acc-not-rescaled", "old acc is not rescaled", None),
    ("l-not-rescaled", "old l is not rescaled", None),
    ("inverted", "inverted", L4.UPDATE_CASES[1:]),
    ("inverted", "inf × 0 is NaN", L4.UPDATE_CASES[:1]),
    ("normalised", "acc / l", None),
    ("m-tile-only", "largest score seen so far", None),
    ("no-max", "without subtracting the running maximum", None),
    ("no-max", "without subtracting the running maximum", UPDATE_HIDDEN[:1]),
])
def test_softmax_update_mistakes_are_named(kind, phrase, cases):
    assert phrase in fails(L4.check_softmax_update, _update(kind), *([cases] if cases else []))


def test_softmax_update_wants_three_tensors():
    assert "three tensors" in fails(L4.check_softmax_update, lambda m, l, acc, s, v: (m, l))


def test_softmax_update_must_be_built_by_hand():
    def lazy(m, l, acc, s, v):
        return tuple(course_lib.tiled_attention.online_softmax_update(
            course_lib.tiled_attention.SoftmaxState(m, l, acc), s, v))
    assert "course_lib's own tiled_attention" in fails(L4.check_softmax_update, lazy)


def _tiled(q_scale=1.0, diagonal=0, causal_override=None):
    """tiled_right with a mistake: q scaled (the scale forgotten is q · sqrt(d)), or a mask
    shifted by ``diagonal`` (key j visible to query i when j <= i + diagonal)."""
    def fn(q, k, v, causal=False, block=32):
        causal_ = causal if causal_override is None else causal_override
        n, d = q.shape[-2], q.shape[-1]
        outs = []
        for q0 in range(0, n, block):
            qt = q[..., q0:q0 + block, :] * q_scale
            m = torch.full(qt.shape[:-1], -math.inf)
            l, acc = torch.zeros(qt.shape[:-1]), torch.zeros(qt.shape)
            for k0 in range(0, n, block):
                s = qt @ k[..., k0:k0 + block, :].transpose(-1, -2) / math.sqrt(d)
                if causal_:
                    qi = torch.arange(q0, q0 + qt.shape[-2])[:, None]
                    kj = torch.arange(k0, k0 + s.shape[-1])[None, :]
                    s = s.masked_fill(kj > qi + diagonal, -math.inf)
                m, l, acc = update_right(m, l, acc, s, v[..., k0:k0 + block, :])
            outs.append(acc / l[..., None])
        return torch.cat(outs, -2)
    return fn


def _tiled_short(drop: str, inside_mask: bool = True):
    """tiled_right with the last short tile of the keys, the queries or both left out
    (``range(0, n // block * block, block)``), the rows it leaves unwritten zero; or
    (``inside_mask=False``) the key tiles after the query tile skipped but no mask inside."""
    def fn(q, k, v, causal=False, block=32):
        n, d = q.shape[-2], q.shape[-1]
        out = torch.zeros(q.shape)
        ends = {w: n // block * block if w in drop else n for w in ("keys", "queries")}
        for q0 in range(0, ends["queries"], block):
            qt = q[..., q0:q0 + block, :]
            m, l, acc = torch.full(qt.shape[:-1], -math.inf), torch.zeros(qt.shape[:-1]), torch.zeros(qt.shape)
            for k0 in range(0, min(ends["keys"], q0 + block) if causal else ends["keys"], block):
                s = qt @ k[..., k0:k0 + block, :].transpose(-1, -2) / math.sqrt(d)
                if causal and inside_mask:
                    qi, kj = torch.arange(q0, q0 + qt.shape[-2])[:, None], torch.arange(k0, k0 + s.shape[-1])[None, :]
                    s = s.masked_fill(kj > qi, -math.inf)
                m, l, acc = update_right(m, l, acc, s, v[..., k0:k0 + block, :])
            out[..., q0:q0 + block, :] = acc / l[..., None]
        return out
    return fn


@pytest.mark.parametrize("fn, cases, phrase", [
    (_tiled_short("keys"), L4.TILED_CASES[:1], "the keys of the last tile are left out"),
    (_tiled_short("keys"), L4.TILED_CASES[1:2], "the keys of the last tile are left out"),
    (_tiled_short("queries"), L4.TILED_CASES[:1], "the outputs of the last query tile are wrong"),
    (_tiled_short("queries"), L4.TILED_CASES[1:2], "the outputs of the last query tile are wrong"),
    (_tiled_short("keys queries"), L4.TILED_CASES[:1], "the last tile is left out, of the keys and of the queries"),
    (_tiled_short("", inside_mask=False), L4.TILED_CASES[1:2], "the causal mask is missing inside the tiles"),
    (_tiled_short("keys"), TILED_HIDDEN[1:2], "the keys of the last tile are left out"),
])
def test_tiled_short_tile_and_tile_mask_are_named(fn, cases, phrase):
    """The visible test's inputs have n = 40 with block = 16 (a last tile of 8), one of them causal."""
    assert all(c["shape"][-2] % c["block"] for c in L4.TILED_CASES[:2]) and L4.TILED_CASES[1]["causal"]
    msg = fails(L4.check_tiled_attention, fn, cases)
    assert phrase in msg, msg
    assert "a hidden test's input" in msg or cases[0] in L4.TILED_CASES


@pytest.mark.parametrize("fn, phrase", [
    (_tiled(q_scale=math.sqrt(8)), "scale is missing"),
    (_tiled(q_scale=1 / math.sqrt(8)), "1/d_head"),
    (_tiled(diagonal=-1), "NaN"),
    (_tiled(diagonal=1), "sees the next key"),
    (_tiled(causal_override=False), "causal mask is missing"),
    (_tiled(causal_override=True), "causal=False here"),
    (lambda q, k, v, causal=False, block=32: torch.softmax(
        (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(
            torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).triu(1) if causal else
            torch.zeros(q.shape[-2], q.shape[-2], dtype=torch.bool), -math.inf), -1) @ v,
     "a quarter of the 512 × 512 score matrix"),
    (lambda q, k, v, causal=False, block=32: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
     "torch's scaled_dot_product_attention"),
    (lambda q, k, v, causal=False, block=32: torch.ops.aten.scaled_dot_product_attention(q, k, v, is_causal=causal),
     "torch's scaled_dot_product_attention"),
    (lambda q, k, v, causal=False, block=32: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, is_causal=causal)[0], "torch's scaled_dot_product_attention"),  # tiled in C++: no big tensor
    (lambda q, k, v, causal=False, block=32: course_lib.tiled_attention.tiled_attention(
        q, k, v, causal=causal), "course_lib's own tiled_attention"),
    (lambda q, k, v, causal=False, block=32: course_lib.scaled_dot_product_attention(
        q, k, v, causal=causal), "course_lib's own attention"),
], ids=["no-scale", "scale-d", "diagonal-hidden", "leak", "mask-missing", "mask-unasked",
        "full-matrix", "torch-sdpa", "aten-sdpa", "aten-flash-cpu", "course_lib-tiled", "course_lib-naive"])
def test_tiled_mistakes_are_named(fn, phrase):
    assert phrase in fails(L4.check_tiled_attention, fn)


def test_tiled_with_a_wrong_update_points_back():
    def fn(q, k, v, causal=False, block=32):
        return tiled_right(q, k, v, causal, block) * 1.01
    assert "softmax_update" in fails(L4.check_tiled_attention, fn)


@pytest.mark.parametrize("kib, shrink, phrase", [
    (256, 2**20, "bits"), (32.768, 2**20, "in KB"), (32768, 2**20, "the bytes"),
    (16, 2**20, "count of scores"), (64, 2**20, "float32"),
    (32, 1024, "square it"), (32, 2**25, "all 32 heads"), (32, 2**19, "causal half"),
])
def test_flash_mistakes_are_named(kib, shrink, phrase):
    assert phrase in fails(L4.check_flash, kib, shrink)


@pytest.mark.parametrize("args, phrases", [
    ((256, 1024), ("flash_tile_kib is not right: that is bits", "Also, flash_shrink is not right: that is n / tile side")),
    ((32, 1024), ("flash_shrink is not right: that is n / tile side",)),
])
def test_flash_names_every_wrong_part(args, phrases):
    msg = fails(L4.check_flash, *args)
    assert all(p in msg for p in phrases) and msg.count("is not right") == len(phrases), msg


def test_score_bytes_and_score_tib_are_named_together():
    """The visible test checks the function and score_tib in one call: both wrong, both named."""
    msg = fails(L4.check_score_bytes, lambda n, h, b: n * n * h * 16, score_tib=2**40 / 1e12)
    assert "score_matrix_bytes(n_tokens=1024" in msg and "that is bits, not bytes" in msg, msg
    assert "Also, score_tib is not right" in msg and "in TB" in msg, msg
    assert fails(L4.check_score_bytes, score_bytes_right, score_tib=8.0).startswith("score_tib is not right: that is bits")
    assert "Also" not in fails(L4.check_score_bytes, lambda n, h, b: n * n * h * 16, score_tib=1.0)


# --- test yourself and recap -------------------------------------------------------------------------

@pytest.mark.parametrize("answer, phrase", [
    ({"a", "b", "c", "d", "h"}, "1 of your letters is not worth asking and 0 worth asking are missing"),
    ({"a", "b", "c", "d", "f", "h"}, "2 of your letters are not worth asking and 0 worth asking are"),
    ({"a", "b", "c"}, "0 of your letters are not worth asking and 1 worth asking is missing"),
    ({"b", "h"}, "1 of your letters is not worth asking and 3 worth asking are missing"),
    ({"a", "b", "c", "z"}, "not one of the letters"),
    (4, "expected a set of letters (strings) such as {'a', 'x'}, got int 4"),
    (["a", "b", "c", "d"], "expected a set of letters (strings) such as {'a', 'x'}, got list"),
    ("abcd", "expected a set of letters (strings) such as {'a', 'x'}, got str"),
    (("a", "b", "c", "d"), "got tuple"),
    ({1, 2}, "got set"),
])
def test_vendor_mistakes_are_counted_not_named(answer, phrase):
    """The feedback counts the wrong letters without naming one (naming them, answer after
    answer, would give the whole set away; the newcomer trial recovered it in eight tries)."""
    msg = fails(L4.check_tys_vendor, answer)
    assert phrase in msg, msg
    if "worth asking" in phrase:
        assert not any(f"({c})" in msg or f"'{c}'" in msg for c in "abcdefgh"), msg


def _recap(**changes):
    def fn(d_model, n_layers, n_heads, n_tokens):
        r = longest_right(d_model, n_layers, n_heads, n_tokens)
        att, w = 2 * n_tokens**2 * d_model, 12 * n_tokens * d_model**2
        args = dict(att=att, w=w, L=n_layers, h=n_heads, n=n_tokens, r=r)
        return {**r, **{k: f(**args) for k, f in changes.items()}}
    return fn


@pytest.mark.parametrize("fn, phrase", [
    (_recap(block_flops=lambda r, **_: r["block_flops"] / 2), "that is multiply-adds"),
    (_recap(block_flops=lambda att, w, **_: 2 * (att + w)), "one block"),
    (_recap(block_flops=lambda w, L, **_: 2 * L * w), "scores are missing"),
    (_recap(attention_share=lambda att, w, **_: att / w), "a ratio"),
    (_recap(attention_share=lambda att, w, **_: 100 * att / (att + w)), "percentage"),
    (_recap(attention_share=lambda att, w, **_: w / (att + w)), "the rest's share"),
    (_recap(score_bytes_per_layer=lambda n, h, **_: 16 * n * n * h), "bits"),
    (_recap(score_bytes_per_layer=lambda n, **_: 2 * n * n), "one head's"),
    (_recap(score_bytes_per_layer=lambda n, h, L, **_: 2 * n * n * h * L), "all layers"),
    # 4 bytes a score gives what counting the softmax weights too gives: both causes are named
    (_recap(score_bytes_per_layer=lambda n, h, **_: 4 * n * n * h), "the softmax weights too"),
    (_recap(score_bytes_per_layer=lambda n, h, **_: 4 * n * n * h), "4 bytes a score (32-bit)"),
])
def test_recap_mistakes_are_named(fn, phrase):
    msg = fails(L4.check_longest_input, fn)
    assert phrase in msg
    shows_none_of(msg, *longest_right(768, 12, 12, 1024).values())


def _block_macs_by_counter(n_tokens, d_model):
    m = course_lib.forward_macs(course_lib.gpt2_shape(d_model=d_model, n_layers=1, n_heads=1, d_vocab=1, n_ctx=1),
                                n_tokens, causal=False)
    return {"attention_scores": m.attention_scores, "weights": m.weights}


def _recap_on(block_macs, score_bytes=score_bytes_right):
    def longest_input(d_model, n_layers, n_heads, n_tokens):
        macs = block_macs(n_tokens, d_model)
        per_block = macs["attention_scores"] + macs["weights"]
        return {"block_flops": 2 * n_layers * per_block, "attention_share": macs["attention_scores"] / per_block,
                "score_bytes_per_layer": score_bytes(n_tokens, n_heads, 2)}
    return longest_input


@pytest.mark.parametrize("block_macs, score_bytes, blamed", [
    (_block_macs_by_counter, score_bytes_right, "block_macs"),        # a shortcut: its own test refuses it
    (lambda n, d: {"attention_scores": 4 * n * n * d, "weights": 24 * n * d * d}, score_bytes_right, "block_macs"),
    (block_macs_right, lambda n, h, b: 16 * n * n * h, "score_matrix_bytes"),
])
def test_recap_blames_the_earlier_answer_it_uses(block_macs, score_bytes, blamed):
    """longest_input built on a wrong (or shortcut) block_macs or score_matrix_bytes: the message
    names that answer, not this step; without them the check speaks for itself."""
    fn = _recap_on(block_macs, score_bytes)
    msg = fails(L4.check_longest_input, fn, block_macs=block_macs, score_matrix_bytes=score_bytes)
    assert msg == f"your {blamed} is not right on this input: make its test pass first", msg
    assert "make its test pass first" not in fails(L4.check_longest_input, fn)
    L4.check_longest_input(longest_right, block_macs=lambda n, d: 0, score_matrix_bytes=lambda n, h, b: 0)
    msg = fails(L4.check_longest_input, _recap(attention_share=lambda att, w, **_: att / w),
                block_macs=block_macs_right, score_matrix_bytes=score_bytes_right)
    assert "a ratio" in msg


def test_recap_wants_the_keys():
    assert "'score_bytes_per_layer'" in fails(L4.check_longest_input, lambda *a: {"block_flops": 1})


# --- the notebook's graded cells -------------------------------------------------------------------

CHECK_CALL = re.compile(r"^(lesson4\.check_\w+\(|assert\b)")


def test_notebook_grading_cells_are_well_formed():
    nb, answers, tests = graded_cells(NOTEBOOK, CHECK_CALL)
    assert set(tests) >= {"commutes", "rotary", "rotary-score", "block-macs", "crossover",
                          "score-bytes", "softmax-update", "tiled", "flash", "tys-crossover",
                          "tys-vendor", "longest-input"}


def test_notebook_types_no_expected_value_in_visible_tests():
    """Visible test cells pass only the learner's names to the checks (the expected values are
    computed in course_lib.checks.lesson4)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
            assert not re.search(r"\d", visible.replace("lesson4", "")), visible


def test_every_check_publishes_records_when_grading(monkeypatch, capsys):
    """Under grading (COURSE_CHECK_RECORDS=1) each passing check reports the learner's values
    through the check primitives, one record per compared value."""
    monkeypatch.setenv("COURSE_CHECK_RECORDS", "1")
    calls = {
        "commutes": lambda: L4.check_commutes(commutes_right),
        "rotary": lambda: L4.check_rotary(rotary_right),
        "rotary_score": lambda: L4.check_rotary_score(rotary_score_right),
        "block_macs": lambda: L4.check_block_macs(block_macs_right),
        "crossover": lambda: L4.check_crossover(crossover_right),
        "score_bytes": lambda: (L4.check_score_bytes(score_bytes_right), L4.check_score_tib(1.0)),
        "softmax_update": lambda: L4.check_softmax_update(update_right),
        "tiled": lambda: L4.check_tiled_attention(tiled_right),
        "flash": lambda: L4.check_flash(32, 2**20),
        "tys_crossover": lambda: L4.check_tys_crossover(24_576),
        "tys_vendor": lambda: L4.check_tys_vendor({"a", "b", "c", "d"}),
        "longest_input": lambda: L4.check_longest_input(longest_right),
    }
    for name, call in calls.items():
        call()
        out = capsys.readouterr().out
        assert out.count("COURSE-CHECK-RECORD ") >= 1, name


def test_sealed_answers_are_not_in_the_source():
    source = Path(L4.__file__).read_text()
    for plain in ("24576", "24_576", "24,576", "VENDOR_RIGHT"):
        assert plain not in source


# --- issue #16: mistakes the visible tests now catch, with their cause ----------------------------

def rotary_float32(x, positions, base=10000.0):
    """The right pairing and frequencies, with the angles in float32."""
    d, half = x.shape[-1], x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half) / d)                      # float32
    angles = positions.float()[:, None] * theta[None, :]               # float32
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * angles.cos() - b * angles.sin(), b * angles.cos() + a * angles.sin()], -1)


def test_float32_angles_fail_the_visible_test_naming_float64():
    msg = fails(L4.check_rotary, rotary_float32)
    assert "positions=[0, 1, 2, 40000, 100000, 131071]" in msg
    assert "float32" in msg and "torch.float64" in msg and "small positions" in msg


def test_an_ignored_base_fails_the_visible_test():
    msg = fails(L4.check_rotary, lambda x, positions, base=10000.0: rotary_right(x, positions))
    assert msg.startswith(L4.RANDOM_TAG + "rotary(") and "base argument is ignored" in msg


def test_every_visible_test_tries_an_input_made_at_run_time():
    """An answer that ignores its arguments (the visible case's value, hard-coded) fails."""
    assert fails(L4.check_block_macs, lambda n, d: block_macs_right(1024, 768)).startswith(L4.RANDOM_TAG)
    assert fails(L4.check_score_bytes, lambda n, h, b: score_bytes_right(1024, 12, 2)).startswith(L4.RANDOM_TAG)
    assert fails(L4.check_longest_input, lambda d, L, h, n: longest_right(768, 12, 12, 1024)).startswith(L4.RANDOM_TAG)
    assert fails(L4.check_rotary_score, lambda q, k, m, n: rotary_score_right(q, k, 5, 2)).startswith(L4.RANDOM_TAG)
    for name in ("permutation", "rotary", "rotary_score", "block_macs", "score_bytes", "update",
                 "tiled", "longest_input"):
        assert L4.RANDOM_CASES[name] in getattr(L4, {
            "permutation": "PERMUTATION_CASES", "rotary": "ROTARY_CASES",
            "rotary_score": "ROTARY_SCORE_CASES", "block_macs": "BLOCK_MACS_CASES",
            "score_bytes": "SCORE_BYTES_CASES", "update": "UPDATE_CASES", "tiled": "TILED_CASES",
            "longest_input": "RECAP_CASES"}[name])
    assert L4.RANDOM_CASES["crossover"] in L4.CROSSOVER_D_MODELS


def test_scores_and_weights_counted_both_is_named_twice():
    msg = fails(L4.check_score_bytes, lambda n, h, b: 2 * score_bytes_right(n, h, b))
    assert "twice" in msg and "softmax weights too" in msg
    assert "softmax weights too" in fails(L4.check_score_tib, 2.0)


def test_crossover_with_the_projections_counted_as_attention_is_named():
    for check, answer in ((L4.check_tys_crossover, 2 * 4096),
                          (L4.check_crossover, lambda d: 2 * d)):
        msg = fails(check, answer)
        assert "attention's own projections" in msg and "includes the projections" in msg


def tiled_full_mask(q, k, v, causal=False, block=32):
    """Right values, but the causal mask is made once for the whole n × n (a bool tensor)."""
    n, d = q.shape[-2], q.shape[-1]
    hidden = torch.ones(n, n, dtype=torch.bool).triu(1)                # n² bools
    out = torch.empty(q.shape[:-1] + v.shape[-1:])
    for q0 in range(0, n, block):
        q1 = min(q0 + block, n)
        m, l = torch.full(q.shape[:-2] + (q1 - q0,), -math.inf), torch.zeros(q.shape[:-2] + (q1 - q0,))
        acc = torch.zeros(q.shape[:-2] + (q1 - q0, v.shape[-1]))
        for k0 in range(0, n, block):
            k1 = min(k0 + block, n)
            s = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-2, -1) / math.sqrt(d)
            if causal:
                s = s.masked_fill(hidden[q0:q1, k0:k1], -math.inf)
            m, l, acc = update_right(m, l, acc, s, v[..., k0:k1, :])
        out[..., q0:q1, :] = acc / l[..., None]
    return out


def test_a_full_bool_mask_breaks_the_memory_rule_whatever_its_dtype():
    msg = fails(L4.check_tiled_attention, tiled_full_mask)
    assert msg.startswith("my_tiled_attention(n=512, block=64, causal=False) allocated a tensor "
                          "of shape (512, 512) (bool, 262,144 numbers)")
    assert "in any dtype" in msg


# --- issue #16 (session 6): types as the text asks, hard-coded values caught visibly, true words --

def rotary_float32_cast(x, positions, base=10000.0):
    """Right, but the cosines and sines cast to float32 rather than to x.dtype."""
    d, half = x.shape[-1], x.shape[-1] // 2
    angles = positions.double()[:, None] * base ** (-2 * torch.arange(half, dtype=torch.float64) / d)
    cos, sin = angles.cos().float(), angles.sin().float()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def test_a_float32_cast_fails_the_visible_bfloat16_input():
    L4.check_rotary(rotary_float32_cast, [c for c in L4.ROTARY_CASES if "dtype" not in c])  # float32: right
    msg = fails(L4.check_rotary, rotary_float32_cast)
    assert "x.dtype=bfloat16" in msg and "return the dtype of x (torch.bfloat16), got torch.float32" in msg


def test_rotary_score_must_be_a_python_float():
    msg = fails(L4.check_rotary_score, lambda q, k, m, n: torch.tensor(rotary_score_right(q, k, m, n)))
    assert "expected a Python float, got Tensor" in msg and ".item()" in msg
    assert "expected a Python float, got int" in fails(L4.check_rotary_score, lambda q, k, m, n: 1)


@pytest.mark.parametrize("check, fn", [
    (L4.check_rotary_score, lambda q, k, m, n: rotary_score_right(q, k, m, n) * math.sqrt(q.numel() / 8)),
    (L4.check_tiled_attention, lambda q, k, v, causal=False, block=32: tiled_right(
        q * math.sqrt(q.shape[-1] / 8), k, v, causal, block)),
], ids=["rotary_score", "tiled"])
def test_a_scale_fixed_at_d_head_8_fails_visibly_and_is_named(check, fn):
    msg = fails(check, fn)
    assert HIDDEN not in msg and "the scale is 1/sqrt(8) whatever d_head is" in msg


HIDDEN = "on a hidden test's input"


def test_visible_tests_try_inputs_of_different_kinds():
    """A hard-coded dtype, d_head, number of leading dimensions or size of the scores fails
    visibly: the visible inputs differ in each."""
    assert {c.get("dtype", "float32") for c in L4.ROTARY_CASES} == {"float32", "bfloat16"}
    assert len({len(c["shape"]) for c in L4.ROTARY_CASES}) >= 2
    assert len({c["shape"][-1] for c in L4.TILED_CASES}) >= 2 and len({len(c["shape"]) for c in L4.TILED_CASES}) >= 2
    assert len({len(c["batch"]) for c in L4.UPDATE_CASES}) >= 2
    assert max(c["scale"] for c in L4.UPDATE_CASES) >= 60  # exp of the raw scores overflows float32
    assert len({c["d_head"] for c in L4.ROTARY_SCORE_CASES}) >= 2
    assert len({c["bytes_per_number"] for c in L4.SCORE_BYTES_CASES}) >= 2


def _update_nan_safe_ratio(m, l, acc, s, v):
    """Right maths, but exp(scores) / exp(m_new): inf / inf once a score passes about 88."""
    m_new = torch.maximum(m, s.amax(-1))
    r, p = torch.exp(m) / torch.exp(m_new), torch.exp(s) / torch.exp(m_new)[..., None]
    return m_new, l * r + p.sum(-1), acc * r[..., None] + p @ v


def test_overflowing_exp_fails_the_visible_test_with_true_words():
    L4.check_softmax_update(_update_nan_safe_ratio, [c for c in L4.UPDATE_CASES if c["scale"] < 10])
    msg = fails(L4.check_softmax_update, _update_nan_safe_ratio)
    assert HIDDEN not in msg and ", l holds NaN" in msg and "inf / inf" in msg


def test_softmax_update_names_which_part_and_why():
    """The words name the part that is wrong and its cause: m left at the old m (not "m
    overflows"); l and acc summing exp(scores) (they hold inf at large scores, not m)."""
    def kept(m, l, acc, s, v):
        return m, l + torch.exp(s).sum(-1), acc + torch.exp(s) @ v
    msg = fails(L4.check_softmax_update, kept)
    assert ", m is not right: that is the old m, unchanged" in msg and "overflow" not in msg
    msg = fails(L4.check_softmax_update, _update("no-max"), L4.UPDATE_CASES[1:2])
    assert ", l is not right: that sums exp(scores) without subtracting the running maximum" in msg
    assert "scores up to=" in msg
    assert "a tuple of three tensors" in fails(L4.check_softmax_update, lambda *a: list(update_right(*a)))


def _update_old_max(m, l, acc, s, v):
    m_new = torch.maximum(m, s.amax(-1))
    r, p = torch.exp(m - m_new), torch.exp(s - m[..., None])
    return m_new, l * r + p.sum(-1), acc * r[..., None] + p @ v


def test_the_old_maximum_is_named_even_where_it_gives_nan():
    assert "use the old maximum m" in fails(L4.check_softmax_update, _update_old_max)


@pytest.mark.parametrize("weights, phrase", [
    ("11*n*d*d", "the output projection"),
    ("8*n*d*d", "one of the feed-forward layer's two matrices"),   # and "feed-forward layer only"
    ("8*n*d*d", "feed-forward layer only"),
])
def test_block_macs_new_mistakes_are_named(weights, phrase):
    msg = fails(L4.check_block_macs, eval(f"lambda n, d: {{'attention_scores': 2*n*n*d, 'weights': {weights}}}"))
    assert phrase in msg


def test_crossover_upside_down_is_named_without_the_answer():
    for msg in (fails(L4.check_crossover, lambda d: d / 6), fails(L4.check_tys_crossover, 4096 / 6)):
        assert "divided by a factor" in msg and "6" not in msg.split("is not right")[1]
    msg = fails(L4.check_tys_crossover, 6)
    assert "that is a constant" in msg and "6 ×" not in msg and "6·" not in msg


def test_two_causes_of_one_count_are_both_named():
    """2 bytes hard-coded gives, at 1 byte a number, what counting the softmax weights too gives."""
    msg = fails(L4.check_score_bytes, lambda n, h, b: n * n * h * 2)
    assert msg.startswith(L4.RANDOM_TAG) and "softmax weights too" in msg and "bytes_per_number argument is not used" in msg
    # 4 bytes hard-coded gives, at the shown 2 bytes, twice the scores: both causes, in the count and its TiB
    msg = fails(L4.check_score_bytes, lambda n, h, b: n * n * h * 4, score_tib=2 * 2**17 * 2**17 * 32 * 2 / 2**40)
    count, tib = msg.split(". Also, ")
    assert not count.startswith(L4.RANDOM_TAG) and tib.startswith("score_tib is not right")
    assert all("softmax weights too" in m and "4 bytes (32-bit)" in m for m in (count, tib)), msg


def test_a_wrong_tuple_is_named_in_one_line():
    """A tuple of tensors is described by its length, not its repr (lines of numbers, cut off)."""
    msg = fails(L4.check_softmax_update, lambda m, l, acc, s, v: (l, acc))
    assert msg.endswith("got tuple of 2") and "\n" not in msg and "tensor(" not in msg, msg


def test_sealed_vendor_letters_hold_no_unused_hints():
    assert all(not L4.VENDOR_SEALED[c].mistakes for c in L4.VENDOR_QUESTIONS)


def test_an_error_from_a_wrong_block_macs_blames_block_macs():
    """A longest_input that divides by a block_macs giving 0 off the shape it was written for
    raises ZeroDivisionError; the check re-checks block_macs on that input and names it."""
    def block_macs(n_tokens, d_model):
        n, d = n_tokens, d_model
        right = (n, d) == (1024, 768)
        return {"attention_scores": 2 * n * n * d * right, "weights": 12 * n * d * d * right}

    def longest_input(d_model, n_layers, n_heads, n_tokens):
        macs = block_macs(n_tokens, d_model)
        per_block = macs["attention_scores"] + macs["weights"]
        return {"block_flops": 2 * n_layers * per_block, "attention_share": macs["attention_scores"] / per_block,
                "score_bytes_per_layer": n_tokens * n_tokens * n_heads * 2}
    case = [dict(d_model=512, n_layers=4, n_heads=8, n_tokens=2048)]
    alone = fails(L4.check_longest_input, longest_input, cases=case)  # alone: the learner's own error, one line
    assert alone == "longest_input on a hidden test's input raised ZeroDivisionError: division by zero"
    msg = fails(L4.check_longest_input, longest_input, cases=case, block_macs=block_macs)
    assert msg == "your block_macs is not right on this input: make its test pass first"


def test_an_error_of_the_learners_own_names_its_input_in_one_line():
    """rotary, rotary_score, softmax_update and tiled attention run the learner's code through exercise.call:
    an error it raises is one line naming the input (on a hidden one, its numbers withheld), not a traceback."""
    def broken(*args, **kwargs):
        raise ValueError("size 40 does not match 16")

    shown = fails(L4.check_rotary, broken)
    assert shown.startswith("rotary(x.shape=(2, 3, 6, 8)") and "raised ValueError: size 40 does not match 16" in shown
    hidden = fails(L4.check_tiled_attention, broken, [dict(shape=(1, 1, 24, 8), causal=True, block=5, seed=7)])
    assert "on a hidden test's input" in hidden and "raised ValueError: size … does not match …" in hidden
    shows_none_of(hidden, 24, 5, 7)
    for check in (L4.check_rotary_score, L4.check_softmax_update):
        assert "raised ValueError" in fails(check, broken)


def test_fused_attention_is_named_even_when_the_answer_then_fails():
    """A tiled attention that calls torch's fused kernel and then raises is refused for the call, not for the
    error it raised after (exercise.call names a refused call first)."""
    def fused_then_broken(q, k, v, causal, block):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        raise RuntimeError("my tiles are not done")

    assert "calls torch's scaled_dot_product_attention" in fails(L4.check_tiled_attention, fused_then_broken)


def test_commutes_names_its_input_on_an_error():
    """commutes_with_permutation's answer runs through exercise.call too: its error is one line naming the input
    (it went on as a traceback before)."""
    def broken(block, x, perm):
        return bool((block(x[:, perm]) - block(x)[perm]).abs().max() < 1e-4)  # indexes the batch: IndexError

    msg = fails(L4.check_commutes, broken)
    assert msg.startswith("commutes_with_permutation(d_model=32") and "raised IndexError" in msg
