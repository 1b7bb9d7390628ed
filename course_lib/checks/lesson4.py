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
from ..units import GB, GiB, TB, TiB
from . import (CheckFailed, check_choice, check_close, check_sealed, check_value, is_shown,
               builds_on, on_hidden, own_work, watch_calls)
from .sealed import Sealed

# --- the numbers of the lesson ---------------------------------------------------------------

LONG_CONTEXT = 131_072
"""Tokens in the module's long-context example (2^17, the "128K" of model cards)."""
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

PERMUTATION_CASES = (
    dict(d_model=32, n_heads=4, batch=2, pos=7, causal=False, positions="none", seed=0),
    dict(d_model=32, n_heads=4, batch=2, pos=7, causal=True, positions="none", seed=1),
)
"""Blocks the visible test tries: one with no order information at all, one causal."""

ROTARY_CASES = (dict(shape=(2, 3, 6, 8), start=0, base=10000.0, seed=0),)
ROTARY_SCORE_CASES = (dict(d_head=8, m=5, n=2, seed=0),)
BLOCK_MACS_CASES = (dict(n_tokens=1024, d_model=768),)
SCORE_BYTES_CASES = (dict(n_tokens=1024, n_heads=12, bytes_per_number=2),)
UPDATE_CASES = (dict(batch=(2,), block_q=4, block_k=5, d_v=6, first=True, scale=1.0, seed=0),
                dict(batch=(2,), block_q=4, block_k=5, d_v=6, first=False, scale=1.0, seed=1))
TILED_CASES = (dict(shape=(1, 2, 40, 8), causal=False, block=16, seed=0),
               dict(shape=(1, 2, 40, 8), causal=True, block=16, seed=1))
RECAP_CASES = (dict(d_model=768, n_layers=12, n_heads=12, n_tokens=1024),)
CROSSOVER_D_MODELS = (768,)

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
    g = _generator(2000 + case["seed"])
    x = torch.randn(*case["shape"], generator=g)
    positions = torch.arange(case["start"], case["start"] + case["shape"][-2])
    return x, positions


def check_rotary(fn, cases: Sequence[Mapping] = ROTARY_CASES) -> None:
    """Check ``fn(x, positions, base) -> x rotated`` against course_lib.positions: x (..., pos,
    d_head) float32, positions (pos,) integers, base (10000 unless a case says)."""
    for case in cases:
        x, positions = rotary_case(case)
        base = case["base"]
        shown = is_shown(case, ROTARY_CASES)
        what = (_label("rotary", {"x.shape": tuple(x.shape), "positions": f"{case['start']}.."
                                  f"{case['start'] + x.shape[-2] - 1}", "base": base}) if shown
                else on_hidden("rotary", "positions not starting at 0" if case["start"] else "",
                               "a base other than 10000" if base != 10000 else ""))
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
        raise CheckFailed(f"{what} is not right" + (
            ": it keeps each vector's length, as a rotation should, but turns by the wrong "
            "angles; check θ_i and the angle m·θ_i for position m." if norm_kept else
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
        what = (_label("block_macs", case) if is_shown(case, BLOCK_MACS_CASES)
                else on_hidden("block_macs"))
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
        "2·n²·d_model)": 12 * d,
        "that compares attention with the four attention projections only (4·n·d_model²); the "
        "rest of the block is 12·n·d_model²": 2 * d,
        "that compares attention with the feed-forward layer only (8·n·d_model²); the rest of "
        "the block is 12·n·d_model²": 4 * d,
        "that is d_model itself: solve 2·n²·d_model = 12·n·d_model² for n": d,
        "that is the square of d_model: both sides have a factor n·d_model to cancel": d * d,
        "attention costs about 2·n²·d_model, so the crossover grows with d_model: 6 × d_model": 6,
    }


def check_crossover(fn, d_models: Sequence[int] = CROSSOVER_D_MODELS) -> None:
    """Check ``fn(d_model) -> n``, the sequence length where attention's scores cost as many
    multiply-adds as the rest of a GPT-2-style block."""
    for d in d_models:
        what = (f"crossover_length(d_model={d})" if d in CROSSOVER_D_MODELS
                else on_hidden("crossover_length"))
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
        "that is one head's matrix: every head has its own n × n scores": right / h,
        "that counts the causal half only; the full matrix has n × n entries": n * (n + 1) // 2 * h * b,
        "the bytes per number are missing: that is the count of scores": right / b,
    }


def check_score_bytes(fn, cases: Sequence[Mapping] = SCORE_BYTES_CASES) -> None:
    """Check ``fn(n_tokens, n_heads, bytes_per_number) -> bytes`` of one layer's full score
    matrices."""
    for case in cases:
        n, h, b = case["n_tokens"], case["n_heads"], case["bytes_per_number"]
        what = (_label("score_matrix_bytes", case) if is_shown(case, SCORE_BYTES_CASES)
                else on_hidden("score_matrix_bytes"))
        check_value(own_work(fn, n, h, b), score_bytes_expected(n, h, b), what=what, rel=1e-9,
                    mistakes=_score_byte_mistakes(n, h, b))


# The fixed figures (score_tib here, flash_tile_kib and flash_shrink below) are sealed
# (course_lib.checks.sealed) with the tolerance the checks always had (1e-6): salted hashes of the
# forms that count as right and of those the usual mistakes give.  Regenerate with
# ``python -m course_lib.checks.seal`` (salt lesson4/<what>).

SCORE_TIB = Sealed(
    what='score_tib', salt='lesson4/score_tib', kind='number', digits=8,
    right=('0147db1128d1d030', '04990cdedec8135f', '05d0c99cbab56e85', '074fa776590aeb78',
           '07add0f346bea2e2', '07feb69af8b580e7', '083ed5dce826d382', '0852b5168df22bfe',
           '092ed0eb1a9c2069', '0995d671fd6d0415', '0a81384d7f55fdf3', '0b37a5c5e927d2df',
           '0e79a02d8d47f770', '0fd9a0fac58f0562', '135949647ff80993', '1725289fb4c74db7',
           '17288471b70514bc', '1aeec8b722c97ce5', '234a8c2b36a6bc0d', '25180d82be3b5c52',
           '268d7d124777f188', '269649082bc52f84', '28e492c5da38e5c6', '292eba816681a9e9',
           '29e384a4521bc07d', '2af9c3464fc79db3', '2d970527707a54ae', '2f07dae2e4a727f2',
           '2f4ee79dcff6eda5', '309352734922b26b', '32070e18202032b0', '35df09a80dce3edb',
           '399d71fb8dfbb0b7', '440d111385b328af', '46939d17d2f3ec4a', '47dc55fac81fcd90',
           '486b74f02cbd9a22', '4a08dcf93120c4d7', '4a4d202e1e992365', '4d48f59bfd26fd80',
           '4e9fb0e1b9c39f06', '4fc712979a6100e5', '59640d98d2b10fda', '5ddf5e882de78ba3',
           '5e3feba21b5bb977', '5f345236eb7aa291', '5f502bb283414948', '644e28360160899d',
           '683c0c97a75f43b7', '6beaf09e31c7bcdb', '6cb031127883afb2', '6d9182e67d3dd206',
           '6f68411e46862deb', '791ab09f7328a7ee', '7e7c12a82175c1ae', '8005c8f31dd2bfba',
           '83b0eb146f4ac834', '859a188546895c82', '8946641961867011', '8a7c5a4643d7135a',
           '8e03d70d3aa223e8', '8eaa30668d7b3049', '90e54e195f2102fd', '90eea57b44f65099',
           '9af89173e35553be', '9d6b1101b002b33e', '9dc574d17f53007d', 'a20c4c55ae32976a',
           'a2831f13a8bb74c7', 'a363bc5cc375753e', 'a3e10d67d858de2e', 'a71db0e28bf0dc0d',
           'a79213355d01bd1f', 'a7e398630b6ff430', 'a94d40b9f64958c1', 'b215e075881978c5',
           'b2333fa572ed00b6', 'b602464aabb1a90e', 'b8750470d97e3388', 'b8ae410019837542',
           'ba72c3b3c511c466', 'bf618c09238789e0', 'bfbf1b4ddc78cbbf', 'c18fdd5a4c5855ce',
           'c38ddec15cd3b8f0', 'c461ea4112ed34d2', 'c9e48253dac4289d', 'cb1a5b856b670746',
           'd1c57e3553317ab4', 'd25428dffb9535e2', 'd340b5eef67e767e', 'd52d6808aaa904b8',
           'd55bb5dd0b620e03', 'df728b1207f73f7f', 'dfcf49c0ed36b2be', 'e072792578608827',
           'e2f355333d08dfd8', 'e356d575b2b75987', 'e5ba3faa367c1ee1', 'ec658bac4b043fb2',
           'eccb84e80cd2a621', 'ecdff9e8029fe7fb', 'ef5af50698a159d9', 'ef80e42b11647347',
           'f4621e0cd598fdc2', 'f7c94f67b8df848b', 'f9258615c22bf373', 'fae468879e725046',
           'fb5699f6dcdff4cd', 'fc3b70c275481467', 'ff6b12153468f993',),
    mistakes=(
        ('that is in TB (10^12 bytes); the question asks for TiB (2^40 bytes)',
         ('03da55735e885f43', '0b155c86b3548992', '15328fe89e568f1b', '2ff93a5f008a020b',
          '3ea425cded03fbeb', '535cdfd9d9f6c3ee', '572e3bf816a1a5d0', '584377cc2ac1288d',
          '5925f0de74f3e50d', '7c2159090af3cb2f', '89ea7720dfc73ed9', 'a2ad1f4bc535b5d5',
          'b0322d5c3aac4c3e', 'b860f515f347e971', 'bdff33a0c2b6f98b', 'c31272e6eff74bef',
          'cecebf7ff2755c57', 'cf32ee5588ab239b', 'd4ee09b0b0f04f07', 'e648114581916e10',
          'f074725cef13bb30', 'f225292b9a139b59', 'f561aa80db936afc',)),
        ('that is in GiB; divide by 2^40 for TiB',
         ('16e6890ba2c20724', '24652ae781e0a870', '368ab9dec0607fb9', '5aaf7fda449e80dd',
          '7d18476db154a7c3', '7ebae7b990b8477a', '808fcca8b841e65e', '87fe42aee8a6ce68',
          '8a59144a3b24cae2', '9679523cf75e533f', 'af425b8111cfd286', 'b99e278a8f0b0869',
          'cd4c07d45778de70', 'd569d09fe99b46c3', 'de61b70aed9dd334', 'e24d446b35a7d924',
          'e37c4d89a9926ee3', 'e8e7156d08b288b2', 'ee2ddc0a677feae7', 'f198b7705ebcb7f8',
          'fa25276fcc3ebaf0',)),
        ('that is in GB (10^9 bytes); the question asks for TiB (2^40 bytes)',
         ('0c6235ca092528aa', '1ed6ec84480c047e', '2967463bcfd3db4e', '2ba79094e62a9916',
          '3e5cfc6516f4c791', '3e7d3d863dea6a33', '58eb7cb097aade80', '5dd3d412ccadf9dd',
          '5fc2a4146cd2f88d', '5fefd1bbe43246ab', '709d5ad1539c2cfc', '742ac0f8278ac118',
          '76a375db66bf461d', '8f79617bf9167f4c', '973d9a5eada6e463', '9ed1ef931ca5cd1e',
          'a7207dc74923b218', 'bd303f025a806941', 'c66edd062e92f8f9', 'd3336407dbc8c95d',
          'e6cd61ab83a6532a', 'e9cc617379cd7847', 'f779db07a02db487',)),
        ('that is bits: a 16-bit number takes 2 bytes',
         ('013e6f493ba8f167', '052f9cc20ca19ab1', '0b3129d8d1927beb', '0d6e51fd78387ca0',
          '0d9de135e2235f24', '0eb855a5c89b5773', '102f0094fe4b0219', '105176b5f92fb00d',
          '12827a2bb17d1c29', '152719f11d9036d4', '18d6bfd816ccd2c5', '19be14a1f5004ec5',
          '1b69b80d7ca7368f', '1cdcf307957827c3', '1ddc62ce5e4e6c43', '1f440e0f61510565',
          '1fb2b282c41d08e3', '25243ac54da52233', '25be8478a5aa490d', '25d47f7e819025c3',
          '26be6606898416ff', '27d119d466fbce05', '27f24ce4b7081a75', '28bd8d3b2b620d18',
          '2a4b6a81e573fbf2', '2a76bf6585154f17', '2cda127c75c9a208', '2cdf60fdbc9087eb',
          '2f1985382371ced0', '31be4c8fac478105', '31d7ab566856c5a6', '326d2a9462cb471d',
          '339fc0282fef0db2', '34120f28af7350c6', '34726ee82b15154a', '3527fdfbfa29db1f',
          '3535ffe5992fd07f', '35702e924d947c77', '360ae20f6252ad82', '36517fc146e9a056',
          '37b7fa0ad937e222', '387c2310b827157a', '3898bcabfcb1bbf3', '38f998346b7ae352',
          '3981957c5707bdb4', '3cfa156e93d0b4ea', '3dfa14ca8593552c', '3e85382c0e463eef',
          '3ed6b34cfc7191e3', '3f1e7a958bd9fc83', '427d1e1c301ca56f', '46689ba17e2b35a7',
          '4682445fb19c92d0', '468bc763488b12f0', '4846aeb1349833b6', '4946465e198c5d63',
          '4a7cc56359cb7dbd', '4b2e1eef391c51f4', '4be4e116bbe3119e', '4bed7dd1392f7ed2',
          '4ceb5cdfb277df33', '512f3f69a0359bfd', '53d4704d301579e2', '544771a50d4aea70',
          '576ab6b724be9e42', '616c675d05b00286', '62728928f2d0887f', '6317aeb0cf373117',
          '6429cf790226b334', '65d87b53e468ead9', '66a26c85a7dd4bd1', '6715097ebeef445e',
          '68989636b7ee3126', '6dafe04681f7241c', '6df4da772762bb36', '6f69b445b89c1e04',
          '70b6a151a9cae3c4', '7260aa06a2d71652', '77fe924f09754e0e', '7a42382163e8e35e',
          '7b2f462e19b35576', '7b6d9b9dcf22d88c', '7c2a55d7d63e9542', '80b3e20982fef969',
          '80fd06b1c2df6252', '846de393b98f3c66', '8edd227314568614', '9167e7735a22d401',
          '91aee5be080c52c8', '931ff25acad154d7', '968021f663e50daa', '9823d3a1132b7d39',
          '98aabae622c55c23', '99dcce8b061427f7', '9c607f73c5897615', '9cc8b1cc5500e88f',
          '9e4a193dfbe63455', '9fde7bbdac400284', 'a0807f79af4f2ed6', 'a0bcd4d61d2a645d',
          'a2fbcb80007d0093', 'a5a64a5a487af51e', 'a9f77a18c13dd55c', 'acbe25c94a979681',
          'ae3887da0154f968', 'b383209c21dca584', 'b4262cd1dfa21a7d', 'b5baf9bfd81fd6dc',
          'b66402cc6e8d3bb6', 'b80a2c9b77c21d6d', 'c0005f5b06ca9b3f', 'c0d85c2ec12d17be',
          'c18777a4d322eeda', 'c1c92d914f1278a5', 'c1cd29717af657f3', 'c1d252cb5c2eae7d',
          'c33a5f1e991b80c4', 'c3a60086e7d05bc0', 'c3b67a99a16bc332', 'c46f6d150c00e821',
          'c7cebe5a656fdee7', 'c8c7080dc313bd44', 'c908c3e8ad722dc6', 'ca312d049399b97f',
          'ce5a2f50b261b0e2', 'd0651501f2f28fad', 'd08a3f6943dcd241', 'd1b365c3c5810ab7',
          'd38f7eb6c98339dc', 'd6d078e54c35f2e3', 'd92f688a0a948698', 'd9a696f46c5f88cc',
          'e0a090bf37a63e01', 'e47f5127cccd8802', 'e5419ee7d42933d2', 'e5d2fe0adb9a716b',
          'e813b800e238e25d', 'e89b305843c30d45', 'e9cc1afb57c45285', 'eadab1f2d0b64505',
          'eb7f8e7a48068879', 'ecafad04962356f2', 'ecda9e497646c243', 'ed8abd5b21ea1d93',
          'f0393a7fdd448b38', 'f09d5f3e94c8ec22', 'f317382739980d96', 'f43860829673c007',
          'f509628499f1c547', 'f56827028afe1c49', 'f5cf9535ab1834e9', 'f5e5dcd78c32a540',
          'f5e701b09325f39f', 'f77a296db051c5b0', 'f859a85a6de662ea', 'f85ebdd279ac7bc3',
          'fb92ade07f94b271', 'fc21630f872b6eed', 'fcd63fdc7d105b70', 'fd9918b796dea4a6',
          'fe3f310dcc3581d4',)),
        ("that is one head's matrix; there are 32 heads",
         ('017146036c156aa8', '0e124eb07d8a3697', '126def34416d94dd', '128c22bde62c77cf',
          '13974636463ee859', '153f7986b453fa48', '15830b4482613de2', '1cfcc1ed206ccf9d',
          '2950c586af6bffa2', '2a8a335f94279ad8', '3431558021a85fdf', '39093032e96f813c',
          '3d6c7070255ee72c', '3df35871ec08bc62', '3e2d77a3e2e364c5', '4071ee0a938be712',
          '49188cd75faca674', '5536b822b4930c06', '5624d4fca368e323', '57d818e72cf37495',
          '5efcad7dcdd09dae', '5fe47046b64fa271', '6209279f9dba7d7c', '629a104303a50fd5',
          '667f98a47c09d20b', '682a41a1879ca188', '707605a7c4c080d5', '752f6f061ce86235',
          '7a05fff1d7f8ee68', '8774138858bbc645', '8a3a518cd95f65b8', '8ecdbf91933e2a88',
          '93f49ebd367e78fd', '9bc8ec581d224c8d', '9cdfab97fe5f1566', '9ec7832812ec6c63',
          'a1d72c4293a5a104', 'aafb521f23613e7c', 'ab94a0c181cdbaf1', 'ac2435e833a4abc4',
          'aefd0bfebc32c3e3', 'b444a65973838050', 'b740dbb42a97ee97', 'b993b92dc6b7d3ff',
          'bdf4b933bd1a08d5', 'c2137af5f4f9bf04', 'c3411892c6af7187', 'c7478653a6ec6da1',
          'cac4aee42d483480', 'cc2763f5b7d80a1d', 'cf4ab8e106bd0006', 'd4c3f1f9253f5dd7',
          'd68b12b550ba67ca', 'd87d8075da59fa48', 'daf415ef0922ce5d', 'df2ce656964051d4',
          'e6813716209c3cbf', 'eb87dafcd31abfb4', 'eddfa0cdf68573fc', 'f62f5c4802f899fb',
          'f881b1f5cd35273d', 'fa421f808d5c39ba', 'fbea2be8b3ec765a',)),
        ('that counts the causal half only',
         ('0121c7bc4140f5f4', '047c14392264f450', '04f7bf1923145d6c', '08d8df52d2237cfe',
          '0edd3252d301b55e', '0ffb0d7da613f51c', '1234082f1ac000a8', '169272ee240c03fe',
          '1761c164c4c6caf3', '1c0b8cd62ef1100a', '1c263c3bec98712a', '1c98b36f6dea408e',
          '1d8dd6e27865018b', '213fcae9c06462d6', '2407f339592f9292', '288c8ad355244e19',
          '335e74def0f8a5a5', '34f2c0040089359b', '396f075e4ef61d6f', '41622abb6eb66027',
          '451e460601484ef9', '46574c28f61b0819', '48db63a70cd8a2dd', '4c252f9f32d5beeb',
          '4ded905cd4f84abf', '4e58eaaf8ad358c9', '55a6f7dba047b92c', '563637b4a9aba806',
          '5c2c3289af2044a7', '5ed0993ccac2ccca', '5edc9a43044ec25a', '5fac4ef5dabe6a9b',
          '61807d61fdaf5cd6', '6382d3c5f86b6b57', '64aa1907b1347bcc', '656dffc6c3d10f74',
          '659676155d1da668', '66a5dfbb9be752c0', '673c4b6911cdcc09', '6766e709cef3331c',
          '703ecd71e36a8edd', '7130f065fbe8ee59', '7167acc38523cf70', '73db26254f0ab851',
          '75b959e23ee76837', '77bdcbe109570f01', '77c97603313c28e9', '7944299cd5422a3f',
          '7992c286477b68b2', '7aec87b39fedb5cb', '7b85b041ad7e3515', '8272cae45b6becce',
          '82c49b0c152c0fdf', '82fe966859a339da', '83cf33475e3aa693', '89c7a459b0257f86',
          '8b6d7aad007ab991', '90a4c0c966445b2e', '90a6b10a3d307725', '9420b386cde0439b',
          '994232abcf9e5cf3', '9a9fbddb2b18be57', '9b1df013f1c30b2c', '9b4306715e02e2f8',
          '9bf034ef7b822c04', '9d2f02c83d7c6b29', '9e3eff78d4cd6f14', 'a30ef2822bfffc37',
          'a5e799446921c99e', 'a8da7462a715bd68', 'aaafc71f52502c08', 'aac2bac295316161',
          'ac0ab6e94a1bf8cf', 'ac9c7cc00956c82f', 'ad31182ab255a671', 'adf01629ac4b98e1',
          'aecd7c9da7bc6767', 'b99b4fcc2c0b37e7', 'bab5d2a4063d210b', 'bc1cd768e7bb25c9',
          'be17be16a7df2bdd', 'be2ef38784249f97', 'c7cb8d2ad0e62bd9', 'd31e6f13ca85ca9a',
          'd69f979fc83ae3f7', 'd850e942ab4e9ee6', 'd8f96292cf3a928d', 'ddd8368b11c99d00',
          'e826f3c1d6579632', 'ec727088542a9b98', 'efc212c4b0708589', 'f02d0f7599843b8e',
          'f38f1ef04aa0aac7', 'f41749e3026a7435', 'f4a18145f7a09d46', 'f4c6384c0630c8ff',
          'f4c95b16be557662', 'f51d0d0b8ec34f3d', 'f708d752b3096619', 'f98602e0e280f1d7',
          'febb29ab6c34b90d',)),
        ('that is the bytes: convert to TiB (divide by 2^40)',
         ('0d77e344a018763b', '139677881021fd2c', '2b7e5a44d69e47ac', '3453d18e776e9db9',
          '45ea18c2febcac41', '48c60895c9ca08d6', '4dafed042038787c', '53aec002cb94851b',
          '54deb36f384dfe86', '703ce77dfa6474bb', '7ced2146d375eecc', '80956d14ab65e071',
          '902981aac86e777c', '956ad3543ab0a8a8', '99676b4755ab02cc', '9fc4b10b43f69378',
          'a4d541f3da0cc9fd', 'b619b69587ba7e26', 'bb86415e32057fe6', 'c91c51cebc924f4f',
          'def66184a89ff763', 'e255a0b10cdcced0', 'e5fc839b6be91278',)),
    ),
    decade=0, sign=1,
)


def check_score_tib(tib) -> None:
    """The module's figure: TiB of one layer's score matrices at LONG_CONTEXT tokens,
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
    # Memory: a tiled version never holds the whole score matrix.
    block = 64
    q, k, v = tiled_case(dict(shape=(1, 1, memory_n, 32), seed=99))
    mem = measure_peak_extra_memory(fn, q, k, v, causal=False, block=block)
    full = memory_n * memory_n * q.element_size()
    holds_half = mem.largest_bytes >= full // 2
    if not holds_half:  # the record says only that the check passed, not the bytes (they vary)
        check_choice(holds_half, False, what=f"my_tiled_attention(n={memory_n}) holds half the "
                     "score matrix", choices=(True, False))
    else:
        raise CheckFailed(
            f"my_tiled_attention(n={memory_n}, block={block}) allocated a tensor of shape "
            f"{mem.largest_shape}, {mem.largest_bytes:,} bytes: at least half the whole "
            f"{memory_n} × {memory_n} score matrix. Tiled attention keeps one block × block "
            "tile of scores at a time.")


FLASH_TILE_KIB = Sealed(
    what='flash_tile_kib', salt='lesson4/flash_tile_kib', kind='number', digits=7,
    right=('17758a7fa81e45e8', '1e41762d84b8f810', '1f17901880657d0b', '2a413186be7d8e23',
           '3663a9da9d894224', 'a25e5d0e244f7f62', 'be0cb3bd255e3e34',),
    mistakes=(
        ('that is bits: a 16-bit number takes 2 bytes',
         ('09739d09cd5538b2', '115acb4c0b8139d0', '5ef6d1612ed54e89', '71e5f130c1dc44bb',
          'a9131f3b8ef9deb2', 'bc6ba1664f820458', 'ed8c4015e32a896a',)),
        ('that is in KB (1,000 bytes); the question asks for KiB (1,024 bytes)',
         ('082bde8834058bfc', '4de20bdfc1c77d27', '616f8b86de3d40c6', '6c14f42a5021752b',
          '70b9d6042fa71185', 'cee5fc8666bbf620', 'e6f4472ff658d69a',)),
        ('that is the bytes; divide by 1,024 for KiB',
         ('1f568d15edf02489', '77897152551dbcf7', '8a2c4c709332ce69', 'a18ba3d0fe802877',
          'cd021aec0df8883a', 'd607182976b12a73', 'f77f7871288945e7',)),
        ('that is a count of scores; each takes 2 bytes in 16-bit',
         ('19d1143c71b6960f', '2ac8eddc0338a181', '3e343cc37e9a3d86', '549c0049322ca440',
          'd1517d35231a3c4c',)),
        ('that is float32 (4 bytes); the question asks for 16-bit',
         ('0036dccb979a2916', '0f0720320a80e6d2', '106737e67199bf7a', '26fce7cee566d19e',
          '2d1d2667ab8c181e', '31b001f63b45a9d5', '460786eba09aea5b', '859bb7fee2ce4041',
          '9782853d0bd35817', 'a7055ae8f59834f5', 'e455835c2cbbd4f9', 'ef95aa7257b156d9',
          'f7b4f97457777c52',)),
    ),
    decade=1, sign=1,
)

FLASH_SHRINK = Sealed(
    what='flash_shrink', salt='lesson4/flash_shrink', kind='number', digits=8,
    right=('01209fdbb169e467', '0495d0484f22b2c2', '04f68892efa6558d', '0a8762600a2c607d',
           '2837415b6744c03d', '30842a19115da92f', '3cf238780743e7cf', '469b6e1d1e100fcd',
           '4c95cb758ad0d374', '4ff3f0f78c1c756c', '67992f6a4af3aafa', '69c011a078598268',
           '770617a57bf35b82', '930bab9647f26d31', '95c60371f939bf2f', 'b4d5b46ff24d7546',
           'ba7a3bf3a0d17277', 'be4f325f182907d6', 'c21219d45f325423', 'dc3d8bbfdabbd022',
           'ec4e9e0e8ecf1529',),
    mistakes=(
        ('that is n / tile side: both sides of the matrix shrink, so square it',
         ('0c03368fc25ccf0c', '16457ab3133f0e99', '35560744f9ca0b72', '425ce7a38e2391ed',
          '4410e55ee2f2fdd6', '6f01f62198a6a5c8', '708c5793f5f92739', '75ffab8d702acc0f',
          '763296dfe68eb74f', '7a10071bcc6185ff', '9e595be3963bada6', 'a6eb425fb81f3c04',
          'ab31b972c316def2', 'aeea2333a4f1a953', 'b157834042398e0f', 'b20db4eafd6b2950',
          'c787af2cc30746bd', 'c8e1990301a21aa4', 'e141a2dc75ee4aad', 'e41787d82e42d7db',
          'f4e9838dcefb60b3',)),
        ("that compares all 32 heads' matrices with one tile: compare one head with one tile",
         ('0594f352fa77ba63', '09546dc9b9df1bd1', '114a16e82f96359e', '135d0e7e66a5051b',
          '159918457926731a', '164bcad41351a954', '1929fa9ae8f4be32', '1f30536d9437e788',
          '22152be645442baf', '225aa638c32b2f72', '233bc448d8dc6dbb', '249341748331b6db',
          '2519165d1bcf95a1', '2ae488c2bbcac217', '2e575be376623ea9', '2f8772585ea3c835',
          '33b10dbfed4a83d0', '358b039c8bc15327', '3bf3183cc688a19c', '4450704bc6e0637b',
          '4b4aec68a3ad0c85', '4e4b8e35be393a30', '50d24032f9267624', '50e30f2356b65310',
          '5786b715f9c8698d', '63959b4cb436f4cf', '63b2b21f82c8f95e', '6e90e1430c22002a',
          '70b98575ed68470c', '72785651c67b8954', '72b499369fb05f77', '761942b3ef21ab3a',
          '7d23cffde33e2e4b', '80d3f1d8df9c7a1d', '80ee6859e502a963', '8695be8aa8c14274',
          '87c95d0da3af3070', '8b8b2b8e9cf3bb01', '8b9b197f370d3f68', '8bafe19be3fc58be',
          '96d503f6afa149ed', '9811bfa10b2cf163', '99a4470ca926285b', 'a1919aebc522b810',
          'a57792eeb2c2d7bd', 'a6147acb974533dc', 'a981b08ad4b6269f', 'b0866d4dfb37ba4f',
          'b143de22bd015f93', 'b28dacf08b844289', 'b388d0d30b1b8c31', 'b3bcd9c9ac96e030',
          'b634026f6e0d79cb', 'b81edab76e44c661', 'bb4acd558dd5a27b', 'bc9803ded3f77a99',
          'c145cf84cfc53d3e', 'c9b738f11b566e58', 'cf3d3e6caba7ea22', 'd15a9ffd6455669c',
          'df0b59615f3518ae', 'e0fbfa166dd807c6', 'e31e884834f2af6d', 'e59cbbe3be7e279a',
          'e7a16c0182e7a66b', 'eca86f9dd93abc0a', 'ef52ce0d0f841756', 'f26ca2fd393694dc',
          'ff8629f4903e9311',)),
        ('that compares the causal half; compare the full matrix with one tile',
         ('0a0c14ae78e16111', '0aab9a20be9ad169', '0b0466794b4dd1b5', '0e70de1f9b6d48d3',
          '1344615d643dcb95', '14662ce2208b1012', '152c6f8b5f60e1ff', '16a27e1b6dcdd7f5',
          '174e04793eee7774', '19ad4edebd2fce10', '1ac551435c99c81f', '1af2d7e49cf2571b',
          '1bb29d730d05336f', '213350defb7d5db0', '25d555c3c7542eb3', '274c514d9bf5bad0',
          '2c99495c45db86a7', '2ccd2e363089f464', '304f246b2dbbedc2', '3238bbb911e20ec5',
          '337d76413b714756', '386d0d8e6e533681', '3aa89c91bee92eb6', '41ab6793ef205c7c',
          '427ecaa6e6928e2a', '4651d81bb62ae5d4', '473ead608a501b50', '4d37ab90678c07b8',
          '4d565f98167275f4', '4db6a8a6868ad3e6', '4ed8e118372d364c', '4f6c39c485c32ccb',
          '4f768c65815c7a73', '51492b815833da9f', '525ea16707a172a0', '534b47bd43029a83',
          '53ccbebb04467e97', '54be6442ed7e7f2d', '5665ddb31854edb3', '5717f82a2aae71a6',
          '5adf96967312030b', '5ef7095973f886ce', '5f27ea71d2b5146d', '5f882b781870a2bf',
          '614309f2c2ecc714', '6d5e29fb08f7ea7c', '6e70e9380dd0a027', '6ea4864aa1e9c685',
          '783e07a0f7008847', '788a3e3812b1b19f', '795b2e823ee2dde9', '7b919992aed26f0c',
          '7bb718dfd468909e', '8601efe3c50bb280', '862cca3ab23a2ee9', '8a9e1f13514252af',
          '8af22caac9751ed8', '90da961a2a96345b', '91604aa9e5bf0211', '95c6c54efd3b0ae6',
          '97466eada81c02c3', '99c7c57cc498cad4', '9a0a928017a128d1', '9f15ec5cb4587cd5',
          'a1a85fe206bba820', 'a294b8ad414ceb20', 'a29549b1ccfe7fb8', 'ad5f18317d77b4ab',
          'ae703e14c26e6889', 'b08e4f74f6fee4f6', 'b2cc0d97c03e7acd', 'b2df0502e8160a4d',
          'b8f61200130bbd91', 'bb05f1f534d17777', 'bb6c32cc1821be24', 'bbc0df2125dad183',
          'c232cfda91e32a9c', 'c95080f8c2dc1bc7', 'cb780dd72f746b19', 'cd39398687ba61f2',
          'cd4ce2c36508543d', 'ceeecb1c6dc48cff', 'd029c43ba3cf3428', 'd1a142846338d026',
          'd23da078d803f3c1', 'd428edede0acbc2f', 'd4b4aef34f2504bd', 'd4e87bbec05375b8',
          'd5a677b0c351ca40', 'd8ffd2cc7bf87c9c', 'da140a9cfab67677', 'db2c50c0b7f02983',
          'db33778160481557', 'db9cd78ae23120f3', 'e7ad0863ccf376dd', 'e805cef15c3c0228',
          'eb26d8786a99e398', 'ed85b1206174f9e9', 'edb02f96a42efd24', 'f01abbc0d25b9e7d',
          'f70c2889117bbdc8', 'f724b4f12b432d1a', 'f8cbd05c8c28d47a', 'f9e71ba52b3e64a4',
          'fcf8b0122ab43dc7',)),
    ),
    decade=6, sign=1,
)


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

TYS_CROSSOVER = Sealed(
    what='tys_crossover', salt='lesson4/tys_crossover', kind='number', digits=3,
    right=('4e6e4ef926b20bf7', 'b85e6aa82b7e1503', 'bc210b20bdb51e04',),
    mistakes=(
        ("at that length attention costs twice the rest: one side looks like FLOPs and the other multiply-adds, or the values' weighted sum is missing (n²·d_model instead of 2·n²·d_model)",
         ('4794c7e04533e346', '5707e8da6474a345', '6613e4f225f235b3', '8a5eb582cf714393',
          'a35af7f0ba964694', 'a71b265f62bef588',)),
        ('that compares attention with the four attention projections only (4·n·d_model²); the rest of the block is 12·n·d_model²',
         ('04f04d0655982d91', '175a0e0872e4adb9', '2ee068403ee2afa0', '6fc2af3de9c2dc73',
          '812597628dffe806', '88a7675cda0d8a6b', '89327e57cc55f993', 'fa72ca7cdda2ba34',
          'fc7234020a79c9b7',)),
        ('that compares attention with the feed-forward layer only (8·n·d_model²); the rest of the block is 12·n·d_model²',
         ('144b3c41bca5e27b', '882715e511a72a85', 'b5622860d400f908',)),
        ('that is d_model itself: solve 2·n²·d_model = 12·n·d_model² for n',
         ('3e7180f4ca7024c2', '8339de1fda186d7e', '957255913c25cd17', 'c11df3844663303d',
          'efa5555d290790f3',)),
        ('that is the square of d_model: both sides have a factor n·d_model to cancel',
         ('45dbafe9f82c5153', '470d8a76228d4a0d', '5694548d225d0168',)),
        ('attention costs about 2·n²·d_model, so the crossover grows with d_model: 6 × d_model',
         ('2111a6c20c654456', '23c090d82322cb4d', '407accb107c1e555', '85ef64941134b236',
          '90a1e4cee4dc7e47', 'f277c8e11568004a', 'f36da323a119a38e',)),
    ),
    hint='solve 2·n²·d_model = 12·n·d_model² for n, with d_model = 4,096',
    decade=4, sign=1,
)

VENDOR_SEALED = {
    'a': Sealed(
        what='tys_vendor, question (a)', salt='lesson4/tys_vendor/a', kind='choice', digits=None,
        right=('9e4a8a300d64b946',),
        mistakes=(
            ("latency and cost at the full length are the first thing to ask: attention's share of both grows with the length",
             ('54d1a1c040281a15',)),
        ),
        choices=('yes', 'no'),
    ),
    'b': Sealed(
        what='tys_vendor, question (b)', salt='lesson4/tys_vendor/b', kind='choice', digits=None,
        right=('e6f2106d7a9b176a',),
        mistakes=(
            ('accuracy has to be measured at the length, with the fact at the start, in the middle and at the end: models often do worst in the middle',
             ('a5a16e9e47fa8761',)),
        ),
        choices=('yes', 'no'),
    ),
    'c': Sealed(
        what='tys_vendor, question (c)', salt='lesson4/tys_vendor/c', kind='choice', digits=None,
        right=('838df614d59a48df',),
        mistakes=(
            ('ask whether the length is native or extended: a model trained shorter and stretched afterwards may accept the input without using all of it well',
             ('4c0df698880754ed',)),
        ),
        choices=('yes', 'no'),
    ),
    'd': Sealed(
        what='tys_vendor, question (d)', salt='lesson4/tys_vendor/d', kind='choice', digits=None,
        right=('d11395f28f8d38ef',),
        mistakes=(
            ('ask whether the serving stack uses tiled attention: without it, the score matrix alone decides whether the input fits in memory',
             ('83bd5c527486d3b2',)),
        ),
        choices=('yes', 'no'),
    ),
    'e': Sealed(
        what='tys_vendor, question (e)', salt='lesson4/tys_vendor/e', kind='choice', digits=None,
        right=('ec3405b5011795c6',),
        mistakes=(
            ('the embedding table does not change with the input length (and a rotary model has no position table at all)',
             ('40bdf348ef6c7437',)),
        ),
        choices=('yes', 'no'),
    ),
    'f': Sealed(
        what='tys_vendor, question (f)', salt='lesson4/tys_vendor/f', kind='choice', digits=None,
        right=('86e539a972d466e7',),
        mistakes=(
            ("a short prompt says nothing about the 128,000-token case: attention's cost grows with the square of the length",
             ('e10e3498f913b9ed',)),
        ),
        choices=('yes', 'no'),
    ),
    'g': Sealed(
        what='tys_vendor, question (g)', salt='lesson4/tys_vendor/g', kind='choice', digits=None,
        right=('4c9dafb4bc5f311a',),
        mistakes=(
            ('the kind of norm does not change with the input length',
             ('89ddb97125178440',)),
        ),
        choices=('yes', 'no'),
    ),
    'h': Sealed(
        what='tys_vendor, question (h)', salt='lesson4/tys_vendor/h', kind='choice', digits=None,
        right=('e27ed7128b550b8c',),
        mistakes=(
            ('a test with the fact always at the end is the easiest case: ask for the start and the middle too (that is question b)',
             ('bcee1e8bab9d7a52',)),
        ),
        choices=('yes', 'no'),
    ),
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
        what = (_label("longest_input", case) if is_shown(case, RECAP_CASES)
                else on_hidden("longest_input"))
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
