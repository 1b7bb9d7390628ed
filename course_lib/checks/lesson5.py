"""Checks for lesson 5, "Generation and the KV cache", declared on :mod:`.exercise`.

Generation is compared with ``TinyGPT.generate(use_cache=False)`` on seeded toy models, its
calls to ``model.run`` recorded (a loop without the cache fails even with the right tokens);
cache bytes and requests that fit with :mod:`course_lib.memory`; FLOPs per weight byte and the
ridge point with their definitions (a multiply-add is 2 FLOPs).  Words: ``hints/lesson5.toml``."""
from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

from ..cards import load_card
from ..memory import kv_cache_bytes_per_sequence, requests_that_fit
from ..params import count_params
from ..shapes import gpt2_shape, llama_shape
from ..units import ACCELERATORS, GB, GiB  # noqa: F401 (ACCELERATORS: the lesson's table)
from . import CheckFailed, builds_on, check_close, check_value, got_words, heads_kind, is_shown, on_hidden
from .exercise import RANDOM_TAG, Exercise, Inputs, Part, Question, attempt, call, dtype_name, merged
from .hints import load as _load_hints, words
from .sealed import load as _load_sealed

SEALED, HINTS, _hints = _load_sealed("lesson5"), _load_hints("lesson5"), words("lesson5")
SEVEN_B = dict(n_layers=32, n_heads=32, n_kv_heads=32, d_head=128)
"""The lesson's 7B-class shape (Llama 2 7B, Touvron et al., 2023): 32 layers, 32 heads of 128."""
RECAP = dict(card="Llama-2-13b-hf", n_tokens=4096, memory_gb=80, bytes_per_number=2, accelerator="A100 SXM 80GB")
"""The recap's service: Llama 2 13B at 4,096 tokens on one A100 SXM 80GB (80 × 10^9 bytes),
weights and cache in 16-bit."""


def cache_shape(n_layers, n_heads, n_kv_heads, d_head):
    """A Llama-style ModelShape with these attention numbers (d_ff = 4·d_model, the rest
    placeholders: they do not enter the cache)."""
    return llama_shape(d_model=n_heads * d_head, n_layers=n_layers, n_heads=n_heads,
                       n_kv_heads=n_kv_heads, d_ff=4 * n_heads * d_head)


# --- exercise 1: generation with a cache --------------------------------------------------------

_r = random.Random("lesson5/generate_cached")
_kv = _r.choice((1, 2))  # a GPT-2 or a Llama-style toy model, drawn in this order
RANDOM_GEN_CASE = dict(shape=dict(kind="gpt2", d_model=8 * _r.randint(2, 4), n_layers=_r.randint(1, 3),
                                  n_heads=_r.choice((2, 4)), d_vocab=_r.randint(20, 60), n_ctx=64)
                       if _r.random() < 0.5 else
                       dict(kind="llama", d_model=16 * _kv * _r.randint(1, 2), n_layers=_r.randint(1, 3),
                            n_heads=4 * _kv, n_kv_heads=_kv, d_ff=_r.choice((32, 48)), d_vocab=_r.randint(20, 60),
                            n_ctx=64),
                       batch=_r.randint(1, 3), prompt_len=_r.randint(2, 8), n_new=_r.randint(3, 10),
                       seed=_r.randint(10, 999))
GEN_CASES = (dict(shape=dict(kind="gpt2", d_model=32, n_layers=2, n_heads=4, d_vocab=50,
                             n_ctx=64), batch=2, prompt_len=6, n_new=12, seed=0), RANDOM_GEN_CASE)


def toy_model(shape: Mapping, seed: int):
    """A seeded TinyGPT: ``shape`` is ``kind`` ("gpt2" or "llama") and ``gpt2_shape`` /
    ``llama_shape``'s keywords.  Weights ~ Normal(0, 0.5), so that a stale cache shows."""
    import torch

    from ..tiny_gpt import TinyGPT

    kw = dict(shape)
    model = TinyGPT({"gpt2": gpt2_shape, "llama": llama_shape}[kw.pop("kind")](**kw))
    model.init_weights(torch.Generator().manual_seed(seed), std=0.5)
    return model.eval()


def _prompt(model, batch, prompt_len, seed):
    import torch
    return torch.randint(0, model.shape.d_vocab, (batch, prompt_len),
                         generator=torch.Generator().manual_seed(1000 + seed))


def check_generate_cached(fn, cases: Sequence[Mapping] = GEN_CASES) -> None:
    """Check ``fn(model, prompt, n_new) -> tokens``: greedy generation with a KV cache on a
    TinyGPT and a (batch, pos) prompt, returning (batch, pos + n_new) tokens equal to
    ``model.generate(prompt, n_new, use_cache=False)``, by a cached loop (the prompt once with
    no cache, then one token at a time with the latest cache).  Runs on one torch thread."""
    from ..training import num_threads

    with num_threads(1):
        for case in cases:
            _check_generate_case(fn, case)


def _check_generate_case(fn, case: Mapping) -> None:
    import torch

    s, b, p, n_new = (case[k] for k in ("shape", "batch", "prompt_len", "n_new"))
    model, shown = toy_model(s, case["seed"]), is_shown(case, GEN_CASES)
    prompt = _prompt(model, b, p, case["seed"])
    expected = model.generate(prompt, n_new, use_cache=False)
    sizes = "" if s == GEN_CASES[0]["shape"] else \
        "(" + ", ".join(f"{k}={v}" for k, v in s.items() if k != "kind") + ") "
    what = ((RANDOM_TAG if case == RANDOM_GEN_CASE else "") + f"generate_cached on a {s['kind']} "
            f"toy model {sizes}(batch {b}, prompt of {p}, n_new={n_new})" if shown else
            on_hidden("generate_cached", f"a {s['kind']} toy model", heads_kind(
                s["n_heads"], s.get("n_kv_heads", s["n_heads"])), "a one-token prompt" if p == 1 else ""))

    def fail(key, **fields):
        raise CheckFailed(HINTS["generate_cached"][key].format(what=what, **fields))

    calls, run = [], model.run  # per call of model.run: (tokens fed, positions already cached)

    def recorded(tokens, past_kvs=None, return_patterns=False):
        calls.append((int(tokens.shape[1]), 0 if past_kvs is None else int(past_kvs[0][0].shape[2])))
        return run(tokens, past_kvs, return_patterns)
    model.run, model.generate = recorded, lambda *args, **kwargs: fail("calls_generate")

    def steps() -> list:  # the steps after the first not fed one token with the latest cache: the first named
        bad = [(n, past) for (n0, p0), (n, past) in zip(calls, calls[1:]) if past == 0 or n != 1 or past != p0 + n0]
        for n, past in bad[:1]:  # no cache, more than one token, or a stale cache
            fail("no_cache" if past == 0 else "several" if n != 1 else "stale", n=n if shown else "several")
        return bad
    try:
        got = call(fn, what, model, prompt.clone(), n_new, shown=shown)
    except Exception:  # the model refused a step (more positions than n_ctx, a cache of another length)
        steps()
        raise
    if not isinstance(got, torch.Tensor):
        fail("not_tensor", type=got_words(got, what, 0))
    if got.dtype.is_floating_point or got.dtype.is_complex or got.dtype == torch.bool:
        fail("not_integer", dtype=got.dtype)
    width = got.shape[1] if got.dim() == 2 and got.shape[0] == b else None  # None: a wrong shape
    if width == n_new:
        fail("new_only")
    if width in (p + n_new - 1, p + n_new + 1):
        fail("off_by_one", count=f"{width - p} new tokens, not {n_new}" if shown else
             "one new token too " + ("many" if width > p + n_new else "few"))
    if width != p + n_new:
        fail("shape", want=f" = ({b}, {p + n_new}), got {tuple(got.shape)}" if shown else "")
    if not torch.equal(got[:, :p], prompt):
        fail("prompt_changed")
    if not calls or calls[0][1] != 0:
        fail("first_cached" if calls else "never_runs")
    bad = steps()
    if len(calls) > n_new + 1:
        fail("too_many_calls", times=f"{len(calls)} times" if shown else "too often")
    if not torch.equal(got, expected):
        fail("differ")
    # Passed: publish what was decided (records for the grader), the same for any right loop.
    check_value(len(bad), 0, what=f"{what}: steps not fed one token with the latest cache", integer=True)
    check_close(got, expected, what=f"{what}: the tokens", rtol=0.0, atol=0.0)


# --- exercises 2 to 4: the cache's bytes, FLOPs per weight byte, the ridge point ----------------

def _random_kv_case(seed: str = "lesson5/kv_cache_size") -> dict:
    """A cache shape drawn from ``random.Random(seed)``: 1 to 8 key/value heads, each serving 1,
    2 or 4 query heads, 2 to 40 layers, d_head 32 to 128, 100 to 20,000 tokens, 1, 2 or 4 bytes."""
    rng = random.Random(seed)
    n_kv = rng.choice((1, 2, 4, 8))
    return dict(n_layers=rng.randint(2, 40), n_heads=n_kv * rng.choice((1, 2, 4)), n_kv_heads=n_kv,
                d_head=rng.choice((32, 48, 64, 80, 96, 128)), n_tokens=rng.randint(100, 20_000),
                bytes_per_number=rng.choice((1, 2, 4)))


RANDOM_KV_CASE = _random_kv_case()
KV_CASES = (dict(SEVEN_B, n_tokens=8192, bytes_per_number=2),  # and Llama 3 8B's 8 kv heads
            dict(SEVEN_B, n_kv_heads=8, n_tokens=8192, bytes_per_number=2), RANDOM_KV_CASE)


def kv_cache_expected(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number) -> int:
    """course_lib's bytes for one sequence's cache of this shape."""
    return kv_cache_bytes_per_sequence(cache_shape(n_layers, n_heads, n_kv_heads, d_head),
                                       n_tokens, dtype_name(bytes_per_number))


def _kv_mistakes(r) -> dict:
    kv, q = r["value"], None if r["n_heads"] == r["n_kv_heads"] else r["value"] * r["n_heads"] / r["n_kv_heads"]
    return merged(_hints("kv_cache_size", values=kv / 2, query_heads=q, query_heads_keys=q and q / 2, bits=8 * kv,
                         numbers=kv / r["bytes_per_number"], one_layer=kv / r["n_layers"],
                         one_token=kv / r["n_tokens"], gib=kv / GiB, gb=kv / GB))


check_kv_cache_size = Exercise(
    "kv_cache_size", Inputs(KV_CASES[:2], KV_CASES[2:], kinds=lambda c: [heads_kind(
        c["n_heads"], c["n_kv_heads"])]), lambda a: {"value": kv_cache_expected(**a)},
    [Part(rel=1e-9, mistakes=_kv_mistakes)], fixed_note=False)
"""``kv_cache_size(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number)``: bytes
of one sequence's KV cache, against ``memory.kv_cache_bytes_per_sequence``."""

_r = random.Random("lesson5/flops_per_weight_byte")
RANDOM_INTENSITY_CASE = dict(n_tokens=_r.randint(2, 4000), bytes_per_number=_r.choice((1, 4)))
INTENSITY_CASES = (dict(n_tokens=1, bytes_per_number=2), dict(n_tokens=512, bytes_per_number=2), RANDOM_INTENSITY_CASE)
check_flops_per_weight_byte = Exercise(
    "flops_per_weight_byte", Inputs(INTENSITY_CASES[:2], INTENSITY_CASES[2:], hidden=""),
    lambda a: {"n": a["n_tokens"], "b": a["bytes_per_number"]}, fixed_note=False, parts=[Part(
        expected=lambda r: 2 * r["n"] / r["b"], rel=1e-9, mistakes=lambda r: merged(_hints(
            "flops_per_weight_byte", macs=r["n"] / r["b"], bits=2 * r["n"] / (8 * r["b"]),
            no_reuse=2 / r["b"], inverted=r["b"] / (2 * r["n"]), times_bytes=2 * r["n"] * r["b"])))])
"""``flops_per_weight_byte(n_tokens, bytes_per_number)``: FLOPs per byte of weights when one
pass handles n_tokens tokens, each weight read once and used in one multiply-add (2 FLOPs) per
token: 2·n_tokens / bytes_per_number."""

_r = random.Random("lesson5/ridge_point")
RIDGE_CASES = (dict(peak_flops=312e12, bandwidth=2.039e12, bytes_per_number=2),  # an A100, 16-bit
               dict(peak_flops=_r.choice((100e12, 400e12, 1979e12, 2250e12)),
                    bandwidth=_r.choice((1e12, 1.6e12, 4e12, 8e12)), bytes_per_number=_r.choice((1, 4))))
RANDOM_RIDGE_CASE = RIDGE_CASES[1]
check_ridge_point = Exercise(
    "ridge_point", Inputs(RIDGE_CASES[:1], RIDGE_CASES[1:], hidden=""), returns="ridge, batch", fixed_note=False,
    reference=lambda a: dict(P=a["peak_flops"], W=a["bandwidth"], b=a["bytes_per_number"],
                             ridge=a["peak_flops"] / a["bandwidth"]),
    parts=[Part(0, expected="ridge", rel=1e-6, suffix="[0], the ridge point", mistakes=lambda r: _hints(
               "ridge_point", inverted=r["W"] / r["P"], tib=r["P"] / (r["W"] * 2**40 / 1e12),
               half_peak=r["P"] / 2 / r["W"], bits_per_second=r["P"] / (8 * r["W"])) | merged(_hints(
               "ridge_point", rounded=round(r["ridge"]), rounded_1=round(r["ridge"], 1)))),
           Part(1, expected=lambda r: r["ridge"] * r["b"] / 2, rel=0.005, builds_on=("flops_per_weight_byte",),
                suffix="[1], the decode batch at the ridge", mistakes=lambda r: merged(_hints(
                    "ridge_point", batch_macs=r["ridge"] * r["b"], batch_is_ridge=r["ridge"],
                    batch_bits=r["ridge"] * 8 * r["b"] / 2, batch_upside_down=r["ridge"] * 2 / r["b"])))])
"""``ridge_point(peak_flops, bandwidth, bytes_per_number) -> (ridge, batch)``: peak / bandwidth
(FLOP per byte), and the decode batch whose FLOPs per weight byte, 2·B / bytes_per_number,
reach it: ridge · bytes_per_number / 2."""


# --- exercise 5: requests that fit --------------------------------------------------------------

_r = random.Random("lesson5/requests_fit")
REQUEST_CASES = (dict(card="Llama-2-7b-hf", memory_gb=80, n_tokens=4096, bytes_per_number=2),
                 dict(card="Llama-2-13b-hf", memory_gb=24, n_tokens=4096, bytes_per_number=2),
                 dict(card="Llama-2-7b-hf", memory_gb=24, n_tokens=4096, bytes_per_number=1),
                 dict(card=_r.choice(("Llama-2-7b-hf", "Llama-2-13b-hf")), memory_gb=_r.choice(
                     (40, 48, 94, 141)), n_tokens=_r.randint(256, 4096), bytes_per_number=_r.choice((1, 2))))
"""A card without a sliding window, the memory in GB (10^9 bytes, as a data sheet states it), the context and
the bytes per number: the lesson's example; 16-bit weights that alone do not fit (0 requests); weights and cache
in 8-bit; and one made at run time (the last)."""
RANDOM_REQUEST_CASE = REQUEST_CASES[-1]


def request_args(card, memory_gb, n_tokens, bytes_per_number) -> dict:
    """The arguments the learner's ``requests_fit`` gets for a case: numbers from the card."""
    s = load_card(card)
    if s.sliding_window is not None or s.mla is not None:
        raise ValueError(f"{card} has a sliding window or latent attention: the simple cache "
                         "formula does not hold")
    return dict(memory_gb=memory_gb, n_params=count_params(s).total, n_layers=s.n_layers, n_heads=s.n_heads,
                n_kv_heads=s.n_kv_heads, d_head=s.d_head, n_tokens=n_tokens, bytes_per_number=bytes_per_number)


def requests_expected(card, memory_gb, n_tokens, bytes_per_number) -> int:
    """course_lib's requests that fit for a case."""
    return requests_that_fit(load_card(card), n_tokens, int(memory_gb * GB), dtype_name(bytes_per_number))


def _request_mistakes(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
                      bytes_per_number) -> dict:
    mem, weights = memory_gb * GB, n_params * bytes_per_number
    cache = 2 * n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number

    def fit(memory, w, c):
        return max(0, math.floor((memory - w) / c))

    return merged(_hints(
        "requests_fit", no_weights=math.floor(mem / cache), gib=fit(memory_gb * GiB, weights, cache),
        query_heads=None if n_heads == n_kv_heads else fit(mem, weights, cache * n_heads / n_kv_heads),
        values=fit(mem, weights, cache / 2), round_up=math.ceil((mem - weights) / cache) if mem > weights else 0,
        params_as_bytes=fit(mem, n_params, cache),
        weights_16bit=fit(mem, n_params * 2, cache) if bytes_per_number != 2 else None,
        cache_16bit=fit(mem, weights, cache * 2 / bytes_per_number) if bytes_per_number != 2 else None))


def check_requests_fit(fn, cases: Sequence[Mapping] = REQUEST_CASES) -> None:
    """Check ``fn(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
    bytes_per_number)``: how many sequences of ``n_tokens`` fit in the cache beside the weights
    (a whole number, 0 when the weights alone do not fit), against ``memory.requests_that_fit``."""
    for case in cases:  # a shown label names the card after the learner's arguments
        args = request_args(**case)
        what, shown, got = attempt(fn, "requests_fit", case, (REQUEST_CASES[:-1], REQUEST_CASES[-1:]), args,
                                   kwargs=args, kinds=(f"a card of model_type {load_card(case['card']).model_type}",
                                                       heads_kind(args["n_heads"], args["n_kv_heads"])))
        what += f" ({case['card']})" if shown else ""
        got = int(got) if isinstance(got, float) and got.is_integer() else got
        if isinstance(got, (int, float)) and not isinstance(got, bool) and got < 0:
            raise CheckFailed(HINTS["requests_fit"]["negative"].format(what=what))
        with builds_on("kv_cache_size"):
            check_value(got, requests_expected(**case), what=what, integer=True, mistakes=_request_mistakes(**args))


# --- test yourself and the recap (sealed_answers/lesson5.json) --------------------------------------
# tys1_cache_gib to 1 %, the two FLOPs per byte to 3 % (the lesson's round figures and
# course_lib's exact counts for a 7B shape both pass), the recap's requests exact.

BOUNDS = ("memory", "compute")
check_tys1 = Question([SEALED[f"lesson5/tys1_{k}"] for k in ("holds", "cache_gib")], ("kv_cache_size",),
                      {0: ("keys and values", "keys", "queries, keys and values", "attention weights")})
"""What a KV cache holds; the 7B-class cache at 8,192 tokens in 16-bit, in GiB."""
check_tys2 = Question([SEALED[f"lesson5/tys2_{k}"] for k in ("decode_flops_per_byte", "prefill_flops_per_byte",
                       "decode_bound", "prefill_bound")], ("flops_per_weight_byte",), {2: BOUNDS, 3: BOUNDS})
"""FLOPs per weight byte of one decode step and of a 512-token prefill in 16-bit, and what
limits each on an A100 ("memory" or "compute")."""
check_recap = Question([SEALED["lesson5/recap_requests"], SEALED["lesson5/recap_bound"]],
                       ("requests_fit",), {1: BOUNDS})
"""The recap (:data:`RECAP`): the requests that fit beside the weights, and whether decoding
all of them in one batch is limited by "memory" or "compute" on the A100."""

from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson5")  # one-line pass and fail messages in a notebook (course_lib.tutor)
