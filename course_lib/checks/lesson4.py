"""Checks for lesson 4, "Position and context", on :mod:`.exercise`: order (a ``course_lib.block`` with no positions,
on permutations), rotary positions (``course_lib.positions``), the multiply-adds and bytes of the score matrix
(``forward_macs(causal=False)``), the running softmax (``course_lib.tiled_attention``) and tiled attention (torch's
``scaled_dot_product_attention``; memory: ``course_lib.profiling``).  Inputs are seeded; mistakes' words:
``hints/lesson4.toml``; sealed answers: ``sealed_answers/lesson4.json``."""
from __future__ import annotations

import math
import random
from functools import partial
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from .. import positions as _positions
from ..block import TransformerBlock
from ..flops import forward_macs
from ..profiling import measure_peak_extra_memory
from ..shapes import gpt2_shape
from ..tiled_attention import initial_state, online_softmax_update
from ..units import GiB
from . import CheckFailed, check_choice, check_close, got_words, is_shown, watch_calls
from .exercise import (RANDOM_TAG, Exercise, Inputs, Part, Question, attempt, blames, call,  # noqa: F401 - tests
                       close, compare, every, label, merged, name_mistake, sealed_picks, torch_watch)
from .hints import load as _load_hints, words
from .sealed import as_option, load as _load_sealed

SEALED, HINTS, _named = _load_sealed("lesson4"), _load_hints("lesson4"), words("lesson4")

LONG_CONTEXT = 131_072  # tokens in the long-context example (2^17, the "128K" of model cards)
BYTES_16BIT = 2         # bytes per number in fp16 or bf16
FLASH_TILE = 128        # tile side (queries and keys) of the FlashAttention figure
_UNSET = object()       # check_score_bytes's score_tib not given

RANDOM_CASES = {name: draw(random.Random(f"lesson4/{name}")) for name, draw in dict(
    permutation=lambda r: (lambda h: dict(d_model=h * r.choice((4, 8, 12, 16)), n_heads=h, batch=r.randint(1, 3),
                                          pos=r.randint(4, 9), causal=r.random() < 0.5, positions="none",
                                          seed=r.randint(10, 999)))(r.randint(1, 4)),
    rotary=lambda r: dict(shape=(r.randint(1, 2), r.randint(1, 3), r.randint(3, 9), 2 * r.randint(2, 24)),
                          start=r.randint(1, 3000), base=r.choice((50_000.0, 500_000.0, 1_000_000.0)),
                          seed=r.randint(10, 999)),
    rotary_score=lambda r: dict(d_head=2 * r.randint(2, 32), m=r.randint(0, 400), n=r.randint(0, 400),
                                seed=r.randint(10, 999)),
    block_macs=lambda r: dict(n_tokens=r.randint(2, 8000), d_model=r.randrange(64, 4097, 64)),
    crossover=lambda r: r.randrange(64, 8193, 64),
    score_bytes=lambda r: dict(n_tokens=r.randint(100, 50_000), n_heads=r.randint(1, 64),
                               bytes_per_number=r.choice((1, 4))),
    update=lambda r: dict(batch=(r.randint(1, 3),), block_q=r.randint(2, 8), block_k=r.randint(2, 8),
                          d_v=r.randint(2, 8), first=r.random() < 0.5, scale=r.choice((1.0, 30.0)),
                          seed=r.randint(10, 999)),
    tiled=lambda r: dict(shape=(r.randint(1, 2), r.randint(1, 3), r.randint(10, 60), r.choice((4, 8, 16))),
                         causal=r.random() < 0.5, block=r.randint(4, 20), seed=r.randint(10, 999)),
    longest_input=lambda r: (lambda h: dict(d_model=64 * h, n_layers=r.randint(2, 48), n_heads=h,
                                            n_tokens=r.randint(256, 65_536)))(r.randint(2, 40)),
).items()}
"""The input each visible test draws at run time from ``random.Random("lesson4/<exercise>")`` (the same on every run;
labelled :data:`RANDOM_TAG`), so an answer ignoring its arguments fails."""

# The visible tests' inputs, each list ending in its run-time one.  Rotary: positions up to 131,071 (float32 is off).
PERMUTATION_CASES = (dict(d_model=32, n_heads=4, batch=2, pos=7, causal=False, positions="none", seed=0),
                     dict(d_model=32, n_heads=4, batch=2, pos=7, causal=True, positions="none", seed=1),
                     RANDOM_CASES["permutation"])
ROTARY_CASES = (dict(shape=(2, 3, 6, 8), start=0, base=10000.0, seed=0),
                dict(shape=(1, 2, 6, 16), positions=(0, 1, 2, 40_000, 100_000, 131_071), base=10000.0, seed=1),
                dict(shape=(4, 5, 12), start=3, base=10000.0, dtype="bfloat16", seed=2), RANDOM_CASES["rotary"])
ROTARY_SCORE_CASES = (dict(d_head=8, m=5, n=2, seed=0), RANDOM_CASES["rotary_score"])
BLOCK_MACS_CASES = (dict(n_tokens=1024, d_model=768), RANDOM_CASES["block_macs"])
SCORE_BYTES_CASES = (dict(n_tokens=1024, n_heads=12, bytes_per_number=2), RANDOM_CASES["score_bytes"])
UPDATE_CASES = (dict(batch=(2,), block_q=4, block_k=5, d_v=6, first=True, scale=1.0, seed=0),
                dict(batch=(2, 3), block_q=4, block_k=5, d_v=6, first=False, scale=60.0, seed=1),
                RANDOM_CASES["update"])
TILED_CASES = (dict(shape=(1, 2, 40, 8), causal=False, block=16, seed=0),
               dict(shape=(2, 40, 16), causal=True, block=16, seed=1), RANDOM_CASES["tiled"])
RECAP_CASES = (dict(d_model=768, n_layers=12, n_heads=12, n_tokens=1024), RANDOM_CASES["longest_input"])
CROSSOVER_D_MODELS = (768, RANDOM_CASES["crossover"])

VENDOR_QUESTIONS = HINTS["options"]["vendor_questions"]
"""The list the vendor test-yourself question picks from (letter -> question; hints/lesson4.toml)."""


# --- the shared steps of this lesson's checks ----------------------------------------------------

_COURSE_LIB = (partial(watch_calls, files=dict.fromkeys(("positions.py", "attention.py", "tiled_attention.py",
                                                          "block.py"))), HINTS["by_hand"]["course_lib"])
_FUSED = (torch_watch(lambda func, *_: "scaled_dot_product" in str(func), dispatch=True),  # however it is reached
          HINTS["by_hand"]["fused"])


def _try(fn, name: str, case, visible: Sequence, text, *args, kinds=(), refuse=(_COURSE_LIB,), **kwargs):
    return attempt(fn, name, case, (visible[:-1], visible[-1:]), text, args, kwargs, kinds=kinds, explain_errors=True,
                   refuse=refuse)


def _count(name: str, cases: Sequence, reference: Callable, *parts: Part, **options) -> Exercise:
    """A count on ``cases`` (the last made at run time); ``reference(*case)``: ``{key: (right, {words: wrong})}``."""
    return Exercise(name, Inputs(shown=cases[:-1], random=cases[-1:], hidden=""), lambda a: reference(*a.values()),
                    parts, positional=True, fixed_note=False, **options)


def _part(key: str | None, rel: float = 1e-9, *on: str) -> Part:
    return Part(key, expected=lambda r: r[key][0], suffix=f"[{key!r}]" if key else "", rel=rel, builds_on=on,
                mistakes=lambda r: merged(r[key][1]))


# --- 1. attention cannot see order -----------------------------------------------------------

def permutation_case(case: Mapping):
    """(block, x (batch, pos, d_model), perm): a GPT-2-style block in eval mode, weights from the seed (``positions=
    "rotary"`` rotates q and k inside), and a permutation that is not its own inverse (so using the inverse shows)."""
    shape = gpt2_shape(d_model=case["d_model"], n_layers=1, n_heads=case["n_heads"], d_vocab=1, n_ctx=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(case["seed"])
        block = TransformerBlock(shape.with_(positions=case.get("positions", "none")), causal=case["causal"])
    g = torch.Generator().manual_seed(1000 + case["seed"])
    x = torch.randn(case["batch"], case["pos"], case["d_model"], generator=g)
    perm = torch.randperm(case["pos"], generator=g)
    while bool((perm[perm] == torch.arange(case["pos"])).all()):  # an involution (or identity)
        perm = torch.roll(perm, 1)
    return block.eval(), x, perm


def check_commutes(fn, cases: Sequence[Mapping] = PERMUTATION_CASES) -> None:
    """Check ``fn(block, x, perm) -> bool``: True when the block's outputs on the tokens in the order ``perm`` are its
    outputs in that order, within rounding (no positions and no mask commute; a causal mask or rotary positions not)."""
    words = HINTS["commutes"]
    for case in cases:
        (block, x, perm), rotary = permutation_case(case), case.get("positions") == "rotary" and "rotary positions"
        kind = "a causal mask" if case["causal"] else rotary  # what makes order count
        with torch.no_grad():
            diff = (block(x[:, perm]) - block(x)[:, perm]).abs().max().item()
        what, _, got = _try(fn, "commutes_with_permutation", case, PERMUTATION_CASES, {  # positions if any
            k: case[k] for k in ("d_model", "batch", "pos", "causal", "positions") if case.get(k, "none") != "none"},
            block, x.clone(), perm.clone(), kinds=(f"causal={case['causal']}", rotary), refuse=())
        if (expected := diff < 1e-4) == bool(kind):  # the check's own premise failed
            raise RuntimeError(f"{what}: max difference {diff:.2e} contradicts the block's kind")
        if not isinstance(got, bool):
            raise CheckFailed(f"{what}: {words['not_bool']}, got {got_words(got, what)}")
        if got != expected:
            raise CheckFailed(f"{what} " + (words["sees_order"].format(kind=kind) if kind else words["blind"]))
        check_choice(got, expected, what=what, choices=(True, False))


# --- 2. rotary positions ---------------------------------------------------------------------

def _rotate(x, positions, base, *, sign=1.0, interleaved=False, half_exponent=False, repeat_interleave=False):
    """Rotary embedding with optional mistakes, in float64 (x: (..., pos, d_head))."""
    d, x = x.shape[-1], x.double()
    if interleaved:  # RoFormer's layout, pairs (2i, 2i+1): the halves' rotation of the features reordered
        order = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
        return _rotate(x[..., order], positions, base, sign=sign)[..., torch.argsort(order)]
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = torch.as_tensor(positions, dtype=torch.float64)[..., None] * base ** (-(i if half_exponent else 2 * i) / d)
    ang = ang.repeat_interleave(2, dim=-1) if repeat_interleave else torch.cat([ang, ang], -1)
    return x * ang.cos() + sign * torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * ang.sin()


def reference_rotary(x, positions, base=10000.0):
    """course_lib's rotary embedding (Llama's halves convention), in x's dtype."""
    return _positions.apply_rotary(x, *_positions.rotary_cos_sin(positions, x.shape[-1], base, dtype=x.dtype))


def check_rotary(fn, cases: Sequence[Mapping] = ROTARY_CASES) -> None:
    """Check ``fn(x, positions, base) -> x rotated`` against course_lib.positions: x (..., pos, d_head) from the case's
    seed, float32 or its ``dtype`` (bfloat16); positions (pos,) integers, its own or start, start + 1, ..."""
    for case in cases:
        base, rows, dtype = case["base"], case["shape"][-2], case.get("dtype")
        x = torch.randn(*case["shape"], generator=torch.Generator().manual_seed(2000 + case["seed"])).to(
            getattr(torch, dtype or "float32"))
        positions = torch.tensor(case.get("positions") or range(case["start"], case["start"] + rows))
        what, shown, got = _try(fn, "rotary", case, ROTARY_CASES, {"x.shape": tuple(x.shape), "positions": list(
            case["positions"]) if "positions" in case else f"{case['start']}..{case['start'] + rows - 1}",
            "base": base, **({"x.dtype": dtype} if dtype else {})}, x.clone(), positions.clone(), base, kinds=(
            "positions not starting at 0" if case.get("start") else "",
            "a base other than 10000" if base != 10000 else "", f"x in {dtype}" if dtype else ""))
        tol, rotate = 1e-4 if x.dtype == torch.float32 else 3e-2, partial(_rotate, x, positions, base)  # 16-bit: 2^-8
        if isinstance(got, torch.Tensor) and got.dtype != x.dtype and got.shape == x.shape:
            raise CheckFailed(f"{what}: return the dtype of x ({x.dtype}), got {got.dtype}")

        def otherwise(got, expected):  # a rotation keeps lengths; float32 angles are off at large positions only
            per_position = lambda t: t.abs().amax(-1).reshape(-1, rows).amax(0)  # noqa: E731
            row_ok, small = per_position(got - expected) <= tol * (1 + per_position(expected)), positions < 1000
            norm_kept = close(got.norm(dim=-1), x.double().norm(dim=-1), rtol=tol, atol=tol)
            float32 = norm_kept and small.any() and bool(row_ok[small].all()) and not bool(row_ok.all())
            key = "float32" if float32 else "wrong_angles" if norm_kept else "length"
            return "is not right: " + HINTS["rotary"][key] if torch.isfinite(got).all() else None
        compare(got, reference_rotary(x, positions, base), what=what, shown=shown, rtol=tol, atol=tol, tensor=True,
                record=(tol, tol), shape_words="the shape of the input", otherwise=otherwise, mistakes=lambda: _named(
                    "rotary", unrotated=x.double(), sign=rotate(sign=-1.0), **{k: rotate(**{k: True}) for k in (
                        "interleaved", "repeat_interleave", "half_exponent")},
                    positions_ignored=_rotate(x, torch.arange(rows), base), base_ignored=_rotate(x, positions, 1e4)))


def rotary_score_case(case: Mapping):
    """(q, k), each (d_head,), from the case's seed."""
    g = torch.Generator().manual_seed(3000 + case["seed"])
    return torch.randn(case["d_head"], generator=g), torch.randn(case["d_head"], generator=g)


def reference_rotary_score(q, k, m, n, base=10000.0) -> float:
    """(q rotated to position m) · (k rotated to position n) / sqrt(d_head), by course_lib."""
    qm = reference_rotary(q.double()[None], torch.tensor([m]), base)[0]
    return (qm @ reference_rotary(k.double()[None], torch.tensor([n]), base)[0]).item() / math.sqrt(q.shape[-1])


def _fixed_scale(exercise: str, d: int, value: Callable[[int], object]) -> dict:  # 1/sqrt(c), c a common d_head
    return {HINTS[exercise]["fixed_scale"].format(c=c): value(c) for c in (4, 8, 16, 32, 64, 128) if c != d}


def check_rotary_score(fn, cases: Sequence[Mapping] = ROTARY_SCORE_CASES) -> None:
    """Check ``fn(q, k, m, n) -> float``: the scaled score of query q at position m against key k
    at position n, both rotated; and that it stays the same when m and n move together."""
    for case in cases:
        (q, k), m, n, d = rotary_score_case(case), case["m"], case["n"], case["d_head"]
        shown, ref, root = is_shown(case, ROTARY_SCORE_CASES), partial(reference_rotary_score, q, k), math.sqrt(d)
        what = label("rotary_score", f"q, k, m={m}, n={n}", shown=shown, random=case == ROTARY_SCORE_CASES[-1],
                     kinds=(m == n and "query and key at the same position",)) + (f" with d_head={d}" if shown else "")

        def score(m, n):
            x = call(fn, what, q.clone(), k.clone(), m, n, shown=shown, explain_errors=True, refuse=(_COURSE_LIB,))
            if not isinstance(x, float):  # the text asks for a Python float (a numpy float64 is one)
                raise CheckFailed(f"{what}: expected a Python float, got {got_words(x, what)}" + (
                    f"; {HINTS['rotary_score']['tensor']}" if isinstance(x, torch.Tensor) else ""))
            if not math.isfinite(x := float(x)):
                raise CheckFailed(f"{what}: got {x}, which is not a finite number")
            return x
        got, expected = score(m, n), ref(m, n)
        compare(got, expected, what=what, shown=shown, rtol=1e-4, atol=1e-4, record=(1e-4, 1e-4),
                otherwise=lambda g, e: HINTS["rotary_score"]["other"],
                mistakes=lambda: _named("rotary_score", no_scale=expected * root, by_d_head=expected / root,
                                        query_only=ref(m, 0), swapped=ref(n, m), same_position=ref(0, 0))
                | _fixed_scale("rotary_score", d, lambda c: expected * math.sqrt(d / c)))
        for shift in (1, 7, 100):
            moved, by = score(m + shift, n + shift), f"by {shift}" if shown else "by the same amount"
            if not math.isclose(moved, got, rel_tol=1e-4, abs_tol=1e-4):  # by: not a hidden position's shift
                raise CheckFailed(f"{what}: " + HINTS["rotary_score"]["moved"].format(by=by))
            check_close(moved, expected, what=f"{what}, both moved {by}", rtol=1e-4, atol=1e-4)


# --- 3. what attention costs, 4. the score matrix in memory ----------------------------------

def _block_macs(n: int, d: int) -> dict:  # n_tokens, d_model: one GPT-2-style block's
    m, nd2 = forward_macs(gpt2_shape(d_model=d, n_layers=1, n_heads=1, d_vocab=1, n_ctx=1), n, causal=False), n * d * d
    s, w = m.attention_scores, m.weights
    return {"attention_scores": (s, _named("block_macs", flops=2 * s, qk_only=n * n * d, causal_half=n * (n + 1) * d,
                                           one_token_scores=2 * n * d)),
            "weights": (w, _named("block_macs", flops=2 * w, projections_only=4 * nd2, ff_only=8 * nd2,
                                  one_ff_matrix=8 * nd2, one_token=12 * d * d, ff_width=6 * nd2, no_out_proj=11 * nd2))}


check_block_macs = _count("block_macs", BLOCK_MACS_CASES, _block_macs, _part("attention_scores"), _part("weights"),
                          returns=("attention_scores", "weights"))
"""``block_macs(n_tokens, d_model) -> {"attention_scores", "weights"}``: the multiply-adds of one GPT-2-style block
over n_tokens with the full score matrix (``forward_macs(causal=False)``)."""


def crossover_expected(d_model: int) -> int:
    """The length where the score multiply-adds (2·n²·d_model) equal the weights' (12·n·d_model²),
    both from forward_macs: n = 6·d_model."""
    (s, _), (w, _) = _block_macs(1, d_model).values()  # one token: scores n²·2·d_model, weights n·12·d_model²
    return w // s


check_crossover = _count("crossover_length", [{"d_model": d} for d in CROSSOVER_D_MODELS], lambda d: {None: (
    crossover_expected(d), _named("crossover", twice=12 * d, projections=2 * d, ff_only=4 * d, d_model=d, squared=d * d,
                                  constant=6, upside_down=d / 6))}, _part(None, 1e-9, "block_macs"), arg="d_model")
"""``crossover_length(d_model) -> n``, the length where attention's scores cost as many multiply-adds as the rest of a
GPT-2-style block."""


def score_bytes_expected(n_tokens: int, n_heads: int, bytes_per_number: float) -> float:
    """Bytes of one layer's full score matrices: n_tokens² scores per head."""
    return n_tokens * n_tokens * n_heads * bytes_per_number


def _score_bytes(n: int, h: int, b: float) -> dict:  # n_tokens, n_heads, bytes_per_number
    right = score_bytes_expected(n, h, b)
    return {None: (right, _named(
        "score_bytes", bits=right * 8, weights_too=right * 2, one_head=right / h, causal_half=n * (n + 1) // 2 * h * b,
        half=right / 2, not_squared=n * h * b, count=right / b, bytes_fixed=n * n * h * BYTES_16BIT,
        bytes_fixed_4=n * n * h * 4))}


def check_score_bytes(fn, cases: Sequence[Mapping] = SCORE_BYTES_CASES, visible: Sequence[Mapping] = SCORE_BYTES_CASES,
                      score_tib=_UNSET, *, then: Callable[[], None] | None = None) -> None:
    """Check ``fn(n_tokens, n_heads, bytes_per_number) -> bytes`` of one layer's full score matrices, n_tokens² per
    head (exact), on ``cases``; ``visible``: the ones a message may name, the last made at run time.  Given
    ``score_tib`` (:data:`check_score_tib`) or ``then`` (another such check: the capstone's, which checks its copy of
    the exercise here), that is checked too, a failure of both named in one message (:func:`~.exercise.every`)."""
    if score_tib is not _UNSET:
        then = partial(check_score_tib, score_tib)
    every(partial(_count("score_matrix_bytes", visible, _score_bytes, _part(None)), fn, cases), *filter(None, [then]))


check_score_tib = Question((SEALED["lesson4/score_tib"],), builds_on=("score_matrix_bytes",))
"""TiB of one layer's score matrices at LONG_CONTEXT tokens, 32 heads (a 7B-class shape), 16-bit (sealed);
the visible test checks it with ``check_score_bytes(fn, score_tib=...)``."""


# --- 5. tiled attention ----------------------------------------------------------------------

def _update_mistakes(state, s, v) -> dict:  # in float32 as a learner's code runs: an overflow or NaN is its own
    (m, l, acc), m_new = state, torch.maximum(state.m, s.amax(-1))
    r, inv, p = torch.exp(m - m_new), torch.exp(m_new - m), torch.exp(s - m_new[..., None])
    p_old, raw = torch.exp(s - m[..., None]), torch.exp(s)  # -inf - (-inf): NaN, as in yours
    return {"acc": _named("softmax_update", acc_not_rescaled=acc + p @ v, inverted=acc * inv[..., None] + p @ v,
                          old_max=acc * r[..., None] + p_old @ v, no_max=acc + raw @ v,
                          normalised=(acc * r[..., None] + p @ v) / (l * r + p.sum(-1))[..., None]),
            "l": _named("softmax_update", l_not_rescaled=l + p.sum(-1), inverted=l * inv + p.sum(-1),
                        old_max=l * r + p_old.sum(-1), no_max=l + raw.sum(-1)),
            "m": _named("softmax_update", m_tile=s.amax(-1), m_kept=m)}


def _update_words(got, expected) -> str:  # NaN, inf, -inf where a number should be, or the update's formulas
    bad = "nan" if torch.isnan(got).any() else "overflow" if (got == math.inf).any() else \
        "minus_inf" if (got == -math.inf).any() and not (expected == -math.inf).any() else "other"
    return ("is not right: " if bad == "other" else "") + HINTS["softmax_update"][bad]


def check_softmax_update(fn, cases: Sequence[Mapping] = UPDATE_CASES) -> None:
    """Check ``fn(m, l, acc, scores_tile, v_tile) -> (m, l, acc)`` against tiled_attention.online_softmax_update, on
    tiles from the case's seed: scores scaled by its ``scale`` (large ones overflow exp without the running maximum),
    some -inf (masked), each row with a visible score in the tile; the first tile or one after an earlier tile."""
    for case in cases:
        g = torch.Generator().manual_seed(4000 + case["seed"])
        batch, bq, bk, dv = tuple(case["batch"]), case["block_q"], case["block_k"], case["d_v"]
        state = initial_state(batch, bq, dv)
        if not case["first"]:  # a state after one earlier tile
            state = online_softmax_update(state, torch.randn(*batch, bq, bk, generator=g) * case["scale"],
                                          torch.randn(*batch, bk, dv, generator=g))
        scores = torch.randn(*batch, bq, bk, generator=g) * case["scale"] + 2.0
        hidden = (torch.rand(*batch, bq, bk, generator=g) < 0.3) & (torch.arange(bk) > 0)  # key 0 visible in every row
        s, v = scores.masked_fill(hidden, -math.inf), torch.randn(*batch, bk, dv, generator=g)
        what, shown, got = _try(fn, "softmax_update", case, UPDATE_CASES, {
            "batch": tuple(case["batch"]), **{k: case[k] for k in ("block_q", "block_k", "d_v")},
            "first tile": case["first"], "scores up to": round(s.amax().item())}, *(t.clone() for t in (*state, s, v)),
            kinds=("the first tile" if case["first"] else "a later tile", abs(case["scale"]) > 10 and "large scores"))
        if not isinstance(got, tuple) or len(got) != 3:
            raise CheckFailed(f"{what}: expected a tuple of three tensors (m, l, acc), "
                              f"got {got_words(got, what, 0)}" + (
                f" of {len(got)}" if isinstance(got, (tuple, list)) else ""))  # a tensor's repr: lines of numbers
        for name, g, e in zip(("m", "l", "acc"), got, online_softmax_update(state, s, v)):
            compare(g, e, what=f"{what}, {name}", shown=shown, rtol=1e-5, atol=1e-5, record=(1e-5, 1e-5),
                    tensor=True, mistakes=lambda: _update_mistakes(state, s, v)[name], otherwise=_update_words)


def tiled_case(case: Mapping):
    """(q, k, v), each (*shape), from the case's seed."""
    return torch.randn(3, *case["shape"], generator=torch.Generator().manual_seed(5000 + case["seed"])).unbind(0)


def check_tiled_attention(fn, cases: Sequence[Mapping] = TILED_CASES, memory_n: int = 512) -> None:
    """Check ``fn(q, k, v, causal, block) -> (..., n, d_head)`` against torch's scaled_dot_product_attention, and that
    it never holds a tensor a quarter of the score matrix's size, in any dtype (course_lib.profiling, n = memory_n)."""
    words, near = HINTS["tiled"], partial(close, rtol=1e-4, atol=1e-4)
    for case in cases:
        (q, k, v), (n, d), causal, block = tiled_case(case), case["shape"][-2:], case["causal"], case["block"]
        what, shown, got = _try(
            fn, "my_tiled_attention", case, TILED_CASES, {"q.shape": tuple(q.shape), "causal": causal, "block": block},
            q.clone(), k.clone(), v.clone(), causal=causal, block=block, refuse=(_COURSE_LIB, _FUSED), kinds=(
                f"causal={causal}", "one tile longer than the input" if block >= n else
                "a last tile shorter than the block" if n % block else ""))
        att, i, j = partial(F.scaled_dot_product_attention, q, k, v), torch.arange(n)[:, None], torch.arange(n)[None, :]
        sees = lambda allowed: att(attn_mask=torch.as_tensor(allowed).expand(n, n))  # noqa: E731 - query i sees key j
        expected, full = att(is_causal=causal), n // block * block  # full: the rows and keys of the whole tiles
        short_keys = sees((j < full) & (j <= i if causal else True)) if n % block and full else None
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:  # before compare: rows unwritten, NaN
            if short_keys is not None and not near(got, expected) and not near(got, short_keys):  # rows before full
                name_mistake(what, {f"{words[key]}.": near(got[..., :full, :], rows[..., :full, :]) for rows, key in (
                    (expected, "short_queries"), (short_keys, "short_both"))})
            if torch.isnan(got).any():  # the reference has none
                raise CheckFailed(f"{what}: {words['nan']}" + ("" if causal else f" {words['not_causal']}"))
        compare(got, expected, what=what, shown=shown, rtol=1e-4, atol=1e-4, record=(1e-4, 1e-4), tensor=True,
                shape_words="the shape of the input", otherwise=lambda g, e: words["other"], mistakes=lambda: _named(
                    "tiled", no_scale=att(is_causal=causal, scale=1.0), scale_d=att(is_causal=causal, scale=1 / d),
                    short_keys=short_keys, **(dict(no_mask=att(), next_key=sees(j <= i + 1), own_key=sees(j <= i - 1),
                                                   tile_mask=sees(j < (i // block + 1) * block)) if causal else dict(
                        unasked_mask=att(is_causal=True)))) | _fixed_scale(
                    "tiled", d, lambda c: att(is_causal=causal, scale=c ** -0.5)))
    q, k, v = tiled_case(dict(shape=(1, 1, memory_n, 32), seed=99))
    for causal in (False, True):
        mem = measure_peak_extra_memory(fn, q, k, v, causal=causal, block=64)
        if too_big := mem.most_numbers >= memory_n * memory_n // 4:
            raise CheckFailed(f"my_tiled_attention(n={memory_n}, block=64, causal={causal}) " + words["memory"].format(
                shape=mem.most_numbers_shape, dtype=str(mem.most_numbers_dtype).replace("torch.", ""),
                numbers=mem.most_numbers, n=memory_n))
        check_choice(too_big, False, what=f"my_tiled_attention(n={memory_n}, causal={causal}) holds a quarter "
                     "of the score matrix's numbers", choices=(True, False))  # not the bytes: they vary


check_flash = Question((SEALED["lesson4/flash_tile_kib"], SEALED["lesson4/flash_shrink"]), all_parts=True)
"""KiB of one FLASH_TILE × FLASH_TILE tile of 16-bit scores, and how many times smaller it is than
one head's full score matrix at LONG_CONTEXT tokens (both sealed)."""


# --- test yourself and recap -----------------------------------------------------------------

check_tys_crossover = Question((SEALED["lesson4/tys_crossover"],))
"""The length where attention costs more than the rest of a block of d_model = 4096 (sealed, 0.5 % tolerance)."""
VENDOR_SEALED = {c: SEALED[f"lesson4/tys_vendor/{c}"] for c in VENDOR_QUESTIONS}
"""Letter -> its sealed "yes" (worth asking) or "no"."""


def check_tys_vendor(letters) -> None:
    """The questions worth asking a vendor about a 128,000-token context: a set of letters of
    VENDOR_QUESTIONS, as the text asks; each letter's yes or no is sealed."""
    words, is_set = HINTS["vendor"], isinstance(letters, (set, frozenset))
    if not is_set or not all(isinstance(c, str) for c in letters):
        raise CheckFailed(f"tys_vendor: {words['not_letters']}, got {type(letters).__name__} {letters!r:.60}"
                          + ("" if is_set else f"; {words['not_set']}"))
    picked = {as_option(c, VENDOR_QUESTIONS) for c in letters}
    if unknown := sorted(picked - set(VENDOR_QUESTIONS)):
        raise CheckFailed(f"tys_vendor: {', '.join(map(repr, unknown))} {words['unknown']} "
                          + ", ".join(VENDOR_QUESTIONS))
    extra, missing = map(len, sealed_picks(picked, VENDOR_SEALED))
    if extra or missing:  # counts only: naming a letter would give its answer away
        raise CheckFailed("tys_vendor is not right: " + words["counted"].format(
            extra=extra, missing=missing, is_extra=("are", "is")[extra == 1], is_missing=("are", "is")[missing == 1]))


def _longest(d: int, L: int, h: int, n: int) -> dict:  # d_model, n_layers, n_heads, n_tokens
    s, w = (L * right for right, _ in _block_macs(n, d).values())  # all layers: L blocks
    (b, byte_mistakes), share = _score_bytes(n, h, BYTES_16BIT)[None], s / (s + w)
    return {"block_flops": (2 * (s + w), _named(
                "longest_input", macs=s + w, one_block=2 * (s + w) / L, causal_half=2 * (w + s * (n + 1) / (2 * n)),
                no_scores=2 * w, times_heads=2 * (w + h * s))),
            "attention_share": (share, _named("longest_input", ratio=s / w, percentage=100 * share, rest=1 - share)),
            "score_bytes_per_layer": (b, byte_mistakes | _named("longest_input", fp32=2 * b, all_layers=b * L,
                                                                gib=b / GiB))}


_longest_input = _count("longest_input", RECAP_CASES, _longest, _part("block_flops", 1e-9, "block_macs"),
                        _part("attention_share", 1e-6, "block_macs"),
                        _part("score_bytes_per_layer", 1e-9, "score_matrix_bytes"),
                        returns=("block_flops", "attention_share", "score_bytes_per_layer"))


def check_longest_input(fn, cases: Sequence[Mapping] = RECAP_CASES, block_macs=None, score_matrix_bytes=None) -> None:
    """Check ``fn(d_model, n_layers, n_heads, n_tokens) -> {"block_flops", "attention_share", "score_bytes_per_layer"}``
    at a GPT-2-style model's longest input: forward FLOPs of all blocks with full score matrices (no output head), the
    scores' share of them, and the bytes of one layer's full 16-bit score matrices.  Given the learner's ``block_macs``
    and ``score_matrix_bytes`` (which ``fn`` may use), a failure on a case re-checks them first (:func:`blames`)."""
    for c in cases:  # each earlier answer re-checked on this case's sizes
        with blames(("block_macs", check_block_macs, block_macs, [dict(n_tokens=c["n_tokens"], d_model=c["d_model"])]),
                    ("score_matrix_bytes", check_score_bytes, score_matrix_bytes, [dict(
                        n_tokens=c["n_tokens"], n_heads=c["n_heads"], bytes_per_number=BYTES_16BIT)])):
            _longest_input(fn, [c])


from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson4")  # one-line pass and fail messages in a notebook (course_lib.tutor)
