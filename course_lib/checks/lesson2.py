"""Checks for lesson 2, "Attention".

Each check compares a learner's answer with an independent reference and, on failure, raises
:class:`~course_lib.checks.CheckFailed` naming the likely mistake (the scale forgotten or taken
as d_k, the softmax over the wrong axis, a mask off by one, an induction score read at the wrong
offset, ...) without showing the expected value:

* attention against ``torch.nn.functional.scaled_dot_product_attention`` (boolean masks
  included), its weights against a softmax written here;
* the mean largest softmax weight against a Monte-Carlo reference drawn here, with a tolerance
  set from the spread of the draws (Monte-Carlo error, not a fixed number of digits);
* the causal mask against ``torch.ones(n, n).tril()``;
* head scores against :mod:`course_lib.tasks` (``previous_token_score``, ``induction_score``),
  themselves tested on made-up patterns in tests/test_training.py;
* the in-context score against :func:`course_lib.training.next_token_losses` on the shipped
  induction model.

Functions the learner writes are called through :func:`~course_lib.checks.exercise.call`,
which also fails if they call the thing being built: torch's or course_lib's attention, or
course_lib's head scores; arrays are compared by :func:`~course_lib.checks.exercise.compare`.
Inputs are drawn from their own ``torch.Generator`` so the notebook's random state is untouched.
"""
from __future__ import annotations

import math
import random
from functools import lru_cache, partial
from typing import Mapping, Sequence

from . import CheckFailed, _as_number, check_equal, check_sealed, check_value, is_shown, on_hidden
from .exercise import RANDOM_TAG, call, close, compare, label as named
from .sealed import load as _load_sealed

SEALED = _load_sealed("lesson2")
"""This assignment's sealed answers by salt (sealed_answers/lesson2.json)."""

# --- the lesson's fixed figures (inputs, not answers) -----------------------------------------

SCALE_TEST = dict(d_k=256, n_keys=8)
"""Section 2's softmax test: one query against 8 keys of d_k = 256."""
SCALE_TRIALS, SCALE_SEED = 10_000, 0
"""Draws and seed of the notebook's own measurement."""
PAPER_BASE = dict(d_model=512, n_heads=8)
"""Vaswani et al. 2017, the base model: d_model = 512, h = 8 heads (d_k = d_v = 64)."""

ATTENTION_CASES = (
    dict(batch=(2,), n_q=4, n_k=6, d_k=8, d_v=5, mask=None, seed=0),
    dict(batch=(2,), n_q=5, n_k=7, d_k=8, d_v=3, mask="random", seed=1),
)
"""Visible cases of :func:`check_attention`; the notebook's hidden tests pass others.  ``mask``
is None, ``"random"`` (n_q, n_k), ``"random-batch"`` (batch..., 1, n_q, n_k) or ``"causal"``."""

WEIGHT_CASES = (dict(d_k=256, n_keys=8, seed=0),)
"""Visible cases of :func:`check_largest_weight` (each is tried scaled and unscaled)."""

PATTERN_CASES = (dict(shape=(4, 12, 12), period=4, seed=0, kind="random"),)
"""Visible cases of the head-score checks: attention patterns (..., pos, pos)."""

QUERY_CASES = (dict(pos=16, period=5, seed=0),)
"""Visible cases of :func:`check_missing_or_ignored`."""

CONTEXT_CASES = (dict(n_seqs=50, pos=32, period=10, seed=123),)
"""Visible cases of :func:`check_in_context_score` (repeated tokens for the shipped model)."""

LABELS = ("missing", "ignored", "used")

def _random(name: str) -> random.Random:
    """The seeded generator of one exercise's run-time input: the same on every run, so the
    grader's run of the model answer tries the same inputs as the learner's."""
    return random.Random(f"lesson2/{name}")


# Inputs made at run time (seeded): every visible test of a function tries one besides the
# lesson's fixed case, so that an answer which ignores its arguments fails in the notebook.
_r = _random("attention")
RANDOM_ATTENTION = (dict(batch=_r.choice(((3,), (2, 2))), n_q=_r.randint(2, 7), n_k=_r.randint(3, 9),
                         d_k=_r.choice((4, 12, 16, 24)), d_v=_r.randint(2, 7), mask="random",
                         seed=_r.randint(100, 10_000)),)
_r = _random("largest_weight")
RANDOM_WEIGHT = (dict(d_k=_r.choice((8, 32, 48, 128)), n_keys=_r.randint(3, 12),
                      seed=_r.randint(100, 10_000)),)
RANDOM_MASK_SIZES = (_random("causal_mask").randint(6, 20),)
_r = _random("patterns")
_pos = _r.randint(8, 18)
RANDOM_PATTERN = (dict(shape=(_r.randint(2, 5), _pos, _pos), period=_r.randint(2, _pos // 2),
                       seed=_r.randint(100, 10_000), kind="induction"),)
_r = _random("heads_above")
RANDOM_TABLE = dict(n_layers=_r.randint(2, 5), n_heads=_r.randint(2, 6), seed=_r.randint(100, 10_000),
                    threshold=_r.choice((0.3, 0.4, 0.6)))
_r = _random("queries")
RANDOM_QUERY = (dict(pos=_r.randint(10, 24), period=_r.randint(3, 8), seed=_r.randint(100, 10_000)),)
_r = _random("context")
RANDOM_CONTEXT = (dict(n_seqs=_r.randint(20, 40), pos=_r.randint(20, 32), period=_r.randint(5, 12),
                       seed=_r.randint(100, 10_000)),)
del _r, _pos

WEIGHT_TRIALS = 4000
"""Draws per case of :func:`check_largest_weight` in the visible test."""
MASK_SIZES = (5,)
"""Visible sizes of :func:`check_causal_mask`."""
THRESHOLD = 0.5
"""The visible threshold of :func:`check_missing_or_ignored`."""


# --- no shortcuts ----------------------------------------------------------------------------

_SHORTCUTS = {"attention.py": None,          # any function there
              "tiled_attention.py": None,
              "tasks.py": {"previous_token_score", "induction_score", "head_scores"}}
"""course_lib files (and functions) whose code computes an exercise's answer."""
_C_SHORTCUTS = {"scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                "multi_head_attention_forward"}
"""torch's fused attention kernels."""


_own = partial(call, shortcuts=_SHORTCUTS, c_functions=_C_SHORTCUTS, explain_errors=True)
"""The learner's function through :func:`~course_lib.checks.exercise.call`, refusing the
shortcuts that hold an answer; on a shown input too, an exception becomes a message naming
the input."""


def _torch():
    import torch
    return torch


def _tensor(x, what: str):
    """``x`` (a torch tensor, as the exercises ask) in float64, or CheckFailed naming its type."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64)
    raise CheckFailed(f"{what}: return a torch tensor, got {type(x).__name__}")


# --- 1. attention ----------------------------------------------------------------------------

def attention_inputs(batch=(2,), n_q=4, n_k=6, d_k=8, d_v=5, mask=None, seed=0):
    """Seeded float32 q (*batch, n_q, d_k), k (*batch, n_k, d_k), v (*batch, n_k, d_v) and a
    bool mask (True = may attend) or None.  Every row of a mask has at least one True and, when
    it has room, at least one False."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    batch = tuple(batch)
    q = torch.randn(*batch, n_q, d_k, generator=g)
    k = torch.randn(*batch, n_k, d_k, generator=g)
    v = torch.randn(*batch, n_k, d_v, generator=g)
    if mask is None:
        m = None
    elif mask == "causal":
        if n_q != n_k:
            raise ValueError("a causal case needs n_q == n_k")
        m = torch.ones(n_q, n_k, dtype=torch.bool).tril()
    elif mask in ("random", "random-batch"):
        shape = (n_q, n_k) if mask == "random" else (*batch[:1], *([1] * (len(batch) - 1)), n_q, n_k)
        m = torch.rand(shape, generator=g) < 0.6
        rows = torch.arange(n_q)
        m[..., rows, rows % n_k] = True                 # at least one key per query
        if n_k > 1:
            m[..., rows, (rows + 1) % n_k] = False      # and at least one hidden
    else:
        raise ValueError(f"mask={mask!r} must be None, 'random', 'random-batch' or 'causal'")
    return q, k, v, m


def _attend(q, k, v, mask=None, scale="sqrt", axis=-1, masked_score=float("-inf"),
            mask_after=False):
    """Attention written out with one step changed: the outputs of the usual mistakes."""
    torch = _torch()
    scores = q @ k.transpose(-2, -1)                    # (..., n_q, n_k)
    if scale == "sqrt":
        scores = scores / math.sqrt(q.shape[-1])
    elif scale == "d_k":
        scores = scores / q.shape[-1]
    if mask is not None and not mask_after:
        scores = scores.masked_fill(~mask, masked_score)
    weights = torch.softmax(scores, dim=axis)
    if mask is not None and mask_after:
        weights = weights * mask
    return weights @ v, weights


def _shapes(q, k, v, mask) -> str:
    m = "no mask" if mask is None else f"mask {tuple(mask.shape)}"
    return f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, {m}"


_MASK_KINDS = {None: "no mask", "random": "with a mask", "causal": "with a causal mask",
               "random-batch": "with a mask of its own for each batch element"}


def _attention_kinds(case: Mapping) -> tuple:
    return ("batched" if tuple(case.get("batch", ())) else "unbatched",
            _MASK_KINDS.get(case.get("mask"), "with a mask"))


def _got_shape(shape, shown: bool) -> str:
    """``", got (2, 4)"`` for a visible input; a hidden input's shapes are not named."""
    return f", got {tuple(shape)}" if shown else ", got another shape"


def check_attention(fn, cases: Sequence[Mapping] = (*ATTENTION_CASES, *RANDOM_ATTENTION)) -> None:
    """Check ``fn(q, k, v, mask=None) -> (out, weights)``: softmax(q kᵀ / sqrt(d_k)) v, with
    a bool ``mask`` (True = may attend, broadcast over the leading dimensions) applied to the
    scores before the softmax.  out: (..., n_q, d_v); weights: (..., n_q, n_k), rows summing to
    1.  Reference: torch's ``scaled_dot_product_attention(q, k, v, attn_mask=mask)`` (float32,
    atol 1e-5) and a softmax of the scaled, masked scores for the weights."""
    torch = _torch()
    import torch.nn.functional as F
    for case in cases:
        q, k, v, mask = attention_inputs(**case)
        shown = is_shown(case, (*ATTENTION_CASES, *RANDOM_ATTENTION))
        label = named("attention", _shapes(q, k, v, mask), shown=shown,
                      random=is_shown(case, RANDOM_ATTENTION), kinds=_attention_kinds(case))
        args = (q.clone(), k.clone(), v.clone()) + (() if mask is None else (mask.clone(),))
        result = _own(fn, label, *args, shown=shown)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise CheckFailed(f"{label}: return two tensors, (out, weights), got "
                              f"{type(result).__name__} {result!r:.60}")
        out, weights = _tensor(result[0], f"{label}, out"), _tensor(result[1], f"{label}, weights")
        want_out = (*q.shape[:-1], v.shape[-1])
        want_w = (*q.shape[:-1], k.shape[-2])
        if tuple(out.shape) != want_out:
            hint = (": out has one row per query and one column per value dimension (d_v)"
                    if tuple(out.shape) != want_w else ": that looks like the weights: return "
                    "(out, weights) in that order")
            want = want_out if shown else "(..., n_q, d_v)"
            raise CheckFailed(f"{label}: out should have shape {want}"
                              f"{_got_shape(out.shape, shown)}{hint}")
        if tuple(weights.shape) != want_w:
            hint = (": that is the transpose: rows are queries, columns are keys"
                    if tuple(weights.shape) == (*q.shape[:-2], k.shape[-2], q.shape[-2]) else "")
            want = f"(..., n_q, n_k) = {want_w}" if shown else "(..., n_q, n_k)"
            raise CheckFailed(f"{label}: weights should have shape {want}"
                              f"{_got_shape(weights.shape, shown)}{hint}")
        ref_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).to(torch.float64)
        ref_w = _attend(q, k, v, mask)[1].to(torch.float64)
        variants = {
            "the scores are not divided by sqrt(d_k): scale them by 1 / sqrt(q.shape[-1])":
                _attend(q, k, v, mask, scale=None),
            "the scores are divided by d_k; the scale is sqrt(d_k), its square root":
                _attend(q, k, v, mask, scale="d_k"),
            "the softmax runs over the queries (dim -2): each query's weights must sum to 1 "
            "over the keys, so take the softmax over the last dimension": _attend(q, k, v, mask,
                                                                                   axis=-2),
        }
        if mask is not None:
            variants.update({
                "the mask is ignored: set the score of every key the mask hides to -inf before "
                "the softmax": _attend(q, k, v, None),
                "the mask is inverted: True means 'may attend' (torch's convention), so hide the "
                "keys where it is False": _attend(q, k, v, ~mask),
                "masked scores are set to 0, but e^0 = 1 still gives them weight: set them to "
                "-inf": _attend(q, k, v, mask, masked_score=0.0),
                "the mask is applied to the weights after the softmax, so the rows no longer sum "
                "to 1: mask the scores before the softmax": _attend(q, k, v, mask,
                                                                    mask_after=True),
            })
        if k.shape[-1] == v.shape[-1]:
            variants["keys and values are swapped: scores come from q and k, the blend from v"] = \
                _attend(q, v, k, mask)
        for idx, (which, got, ref) in enumerate((("out", out, ref_out), ("weights", weights, ref_w))):
            if idx and not close(got, ref) and not close(got.sum(-1), torch.ones(got.shape[:-1]),
                                                        atol=1e-4, rtol=1e-5):
                raise CheckFailed(f"{label}: out is right but the weights' rows do not sum to 1: "
                                  "return the softmax weights, one row per query")
            if not close(got, ref) and not bool(got.isfinite().all()):
                raise CheckFailed(f"{label}, {which} is not right: it holds NaN or infinite values "
                                  "(a query that may see no key at all, or -inf left in the output?)")
            compare(got, ref, what=f"{label}, {which}",
                    mistakes={d: w[idx] for d, w in variants.items()})


# --- 2. the scale: the largest weight --------------------------------------------------------

def draw_scores(d_k, n_keys, n_trials, seed):
    """The notebook's draws: q (n_trials, d_k) then k (n_trials, n_keys, d_k), standard normal
    from ``torch.Generator().manual_seed(seed)``; returns the dot products (n_trials, n_keys)."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_trials, d_k, generator=g)
    k = torch.randn(n_trials, n_keys, d_k, generator=g)
    return (k @ q[:, :, None])[..., 0]  # (n_trials, n_keys, 1) -> (n_trials, n_keys)


@lru_cache(maxsize=64)
def largest_weight_reference(d_k, n_keys, scaled, n_trials=SCALE_TRIALS, seed=SCALE_SEED,
                             divide_by=None):
    """(mean, standard deviation) over ``n_trials`` of the largest softmax weight of one query
    over ``n_keys`` keys (:func:`draw_scores`), the scores divided by sqrt(d_k) if ``scaled``
    (or by ``divide_by`` if given).  This is the reference, not the learner's answer."""
    scores = draw_scores(d_k, n_keys, n_trials, seed)
    if divide_by is not None:
        scores = scores / divide_by
    elif scaled:
        scores = scores / math.sqrt(d_k)
    largest = scores.softmax(-1).max(-1).values  # (n_trials,)
    return largest.mean().item(), largest.std().item()


def _mc_tolerance(std, n_trials) -> float:
    """Five standard errors of a difference of two independent means of n_trials draws each."""
    return 5 * std * math.sqrt(2 / n_trials) + 1e-9


def check_largest_weight(fn, cases: Sequence[Mapping] = (*WEIGHT_CASES, *RANDOM_WEIGHT),
                         n_trials: int = WEIGHT_TRIALS) -> None:
    """Check ``fn(d_k, n_keys, scaled, n_trials, seed) -> float``: the mean, over n_trials
    seeded draws of a standard normal query and n_keys standard normal keys of width d_k, of the
    largest softmax weight, with the scores divided by sqrt(d_k) when ``scaled``.  Passes within
    five standard errors of a reference drawn here (so any honest way of drawing passes, and the
    notebook's way matches to float rounding)."""
    for case in cases:
        d_k, n_keys, seed = case["d_k"], case["n_keys"], case["seed"]
        for scaled in (False, True):
            args = dict(d_k=d_k, n_keys=n_keys, scaled=scaled, n_trials=n_trials, seed=seed)
            shown = is_shown(case, (*WEIGHT_CASES, *RANDOM_WEIGHT)) and n_trials == WEIGHT_TRIALS
            label = named("mean_largest_weight", args, shown=shown,
                          random=is_shown(case, RANDOM_WEIGHT), kinds=(f"scaled={scaled}",))
            got = _as_number(_own(fn, label, shown=shown, **args), label)
            mean, std = largest_weight_reference(d_k, n_keys, scaled, n_trials, seed)
            tol = _mc_tolerance(std, n_trials)
            if abs(got - mean) <= tol:
                # For the grader, against the model answer's value: twice the tolerance, since
                # both values lie within it of this reference.
                check_value(got, mean, what=label, rel=2 * tol / abs(mean))
                continue
            if math.isclose(got, 1 / n_keys, rel_tol=1e-6):
                raise CheckFailed(f"{label} is not right: the weights' average is always "
                                  "1 / n_keys: take each trial's largest weight, then average "
                                  "those")
            mistakes = {}
            other = largest_weight_reference(d_k, n_keys, not scaled, n_trials, seed)[0]
            mistakes[("with scaled=True divide the scores by sqrt(d_k)" if scaled else
                      "with scaled=False the scores must not be divided") + ": the two cases "
                     "look swapped or the flag is ignored"] = other
            if scaled:
                mistakes["the scores are divided by d_k; the scale is sqrt(d_k)"] = \
                    largest_weight_reference(d_k, n_keys, True, n_trials, seed, divide_by=d_k)[0]
            if got > 1:
                raise CheckFailed(f"{label} is not right: a softmax weight is at most 1 (is that "
                                  "the largest score rather than the largest weight?)")
            for diagnosis, wrong in mistakes.items():
                if abs(wrong - mean) > 2 * tol and abs(got - wrong) <= tol:
                    raise CheckFailed(f"{label} is not right: {diagnosis}")
            side = "large" if got > mean else "small"
            raise CheckFailed(f"{label} is not right: it is too {side} by more than Monte-Carlo "
                              "error (five standard errors) allows")


# --- 3. the causal mask ----------------------------------------------------------------------

def check_causal_mask(fn, sizes: Sequence[int] = (*MASK_SIZES, *RANDOM_MASK_SIZES)) -> None:
    """Check ``fn(n) -> (n, n) bool tensor``: True where query i may attend to key j, that is
    j <= i (a token sees itself and the tokens before it).  Reference: ``ones(n, n).tril()``."""
    torch = _torch()
    for n in sizes:
        shown = n in (*MASK_SIZES, *RANDOM_MASK_SIZES)
        label = named("causal_mask", str(n), shown=shown, random=n in RANDOM_MASK_SIZES, kinds=())
        got = _own(fn, label, n, shown=shown)
        if not isinstance(got, torch.Tensor):
            raise CheckFailed(f"{label}: return a bool torch tensor, got {type(got).__name__}")
        if tuple(got.shape) != (n, n):
            raise CheckFailed(f"{label}: return an (n, n) tensor, rows = queries, columns = keys"
                              + (f"; got shape {tuple(got.shape)}" if shown else ""))
        if got.dtype != torch.bool:
            if got.is_floating_point() and bool(torch.isinf(got).any()):
                raise CheckFailed(f"{label}: return a bool mask (True = may attend), not an "
                                  "additive mask of 0 and -inf")
            raise CheckFailed(f"{label}: return a bool tensor (True = may attend), got "
                              f"{got.dtype}; .bool() converts 0/1")
        ones = torch.ones(n, n, dtype=torch.bool)
        expected = ones.tril()
        if torch.equal(got, expected):
            check_equal(got.tolist(), expected.tolist(), what=label)  # publishes it for the grader
            continue
        mistakes = {
            "off by one: the diagonal is hidden, but a token may attend to itself (its own key "
            "is allowed); only later tokens are hidden": ones.tril(-1),
            "off by one the other way: query i sees key i + 1, the very token it must predict":
                ones.tril(1),
            "True means 'may attend' here (torch's convention): that marks the hidden keys":
                ~expected,
            "that is the transpose: rows are queries, columns are keys, and query i may see keys "
            "0 .. i": ones.triu(),
        }
        for diagnosis, wrong in mistakes.items():
            if not torch.equal(wrong, expected) and torch.equal(got, wrong):
                raise CheckFailed(f"{label} is not right: {diagnosis}")
        how_many = f"{int((got != expected).sum())} of {n * n}" if shown else "some"
        raise CheckFailed(f"{label} is not right: {how_many} entries differ from 'query i may "
                          "see key j when j <= i'")


# --- 4. head scores --------------------------------------------------------------------------

def pattern_inputs(shape=(4, 12, 12), period=4, seed=0, kind="random"):
    """A seeded causal attention pattern (..., pos, pos), rows summing to 1: ``random`` (softmax
    of standard normal scores, later keys hidden) or ``induction`` (most weight on the key after
    each earlier copy, the rest spread at random)."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    pos = shape[-1]
    hide = torch.ones(pos, pos, dtype=torch.bool).triu(1)
    scores = 2 * torch.randn(*shape, generator=g)
    if kind == "induction":
        i = torch.arange(pos)[:, None]
        j = torch.arange(pos)[None, :]
        target = (j <= i - period + 1) & ((i - j + 1) % period == 0)
        scores = scores + 4 * target
    elif kind != "random":
        raise ValueError(f"kind={kind!r} must be 'random' or 'induction'")
    return scores.masked_fill(hide, float("-inf")).softmax(-1)


def _score_result(got, label, want_shape, shown: bool = True):
    got = _tensor(got, label)
    if tuple(got.shape) != tuple(want_shape):
        hint = (": one score per pattern, averaged over the queries" if got.dim() > len(want_shape)
                else "")
        want = f"shape {tuple(want_shape)} (the pattern's leading dimensions)" if shown else \
            "the shape of the pattern's leading dimensions"
        raise CheckFailed(f"{label}: expected {want}{_got_shape(got.shape, shown)}{hint}")
    return got


def _pattern_kinds(case: Mapping) -> tuple:
    kind = "an induction-like" if case.get("kind") == "induction" else "a random"
    one = len(case["shape"]) == 2
    return f"{kind} causal pattern", "a single pattern, no leading dimensions" if one else ""


def check_previous_token_score(fn, cases: Sequence[Mapping] = (*PATTERN_CASES, *RANDOM_PATTERN)
                               ) -> None:
    """Check ``fn(pattern) -> (...)`` scores: the mean, over queries 1 .. pos-1, of the weight
    each puts on the key just before it.  Reference: course_lib.tasks.previous_token_score."""
    torch = _torch()
    from ..tasks import previous_token_score
    for case in cases:
        p = pattern_inputs(**case)
        shown = is_shown(case, (*PATTERN_CASES, *RANDOM_PATTERN))
        label = named("previous_token_score", f"pattern {tuple(p.shape)}", shown=shown,
                      random=is_shown(case, RANDOM_PATTERN), kinds=_pattern_kinds(case))
        got = _score_result(_own(fn, label, p.clone(), shown=shown), label, p.shape[:-2], shown)
        expected = previous_token_score(p).to(torch.float64)
        pos = p.shape[-1]
        d = p.to(torch.float64)
        mistakes = {
            "that reads the diagonal, the weight each token puts on itself: the previous token "
            "is one column to the left (offset -1)": d.diagonal(0, -2, -1).mean(-1),
            "that reads the key after each query (offset +1), which the causal mask hides: the "
            "previous token is at offset -1": d.diagonal(1, -2, -1).mean(-1),
            "that divides by pos: query 0 has no previous token, so average over the pos - 1 "
            "others": d.diagonal(-1, -2, -1).sum(-1) / pos,
            "that is a sum over the queries: take the mean": d.diagonal(-1, -2, -1).sum(-1),
        }
        compare(got, expected, what=label, rtol=1e-5, atol=1e-6, mistakes=mistakes)


def _induction_variant(p, period, offset=1, every_copy=True, first_query=None):
    """induction_score with one step changed: the key read at i - period + offset, only the
    latest copy, or a different first query."""
    torch = _torch()
    pos = p.shape[-1]
    i = torch.arange(pos)[:, None]
    j = torch.arange(pos)[None, :]
    if every_copy:
        target = (j <= i - period + offset) & ((i - j + offset) % period == 0) & (j >= 0)
    else:
        target = j == i - period + offset
    per_query = (p * target).sum(-1)
    start = period if first_query is None else first_query
    return per_query[..., start:].mean(-1)


def check_induction_score(fn, cases: Sequence[Mapping] = (*PATTERN_CASES, *RANDOM_PATTERN)) -> None:
    """Check ``fn(pattern, period) -> (...)`` scores: for queries i >= period, the weight on
    the keys right after each earlier copy of the current token (i - period + 1,
    i - 2·period + 1, ...), averaged over those queries.  Reference:
    course_lib.tasks.induction_score."""
    torch = _torch()
    from ..tasks import induction_score
    for case in cases:
        p = pattern_inputs(**case)
        period = case["period"]
        shown = is_shown(case, (*PATTERN_CASES, *RANDOM_PATTERN))
        label = named("induction_score", f"pattern {tuple(p.shape)}, period={period}", shown=shown,
                      random=is_shown(case, RANDOM_PATTERN), kinds=_pattern_kinds(case))
        got = _score_result(_own(fn, label, p.clone(), period, shown=shown), label, p.shape[:-2],
                            shown)
        expected = induction_score(p, period).to(torch.float64)
        d = p.to(torch.float64)
        mistakes = {
            "that reads the earlier copy itself (i - period): a duplicate-token head looks "
            "there; an induction head looks one further, at the token after it (i - period + 1)":
                _induction_variant(d, period, offset=0),
            "that reads two after the earlier copy (i - period + 2): the answer is the token "
            "right after it (i - period + 1)": _induction_variant(d, period, offset=2),
            "that reads only the latest copy: once a token has appeared several times, every "
            "earlier copy's next token counts (i - period + 1, i - 2·period + 1, ...)":
                _induction_variant(d, period, every_copy=False),
            "that averages over every query: queries before position period have no earlier "
            "copy to look at, so leave them out": _induction_variant(d, period, first_query=0),
            "that starts one query late: the first query with an earlier copy is at position "
            "period": _induction_variant(d, period, first_query=period + 1),
            "that starts one query early: the first query with an earlier copy is at position "
            "period": _induction_variant(d, period, first_query=period - 1),
        }
        compare(got, expected, what=label, rtol=1e-5, atol=1e-6, mistakes=mistakes)


def heads_above_reference(scores, threshold):
    """[(layer, head), ...] with score > threshold, the highest first."""
    n_heads = scores.shape[1]
    order = scores.flatten().argsort(descending=True, stable=True).tolist()
    return [divmod(i, n_heads) for i in order if scores.flatten()[i] > threshold]


def check_heads_above(fn, tables: Sequence = None) -> None:
    """Check ``fn(scores, threshold) -> [(layer, head), ...]``: every head of an
    (n_layers, n_heads) score table above the threshold, the highest score first."""
    torch = _torch()
    shown = tables is None  # the visible test's tables: the lesson's and one made at run time
    if tables is None:
        t = RANDOM_TABLE
        g = torch.Generator().manual_seed(t["seed"])
        tables = [(torch.tensor([[0.10, 0.92, 0.30], [0.61, 0.05, 0.74]]), 0.5),
                  (torch.rand(t["n_layers"], t["n_heads"], generator=g), t["threshold"])]
    for number, (scores, threshold) in enumerate(tables):
        scores = torch.as_tensor(scores, dtype=torch.float32)
        label = named("heads_above", f"scores {tuple(scores.shape)}, threshold={threshold}",
                      shown=shown, random=number > 0, kinds=())
        got = _own(fn, label, scores.clone(), threshold, shown=shown)
        if not isinstance(got, list):
            raise CheckFailed(f"{label}: return a list of (layer, head) pairs, got "
                              f"{type(got).__name__}")
        try:
            got = [tuple(int(x) for x in pair) for pair in got]
            if any(len(pair) != 2 for pair in got):
                raise ValueError
        except (TypeError, ValueError):
            raise CheckFailed(f"{label}: return a list of (layer, head) pairs of ints, got "
                              f"{got!r:.80}") from None
        expected = heads_above_reference(scores, threshold)
        if got == expected:
            check_equal(got, expected, what=label)  # publishes it for the grader
            continue
        n_layers, n_heads = scores.shape
        if sorted(got) == sorted(expected):
            raise CheckFailed(f"{label}: the right heads, in the wrong order: the highest score "
                              "comes first")
        if sorted((h, l) for l, h in got) == sorted(expected):
            raise CheckFailed(f"{label}: the pairs are (head, layer): give (layer, head), the "
                              "row and column of the table")
        flat = scores.flatten()
        wrong_divmod = [divmod(i, n_layers) for i in flat.argsort(descending=True).tolist()
                        if flat[i] > threshold]
        if n_layers != n_heads and got == wrong_divmod:
            raise CheckFailed(f"{label}: a flat index i is at row i // n_heads, column "
                              "i % n_heads (that divided by n_layers)")
        if len(got) != len(expected):
            side = "many" if len(got) > len(expected) else "few"
            raise CheckFailed(f"{label}: {len(got)} heads is too {side}: keep the heads whose "
                              "score is above the threshold")
        raise CheckFailed(f"{label} is not right: compare each (layer, head) with the table")


# --- 5. missing or ignored -------------------------------------------------------------------

def query_inputs(pos=16, period=5, seed=0):
    """Seeded repeated tokens (pos,) with vocabulary 4·period (chance coincidences happen),
    and a causal pattern (pos, pos) that looks at the key after an earlier copy for some
    queries and elsewhere for others."""
    torch = _torch()
    from ..tasks import repeated_tokens
    g = torch.Generator().manual_seed(seed)
    tokens = repeated_tokens(1, pos, 4 * period, period, g)[0]
    i = torch.arange(pos)[:, None]
    j = torch.arange(pos)[None, :]
    target = (j <= i - period + 1) & ((i - j + 1) % period == 0)
    looks = torch.rand(pos, 1, generator=g) < 0.5          # half of the queries look there
    scores = 2 * torch.randn(pos, pos, generator=g) + 6 * (target & looks)
    pattern = scores.masked_fill(j > i, float("-inf")).softmax(-1)
    return tokens, pattern


def missing_or_ignored_reference(tokens, pattern, i, threshold=0.5, keys="after-copy",
                                 see_future=False, reverse=False):
    """The label of query i: ``missing`` if no key j (1 <= j <= i) holds the answer
    (tokens[j-1] == tokens[i] and tokens[j] == tokens[i+1]), ``ignored`` if the pattern puts
    less than ``threshold`` on those keys, else ``used``.  The other arguments give the
    outputs of the usual mistakes."""
    last = len(tokens) - 1 if see_future else i
    holds = []
    for j in range(1, last + 1):
        if keys == "after-copy":
            ok = tokens[j - 1] == tokens[i] and tokens[j] == tokens[i + 1]
        else:  # the earlier copy of the current token itself
            ok = j < i and tokens[j] == tokens[i]
        if ok:
            holds.append(j)
    if not holds:
        return "missing"
    weight = float(sum(pattern[i, j] for j in holds))
    low = weight < threshold
    if reverse:
        low = not low
    return "ignored" if low else "used"


def check_missing_or_ignored(fn, cases: Sequence[Mapping] = (*QUERY_CASES, *RANDOM_QUERY),
                             threshold: float = THRESHOLD) -> None:
    """Check ``fn(tokens, pattern, i, threshold) -> "missing" | "ignored" | "used"`` for every
    query i < pos - 1 of seeded repeated tokens and patterns (:func:`query_inputs`)."""
    for case in cases:
        tokens, pattern = query_inputs(**case)
        pos = len(tokens)
        shown = is_shown(case, (*QUERY_CASES, *RANDOM_QUERY)) and threshold == THRESHOLD
        label = ((RANDOM_TAG if is_shown(case, RANDOM_QUERY) else "")
                 + f"missing_or_ignored on {pos} tokens with period {case['period']}" if shown
                 else on_hidden("missing_or_ignored"))
        got = []
        for i in range(pos - 1):
            at = f"{label}, query {i}" if shown else label  # a hidden input's positions unsaid
            answer = _own(fn, at, tokens.clone(), pattern.clone(), i, threshold, shown=shown)
            if not isinstance(answer, str) or answer.strip().lower() not in LABELS:
                raise CheckFailed(f"{at}: answer with one of "
                                  f"{', '.join(map(repr, LABELS))}, got {answer!r:.60}")
            got.append(answer.strip().lower())

        def labels(**kw):
            return [missing_or_ignored_reference(tokens, pattern, i, threshold, **kw)
                    for i in range(pos - 1)]

        expected = labels()
        if got == expected:
            check_equal(got, expected, what=label)  # publishes it for the grader
            continue
        mistakes = {
            "that looks for the earlier copy of the current token: the answer is the token "
            "after it (key j with tokens[j-1] == tokens[i] and tokens[j] == tokens[i+1])":
                labels(keys="copy"),
            "that counts keys after the query, which the causal mask hides: information only "
            "there is missing, not ignored (look at keys 1 .. i)": labels(see_future=True),
            "'ignored' and 'used' look swapped: ignored means the weight on the keys that hold "
            "the answer is below the threshold": labels(reverse=True),
        }
        for diagnosis, wrong in mistakes.items():
            if wrong != expected and got == wrong:
                raise CheckFailed(f"{label} is not right: {diagnosis}")
        bad = [i for i in range(pos - 1) if got[i] != expected[i]]
        if not shown:
            raise CheckFailed(f"{label}: some queries get the wrong label")
        raise CheckFailed(f"{label}: {len(bad)} of {pos - 1} queries get the wrong label, the "
                          f"first at query {bad[0]}")


# The answers of the fixed questions (the recap, the paper's figures, test yourself) are sealed
# (course_lib.checks.sealed): salted hashes of the forms that count as right and of those the
# usual mistakes give, so neither this file nor a message shows them.  Regenerate with
# ``python -m course_lib.checks.seal`` from values worked out in a scratch session (salt
# lesson2/<what>).

RECAP_VERDICT = SEALED['lesson2/recap_verdict']


def check_recap_verdict(verdict) -> None:
    """The recap question for the 64-token inputs: were the failures on the repeats, which the
    long inputs added, mostly ``missing`` or ``ignored``?  (Sealed.)"""
    check_sealed(verdict, RECAP_VERDICT)


# --- 6. real-world examples ------------------------------------------------------------------

PAPER_D_K = SEALED['lesson2/paper_d_k']

PAPER_SCORE_STD = SEALED['lesson2/paper_score_std']


def check_paper(d_k, score_std) -> None:
    """The 2017 paper's base model (:data:`PAPER_BASE`): d_k = d_model / h (a whole number), and
    the measured standard deviation of q·k for standard normal q, k of that width (within 5 %
    of sqrt(d_k), for Monte-Carlo error).  Both sealed."""
    check_sealed(d_k, PAPER_D_K)
    check_sealed(score_std, PAPER_SCORE_STD)


def context_inputs(n_seqs=50, pos=32, period=10, seed=123):
    """Seeded repeated tokens (n_seqs, pos) over the induction model's 64-token vocabulary."""
    torch = _torch()
    from ..tasks import repeated_tokens
    return repeated_tokens(n_seqs, pos, 64, period, torch.Generator().manual_seed(seed))


def check_in_context_score(fn, cases: Sequence[Mapping] = (*CONTEXT_CASES, *RANDOM_CONTEXT)) -> None:
    """Check ``fn(model, tokens, period) -> float``: the mean next-token loss on the tokens of
    the later copies (positions period .. pos-1) minus that on the first copy (positions
    1 .. period-1), in nats, for the shipped induction model.  Reference:
    course_lib.training.next_token_losses; relative tolerance 1e-4."""
    torch = _torch()
    from ..training import load_induction_model, next_token_losses
    model, _ = load_induction_model()
    for case in cases:
        tokens = context_inputs(**case)
        p = case["period"]
        shown = is_shown(case, (*CONTEXT_CASES, *RANDOM_CONTEXT))
        label = named("in_context_score", f"model, tokens {tuple(tokens.shape)}, period={p}",
                      shown=shown, random=is_shown(case, RANDOM_CONTEXT), kinds=())
        got = _as_number(call(fn, label, model, tokens.clone(), p, shown=shown, explain_errors=True),
                         label)
        with torch.no_grad():
            losses = next_token_losses(model, tokens)  # (n_seqs, pos-1): [:, i] predicts token i+1
        first, later = losses[:, :p - 1].mean().item(), losses[:, p - 1:].mean().item()
        check_value(got, later - first, what=label, rel=1e-4, mistakes={
            "the sign is flipped: later copies minus the first copy (negative when the model "
            "learns from the prompt)": first - later,
            "off by one: losses[:, i] is the loss of predicting token i + 1, so the first copy's "
            "tokens 1 .. period-1 are losses[:, :period-1]":
                losses[:, p:].mean().item() - losses[:, :p].mean().item(),
            "that is a ratio: give the difference, later minus first": later / first,
            "that is the loss on the later copies alone: subtract the first copy's": later,
        })


# --- test yourself ---------------------------------------------------------------------------

QKV_OPTIONS = {
    "a": "what a token offers, so that others can find it",
    "b": "what a token is looking for in the others",
    "c": "what a token hands over to those that match it",
    "d": "where the token sits in the sequence",
    "e": "how likely the token is to come next",
}
"""The sentences of test-yourself question 1 (the notebook prints them)."""
TYS1_SEALED = {"query": SEALED["lesson2/tys1/query"], "key": SEALED["lesson2/tys1/key"],
               "value": SEALED["lesson2/tys1/value"]}


def check_tys1(answer) -> None:
    """Test-yourself 1: match query, key and value to their sentences in QKV_OPTIONS (each
    letter sealed)."""
    if not isinstance(answer, Mapping) or set(answer) != set(TYS1_SEALED):
        raise CheckFailed("tys1: give a dict with the keys 'query', 'key' and 'value', each "
                          "mapped to a letter")
    for name in ("query", "key", "value"):
        check_sealed(answer[name], TYS1_SEALED[name])


SCALE_REASONS = {
    "a": "so that each query's weights sum to 1",
    "b": "a dot product of d_k numbers has a variance that grows with d_k; large scores make the "
         "softmax nearly one-hot and its gradient nearly zero",
    "c": "to make attention cheaper to compute",
    "d": "to hide the tokens that come later",
}
"""The options of test-yourself question 2."""


TYS2_REASON = SEALED['lesson2/tys2_reason']

# The two measured figures are sealed with their Monte-Carlo tolerance: five standard errors of
# the difference of two independent means of 10,000 draws (:func:`_mc_tolerance` of the
# reference's spread, about 1 % and 2.3 % of the two means, under 0.01 either way), so any
# honest way of drawing passes, and so does a figure rounded to two decimals, as the question
# asks (off by at most 0.005).  Sealed as mistakes: 0.92 and 0.34 (not what these draws give),
# the swapped pair, and each figure rounded further (to one decimal, or to a whole number when that is
# not 0), which gets "give two decimals" rather than a wrong-measurement hint.
TYS2_UNSCALED = SEALED['lesson2/tys2_unscaled']

TYS2_SCALED = SEALED['lesson2/tys2_scaled']


def check_tys2(reason, unscaled, scaled) -> None:
    """Test-yourself 2: why divide by sqrt(d_k), and the measured mean largest weight over 8
    keys at d_k = 256 without and with the scale (seed 0, 10,000 draws; within five standard
    errors of the reference, about 0.009 and 0.008, so two decimals pass; a figure rounded to
    one decimal is told to give two).  All three sealed."""
    check_sealed(reason, TYS2_REASON)
    check_sealed(unscaled, TYS2_UNSCALED)
    check_sealed(scaled, TYS2_SCALED)


MASK_DOES = {
    "a": "it hides every later token from each query: their scores become -inf, so their "
         "weights are 0",
    "b": "it hides every earlier token from each query",
    "c": "it hides each token from itself",
    "d": "it divides the scores by sqrt(d_k)",
}
WITHOUT_MASK = {
    "a": "the training loss stays high, and generation fails",
    "b": "the training loss falls almost to zero, yet the model fails when it generates",
    "c": "nothing changes: the mask only makes training faster",
    "d": "generation becomes slower but stays right",
}
"""The options of test-yourself question 3."""


TYS3_MASK_DOES = SEALED['lesson2/tys3_mask_does']

TYS3_WITHOUT = SEALED['lesson2/tys3_without']


def check_tys3(mask_does, without) -> None:
    """Test-yourself 3: what the causal mask does, and what goes wrong without it (sealed)."""
    check_sealed(mask_does, TYS3_MASK_DOES)
    check_sealed(without, TYS3_WITHOUT)


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson2")  # one-line pass and fail messages in a notebook (checks.tutor)
