"""Checks for lesson 2, "Attention", on inputs from their own seeded generators (the notebook's random state
is untouched).  References: torch's attention, a Monte-Carlo draw made here (five standard errors),
:mod:`course_lib.tasks` and :mod:`course_lib.training`; the fixed answers are sealed.  A failure names the
likely mistake (words: ``hints/lesson2.toml``), never a hidden input's values or shapes."""
from __future__ import annotations

import math
import random
from functools import lru_cache, partial
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F

from .. import tasks
from . import CheckFailed, _as_number, check_value, got_words, is_shown, on_hidden
from .exercise import RANDOM_TAG, Question, attempt, call, close, compare, exactly, name_mistake, read_choice
from .hints import load as _load_hints, named
from .sealed import load as _load_sealed

SEALED, HINTS = _load_sealed("lesson2"), _load_hints("lesson2")
# The visible tests' fixed inputs (the hidden tests pass others), largest_weight's draws, missing_or_ignored's
# threshold; then one input of each made at run time (seeded), so that an answer ignoring its arguments fails.
ATTENTION_CASES = (dict(batch=(2,), n_q=4, n_k=6, d_k=8, d_v=5, mask=None, seed=0),
                   dict(batch=(2,), n_q=5, n_k=7, d_k=8, d_v=3, mask="random", seed=1))
WEIGHT_CASES, WEIGHT_TRIALS = (dict(d_k=256, n_keys=8, seed=0),), 4000
PATTERN_CASES = (dict(shape=(4, 12, 12), period=4, seed=0, kind="random"),)
MASK_SIZES, QUERY_CASES, THRESHOLD = (5,), (dict(pos=16, period=5, seed=0),), 0.5
CONTEXT_CASES = (dict(n_seqs=50, pos=32, period=10, seed=123),)
LABELS = ("missing", "ignored", "used")


def _draw(name: str, **draws) -> dict:
    r = random.Random(f"lesson2/{name}")  # the same on every run, so the grader's run tries the learner's inputs
    return {k: r.randint(*x) if isinstance(x, tuple) else r.choice(x) if isinstance(x, list) else x
            for k, x in draws.items()}


RANDOM_ATTENTION = (_draw("attention", batch=[(3,), (2, 2)], n_q=(2, 7), n_k=(3, 9), d_k=[4, 12, 16, 24],
                          d_v=(2, 7), mask="random", seed=(100, 10_000)),)
RANDOM_WEIGHT = (_draw("largest_weight", d_k=[8, 32, 48, 128], n_keys=(3, 12), seed=(100, 10_000)),)
RANDOM_MASK_SIZES = (random.Random("lesson2/causal_mask").randint(6, 20),)
_r = random.Random("lesson2/patterns")
_pos = _r.randint(8, 18)
RANDOM_PATTERN = (dict(shape=(_r.randint(2, 5), _pos, _pos), period=_r.randint(2, _pos // 2),
                       seed=_r.randint(100, 10_000), kind="induction"),)
RANDOM_TABLE = _draw("heads_above", n_layers=(2, 5), n_heads=(2, 6), seed=(100, 10_000), threshold=[0.3, 0.4, 0.6])
RANDOM_QUERY = (_draw("queries", pos=(10, 24), period=(3, 8), seed=(100, 10_000)),)
RANDOM_CONTEXT = (_draw("context", n_seqs=(20, 40), pos=(20, 32), period=(5, 12), seed=(100, 10_000)),)
del _r, _pos

_OWN = dict(explain_errors=True, shortcuts={"attention.py": None, "tiled_attention.py": None, "tasks.py": {
    "previous_token_score", "induction_score", "head_scores"}}, c_functions={
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math", "multi_head_attention_forward"})
_try = partial(attempt, **_OWN)


def _tensor(x, what: str):
    if not isinstance(x, torch.Tensor):
        raise CheckFailed(f"{what}: return a torch tensor, got {got_words(x, what, 0)}")
    return x.detach().to(torch.float64)


def _shape(what: str, shape, shown: bool, words: str, hint: str = "") -> str:
    return f"{what}: {words}, got {tuple(shape) if shown else 'another shape'}" + (f": {hint}" if hint else "")


def _after_copies(n: int, period: int, offset: int = 1):
    """(n, n) bool: query i's keys i - period + offset, i - 2·period + offset, ... (the token after each copy)."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j <= i - period + offset) & ((i - j + offset) % period == 0)


# --- 1. attention ----------------------------------------------------------------------------

_MASK_KINDS = {None: "no mask", "random": "with a mask", "causal": "with a causal mask",
               "random-batch": "with a mask of its own for each batch element"}


def attention_inputs(batch=(2,), n_q=4, n_k=6, d_k=8, d_v=5, mask=None, seed=0):
    """Seeded float32 q (*batch, n_q, d_k), k (*batch, n_k, d_k), v (*batch, n_k, d_v) and a bool mask (True =
    may attend): None, "random" (n_q, n_k), "random-batch" (batch[0], 1, ..., n_q, n_k) or "causal" (n_q == n_k);
    a random mask's row has a True and, with room, a False."""
    if mask not in _MASK_KINDS or mask == "causal" and n_q != n_k:
        raise ValueError(f"mask={mask!r} must be None, 'random', 'random-batch' or 'causal' (with n_q == n_k)")
    g, batch, rows = torch.Generator().manual_seed(seed), tuple(batch), torch.arange(n_q)
    q, k, v = (torch.randn(*batch, n, d, generator=g) for n, d in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    if mask in (None, "causal"):
        return q, k, v, None if mask is None else torch.ones(n_q, n_k, dtype=torch.bool).tril()
    m = torch.rand((n_q, n_k) if mask == "random" else (*batch[:1], *[1] * (len(batch) - 1), n_q, n_k),
                   generator=g) < 0.6
    m[..., rows, rows % n_k] = True                     # at least one key per query
    m[..., rows, (rows + 1) % n_k] = n_k == 1           # and, with room, at least one hidden
    return q, k, v, m


def _attend(q, k, v, mask=None, scale="sqrt", axis=-1, masked_score=float("-inf"), mask_after=False):
    scores = q @ k.transpose(-2, -1) / {"sqrt": math.sqrt(q.shape[-1]), "d_k": q.shape[-1]}.get(scale, 1)
    if mask is not None and not mask_after:
        scores = scores.masked_fill(~mask, masked_score)
    weights = torch.softmax(scores, dim=axis)
    weights = weights * mask if mask is not None and mask_after else weights
    return weights @ v, weights


def check_attention(fn, cases: Sequence[Mapping] = (*ATTENTION_CASES, *RANDOM_ATTENTION)) -> None:
    """Check ``fn(q, k, v, mask=None) -> (out (..., n_q, d_v), weights (..., n_q, n_k))``: softmax(q kᵀ / sqrt(d_k))
    v, a bool ``mask`` (True = may attend) on the scores.  Reference: torch's ``scaled_dot_product_attention``."""
    H = HINTS["attention"]
    for case in cases:
        q, k, v, mask = attention_inputs(**case)
        text = ", ".join(f"{n} {tuple(t.shape)}" for n, t in zip("qkv", (q, k, v)))
        text += ", no mask" if mask is None else f", mask {tuple(mask.shape)}"
        kinds = ("batched" if tuple(case.get("batch", ())) else "unbatched", _MASK_KINDS[case.get("mask")])
        label, shown, result = _try(fn, "attention", case, (ATTENTION_CASES, RANDOM_ATTENTION), text,
                                    [t.clone() for t in (q, k, v, mask) if t is not None], kinds=kinds)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise CheckFailed(f"{label}: {H['two_tensors']}, got {got_words(result, label)}")
        out, weights = _tensor(result[0], f"{label}, out"), _tensor(result[1], f"{label}, weights")
        want_out, want_w = (*q.shape[:-1], v.shape[-1]), (*q.shape[:-1], k.shape[-2])
        if out.shape != want_out:
            want = want_out if shown else "(..., n_q, d_v)"
            raise CheckFailed(_shape(label, out.shape, shown, H["out_should"].format(want=want),
                                     H["out_is_weights" if out.shape == want_w else "out_shape"]))
        if weights.shape != want_w:
            transposed = weights.shape == (*want_w[:-2], want_w[-1], want_w[-2])
            words = H["weights_should"] + (f" = {want_w}" if shown else "")
            raise CheckFailed(_shape(label, weights.shape, shown, words, H["transposed"] if transposed else ""))
        changes = named(H, no_scale=dict(scale=None), by_d_k=dict(scale="d_k"), over_queries=dict(axis=-2), **(
            {} if mask is None else dict(mask_ignored=dict(mask=None), mask_inverted=dict(mask=~mask),
                                         masked_zero=dict(masked_score=0.0), mask_after=dict(mask_after=True))),
            swapped=dict(k=v, v=k) if k.shape[-1] == v.shape[-1] else None)
        variants = {d: _attend(**{"q": q, "k": k, "v": v, "mask": mask, **change}) for d, change in changes.items()}
        refs = (F.scaled_dot_product_attention(q, k, v, attn_mask=mask), _attend(q, k, v, mask)[1])
        for idx, (which, got, ref) in enumerate(zip(("out", "weights"), (out, weights), refs)):
            if idx and not close(got, ref) and not close(got.sum(-1), torch.ones(got.shape[:-1]), atol=1e-4, rtol=1e-5):
                raise CheckFailed(f"{label}: {H['not_normalised']}")
            compare(got, ref, what=f"{label}, {which}", mistakes={d: w[idx] for d, w in variants.items()},
                    otherwise=lambda g, _: None if g.isfinite().all() else f"is not right: {H['not_finite']}")


# --- 2. the scale: the largest weight --------------------------------------------------------

@lru_cache(maxsize=64)
def largest_weight_reference(d_k, n_keys, scaled, n_trials=10_000, seed=0, divide_by=None):
    """(mean, std) over ``n_trials`` of the largest softmax weight of a standard normal query (drawn first) over
    ``n_keys`` keys from ``manual_seed(seed)``, the scores divided by sqrt(d_k) if ``scaled`` (or ``divide_by``)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_trials, d_k, generator=g)
    scores = (torch.randn(n_trials, n_keys, d_k, generator=g) @ q[:, :, None])[..., 0]
    largest = (scores / (divide_by or (math.sqrt(d_k) if scaled else 1))).softmax(-1).max(-1).values
    return largest.mean().item(), largest.std().item()


def _mc_tolerance(std, n_trials) -> float:  # five standard errors of a difference of two means
    return 5 * std * math.sqrt(2 / n_trials) + 1e-9


def check_largest_weight(fn, cases: Sequence[Mapping] = (*WEIGHT_CASES, *RANDOM_WEIGHT),
                         n_trials: int = WEIGHT_TRIALS) -> None:
    """Check ``fn(d_k, n_keys, scaled, n_trials, seed) -> float``: the mean largest softmax weight
    (:func:`largest_weight_reference`), within five standard errors of the reference."""
    H = HINTS["largest_weight"]
    for case, scaled in ((case, scaled) for case in cases for scaled in (False, True)):
        args = dict(d_k=case["d_k"], n_keys=case["n_keys"], scaled=scaled, n_trials=n_trials, seed=case["seed"])
        label, _, got = _try(fn, "mean_largest_weight", case, (WEIGHT_CASES, RANDOM_WEIGHT), args, kwargs=args,
                             kinds=(f"scaled={scaled}",), shown=n_trials == WEIGHT_TRIALS)
        ref = partial(largest_weight_reference, case["d_k"], case["n_keys"], n_trials=n_trials, seed=case["seed"])
        got, (mean, std) = _as_number(got, label), ref(scaled)
        tol = _mc_tolerance(std, n_trials)
        if abs(got - mean) <= tol:  # the grader compares with the model answer's: twice tol
            check_value(got, mean, what=label, rel=2 * tol / abs(mean))
            continue
        wrong = named(H, flag_scaled=ref(False)[0] if scaled else None, flag_unscaled=None if scaled else ref(True)[0],
                      by_d_k=ref(True, divide_by=case["d_k"])[0] if scaled else None)
        name_mistake(label, {H["average"]: math.isclose(got, 1 / case["n_keys"], rel_tol=1e-6), H["above_one"]: got > 1,
                             **{d: abs(w - mean) > 2 * tol and abs(got - w) <= tol for d, w in wrong.items()}})
        raise CheckFailed(f"{label} is not right: " + H["too_far"].format(side="large" if got > mean else "small"))


# --- 3. the causal mask ----------------------------------------------------------------------

def check_causal_mask(fn, sizes: Sequence[int] = (*MASK_SIZES, *RANDOM_MASK_SIZES)) -> None:
    """Check ``fn(n) -> (n, n) bool tensor``: True where query i may attend to key j, j <= i.
    Reference: ``ones(n, n).tril()``."""
    H = HINTS["causal_mask"]
    for n in sizes:
        label, shown, got = _try(fn, "causal_mask", n, (MASK_SIZES, RANDOM_MASK_SIZES), str(n), (n,))
        if not isinstance(got, torch.Tensor):
            raise CheckFailed(f"{label}: {H['not_tensor']}, got {got_words(got, label, 0)}")
        if tuple(got.shape) != (n, n):
            raise CheckFailed(f"{label}: {H['shape']}" + (f"; got shape {tuple(got.shape)}" if shown else ""))
        if got.dtype != torch.bool:
            additive = got.is_floating_point() and bool(torch.isinf(got).any())
            raise CheckFailed(f"{label}: " + (H["additive"] if additive else H["not_bool"].format(dtype=got.dtype)))
        g, ones, right = got.tolist(), torch.ones(n, n, dtype=torch.bool), torch.ones(n, n, dtype=torch.bool).tril()
        wrong = named(H, diagonal=ones.tril(-1), one_ahead=ones.tril(1), inverted=~right, transposed=ones.triu())
        if not exactly(g, right.tolist(), label, {d: g == w.tolist() != right.tolist() for d, w in wrong.items()}):
            how_many = f"{int((got != right).sum())} of {n * n}" if shown else "some"
            raise CheckFailed(f"{label} is not right: " + H["differ"].format(how_many=how_many))


# --- 4. head scores --------------------------------------------------------------------------

def pattern_inputs(shape=(4, 12, 12), period=4, seed=0, kind="random"):
    """A seeded causal attention pattern (..., pos, pos), rows summing to 1: ``random`` (softmax
    of standard normal scores) or ``induction`` (most weight on the key after each earlier copy)."""
    if kind not in ("random", "induction"):
        raise ValueError(f"kind={kind!r} must be 'random' or 'induction'")
    scores = 2 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    scores = scores + 4 * _after_copies(shape[-1], period) if kind == "induction" else scores
    return scores.masked_fill(torch.ones(shape[-1], shape[-1], dtype=torch.bool).triu(1), float("-inf")).softmax(-1)


def _head_scores(fn, cases, name, reference, mistakes, periodic=False) -> None:
    H = HINTS["head_scores"]
    for case in cases:
        p, period = pattern_inputs(**case), case["period"]
        kinds = (f"{'an induction-like' if case.get('kind') == 'induction' else 'a random'} causal pattern",
                 "a single pattern, no leading dimensions" if len(case["shape"]) == 2 else "")
        label, shown, got = _try(fn, name, case, (PATTERN_CASES, RANDOM_PATTERN), f"pattern {tuple(p.shape)}" + (
            f", period={period}" if periodic else ""), (p.clone(), period)[:1 + periodic], kinds=kinds)
        got = _tensor(got, label)
        compare(got, reference(p, period), what=label, shown=shown, rtol=1e-5, atol=1e-6, mistakes=mistakes(
            p.double(), period), shape_words=H["leading"] + (H["per_query"] if got.dim() > p.dim() - 2 else ""))


def check_previous_token_score(fn, cases: Sequence[Mapping] = (*PATTERN_CASES, *RANDOM_PATTERN)) -> None:
    """Check ``fn(pattern) -> (...)`` scores: the mean, over queries 1 .. pos-1, of the weight
    each puts on the key just before it.  Reference: course_lib.tasks.previous_token_score."""
    _head_scores(fn, cases, "previous_token_score", lambda p, _: tasks.previous_token_score(p), lambda d, _: named(
        HINTS["previous_token_score"], itself=d.diagonal(0, -2, -1).mean(-1), next_key=d.diagonal(1, -2, -1).mean(-1),
        by_pos=d.diagonal(-1, -2, -1).sum(-1) / d.shape[-1], summed=d.diagonal(-1, -2, -1).sum(-1)))


def _induction_variant(p, period, offset=1, every_copy=True, first_query=None):
    i, j = torch.arange(p.shape[-1])[:, None], torch.arange(p.shape[-1])[None, :]
    target = _after_copies(p.shape[-1], period, offset) if every_copy else j == i - period + offset
    return (p * target).sum(-1)[..., period if first_query is None else first_query:].mean(-1)


def check_induction_score(fn, cases: Sequence[Mapping] = (*PATTERN_CASES, *RANDOM_PATTERN)) -> None:
    """Check ``fn(pattern, period) -> (...)`` scores: the weight on the keys right after each earlier copy (i - period
    + 1, i - 2·period + 1, ...), averaged over queries i >= period.  Reference: course_lib.tasks.induction_score."""
    v = _induction_variant
    _head_scores(fn, cases, "induction_score", tasks.induction_score, lambda d, t: named(
        HINTS["induction_score"], the_copy=v(d, t, offset=0), two_after=v(d, t, offset=2),
        latest_only=v(d, t, every_copy=False), every_query=v(d, t, first_query=0), late=v(d, t, first_query=t + 1),
        early=v(d, t, first_query=t - 1)), periodic=True)


def heads_above_reference(scores, threshold):
    """[(layer, head), ...] with score > threshold, the highest first."""
    order = scores.flatten().argsort(descending=True, stable=True).tolist()
    return [divmod(i, scores.shape[1]) for i in order if scores.flatten()[i] > threshold]


def check_heads_above(fn, tables: Sequence = None) -> None:
    """Check ``fn(scores, threshold) -> [(layer, head), ...]``: every head of an (n_layers,
    n_heads) score table above the threshold, the highest score first."""
    H, t = HINTS["heads_above"], RANDOM_TABLE
    visible = [(torch.tensor([[0.10, 0.92, 0.30], [0.61, 0.05, 0.74]]), 0.5), (torch.rand(
        t["n_layers"], t["n_heads"], generator=torch.Generator().manual_seed(t["seed"])), t["threshold"])]
    for number, (scores, threshold) in enumerate(visible if tables is None else tables):
        scores = torch.as_tensor(scores, dtype=torch.float32)
        label, _, got = _try(fn, "heads_above", number, ((0,), (1,)), f"scores {tuple(scores.shape)}, "
                             f"threshold={threshold}", (scores.clone(), threshold), shown=tables is None)
        if not isinstance(got, list):
            raise CheckFailed(f"{label}: {H['pairs']}, got {got_words(got, label, 0)}")
        try:
            got = [(int(layer), int(head)) for layer, head in got]
        except (TypeError, ValueError):
            raise CheckFailed(f"{label}: {H['pairs']} of ints, got {got_words(got, label, 80)}") from None
        expected, (n_layers, n_heads), flat = heads_above_reference(scores, threshold), scores.shape, scores.flatten()
        by_layers = [divmod(i, n_layers) for i in flat.argsort(descending=True).tolist() if flat[i] > threshold]
        side = "many" if len(got) > len(expected) else "few"
        if not exactly(got, expected, label, {
                H["order"]: sorted(got) == sorted(expected),
                H["head_layer"]: sorted((h, l) for l, h in got) == sorted(expected),
                H["by_layers"]: n_layers != n_heads and got == by_layers,
                H["count"].format(n=len(got), side=side): len(got) != len(expected)}, sep=": "):
            raise CheckFailed(f"{label} is not right: {H['compare']}")


# --- 5. missing or ignored -------------------------------------------------------------------

def query_inputs(pos=16, period=5, seed=0):
    """Seeded repeated tokens (pos,) with vocabulary 4·period (chance coincidences happen), and a
    causal pattern (pos, pos) on the key after an earlier copy for about half of the queries."""
    g = torch.Generator().manual_seed(seed)
    tokens = tasks.repeated_tokens(1, pos, 4 * period, period, g)[0]
    looks = _after_copies(pos, period) & (torch.rand(pos, 1, generator=g) < 0.5)
    scores = 2 * torch.randn(pos, pos, generator=g) + 6 * looks
    return tokens, scores.masked_fill(torch.ones(pos, pos, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)


def missing_or_ignored_reference(tokens, pattern, i, threshold=0.5, keys="after-copy", see_future=False, reverse=False):
    """Query i's label: ``missing`` if no key j (1 <= j <= i) holds the answer (tokens[j-1] == tokens[i], tokens[j]
    == tokens[i+1]), ``ignored`` if the pattern puts less than ``threshold`` on those, else ``used``; or a mistake's."""
    holds = [j for j in range(1, (len(tokens) - 1 if see_future else i) + 1)
             if (tokens[j - 1] == tokens[i] and tokens[j] == tokens[i + 1] if keys == "after-copy"
                 else j < i and tokens[j] == tokens[i])]
    if not holds:
        return "missing"
    return "ignored" if (float(sum(pattern[i, j] for j in holds)) < threshold) != reverse else "used"


def check_missing_or_ignored(fn, cases: Sequence[Mapping] = (*QUERY_CASES, *RANDOM_QUERY),
                             threshold: float = THRESHOLD) -> None:
    """Check ``fn(tokens, pattern, i, threshold) -> "missing" | "ignored" | "used"`` for every
    query i < pos - 1 of seeded repeated tokens and patterns (:func:`query_inputs`)."""
    H = HINTS["missing_or_ignored"]
    for case in cases:
        tokens, pattern = query_inputs(**case)
        n, shown = len(tokens) - 1, is_shown(case, (*QUERY_CASES, *RANDOM_QUERY)) and threshold == THRESHOLD
        label = ((RANDOM_TAG if is_shown(case, RANDOM_QUERY) else "") + H["on_tokens"].format(
            pos=n + 1, period=case["period"]) if shown else on_hidden("missing_or_ignored"))
        at = [f"{label}, query {i}" if shown else label for i in range(n)]  # a hidden input's positions unsaid
        got = [read_choice(call(fn, at[i], tokens.clone(), pattern.clone(), i, threshold, shown=shown, **_OWN), at[i],
                           LABELS) for i in range(n)]
        expected, copy, future, reverse = (
            [missing_or_ignored_reference(tokens, pattern, i, threshold, **kw) for i in range(n)]
            for kw in ({}, dict(keys="copy"), dict(see_future=True), dict(reverse=True)))
        wrong = named(H, copy=copy, future=future, reversed=reverse)
        if not exactly(got, expected, label, {d: got == w != expected for d, w in wrong.items()}):
            bad = [i for i in range(n) if got[i] != expected[i]]
            raise CheckFailed(f"{label}: " + (H["wrong_labels"].format(bad=len(bad), n=n, first=bad[0]) if shown
                                              else H["some_wrong"]))


# --- 6. real-world examples ------------------------------------------------------------------

def context_inputs(n_seqs=50, pos=32, period=10, seed=123):
    """Seeded repeated tokens (n_seqs, pos) over the induction model's 64-token vocabulary."""
    return tasks.repeated_tokens(n_seqs, pos, 64, period, torch.Generator().manual_seed(seed))


def check_in_context_score(fn, cases: Sequence[Mapping] = (*CONTEXT_CASES, *RANDOM_CONTEXT)) -> None:
    """Check ``fn(model, tokens, period) -> float``: the shipped induction model's mean next-token loss (nats) on the
    later copies (positions period .. pos-1) minus that on the first (1 .. period-1), rel 1e-4."""
    from ..training import load_induction_model, next_token_losses  # not on import: it loads tqdm
    model, _ = load_induction_model()
    for case in cases:
        tokens, p = context_inputs(**case), case["period"]
        label, _, got = attempt(fn, "in_context_score", case, (CONTEXT_CASES, RANDOM_CONTEXT), f"model, tokens "
                                f"{tuple(tokens.shape)}, period={p}", (model, tokens.clone(), p), explain_errors=True)
        with torch.no_grad():
            losses = next_token_losses(model, tokens)  # (n_seqs, pos-1): [:, i] predicts token i+1
        first, later = losses[:, :p - 1].mean().item(), losses[:, p - 1:].mean().item()
        shifted = losses[:, p:].mean().item() - losses[:, :p].mean().item()
        check_value(got, later - first, what=label, rel=1e-4, mistakes=named(
            HINTS["in_context_score"], sign=first - later, off_by_one=shifted, ratio=later / first, later_only=later))


# --- sealed answers: the recap, the paper's figures, test yourself ---------------------------
# Salted hashes of the right forms and of the usual mistakes' (course_lib.checks.sealed): regenerate them
# with ``python -m course_tools.seal``.

QKV_OPTIONS, SCALE_REASONS, MASK_DOES, WITHOUT_MASK = (HINTS["options"][t] for t in (
    "tys1_options", "tys2_options", "tys3_mask_does", "tys3_without"))
"""The options of test-yourself questions 1 (what query, key and value are), 2 (why the scale) and 3 (what the
mask does, what goes wrong without it), as the notebook prints them: words of hints/lesson2.toml."""

check_recap_verdict = Question([SEALED["lesson2/recap_verdict"]])
"""The recap: were the 64-token inputs' added failures mostly ``missing`` or ``ignored``?"""
check_paper = Question([SEALED["lesson2/paper_d_k"], SEALED["lesson2/paper_score_std"]])
"""The paper's base model (d_model = 512, h = 8): d_k = d_model / h, and the measured standard
deviation of q·k for standard normal q, k of that width (within 5 % of sqrt(d_k))."""

TYS1_SEALED = {name: SEALED[f"lesson2/tys1/{name}"] for name in ("query", "key", "value")}


def check_tys1(answer) -> None:
    """Test-yourself 1: a dict matching query, key and value to letters of QKV_OPTIONS (sealed)."""
    if not isinstance(answer, Mapping) or set(answer) != set(TYS1_SEALED):
        raise CheckFailed(HINTS["tys1"]["keys"])
    Question(list(TYS1_SEALED.values()))(*(answer[name] for name in TYS1_SEALED))


check_tys2 = Question([SEALED[f"lesson2/{s}"] for s in ("tys2_reason", "tys2_unscaled", "tys2_scaled")])
"""Test-yourself 2: why divide by sqrt(d_k), and the mean largest weight over 8 keys at d_k = 256 without and with
the scale (seed 0, 10,000 draws), sealed within five standard errors of a difference (two decimals pass)."""

check_tys3 = Question([SEALED["lesson2/tys3_mask_does"], SEALED["lesson2/tys3_without"]])
"""Test-yourself 3: what the causal mask does, and what goes wrong without it."""

from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson2")  # one-line pass and fail messages in a notebook (course_lib.tutor)
