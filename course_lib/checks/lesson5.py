"""Checks for lesson 5, "Generation and the KV cache", on :mod:`course_lib.checks.exercise`.

Each check compares a learner's answer with an independent reference and names the likely
mistake (values without keys, bits for bytes, multiply-adds for FLOPs, GB for GiB, query heads
for key/value heads, the weights left out of the budget, ...) without showing the expected value:

* generation with a KV cache against :meth:`course_lib.tiny_gpt.TinyGPT.generate` with
  ``use_cache=False`` on seeded toy models; every call the loop makes to ``model.run`` is
  recorded, so a loop that does not use the cache fails even when its tokens are right;
* cache bytes and requests that fit against :mod:`course_lib.memory` (itself tested against
  ``transformers`` on the meta device and the bytes a toy model's cache really holds);
* FLOPs per weight byte, the ridge point and the decode batch at the ridge against their
  definitions (a multiply-add is 2 FLOPs) and :data:`course_lib.units.ACCELERATORS`.

Every function exercise's visible test also tries an input made at run time from a seeded
``random.Random`` (:data:`RANDOM_TAG`); the learner's functions run through
:func:`~course_lib.checks.exercise.call` (course_lib's counters refused).
"""
from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

from ..cards import load_card
from ..memory import kv_cache_bytes_per_sequence, requests_that_fit
from ..params import count_params
from ..shapes import ModelShape
from ..units import ACCELERATORS, GB, GiB  # noqa: F401 (ACCELERATORS: the lesson's table)
from . import CheckFailed, builds_on, check_close, check_sealed, check_value, is_shown
from .exercise import RANDOM_TAG, call, label, merged as _merged
from .sealed import load as _load_sealed

SEALED = _load_sealed("lesson5")
"""This assignment's sealed answers by salt (sealed_answers/lesson5.json)."""
A100 = "A100 SXM 80GB"
BYTES_16BIT = 2
PREFILL_TOKENS = 512
"""The lesson's prompt length for prefill."""
SEVEN_B = dict(n_layers=32, n_heads=32, n_kv_heads=32, d_head=128)
"""The lesson's 7B-class shape (Llama 2 7B, Touvron et al., 2023): 32 layers, 32 heads of 128."""
SEVEN_B_TOKENS = 8192
RECAP = dict(card="Llama-2-13b-hf", n_tokens=4096, memory_gb=80, bytes_per_number=2,
             accelerator=A100)
"""The recap's service: Llama 2 13B at its full context of 4,096 tokens on one A100 SXM 80GB
(80 × 10^9 bytes, course_lib.units' convention), weights and cache in 16-bit."""
_DTYPE = {0.5: "int4", 1: "int8", 2: "bf16", 4: "fp32"}


def _dtype(bytes_per_number) -> str:
    if bytes_per_number not in _DTYPE:
        raise ValueError(f"bytes_per_number={bytes_per_number!r} is not one of {sorted(_DTYPE)}")
    return _DTYPE[bytes_per_number]


def cache_shape(n_layers, n_heads, n_kv_heads, d_head) -> ModelShape:
    """A Llama-style ModelShape with these attention numbers (the other sizes do not enter the
    cache and are placeholders)."""
    return ModelShape(d_model=n_heads * d_head, n_layers=n_layers, n_heads=n_heads,
                      n_kv_heads=n_kv_heads, d_head=d_head, d_ff=4 * n_heads * d_head,
                      d_vocab=32000, n_ctx=4096, mlp="swiglu", norm="rmsnorm",
                      positions="rotary", qkv_bias=False, out_bias=False, mlp_bias=False,
                      tied_embeddings=False, model_type="llama")


def _heads_kind(n_heads, n_kv_heads) -> str:
    if n_kv_heads == n_heads:
        return "multi-head attention (a key/value head per query head)"
    return ("multi-query attention (one key/value head)" if n_kv_heads == 1
            else "grouped-query attention")


def _each(fn, name: str, cases, visible, random_case, kinds=lambda case: ()):
    """For each case: (case, the learner's ``fn(**case)``, the case's label)."""
    for case in cases:
        shown = is_shown(case, visible)
        what = label(name, case, shown=shown, random=case == random_case, kinds=kinds(case))
        yield case, call(fn, what, shown=shown, **case), what


# --- exercise 1: generation with a cache --------------------------------------------------------

def _random_gen_case(r: random.Random) -> dict:
    kv = r.choice((1, 2))
    shape = (dict(kind="gpt2", d_model=8 * r.randint(2, 4), n_layers=r.randint(1, 3),
                  n_heads=r.choice((2, 4)), d_vocab=r.randint(20, 60), n_ctx=64)
             if r.random() < 0.5 else
             dict(kind="llama", d_model=16 * kv * r.randint(1, 2), n_layers=r.randint(1, 3),
                  n_heads=4 * kv, n_kv_heads=kv, d_ff=r.choice((32, 48)),
                  d_vocab=r.randint(20, 60), n_ctx=64))
    return dict(shape=shape, batch=r.randint(1, 3), prompt_len=r.randint(2, 8),
                n_new=r.randint(3, 10), seed=r.randint(10, 999))


RANDOM_GEN_CASE = _random_gen_case(random.Random("lesson5/generate_cached"))
GEN_CASES = (dict(shape=dict(kind="gpt2", d_model=32, n_layers=2, n_heads=4, d_vocab=50,
                             n_ctx=64), batch=2, prompt_len=6, n_new=12, seed=0),
             RANDOM_GEN_CASE)
"""Visible cases of :func:`check_generate_cached` (one made at run time)."""


def toy_model(shape: Mapping, seed: int):
    """A seeded TinyGPT for a generation case.  ``shape``: ``kind`` ("gpt2" or "llama") and the
    keyword arguments of ``gpt2_shape`` / ``llama_shape``.  Weights ~ Normal(0, 0.5): wide
    enough that greedy decoding does not settle on one token, so a stale cache shows."""
    import torch

    from ..shapes import gpt2_shape, llama_shape
    from ..tiny_gpt import TinyGPT

    kw = dict(shape)
    model = TinyGPT({"gpt2": gpt2_shape, "llama": llama_shape}[kw.pop("kind")](**kw))
    model.init_weights(torch.Generator().manual_seed(seed), std=0.5)
    return model.eval()


def _prompt(model, batch, prompt_len, seed):
    import torch
    return torch.randint(0, model.shape.d_vocab, (batch, prompt_len),
                         generator=torch.Generator().manual_seed(1000 + seed))


def _record_calls(model) -> list:
    """Wrap ``model.run`` (this instance) to record (new tokens fed, positions already cached)
    per call, and make ``model.generate`` fail.  Returns the list of calls."""
    calls, run = [], model.run

    def recorded(tokens, past_kvs=None, return_patterns=False):
        calls.append((int(tokens.shape[1]), 0 if past_kvs is None else int(past_kvs[0][0].shape[2])))
        return run(tokens, past_kvs, return_patterns)

    def no_generate(*args, **kwargs):
        raise CheckFailed("your function calls model.generate: write the loop yourself, with "
                          "model.run(tokens, past_kvs)")

    model.run, model.generate = recorded, no_generate
    return calls


def _diagnose_calls(calls, label, shown: bool = True) -> None:
    if not calls:
        raise CheckFailed(f"{label} never calls model.run (or model(...)): run the prompt "
                          "through the model first, then one new token at a time")
    if calls[0][1] != 0:
        raise CheckFailed(f"{label}: the first call already has a cache: start with past_kvs=None")
    for (n_prev, past_prev), (n, past) in zip(calls, calls[1:]):
        if past == 0:
            raise CheckFailed(f"{label} runs the whole sequence again at a step (no past_kvs): "
                              "that is generation without a cache. After the prompt, feed only "
                              "the newest token, with the kvs the previous call returned")
        if n != 1:
            raise CheckFailed(f"{label} feeds {n if shown else 'several'} tokens at a step after "
                              "the prompt: with a cache, feed only the newest token (shape (batch, 1))")
        if past != past_prev + n_prev:
            raise CheckFailed(f"{label} passes a stale cache: at each step pass the kvs that "
                              "the latest call returned (they include the token just added), "
                              "not an earlier call's")


def check_generate_cached(fn, cases: Sequence[Mapping] = GEN_CASES) -> None:
    """Check ``fn(model, prompt, n_new) -> tokens``: greedy generation with a KV cache on a
    TinyGPT and a (batch, pos) prompt, returning (batch, pos + n_new) tokens equal to
    ``model.generate(prompt, n_new, use_cache=False)``; the calls to ``model.run`` must be a
    cached loop's (the prompt once with no cache, then one token at a time with the latest
    cache); ``model.generate`` may not be called.  Runs on one torch thread."""
    from ..training import num_threads

    with num_threads(1):
        for case in cases:
            _check_generate_case(fn, case)


def _check_generate_case(fn, case: Mapping) -> None:
    import torch

    model, s, n_new, p = toy_model(case["shape"], case["seed"]), case["shape"], case["n_new"], case["prompt_len"]
    prompt = _prompt(model, case["batch"], p, case["seed"])
    expected = model.generate(prompt, n_new, use_cache=False)
    shown = is_shown(case, GEN_CASES)
    sizes = "" if s == GEN_CASES[0]["shape"] else \
        "(" + ", ".join(f"{k}={v}" for k, v in s.items() if k != "kind") + ") "
    what = (("" if case != RANDOM_GEN_CASE else RANDOM_TAG) + f"generate_cached on a {s['kind']} "
            f"toy model {sizes}(batch {case['batch']}, prompt of {p}, n_new={n_new})" if shown else
            label("generate_cached", {}, shown=False, kinds=(
                f"a {s['kind']} toy model", _heads_kind(s["n_heads"], s.get("n_kv_heads", s["n_heads"])),
                "a one-token prompt" if p == 1 else "")))
    calls = _record_calls(model)
    got = call(fn, what, model, prompt.clone(), n_new, shown=shown)

    def fail(text):
        raise CheckFailed(what + text)
    if not isinstance(got, torch.Tensor):
        fail(f": return a tensor of token ids (batch, pos + n_new), got {type(got).__name__}")
    if got.dtype.is_floating_point or got.dtype.is_complex or got.dtype == torch.bool:
        fail(f": return integer token ids (torch.long, as the prompt), got a tensor of {got.dtype}")
    want = f" = ({case['batch']}, {p + n_new}), got {tuple(got.shape)}" if shown else ""
    if got.dim() != 2 or got.shape[0] != case["batch"]:
        fail(f": return shape (batch, pos + n_new){want}")
    width = got.shape[1]
    if width == n_new:
        fail(" returns only the new tokens: return the prompt followed by them")
    if width in (p + n_new - 1, p + n_new + 1):
        fail(f" returns {f'{width - p} new tokens, not {n_new}' if shown else 'one new token too ' + ('many' if width > p + n_new else 'few')}"
             ": an off-by-one in the loop")
    if width != p + n_new:
        fail(f": return shape (batch, pos + n_new){want}")
    if not torch.equal(got[:, :p], prompt):
        fail(": the result must start with the prompt, unchanged")
    _diagnose_calls(calls, what, shown)
    if len(calls) > n_new + 1:
        fail(f" calls the model {f'{len(calls)} times' if shown else 'too often'}: once for the "
             "prompt and once per new token is enough")
    if not torch.equal(got, expected):
        fail(": the new tokens differ from greedy generation without a cache. Pick each token "
             "as the argmax of the logits at the last position, logits[:, -1], and append it to every row")
    # Passed: publish what was decided (records for the grader), the same for any right loop.
    not_cached = sum(1 for (n0, p0), (n, past) in zip(calls, calls[1:]) if n != 1 or past != p0 + n0)
    check_value(not_cached, 0, what=f"{what}: steps not fed one token with the latest cache", integer=True)
    check_close(got, expected, what=f"{what}: the tokens", rtol=0.0, atol=0.0)


# --- exercise 2: the size of the cache ----------------------------------------------------------

def _random_kv_case(seed: str = "lesson5/kv_cache_size") -> dict:
    """A cache shape drawn at run time from ``random.Random(seed)``: 1 to 8 key/value heads, each
    serving 1, 2 or 4 query heads, 2 to 40 layers, d_head 32 to 128, 100 to 20,000 tokens, 1, 2
    or 4 bytes a number."""
    rng = random.Random(seed)
    n_kv = rng.choice((1, 2, 4, 8))
    return dict(n_layers=rng.randint(2, 40), n_heads=n_kv * rng.choice((1, 2, 4)), n_kv_heads=n_kv,
                d_head=rng.choice((32, 48, 64, 80, 96, 128)), n_tokens=rng.randint(100, 20_000),
                bytes_per_number=rng.choice((1, 2, 4)))


RANDOM_KV_CASE = _random_kv_case()
KV_CASES = (dict(SEVEN_B, n_tokens=SEVEN_B_TOKENS, bytes_per_number=BYTES_16BIT),
            dict(n_layers=32, n_heads=32, n_kv_heads=8, d_head=128, n_tokens=8192,
                 bytes_per_number=2),
            RANDOM_KV_CASE)
"""Visible cases of :func:`check_kv_cache_size`: the 7B-class shape, Llama 3 8B's (8 key/value
heads), and a shape made at run time."""


def kv_cache_expected(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number) -> int:
    """course_lib's bytes for one sequence's cache of this shape."""
    return kv_cache_bytes_per_sequence(cache_shape(n_layers, n_heads, n_kv_heads, d_head),
                                       n_tokens, _dtype(bytes_per_number))


def kv_mistakes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number) -> dict:
    """``{diagnosis: wrong bytes}`` for the usual slips in a cache size."""
    kv = kv_cache_expected(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number)
    q = kv * n_heads / n_kv_heads
    query_heads = {} if n_heads == n_kv_heads else {
        "that uses the query heads (n_heads); the cache holds the key/value heads "
        "(n_kv_heads)": q,
        "that uses the query heads instead of the key/value heads, and counts keys but not "
        "values": q / 2}
    return _merged({
        "the cache keeps a key AND a value for each token: a factor 2 is missing": kv / 2,
        **query_heads,
        "that counts bits (8 per byte); the question asks for bytes": 8 * kv,
        "that is a count of numbers; multiply by bytes_per_number for bytes": kv / bytes_per_number,
        "every layer keeps its own keys and values: multiply by n_layers": kv / n_layers,
        "that is one token's cache; multiply by n_tokens": kv / n_tokens,
        "that is in GiB; the question asks for bytes": kv / GiB,
        "that is in GB; the question asks for bytes": kv / GB})


def check_kv_cache_size(fn, cases: Sequence[Mapping] = KV_CASES) -> None:
    """Check ``fn(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number)``: the
    bytes of one sequence's KV cache, against ``memory.kv_cache_bytes_per_sequence``."""
    for case, got, what in _each(fn, "kv_cache_size", cases, KV_CASES, RANDOM_KV_CASE,
                                 lambda c: (_heads_kind(c["n_heads"], c["n_kv_heads"]),)):
        check_value(got, kv_cache_expected(**case), what=what, rel=1e-9, mistakes=kv_mistakes(**case))


# --- exercise 3: FLOPs per byte of weights ------------------------------------------------------

RANDOM_INTENSITY_CASE = (lambda rng: dict(n_tokens=rng.randint(2, 4000),
                                           bytes_per_number=rng.choice((1, 4))))(
    random.Random("lesson5/flops_per_weight_byte"))
"""A pass made at run time (seeded): 2 to 4,000 tokens, 1 or 4 bytes a number."""
INTENSITY_CASES = (dict(n_tokens=1, bytes_per_number=2), dict(n_tokens=512, bytes_per_number=2),
                   RANDOM_INTENSITY_CASE)


def check_flops_per_weight_byte(fn, cases: Sequence[Mapping] = INTENSITY_CASES) -> None:
    """Check ``fn(n_tokens, bytes_per_number)``: FLOPs per byte of weights when one pass handles
    ``n_tokens`` tokens, each weight read once and used in one multiply-add (2 FLOPs) per
    token: 2·n_tokens / bytes_per_number."""
    for case, got, what in _each(fn, "flops_per_weight_byte", cases, INTENSITY_CASES,
                                 RANDOM_INTENSITY_CASE):
        n, b = case["n_tokens"], case["bytes_per_number"]
        check_value(got, 2 * n / b, what=what, rel=1e-9, mistakes=_merged({
            "that counts multiply-adds; FLOPs = 2 × multiply-adds": n / b,
            "that divides by bits (8 per byte); the question asks per byte": 2 * n / (8 * b),
            "a weight read once serves every token of the pass: the FLOPs grow with n_tokens, "
            "the bytes do not": 2 / b,
            "that is bytes per FLOP: divide FLOPs by bytes": b / (2 * n),
            "that multiplies by bytes_per_number; divide by it (more bytes a weight means "
            "fewer FLOPs per byte)": 2 * n * b}))


# --- exercise 4: the ridge point ----------------------------------------------------------------

RANDOM_RIDGE_CASE = (lambda r: dict(peak_flops=r.choice((100e12, 400e12, 1979e12, 2250e12)),
                                     bandwidth=r.choice((1e12, 1.6e12, 4e12, 8e12)),
                                     bytes_per_number=r.choice((1, 4))))(
    random.Random("lesson5/ridge_point"))
"""An accelerator and a width made at run time (seeded)."""
RIDGE_CASES = (dict(peak_flops=312e12, bandwidth=2.039e12, bytes_per_number=2),
               RANDOM_RIDGE_CASE)
"""Visible cases of :func:`check_ridge_point`: the A100 at 16-bit, and one made at run time."""


def check_ridge_point(fn, cases: Sequence[Mapping] = RIDGE_CASES) -> None:
    """Check ``fn(peak_flops, bandwidth, bytes_per_number) -> (ridge, batch)``: the ridge point
    peak / bandwidth (FLOP per byte), and the decode batch whose FLOPs per weight byte reach it
    (B sequences do 2·B / bytes_per_number FLOPs per weight byte): ridge · bytes_per_number / 2."""
    for case, result, what in _each(fn, "ridge_point", cases, RIDGE_CASES, RANDOM_RIDGE_CASE):
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise CheckFailed(f"{what}: return 2 numbers, (ridge, batch), got "
                              f"{type(result).__name__} {result!r:.60}")
        P, W, b = case["peak_flops"], case["bandwidth"], case["bytes_per_number"]
        ridge = P / W
        check_value(result[0], ridge, what=f"{what}[0], the ridge point", rel=1e-6, mistakes={
            "that is bandwidth ÷ peak (bytes per FLOP): the ridge is peak ÷ bandwidth, in FLOP "
            "per byte": W / P,
            "that reads TB/s as TiB/s (2^40 bytes); the data sheet's TB is 10^12 bytes":
                P / (W * 2**40 / 1e12),
            "that halves the peak (multiply-adds per second); the ridge uses FLOP/s": P / 2 / W,
            "that divides by bits per second; the bandwidth is in bytes": P / (8 * W)})
        with builds_on("flops_per_weight_byte"):
            check_value(result[1], ridge * b / 2, what=f"{what}[1], the decode batch at the ridge",
                        rel=0.005, mistakes=_merged({
                            "a batch of B sequences does 2·B FLOPs per weight read, not B: that "
                            "counts multiply-adds as FLOPs": ridge * b,
                            "that is the ridge itself; the decode batch at the ridge is ridge × "
                            "bytes_per_number / 2 (the same only at 2 bytes a number)": ridge,
                            "that counts bits (8 per byte) for the weights": ridge * 8 * b / 2,
                            "a bigger batch raises the FLOPs per byte; solve 2·B / "
                            "bytes_per_number = ridge for B": ridge * 2 / b}))


# --- exercise 5: requests that fit --------------------------------------------------------------

RANDOM_REQUEST_CASE = (lambda r: dict(card=r.choice(("Llama-2-7b-hf", "Llama-2-13b-hf")),
                                       memory_gb=r.choice((40, 48, 94, 141)),
                                       n_tokens=r.randint(256, 4096),
                                       bytes_per_number=r.choice((1, 2))))(
    random.Random("lesson5/requests_fit"))
"""A card, a memory, a context and a width made at run time (seeded)."""
REQUEST_CASES = (dict(card="Llama-2-7b-hf", memory_gb=80, n_tokens=4096, bytes_per_number=2),
                 RANDOM_REQUEST_CASE)
"""Visible cases of :func:`check_requests_fit`: a shipped card (no sliding window, so every
token is kept), the memory in GB (10^9 bytes, as a data sheet states it: course_lib.units'
convention), the context length and the bytes per number of weights and cache."""


def request_args(card, memory_gb, n_tokens, bytes_per_number) -> dict:
    """The arguments the learner's ``requests_fit`` gets for a case: numbers from the card."""
    s = load_card(card)
    if s.sliding_window is not None or s.mla is not None:
        raise ValueError(f"{card} has a sliding window or latent attention: the simple cache "
                         "formula does not hold")
    return dict(memory_gb=memory_gb, n_params=count_params(s).total, n_layers=s.n_layers,
                n_heads=s.n_heads, n_kv_heads=s.n_kv_heads, d_head=s.d_head, n_tokens=n_tokens,
                bytes_per_number=bytes_per_number)


def requests_expected(card, memory_gb, n_tokens, bytes_per_number) -> int:
    """course_lib's requests that fit for a case."""
    return requests_that_fit(load_card(card), n_tokens, int(memory_gb * GB), _dtype(bytes_per_number))


def request_mistakes(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
                     bytes_per_number) -> dict:
    """``{diagnosis: wrong count}`` for the usual slips, from the learner's arguments."""
    b = bytes_per_number
    mem, weights = memory_gb * GB, n_params * b
    cache = 2 * n_layers * n_kv_heads * d_head * n_tokens * b

    def fit(memory, w, c):
        return max(0, math.floor((memory - w) / c))

    query_heads = {} if n_heads == n_kv_heads else {
        "the cache uses the key/value heads (n_kv_heads), not the query heads":
            fit(mem, weights, cache * n_heads / n_kv_heads)}
    return _merged({
        "the weights must fit too: subtract their bytes from the memory first":
            math.floor(mem / cache),
        "the memory is in GB (10^9 bytes, as the data sheet states it), not GiB (2^30 bytes)":
            fit(memory_gb * GiB, weights, cache),
        **query_heads,
        "the cache keeps keys and values: its size has a factor 2": fit(mem, weights, cache / 2),
        "count whole requests: round down, a request does not fit in part":
            math.ceil((mem - weights) / cache) if mem > weights else 0,
        "the weights are n_params × bytes_per_number bytes": fit(mem, n_params, cache)})


def check_requests_fit(fn, cases: Sequence[Mapping] = REQUEST_CASES) -> None:
    """Check ``fn(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
    bytes_per_number)``: how many sequences of ``n_tokens`` fit in the cache beside the weights
    (a whole number, 0 when the weights alone do not fit), against ``memory.requests_that_fit``."""
    for case in cases:
        args, shown = request_args(**case), is_shown(case, REQUEST_CASES)
        what = label("requests_fit", args, shown=shown, random=case == RANDOM_REQUEST_CASE, kinds=(
            f"a card of model_type {load_card(case['card']).model_type}",
            _heads_kind(args["n_heads"], args["n_kv_heads"])))
        what += f" ({case['card']})" if shown else ""
        got = call(fn, what, shown=shown, **args)
        got = int(got) if isinstance(got, float) and got.is_integer() else got
        if isinstance(got, (int, float)) and not isinstance(got, bool) and got < 0:
            raise CheckFailed(f"{what} is negative: when the weights alone do not fit, no "
                              "request fits (0)")
        with builds_on("kv_cache_size"):
            check_value(got, requests_expected(**case), what=what, integer=True,
                        mistakes=request_mistakes(**args))


# --- test yourself and the recap ----------------------------------------------------------------
# Sealed (course_lib.checks.sealed): salted hashes of the forms that count as right and of those
# the usual mistakes give.  Tolerances: tys1_cache_gib 1 %, the two FLOPs per byte 3 % (the
# lesson's round figures and course_lib's exact counts for a 7B shape both pass), the recap's
# requests exact.  Regenerate with ``python -m course_lib.checks.seal`` (salt lesson5/<what>).

HOLDS = ("keys and values", "keys", "queries, keys and values", "attention weights")
BOUNDS = ("memory", "compute")


def _choice(x, what: str, options) -> str:
    """``x`` as one of ``options`` (case, spaces and ``_`` as written there), or CheckFailed."""
    norm = " ".join(x.strip().lower().replace("_", " ").split()) if isinstance(x, str) else x
    if norm not in options:
        raise CheckFailed(f"{what}: answer with one of {', '.join(map(repr, options))}, got {x!r:.60}")
    return norm


def check_tys1(holds, cache_gib) -> None:
    """Test-yourself 1: what a KV cache holds, and the 7B-class cache at 8,192 tokens in 16-bit,
    in GiB (both sealed)."""
    check_sealed(_choice(holds, "tys1_holds", HOLDS), SEALED['lesson5/tys1_holds'])
    with builds_on("kv_cache_size"):
        check_sealed(cache_gib, SEALED['lesson5/tys1_cache_gib'])


def check_tys2(decode_flops_per_byte, prefill_flops_per_byte, decode_bound, prefill_bound) -> None:
    """Test-yourself 2: FLOPs per weight byte of one decode step and of a 512-token prefill in
    16-bit, and what limits each on an A100 ("memory" or "compute").  All sealed."""
    with builds_on("flops_per_weight_byte"):
        check_sealed(decode_flops_per_byte, SEALED['lesson5/tys2_decode_flops_per_byte'])
        check_sealed(prefill_flops_per_byte, SEALED['lesson5/tys2_prefill_flops_per_byte'])
    check_sealed(_choice(decode_bound, "tys2_decode_bound", BOUNDS), SEALED['lesson5/tys2_decode_bound'])
    check_sealed(_choice(prefill_bound, "tys2_prefill_bound", BOUNDS), SEALED['lesson5/tys2_prefill_bound'])


def check_recap(requests, bound) -> None:
    """The recap's question for :data:`RECAP`: how many requests fit beside the weights, and
    whether decoding all of them in one batch is limited by "memory" or "compute" on the A100
    (the weights' FLOPs per byte against the ridge point).  Both sealed."""
    with builds_on("requests_fit"):
        check_sealed(requests, SEALED['lesson5/recap_requests'])
    check_sealed(_choice(bound, "recap_bound", BOUNDS), SEALED['lesson5/recap_bound'])


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson5")  # one-line pass and fail messages in a notebook (checks.tutor)
