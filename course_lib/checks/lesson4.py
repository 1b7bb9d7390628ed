"""Checks for lesson 4, "Position and context".

Each check compares a learner's answer with an independent reference and, on failure, raises
:class:`~course_lib.checks.CheckFailed` naming the likely mistake without showing the expected
value:

* order: a block with no positions, built by ``course_lib.block.TransformerBlock``, is tried on
  permutations (the check decides with its own comparison what the answer must be);
* rotary positions: ``course_lib.positions`` (itself tested against ``transformers``' Llama);
* multiply-adds: ``course_lib.flops.forward_macs`` with ``causal=False`` (the full score matrix);
* bytes: n_tokens² × n_heads × bytes per number, with ``course_lib.units`` for TiB;
* the running softmax: ``course_lib.tiled_attention.online_softmax_update``; the learner's tiled
  attention: ``torch.nn.functional.scaled_dot_product_attention``, and its memory with
  ``course_lib.profiling.measure_peak_extra_memory``.

A learner's function is called so that calling the course_lib function it re-creates fails
(:func:`own_work` for the counters, :func:`_built_by_hand` for positions and attention).
Hidden tests pass inputs the learner has not seen; every case is made from a seed, so a check
gives the same verdict every time.  Every passing case ends in a check primitive
(``check_value``, ``check_close``, ``check_choice``, ``check_sealed``), so that under grading
it publishes a record of the learner's value (course_lib.checks.records).  The test-yourself
answers are sealed (course_lib.checks.sealed): this module holds hashes of them, not the values.
"""
from __future__ import annotations

import math
import numbers
import random
from contextlib import nullcontext
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from .. import positions as _positions
from ..block import TransformerBlock
from ..flops import forward_macs
from ..profiling import measure_peak_extra_memory
from ..shapes import gpt2_shape
from ..tiled_attention import SoftmaxState, initial_state, online_softmax_update
from ..units import GiB
from . import (CheckFailed, check_choice, check_close, check_sealed, check_value, is_shown,
               builds_on, on_hidden, own_work, watch_calls)
from .sealed import load as _load_sealed

SEALED = _load_sealed("lesson4")
"""This assignment's sealed answers by salt (sealed_answers/lesson4.json)."""

# --- the numbers of the lesson ---------------------------------------------------------------

LONG_CONTEXT = 131_072
"""Tokens in the lesson's long-context example (2^17, the "128K" of model cards)."""
LONG_HEADS = 32
"""Heads in that example (a 7B-class shape)."""
BYTES_16BIT = 2
"""Bytes per number in 16-bit (fp16 or bf16)."""
TYS_D_MODEL = 4096
"""The hidden size of the test-yourself question on the crossover."""
FLASH_TILE = 128
"""Tile side (queries and keys) for the FlashAttention figure: 128 × 128 scores at a time."""

RECAP_KEYS = ("block_flops", "attention_share", "score_bytes_per_layer")
MACS_KEYS = ("attention_scores", "weights")

RANDOM_TAG = "[random shape] "
"""How a label marks an input made at run time, from ``random.Random("lesson4/<exercise>")``
(the same on every run, so the grader's run of the model answer tries it too).  Every function
exercise's visible test tries one, so an answer that ignores its arguments fails there."""


def _random_case(name: str, draw) -> dict:
    """One input drawn at run time by ``draw(rng)`` from the seeded ``random.Random``."""
    return draw(random.Random(f"lesson4/{name}"))


def _heads(r: random.Random, widths=(4, 8, 12, 16)) -> dict:
    h = r.randint(1, 4)
    return dict(d_model=h * r.choice(widths), n_heads=h)


RANDOM_CASES = dict(
    permutation=_random_case("permutation", lambda r: dict(
        **_heads(r), batch=r.randint(1, 3), pos=r.randint(4, 9), causal=r.random() < 0.5,
        positions="none", seed=r.randint(10, 999))),
    rotary=_random_case("rotary", lambda r: dict(
        shape=(r.randint(1, 2), r.randint(1, 3), r.randint(3, 9), 2 * r.randint(2, 24)),
        start=r.randint(1, 3000), base=r.choice((50_000.0, 500_000.0, 1_000_000.0)),
        seed=r.randint(10, 999))),
    rotary_score=_random_case("rotary_score", lambda r: dict(
        d_head=2 * r.randint(2, 32), m=r.randint(0, 400), n=r.randint(0, 400),
        seed=r.randint(10, 999))),
    block_macs=_random_case("block_macs", lambda r: dict(
        n_tokens=r.randint(2, 8000), d_model=r.randrange(64, 4097, 64))),
    crossover=_random_case("crossover", lambda r: r.randrange(64, 8193, 64)),
    score_bytes=_random_case("score_bytes", lambda r: dict(
        n_tokens=r.randint(100, 50_000), n_heads=r.randint(1, 64),
        bytes_per_number=r.choice((1, 4)))),
    update=_random_case("update", lambda r: dict(
        batch=(r.randint(1, 3),), block_q=r.randint(2, 8), block_k=r.randint(2, 8),
        d_v=r.randint(2, 8), first=r.random() < 0.5, scale=r.choice((1.0, 30.0)),
        seed=r.randint(10, 999))),
    tiled=_random_case("tiled", lambda r: dict(
        shape=(r.randint(1, 2), r.randint(1, 3), r.randint(10, 60), r.choice((4, 8, 16))),
        causal=r.random() < 0.5, block=r.randint(4, 20), seed=r.randint(10, 999))),
    longest_input=_random_case("longest_input", lambda r: (lambda h: dict(
        d_model=64 * h, n_layers=r.randint(2, 48), n_heads=h, n_tokens=r.randint(256, 65_536)))(
        r.randint(2, 40))),
)
"""The input each visible test draws at run time (see :data:`RANDOM_TAG`)."""


def _tagged(what: str, case, name: str) -> str:
    """``what``, marked with :data:`RANDOM_TAG` when ``case`` is the run-time input of ``name``."""
    return RANDOM_TAG + what if case == RANDOM_CASES[name] else what


PERMUTATION_CASES = (
    dict(d_model=32, n_heads=4, batch=2, pos=7, causal=False, positions="none", seed=0),
    dict(d_model=32, n_heads=4, batch=2, pos=7, causal=True, positions="none", seed=1),
    RANDOM_CASES["permutation"],
)
"""Blocks the visible test tries: one with no order information at all, one causal, and one
made at run time."""

ROTARY_CASES = (dict(shape=(2, 3, 6, 8), start=0, base=10000.0, seed=0),
                dict(shape=(1, 2, 6, 16), positions=(0, 1, 2, 40_000, 100_000, 131_071),
                     base=10000.0, seed=1),
                RANDOM_CASES["rotary"])
"""Visible cases of :func:`check_rotary`: small positions; positions up to 131,071 (where
float32 angles are off); a shape, start and base other than 10000 made at run time."""
ROTARY_SCORE_CASES = (dict(d_head=8, m=5, n=2, seed=0), RANDOM_CASES["rotary_score"])
BLOCK_MACS_CASES = (dict(n_tokens=1024, d_model=768), RANDOM_CASES["block_macs"])
SCORE_BYTES_CASES = (dict(n_tokens=1024, n_heads=12, bytes_per_number=2),
                     RANDOM_CASES["score_bytes"])
UPDATE_CASES = (dict(batch=(2,), block_q=4, block_k=5, d_v=6, first=True, scale=1.0, seed=0),
                dict(batch=(2,), block_q=4, block_k=5, d_v=6, first=False, scale=1.0, seed=1),
                RANDOM_CASES["update"])
TILED_CASES = (dict(shape=(1, 2, 40, 8), causal=False, block=16, seed=0),
               dict(shape=(1, 2, 40, 8), causal=True, block=16, seed=1),
               RANDOM_CASES["tiled"])
RECAP_CASES = (dict(d_model=768, n_layers=12, n_heads=12, n_tokens=1024),
               RANDOM_CASES["longest_input"])
CROSSOVER_D_MODELS = (768, RANDOM_CASES["crossover"])

VENDOR_QUESTIONS = {
    "a": "What are latency and cost per request with an input of 128,000 tokens?",
    "b": "How accurate is it at 128,000 tokens when the fact it needs sits at the start, "
         "in the middle, or at the end of the input?",
    "c": "Was it trained at 128,000 tokens, or trained shorter and extended afterwards?",
    "d": "Does the serving stack use tiled attention (FlashAttention or similar), or does it "
         "build the full score matrix?",
    "e": "How many parameters does the model have in its embedding table?",
    "f": "How fast is it on a 200-token prompt?",
    "g": "Does it use LayerNorm or RMSNorm?",
    "h": "How accurate is it at 128,000 tokens when the fact it needs is always at the end?",
}
"""The list the vendor test-yourself question picks from (letter -> question)."""
# --- helpers ---------------------------------------------------------------------------------

_BUILT_BY_HAND = ("positions.py", "attention.py", "tiled_attention.py", "block.py")


class _AtenOps(TorchDispatchMode):
    """Records the names of the aten operations that run inside it."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(str(func))
        return func(*args, **(kwargs or {}))


def _built_by_hand(fn, *args, what: str, fused_ok: bool = True, **kwargs):
    """Call ``fn(*args, **kwargs)``; fail if it called course_lib's positions or attention code
    (the learner is asked to build it), or, with ``fused_ok=False``, torch's fused
    scaled_dot_product_attention."""
    if not callable(fn):
        raise CheckFailed(f"{what}: expected a function, got {type(fn).__name__}")
    found: list = []
    ops = _AtenOps() if not fused_ok else nullcontext()  # a dispatch mode costs time: only if needed
    with watch_calls(found, dict.fromkeys(_BUILT_BY_HAND)), ops:
        result = fn(*args, **kwargs)
    name = getattr(fn, "__name__", "your function")
    if found:
        raise CheckFailed(f"{name} calls course_lib's own {found[0]}: write it yourself from "
                          "the formula, then use course_lib to compare")
    if not fused_ok and any("scaled_dot_product" in op for op in ops.names):
        raise CheckFailed(f"{name} calls torch's scaled_dot_product_attention: write the tiles "
                          "and the running softmax yourself (torch is the reference it is "
                          "checked against)")
    return result


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tensor_result(got, like: torch.Tensor, what: str, shown: bool = True) -> torch.Tensor:
    """``got`` as a tensor of ``like``'s shape; the shapes are named only for an input the
    visible test passes (``shown``)."""
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what}: expected a tensor, got {type(got).__name__}")
    if tuple(got.shape) != tuple(like.shape):
        if not shown:
            raise CheckFailed(f"{what}: expected the shape of the input, got another shape")
        raise CheckFailed(f"{what}: expected shape {tuple(like.shape)} (the shape of the input), "
                          f"got {tuple(got.shape)}")
    return got.detach()


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    return bool(torch.allclose(a.double(), b.double(), rtol=tol, atol=tol))


def _number(x, what: str) -> float:
    if isinstance(x, torch.Tensor) and x.numel() == 1:
        x = x.item()
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        raise CheckFailed(f"{what}: expected a number, got {type(x).__name__} {x!r:.60}")
    x = float(x)
    if not math.isfinite(x):
        raise CheckFailed(f"{what}: got {x}, which is not a finite number")
    return x


def _label(name: str, case: Mapping) -> str:
    return f"{name}({', '.join(f'{k}={v}' for k, v in case.items() if k != 'seed')})"


# --- 1. attention cannot see order -----------------------------------------------------------

def make_block(d_model: int, n_heads: int, causal: bool, positions: str = "none",
               seed: int = 0) -> TransformerBlock:
    """A GPT-2-style block (course_lib.block.TransformerBlock) with random weights from ``seed``,
    in eval mode.  ``positions="rotary"`` rotates queries and keys inside attention; any other
    kind adds nothing inside a block (learned and sinusoidal positions are added to the
    embeddings, before the first block)."""
    shape = gpt2_shape(d_model=d_model, n_layers=1, n_heads=n_heads, d_vocab=1, n_ctx=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        block = TransformerBlock(shape.with_(positions=positions), causal=causal)
    return block.eval()


def permutation_case(case: Mapping):
    """(block, x, perm) for a case of :data:`PERMUTATION_CASES`: x (batch, pos, d_model) and a
    permutation of the positions that is not its own inverse (so using the inverse by mistake
    shows)."""
    block = make_block(case["d_model"], case["n_heads"], case["causal"],
                       case.get("positions", "none"), case["seed"])
    g = _generator(1000 + case["seed"])
    x = torch.randn(case["batch"], case["pos"], case["d_model"], generator=g)
    perm = torch.randperm(case["pos"], generator=g)
    while bool((perm[perm] == torch.arange(case["pos"])).all()):  # an involution (or identity)
        perm = torch.roll(perm, 1)
    return block, x, perm


def _as_bool(got, what: str) -> bool:
    if isinstance(got, torch.Tensor) and got.numel() == 1 and got.dtype == torch.bool:
        return bool(got.item())
    if type(got).__name__ in ("bool", "bool_"):
        return bool(got)
    raise CheckFailed(f"{what}: return True or False, got {type(got).__name__} {got!r:.60}")


def check_commutes(fn, cases: Sequence[Mapping] = PERMUTATION_CASES) -> None:
    """Check ``fn(block, x, perm) -> bool``: True when running the block on the tokens in the
    order ``perm`` gives the block's outputs in that same order, within rounding.

    The check builds each case's block and decides the right answer with its own comparison
    (and knows which kind of block it is: no positions and no mask must commute, a causal mask
    or rotary positions must not)."""
    for case in cases:
        block, x, perm = permutation_case(case)
        rotary = case.get("positions", "none") == "rotary"
        what = (_label("commutes_with_permutation", {k: case[k] for k in
                                                     ("d_model", "batch", "pos", "causal")} |
                       ({"positions": case["positions"]} if case.get("positions", "none") != "none"
                        else {}))
                if is_shown(case, PERMUTATION_CASES) else
                on_hidden("commutes_with_permutation", f"causal={case['causal']}",
                          "rotary positions" if rotary else ""))
        what = _tagged(what, case, "permutation")
        with torch.no_grad():
            diff = (block(x[:, perm]) - block(x)[:, perm]).abs().max().item()
        expected = diff < 1e-4
        blind = not case["causal"] and case.get("positions", "none") != "rotary"
        if expected != blind:  # the check's own premise failed: a bug here, not the learner's
            raise RuntimeError(f"{what}: max difference {diff:.2e} contradicts the block's kind")
        got = _as_bool(fn(block, x.clone(), perm.clone()), what)
        if got == expected:
            check_choice(got, expected, what=what, choices=(True, False))  # publishes the record
            continue
        if expected:
            raise CheckFailed(
                f"{what} returned False, but this block has no positions and no causal mask, so "
                "it cannot tell the order: its outputs come out in the permuted order, equal "
                "up to rounding. Compare block(x[:, perm]) with block(x)[:, perm] (the same perm "
                "on both sides, not its inverse, on the positions dimension 1) with a tolerance "
                "such as torch.allclose(..., atol=1e-5): float sums in another order differ in "
                "the last bits.")
        kind = "a causal mask" if case["causal"] else "rotary positions"
        raise CheckFailed(
            f"{what} returned True, but this block has {kind}, so the order of the tokens "
            "changes what each one sees: the outputs do not simply move with the inputs. Does "
            "your comparison permute the outputs, and is its tolerance tight (about 1e-5)?")


# --- 2. rotary positions ---------------------------------------------------------------------

def _rotate(x, positions, base, *, sign=1.0, interleaved=False, half_exponent=False,
            repeat_interleave=False):
    """Rotary embedding with optional mistakes, in float64 (x: (..., pos, d_head))."""
    d = x.shape[-1]
    x = x.double()
    i = torch.arange(d // 2, dtype=torch.float64)
    inv = base ** (-(i if half_exponent else 2 * i) / d)                  # (d/2,)
    ang = torch.as_tensor(positions, dtype=torch.float64)[..., None] * inv  # (pos, d/2)
    if interleaved:  # RoFormer's layout: pairs (2i, 2i+1)
        a, b = x[..., 0::2], x[..., 1::2]
        c, s = ang.cos(), sign * ang.sin()
        out = torch.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
        return out
    ang = ang.repeat_interleave(2, dim=-1) if repeat_interleave else torch.cat([ang, ang], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * ang.cos() + sign * torch.cat([-x2, x1], -1) * ang.sin()


def reference_rotary(x, positions, base=10000.0):
    """course_lib's rotary embedding (Llama's halves convention), in x's dtype."""
    cos, sin = _positions.rotary_cos_sin(positions, x.shape[-1], base, dtype=x.dtype)
    return _positions.apply_rotary(x, cos, sin)


def rotary_case(case: Mapping):
    """(x, positions): x (*shape) float32 from the case's seed; positions the case's own list,
    or ``start``, ``start + 1``, ... one per row."""
    g = _generator(2000 + case["seed"])
    x = torch.randn(*case["shape"], generator=g)
    if "positions" in case:
        return x, torch.tensor(case["positions"])
    positions = torch.arange(case["start"], case["start"] + case["shape"][-2])
    return x, positions


_SMALL_POSITION = 1000
"""Below this, float32 angles m·θ_i are still within the check's tolerance."""


def check_rotary(fn, cases: Sequence[Mapping] = ROTARY_CASES) -> None:
    """Check ``fn(x, positions, base) -> x rotated`` against course_lib.positions: x (..., pos,
    d_head) float32, positions (pos,) integers, base (10000 unless a case says)."""
    for case in cases:
        x, positions = rotary_case(case)
        base = case["base"]
        shown = is_shown(case, ROTARY_CASES)
        shown_positions = (list(case["positions"]) if "positions" in case else
                           f"{case['start']}..{case['start'] + x.shape[-2] - 1}")
        what = (_label("rotary", {"x.shape": tuple(x.shape), "positions": shown_positions,
                                  "base": base}) if shown
                else on_hidden("rotary", "positions not starting at 0" if case["start"] else "",
                               "a base other than 10000" if base != 10000 else ""))
        what = _tagged(what, case, "rotary")
        expected = reference_rotary(x, positions, base)
        got = _tensor_result(_built_by_hand(fn, x.clone(), positions.clone(), base, what=what),
                             x, what, shown)
        if not torch.isfinite(got).all():
            raise CheckFailed(f"{what}: the result holds NaN or inf")
        if got.dtype != x.dtype:
            raise CheckFailed(f"{what}: return the dtype of x ({x.dtype}), got {got.dtype}")
        if _close(got, expected, 1e-4):
            check_close(got, expected, what=what, rtol=1e-4, atol=1e-4)
            continue
        mistakes = {
            "it is the input unchanged: nothing was rotated": x.double(),
            "each pair turns the wrong way (the sign of sin is flipped): the pair (a, b) "
            "becomes (a·cos - b·sin, b·cos + a·sin)": _rotate(x, positions, base, sign=-1.0),
            "you paired neighbouring features (2i, 2i+1), RoFormer's layout; here, as in "
            "Llama, feature i pairs with feature i + d_head/2 (the two halves)":
                _rotate(x, positions, base, interleaved=True),
            "the angles are laid out (θ0, θ0, θ1, θ1, ...); with the halves pairing each half "
            "holds all the angles, (θ0, θ1, ..., θ0, θ1, ...)":
                _rotate(x, positions, base, repeat_interleave=True),
            "the frequencies look like base^(-i/d_head); they are θ_i = base^(-2i/d_head) for "
            "i = 0 ... d_head/2 - 1": _rotate(x, positions, base, half_exponent=True),
            "the positions argument is ignored: the rows are rotated as if they sat at 0, 1, 2, "
            "...": _rotate(x, torch.arange(x.shape[-2]), base),
            "the base argument is ignored (10000 was used)": _rotate(x, positions, 10000.0),
        }
        for diagnosis, wrong in mistakes.items():
            if not _close(wrong, expected.double(), 1e-4) and _close(got, wrong, 1e-4):
                raise CheckFailed(f"{what} is not right: {diagnosis}.")
        norm_kept = _close(got.norm(dim=-1), x.norm(dim=-1), 1e-4)
        err = (got.double() - expected.double()).abs().amax(-1).reshape(-1, x.shape[-2]).amax(0)
        row_ok = err <= 1e-4 * (1 + expected.abs().amax(-1).reshape(-1, x.shape[-2]).amax(0))
        small = positions < _SMALL_POSITION
        if norm_kept and small.any() and bool(row_ok[small].all()) and not bool(row_ok.all()):
            raise CheckFailed(
                f"{what} is not right: it is right at the small positions and off at the large "
                "ones (40,000 and beyond), as when the angles m·θ_i are computed in float32, "
                "which rounds an angle near 100,000 radians by up to about 0.004. Compute θ_i and "
                "the angles in torch.float64, then cast cos and sin to x.dtype.")
        raise CheckFailed(f"{what} is not right" + (
            ": it keeps each vector's length, as a rotation should, but turns by the wrong "
            "angles; check θ_i and the angle m·θ_i for position m, and compute the angles in "
            "torch.float64 (float32 cannot hold a large angle precisely)." if norm_kept else
            ": a rotation keeps each vector's length, and yours changes it; check that each "
            "pair becomes (a·cos - b·sin, b·cos + a·sin) with the same angle in both."))


def rotary_score_case(case: Mapping):
    g = _generator(3000 + case["seed"])
    return torch.randn(case["d_head"], generator=g), torch.randn(case["d_head"], generator=g)


def reference_rotary_score(q, k, m, n, base=10000.0) -> float:
    """(q rotated to position m) · (k rotated to position n) / sqrt(d_head), by course_lib."""
    qm = reference_rotary(q.double()[None], torch.tensor([m]), base)[0]
    kn = reference_rotary(k.double()[None], torch.tensor([n]), base)[0]
    return (qm @ kn).item() / math.sqrt(q.shape[-1])


def _isclose(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)


def check_rotary_score(fn, cases: Sequence[Mapping] = ROTARY_SCORE_CASES) -> None:
    """Check ``fn(q, k, m, n) -> float``: the scaled score of query q at position m against key
    k at position n, both rotated; and that it stays the same when m and n move together."""
    for case in cases:
        q, k = rotary_score_case(case)
        m, n, d = case["m"], case["n"], case["d_head"]
        shown = is_shown(case, ROTARY_SCORE_CASES)
        what = (f"rotary_score(q, k, m={m}, n={n}) with d_head={d}" if shown else
                on_hidden("rotary_score", "query and key at the same position" if m == n else ""))
        what = _tagged(what, case, "rotary_score")
        expected = reference_rotary_score(q, k, m, n)
        got = _number(_built_by_hand(fn, q.clone(), k.clone(), m, n, what=what), what)
        if not _isclose(got, expected):
            mistakes = {
                "the scale is missing: divide the dot product by sqrt(d_head)":
                    expected * math.sqrt(d),
                "that divides by d_head; the scale is 1/sqrt(d_head)": expected / math.sqrt(d),
                "only the query is rotated: rotate the key by its own position n too":
                    reference_rotary_score(q, k, m, 0),
                "m and n are swapped: the query sits at m and the key at n":
                    reference_rotary_score(q, k, n, m),
                "both vectors are rotated to the same position, so the positions cancel":
                    reference_rotary_score(q, k, 0, 0),
            }
            for diagnosis, wrong in mistakes.items():
                if not _isclose(wrong, expected) and _isclose(got, wrong):
                    raise CheckFailed(f"{what} is not right: {diagnosis}.")
            raise CheckFailed(f"{what} is not right. If it uses your rotary, make sure its test "
                              "passes first.")
        check_close(got, expected, what=what, rtol=1e-4, atol=1e-4)
        for shift in (1, 7, 100):
            moved = _number(_built_by_hand(fn, q.clone(), k.clone(), m + shift, n + shift,
                                           what=what), what)
            by = f"by {shift}" if shown else "by the same amount"  # m + shift: a hidden position
            if not _isclose(moved, got):
                raise CheckFailed(f"{what}: moving both positions {by} changed the score; "
                                  "with rotary positions it depends only on the offset m - n.")
            check_close(moved, expected, what=f"{what}, both moved {by}", rtol=1e-4, atol=1e-4)


# --- 3. what attention costs -----------------------------------------------------------------

def _block_shape(d_model: int):
    return gpt2_shape(d_model=d_model, n_layers=1, n_heads=1, d_vocab=1, n_ctx=1)


def check_block_macs(fn, cases: Sequence[Mapping] = BLOCK_MACS_CASES) -> None:
    """Check ``fn(n_tokens, d_model) -> {"attention_scores": ..., "weights": ...}``: the
    multiply-adds of one GPT-2-style block over n_tokens with the full score matrix, against
    ``forward_macs(..., causal=False)``."""
    for case in cases:
        n, d = case["n_tokens"], case["d_model"]
        what = _tagged(_label("block_macs", case) if is_shown(case, BLOCK_MACS_CASES)
                       else on_hidden("block_macs"), case, "block_macs")
        got = own_work(fn, n, d)
        if not isinstance(got, Mapping) or any(k not in got for k in MACS_KEYS):
            raise CheckFailed(f"{what}: return a dict with keys 'attention_scores' and "
                              f"'weights', got {type(got).__name__} {got!r:.80}")
        ref = forward_macs(_block_shape(d), n, causal=False)
        check_value(got["attention_scores"], ref.attention_scores,
                    what=f"{what}['attention_scores']", rel=1e-9, mistakes={
                        "that is FLOPs; count multiply-adds (FLOPs = 2 × multiply-adds)":
                            2 * ref.attention_scores,
                        "that is only q·kᵀ: the weighted sum of the values costs as much again":
                            n * n * d,
                        "that counts only the causal half (n(n+1)/2 pairs); the question counts "
                        "the full n × n matrix": n * (n + 1) * d,
                        "that is one token's scores (2·n·d_model); the question asks for all "
                        "n_tokens": 2 * n * d,
                    })
        check_value(got["weights"], ref.weights, what=f"{what}['weights']", rel=1e-9, mistakes={
            "that is FLOPs; count multiply-adds (FLOPs = 2 × multiply-adds)": 2 * ref.weights,
            "that is attention's four projections only (4·n·d_model²): add the feed-forward "
            "layer's 8·n·d_model²": 4 * n * d * d,
            "that is the feed-forward layer only (8·n·d_model²): add the four attention "
            "projections' 4·n·d_model²": 8 * n * d * d,
            "that is one token (12·d_model²); multiply by n_tokens": 12 * d * d,
            "the feed-forward layer is 4·d_model wide, so its two matrices cost 8·n·d_model²":
                6 * n * d * d,
        })


def crossover_expected(d_model: int) -> int:
    """The length where the score multiply-adds equal the weights' (both from forward_macs):
    n · 2·d_model = 12·d_model², so n = 6·d_model."""
    s = _block_shape(d_model)
    per_token = forward_macs(s, 1, causal=False)
    per_pair = per_token.attention_scores  # one token against one key: 2·d_model
    n = per_token.weights // per_pair
    ref = forward_macs(s, n, causal=False)
    assert ref.attention_scores == ref.weights
    return n


def _crossover_mistakes(d: int) -> dict:
    return {
        "at that length attention costs twice the rest: one side looks like FLOPs and the other "
        "multiply-adds, or the values' weighted sum is missing (n²·d_model instead of "
        "2·n²·d_model), or only the causal half of the pairs is counted (the question counts "
        "the full n × n matrix)": 12 * d,
        "that puts attention's own projections (4·n·d_model²) on attention's side and leaves "
        "the feed-forward layer as the rest, or compares the scores with the projections "
        "alone: here attention is its two score products only, and the rest of the block, "
        "12·n·d_model², includes the projections": 2 * d,
        "that compares the scores with the feed-forward layer only (8·n·d_model²), or counts "
        "the projections on both sides: the rest of the block is 12·n·d_model², projections "
        "included, and attention is its two score products alone": 4 * d,
        "that is d_model itself: solve 2·n²·d_model = 12·n·d_model² for n": d,
        "that is the square of d_model: both sides have a factor n·d_model to cancel": d * d,
        "attention costs about 2·n²·d_model, so the crossover grows with d_model: 6 × d_model": 6,
    }


def check_crossover(fn, d_models: Sequence[int] = CROSSOVER_D_MODELS) -> None:
    """Check ``fn(d_model) -> n``, the sequence length where attention's scores cost as many
    multiply-adds as the rest of a GPT-2-style block."""
    for d in d_models:
        what = _tagged(f"crossover_length(d_model={d})" if d in CROSSOVER_D_MODELS
                       else on_hidden("crossover_length"), d, "crossover")
        with builds_on("block_macs"):
            check_value(own_work(fn, d), crossover_expected(d), what=what, rel=1e-9,
                        mistakes=_crossover_mistakes(d))


# --- 4. the score matrix in memory -----------------------------------------------------------

def score_bytes_expected(n_tokens: int, n_heads: int, bytes_per_number: float) -> float:
    """Bytes of one layer's full score matrices: n_tokens² scores per head."""
    return n_tokens * n_tokens * n_heads * bytes_per_number


def _score_byte_mistakes(n: int, h: int, b: float) -> dict:
    right = score_bytes_expected(n, h, b)
    return {
        "that is bits, not bytes (a 16-bit number takes 2 bytes, not 16)": right * 8,
        "that is twice the score matrices: it counts the softmax weights too; the question "
        "counts the scores alone, one n_tokens × n_tokens matrix per head": right * 2,
        "that is one head's matrix: every head has its own n × n scores": right / h,
        "that counts the causal half only; the full matrix has n × n entries": n * (n + 1) // 2 * h * b,
        "the bytes per number are missing: that is the count of scores": right / b,
    }


def check_score_bytes(fn, cases: Sequence[Mapping] = SCORE_BYTES_CASES) -> None:
    """Check ``fn(n_tokens, n_heads, bytes_per_number) -> bytes`` of one layer's full score
    matrices."""
    for case in cases:
        n, h, b = case["n_tokens"], case["n_heads"], case["bytes_per_number"]
        what = _tagged(_label("score_matrix_bytes", case) if is_shown(case, SCORE_BYTES_CASES)
                       else on_hidden("score_matrix_bytes"), case, "score_bytes")
        check_value(own_work(fn, n, h, b), score_bytes_expected(n, h, b), what=what, rel=1e-9,
                    mistakes=_score_byte_mistakes(n, h, b))


# The fixed figures (score_tib here, flash_tile_kib and flash_shrink below) are sealed
# (course_lib.checks.sealed) with the tolerance the checks always had (1e-6): salted hashes of the
# forms that count as right and of those the usual mistakes give.  Regenerate with
# ``python -m course_lib.checks.seal`` (salt lesson4/<what>).

SCORE_TIB = SEALED['lesson4/score_tib']


def check_score_tib(tib) -> None:
    """The lesson's figure: TiB of one layer's score matrices at LONG_CONTEXT tokens,
    LONG_HEADS heads, 16-bit (sealed)."""
    with builds_on("score_matrix_bytes"):
        check_sealed(tib, SCORE_TIB)


# --- 5. tiled attention ----------------------------------------------------------------------

def update_case(case: Mapping):
    """(state, scores_tile, v_tile) for a case of :data:`UPDATE_CASES`.  Scores are scaled by
    ``case["scale"]`` (large scales overflow exp without the running maximum) and some are
    -inf (masked), but every row keeps at least one visible score in the tile, or has one in
    the state already."""
    g = _generator(4000 + case["seed"])
    batch, bq, bk, dv = tuple(case["batch"]), case["block_q"], case["block_k"], case["d_v"]
    state = initial_state(batch, bq, dv)
    if not case["first"]:  # a state after one earlier tile
        earlier = torch.randn(*batch, bq, bk, generator=g) * case["scale"]
        state = online_softmax_update(state, earlier, torch.randn(*batch, bk, dv, generator=g))
    scores = torch.randn(*batch, bq, bk, generator=g) * case["scale"] + 2.0
    hidden = torch.rand(*batch, bq, bk, generator=g) < 0.3
    hidden[..., 0] = False  # one visible key per row
    scores = scores.masked_fill(hidden, -math.inf)
    v = torch.randn(*batch, bk, dv, generator=g)
    return state, scores, v


def _update_variants(state: SoftmaxState, s, v) -> dict:
    m_new = torch.maximum(state.m, s.amax(-1))
    r = torch.exp(state.m - m_new)
    p = torch.exp(s - m_new[..., None])
    right_l, right_acc = state.l * r + p.sum(-1), state.acc * r[..., None] + p @ v
    inv = torch.exp(m_new - state.m)
    p_old = torch.exp(s - torch.where(torch.isinf(state.m), s.amax(-1), state.m)[..., None])
    return {
        "acc": {
            "the old acc is not rescaled: multiply it by exp(m - m_new) before adding the new "
            "tile, as you did for l": state.acc + p @ v,
            "the rescaling factor is inverted: old sums shrink by exp(m - m_new), which is at "
            "most 1": state.acc * inv[..., None] + p @ v,
            "the new tile's exponentials use the old maximum m; use m_new for both":
                state.acc * r[..., None] + p_old @ v,
            "that is acc / l (the normalised output); keep the unnormalised sum in the state":
                right_acc / right_l[..., None],
        },
        "l": {
            "the old l is not rescaled: multiply it by exp(m - m_new) before adding the new "
            "tile's sum": state.l + p.sum(-1),
            "the rescaling factor is inverted: old sums shrink by exp(m - m_new), which is at "
            "most 1": state.l * inv + p.sum(-1),
            "the new tile's exponentials use the old maximum m; use m_new for both":
                state.l * r + p_old.sum(-1),
        },
        "m": {
            "m must be the largest score seen so far, the old m or this tile's maximum, "
            "whichever is larger": s.amax(-1),
        },
    }


def check_softmax_update(fn, cases: Sequence[Mapping] = UPDATE_CASES) -> None:
    """Check ``fn(m, l, acc, scores_tile, v_tile) -> (m, l, acc)`` against
    course_lib.tiled_attention.online_softmax_update."""
    for case in cases:
        state, s, v = update_case(case)
        shown = is_shown(case, UPDATE_CASES)
        what = (_label("softmax_update", {"batch": tuple(case["batch"]), "block_q": case["block_q"],
                                          "block_k": case["block_k"], "d_v": case["d_v"],
                                          "first tile": case["first"]}) if shown else
                on_hidden("softmax_update", "the first tile" if case["first"] else "a later tile",
                          "large scores" if abs(case["scale"]) > 10 else ""))
        what = _tagged(what, case, "update")
        expected = online_softmax_update(state, s, v)
        got = _built_by_hand(fn, state.m.clone(), state.l.clone(), state.acc.clone(), s.clone(),
                             v.clone(), what=what)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            raise CheckFailed(f"{what}: return three tensors (m, l, acc), got "
                              f"{type(got).__name__} {got!r:.60}")
        variants = _update_variants(state, s, v)
        for name, g_, e_ in zip(("m", "l", "acc"), got, expected):
            g_ = _tensor_result(g_, e_, f"{what}, {name}", shown)
            if torch.isnan(g_).any():
                raise CheckFailed(f"{what}: {name} holds NaN. On the first tile m is -inf and "
                                  "l and acc are 0: the old sums must be multiplied by "
                                  "exp(m - m_new), which is 0 there (exp(m_new - m) would be inf, "
                                  "and inf × 0 is NaN).")
            if torch.isinf(g_).any() and not torch.isinf(e_).any():
                raise CheckFailed(f"{what}: {name} overflows to inf. Subtract the running "
                                  "maximum before exp: exp(scores - m_new).")
            if _close(g_, e_, 1e-5):
                check_close(g_, e_, what=f"{what}, {name}", rtol=1e-5, atol=1e-5)
                continue
            for diagnosis, wrong in variants.get(name, {}).items():
                if not _close(wrong, e_, 1e-5) and _close(g_, wrong, 1e-5):
                    raise CheckFailed(f"{what}, {name} is not right: {diagnosis}.")
            raise CheckFailed(f"{what}, {name} is not right: with m_new = max(m, rowmax of the "
                              "tile), l becomes l·exp(m - m_new) + rowsum(exp(scores - m_new)) and "
                              "acc becomes acc·exp(m - m_new) + exp(scores - m_new) @ v.")


def tiled_case(case: Mapping):
    g = _generator(5000 + case["seed"])
    return torch.randn(3, *case["shape"], generator=g).unbind(0)


def _masked_reference(q, k, v, *, diagonal: int, scale: float | None = None):
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)


def check_tiled_attention(fn, cases: Sequence[Mapping] = TILED_CASES,
                          memory_n: int = 512) -> None:
    """Check ``fn(q, k, v, causal, block) -> (..., n, d_head)`` against torch's
    scaled_dot_product_attention (is_causal for causal), and that it never holds a tensor as
    large as half the score matrix (measured with course_lib.profiling at n = memory_n)."""
    for case in cases:
        q, k, v = tiled_case(case)
        causal, block = case["causal"], case["block"]
        shown, n = is_shown(case, TILED_CASES), q.shape[-2]
        what = (_label("my_tiled_attention", {"q.shape": tuple(q.shape), "causal": causal,
                                              "block": block}) if shown else
                on_hidden("my_tiled_attention", f"causal={causal}",
                          "one tile longer than the input" if block >= n else
                          "a last tile shorter than the block" if n % block else ""))
        what = _tagged(what, case, "tiled")
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        got = _built_by_hand(fn, q.clone(), k.clone(), v.clone(), causal=causal, block=block,
                             what=what, fused_ok=False)
        got = _tensor_result(got, expected, what, shown)
        if _close(got, expected, 1e-4):
            check_close(got, expected, what=what, rtol=1e-4, atol=1e-4)
            continue
        if torch.isnan(got).any():
            raise CheckFailed(f"{what}: the output holds NaN. A query that sees no key at all "
                              "gives 0/0: does the mask hide the diagonal? A query may look at "
                              "its own key (mask only the keys after it)."
                              + ("" if causal else " (This case is not even causal.)"))
        d = q.shape[-1]
        mistakes = {
            "the scale is missing: divide the scores by sqrt(d_head)":
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0),
            "the scale is 1/d_head; it is 1/sqrt(d_head)":
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0 / d),
        }
        if causal:
            mistakes.update({
                "the causal mask is missing: query i may see keys 0 ... i only":
                    F.scaled_dot_product_attention(q, k, v),
                "the mask is off by one: each query also sees the next key":
                    _masked_reference(q, k, v, diagonal=1),
                "the mask is off by one: each query misses its own key (and query 0 sees "
                "nothing)": _masked_reference(q, k, v, diagonal=-1),
            })
        else:
            mistakes["a causal mask was applied, but causal=False here"] = \
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
        for diagnosis, wrong in mistakes.items():
            if not _close(wrong, expected, 1e-4) and _close(got, wrong, 1e-4):
                raise CheckFailed(f"{what} is not right: {diagnosis}.")
        raise CheckFailed(f"{what} is not right. If it uses your softmax_update, make sure its "
                          "test passes first; after the last key tile the output is acc / l.")
    # Memory: a tiled version never holds anything that grows with n², in any dtype (a full
    # n × n bool mask is as much a score-matrix-sized tensor as the scores themselves).
    block = 64
    q, k, v = tiled_case(dict(shape=(1, 1, memory_n, 32), seed=99))
    for causal in (False, True):
        mem = measure_peak_extra_memory(fn, q, k, v, causal=causal, block=block)
        too_big = mem.most_numbers >= memory_n * memory_n // 4
        if too_big:
            dtype = str(mem.most_numbers_dtype).replace("torch.", "")
            raise CheckFailed(
                f"my_tiled_attention(n={memory_n}, block={block}, causal={causal}) allocated a "
                f"tensor of shape {mem.most_numbers_shape} ({dtype}, {mem.most_numbers:,} "
                f"numbers): a quarter of the {memory_n} × {memory_n} score matrix or more. "
                "Tiled attention holds nothing that grows with n², in any dtype: one block × "
                "block tile of scores at a time, and for causal=True each tile's mask made from "
                "that tile's positions, not a full n × n mask.")
        # the record says only that the check passed, not the bytes (they vary)
        check_choice(too_big, False, what=f"my_tiled_attention(n={memory_n}, causal={causal}) "
                     "holds a quarter of the score matrix's numbers", choices=(True, False))


FLASH_TILE_KIB = SEALED['lesson4/flash_tile_kib']

FLASH_SHRINK = SEALED['lesson4/flash_shrink']


def check_flash(tile_kib, shrink) -> None:
    """FlashAttention's figure: KiB of one FLASH_TILE × FLASH_TILE tile of 16-bit scores, and
    how many times smaller it is than one head's full score matrix at LONG_CONTEXT tokens
    (both sealed)."""
    check_sealed(tile_kib, FLASH_TILE_KIB)
    check_sealed(shrink, FLASH_SHRINK)


# --- test yourself and recap -----------------------------------------------------------------
# The test-yourself answers are sealed (course_lib.checks.sealed): salted hashes of the forms that
# count as right and of those the usual mistakes give, so neither this file nor a message shows
# them.  tys_crossover: 0.5 % tolerance (an answer up to half as much again outside may pass, see
# sealed.py); tys_vendor: "yes" or "no" for each letter.  Regenerate with
# ``python -m course_lib.checks.seal`` from values worked out in a scratch session.

TYS_CROSSOVER = SEALED['lesson4/tys_crossover']

VENDOR_SEALED = {
    'a': SEALED['lesson4/tys_vendor/a'],
    'b': SEALED['lesson4/tys_vendor/b'],
    'c': SEALED['lesson4/tys_vendor/c'],
    'd': SEALED['lesson4/tys_vendor/d'],
    'e': SEALED['lesson4/tys_vendor/e'],
    'f': SEALED['lesson4/tys_vendor/f'],
    'g': SEALED['lesson4/tys_vendor/g'],
    'h': SEALED['lesson4/tys_vendor/h'],
}
"""Letter -> its sealed "yes" (worth asking) or "no"."""

def check_tys_crossover(n_tokens) -> None:
    """Test-yourself: the length where attention starts to cost more than the rest of a block
    with d_model = TYS_D_MODEL (sealed; 0.5 % tolerance)."""
    check_sealed(n_tokens, TYS_CROSSOVER)


def check_tys_vendor(letters) -> None:
    """Test-yourself: the questions worth asking a vendor about a 128,000-token context, as a
    set (or string, or list) of letters from VENDOR_QUESTIONS; each letter's yes or no is
    sealed."""
    if isinstance(letters, str):
        picked = {c for c in letters.lower() if c.isalpha()}
    elif isinstance(letters, (set, frozenset, list, tuple)) and all(isinstance(c, str) for c in letters):
        picked = {c.strip().lower() for c in letters}
    else:
        raise CheckFailed(f"tys_vendor: give a set of letters such as {{'a', 'x'}}, got "
                          f"{type(letters).__name__}")
    unknown = sorted(picked - set(VENDOR_QUESTIONS))
    if unknown:
        raise CheckFailed(f"tys_vendor: {', '.join(map(repr, unknown))} is not one of the "
                          f"letters {', '.join(VENDOR_QUESTIONS)}")
    for letter in VENDOR_QUESTIONS:
        check_sealed("yes" if letter in picked else "no", VENDOR_SEALED[letter])


def check_longest_input(fn, cases: Sequence[Mapping] = RECAP_CASES) -> None:
    """Check ``fn(d_model, n_layers, n_heads, n_tokens) -> {"block_flops", "attention_share",
    "score_bytes_per_layer"}`` for a GPT-2-style model at its longest input: forward FLOPs of
    all blocks with full score matrices (the output head aside), the share of those in the
    scores, and the bytes of one layer's full 16-bit score matrices."""
    for case in cases:
        d, L, h, n = (case[k] for k in ("d_model", "n_layers", "n_heads", "n_tokens"))
        what = _tagged(_label("longest_input", case) if is_shown(case, RECAP_CASES)
                       else on_hidden("longest_input"), case, "longest_input")
        got = own_work(fn, d, L, h, n)
        if not isinstance(got, Mapping) or any(k not in got for k in RECAP_KEYS):
            raise CheckFailed(f"{what}: return a dict with keys "
                              f"{', '.join(map(repr, RECAP_KEYS))}, got {type(got).__name__} "
                              f"{got!r:.80}")
        m = forward_macs(gpt2_shape(d_model=d, n_layers=L, n_heads=h, d_vocab=1, n_ctx=n), n,
                         causal=False)
        macs = m.attention_scores + m.weights
        with builds_on("block_macs"):
            check_value(got["block_flops"], 2 * macs, what=f"{what}['block_flops']", rel=1e-9,
                        mistakes={
                            "that is multiply-adds; FLOPs = 2 × multiply-adds": macs,
                            "that is one block; there are n_layers of them": 2 * macs / L,
                            "that counts only the causal half of the scores; count the full "
                            "matrices, as the lesson does":
                                2 * (m.weights + m.attention_scores * (n + 1) / (2 * n)),
                            "the attention scores are missing": 2 * m.weights,
                            "that multiplies the scores by n_heads: n_heads × d_head is d_model "
                            "already": 2 * (m.weights + h * m.attention_scores),
                        })
            share = m.attention_scores / macs
            check_value(got["attention_share"], share, what=f"{what}['attention_share']",
                        rel=1e-6, mistakes={
                            "that is attention ÷ the rest of the block, a ratio; the share is "
                            "attention ÷ (attention + the rest)": m.attention_scores / m.weights,
                            "give a fraction between 0 and 1, not a percentage": 100 * share,
                            "that is the rest's share; the question asks for attention's":
                                1 - share,
                        })
        b = score_bytes_expected(n, h, BYTES_16BIT)
        with builds_on("score_matrix_bytes"):
            check_value(got["score_bytes_per_layer"], b, what=f"{what}['score_bytes_per_layer']",
                        rel=1e-9, mistakes={**_score_byte_mistakes(n, h, BYTES_16BIT),
                                            "that is all layers; the question asks for one": b * L,
                                            "that is in GiB; give bytes": b / GiB})


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson4")  # one-line pass and fail messages in a notebook (checks.tutor)
