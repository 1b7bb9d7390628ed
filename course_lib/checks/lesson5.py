"""Checks for lesson 5, "Generation and the KV cache".

Each check compares a learner's answer with an independent reference and, on failure, raises
:class:`~course_lib.checks.CheckFailed` naming the likely mistake (values without keys, bits
for bytes, multiply-adds for FLOPs, GB for GiB, query heads for key/value heads, the weights
left out of the budget, ...) without showing the expected value:

* generation with a KV cache against :meth:`course_lib.tiny_gpt.TinyGPT.generate` with
  ``use_cache=False`` (which runs the whole sequence again at every step), on seeded toy
  models; every call the learner's loop makes to ``model.run`` is recorded, so a loop that
  does not use the cache fails even when its tokens are right;
* cache bytes and requests that fit against :mod:`course_lib.memory` (itself tested against
  ``transformers`` models built on the meta device and against the bytes the toy model's cache
  really holds);
* FLOPs per weight byte, the ridge point and the decode batch at the ridge against the
  definitions (a multiply-add is 2 FLOPs) and the accelerator figures of :data:`ACCELERATORS`.

Functions the learner writes are called through :func:`~course_lib.checks.own_work`, so an
answer that calls course_lib's counters (``params``, ``memory``, ``flops``) fails.
"""
from __future__ import annotations

import math
import random
from typing import Mapping, NamedTuple, Sequence

from ..cards import load_card
from ..memory import kv_cache_bytes_per_sequence, requests_that_fit
from ..params import count_params
from ..shapes import ModelShape
from ..units import GB, GiB
from . import check_sealed
from .sealed import Sealed
from . import (CheckFailed, builds_on, check_choice, check_close, check_value, is_shown,
               on_hidden, own_work)


class Accelerator(NamedTuple):
    """One accelerator's data-sheet figures (dense, no sparsity)."""

    memory: str
    """Memory as the vendor states it."""
    bandwidth: float
    """Memory bandwidth, bytes per second (TB/s × 10^12)."""
    peak_bf16: float
    """Peak 16-bit (bf16) FLOP/s (TFLOP/s × 10^12)."""


ACCELERATORS = {
    "A100 SXM 80GB": Accelerator("80 GB HBM2e", 2.039e12, 312e12),
    "H100 SXM 80GB": Accelerator("80 GB HBM3", 3.35e12, 989e12),
    "H200 SXM": Accelerator("141 GB HBM3e", 4.8e12, 989e12),
}
"""From NVIDIA's data sheets: the A100 Tensor Core GPU (80 GB SXM), the H100 Tensor Core GPU
(SXM) and the H200 Tensor Core GPU: memory, memory bandwidth (bytes/s) and dense 16-bit peak
(FLOP/s)."""

A100 = "A100 SXM 80GB"
BYTES_16BIT = 2
PREFILL_TOKENS = 512
"""The module text's prompt length for prefill."""

SEVEN_B = dict(n_layers=32, n_heads=32, n_kv_heads=32, d_head=128)
"""The module text's 7B-class shape (Llama 2 7B): 32 layers, 32 heads of 128."""
SEVEN_B_TOKENS = 8192

RECAP = dict(card="Llama-2-13b-hf", n_tokens=4096, memory_gib=80, bytes_per_number=2,
             accelerator=A100)
"""The recap's service: Llama 2 13B at its full context of 4,096 tokens on one 80 GiB A100,
weights and cache in 16-bit."""

_DTYPE = {0.5: "int4", 1: "int8", 2: "bf16", 4: "fp32"}


# --- helpers -----------------------------------------------------------------------------------

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


def _label(name: str, args: Mapping) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _call(fn, name: str, args: Mapping, shown: bool = True, kinds: Sequence[str] = ()):
    """``fn(**args)`` through own_work, and its label: the arguments in full for an input the
    visible test passes (``shown``), else only their ``kinds`` (a hidden test's input)."""
    return own_work(fn, **args), (_label(name, args) if shown else on_hidden(name, *kinds))


def _heads_kind(n_heads, n_kv_heads) -> str:
    if n_kv_heads == n_heads:
        return "multi-head attention (a key/value head per query head)"
    return ("multi-query attention (one key/value head)" if n_kv_heads == 1
            else "grouped-query attention")


def _option(x):
    return " ".join(x.strip().lower().replace("_", " ").split()) if isinstance(x, str) else x


# --- exercise 1: generation with a cache --------------------------------------------------------

GEN_CASES = (dict(shape=dict(kind="gpt2", d_model=32, n_layers=2, n_heads=4, d_vocab=50,
                             n_ctx=64), batch=2, prompt_len=6, n_new=12, seed=0),)
"""Visible case of :func:`check_generate_cached`; the notebook's hidden tests pass others."""


def toy_model(shape: Mapping, seed: int):
    """A seeded TinyGPT for a generation case.  ``shape``: ``kind`` ("gpt2" or "llama") and the
    keyword arguments of ``gpt2_shape`` / ``llama_shape``.  Weights ~ Normal(0, 0.5): wide
    enough that greedy decoding does not settle on one token, so a stale cache shows."""
    import torch

    from ..shapes import gpt2_shape, llama_shape
    from ..tiny_gpt import TinyGPT

    kw = dict(shape)
    make = {"gpt2": gpt2_shape, "llama": llama_shape}[kw.pop("kind")]
    model = TinyGPT(make(**kw))
    model.init_weights(torch.Generator().manual_seed(seed), std=0.5)
    return model.eval()


def _prompt(model, batch, prompt_len, seed):
    import torch
    return torch.randint(0, model.shape.d_vocab, (batch, prompt_len),
                         generator=torch.Generator().manual_seed(1000 + seed))


def _record_calls(model):
    """Replace ``model.run`` (on this instance) by a wrapper that records, for each call, how
    many new tokens it was fed and how many positions its cache already held; make
    ``model.generate`` fail.  Returns the list the calls are appended to."""
    calls = []
    run = model.run

    def recorded(tokens, past_kvs=None, return_patterns=False):
        past = 0 if past_kvs is None else past_kvs[0][0].shape[2]
        calls.append((int(tokens.shape[1]), int(past)))
        return run(tokens, past_kvs, return_patterns)

    def no_generate(*args, **kwargs):
        raise CheckFailed("your function calls model.generate: write the loop yourself, with "
                          "model.run(tokens, past_kvs)")

    model.run = recorded
    model.generate = no_generate
    return calls


def _diagnose_calls(calls, label, shown: bool = True) -> None:
    if not calls:
        raise CheckFailed(f"{label} never calls model.run (or model(...)): run the prompt "
                          "through the model first, then one new token at a time")
    if calls[0][1] != 0:
        raise CheckFailed(f"{label}: the first call already has a cache: start with "
                          "past_kvs=None")
    for (n_prev, past_prev), (n, past) in zip(calls, calls[1:]):
        if past == 0:
            raise CheckFailed(f"{label} runs the whole sequence again at a step (no past_kvs): "
                              "that is generation without a cache. After the prompt, feed only "
                              "the newest token, with the kvs the previous call returned")
        if n != 1:
            raise CheckFailed(f"{label} feeds {n if shown else 'several'} tokens at a step after "
                              "the prompt: with a "
                              "cache, feed only the newest token (shape (batch, 1))")
        if past != past_prev + n_prev:
            raise CheckFailed(f"{label} passes a stale cache: at each step pass the kvs that "
                              "the latest call returned (they include the token just added), "
                              "not an earlier call's")


def check_generate_cached(fn, cases: Sequence[Mapping] = GEN_CASES) -> None:
    """Check ``fn(model, prompt, n_new) -> tokens``: greedy generation with a KV cache, on a
    TinyGPT and a (batch, pos) prompt, returning (batch, pos + n_new) tokens.

    The tokens must equal ``model.generate(prompt, n_new, use_cache=False)`` (greedy, the
    whole sequence recomputed each step); the calls to ``model.run`` must be those of a cached
    loop: the prompt once with no cache, then one token at a time, each with the cache the
    previous call returned.  ``model.generate`` itself may not be called.  Runs on one torch
    thread (for models this small more threads only add waiting)."""
    from ..training import num_threads

    with num_threads(1):
        for case in cases:
            _check_generate_case(fn, case)


def _check_generate_case(fn, case: Mapping) -> None:
    import torch

    model = toy_model(case["shape"], case["seed"])
    prompt = _prompt(model, case["batch"], case["prompt_len"], case["seed"])
    n_new, p = case["n_new"], case["prompt_len"]
    expected = model.generate(prompt, n_new, use_cache=False)
    shown = is_shown(case, GEN_CASES)
    s = case["shape"]
    label = (f"generate_cached on a {s['kind']} toy model "
             f"(batch {case['batch']}, prompt of {p}, n_new={n_new})" if shown else
             on_hidden("generate_cached", f"a {s['kind']} toy model",
                       _heads_kind(s["n_heads"], s.get("n_kv_heads", s["n_heads"])),
                       "a one-token prompt" if p == 1 else ""))
    calls = _record_calls(model)
    got = own_work(fn, model, prompt.clone(), n_new)
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{label}: return a tensor of token ids (batch, pos + n_new), "
                          f"got {type(got).__name__}")
    want = f" = ({case['batch']}, {p + n_new}), got {tuple(got.shape)}" if shown else ""
    if got.dim() != 2 or got.shape[0] != case["batch"]:
        raise CheckFailed(f"{label}: return shape (batch, pos + n_new){want}")
    width = got.shape[1]
    if width == n_new:
        raise CheckFailed(f"{label} returns only the new tokens: return the prompt "
                          "followed by them")
    if width in (p + n_new - 1, p + n_new + 1):
        how_many = (f"{width - p} new tokens, not {n_new}" if shown else
                    f"one new token too {'many' if width > p + n_new else 'few'}")
        raise CheckFailed(f"{label} returns {how_many}: an off-by-one in the loop")
    if width != p + n_new:
        raise CheckFailed(f"{label}: return shape (batch, pos + n_new){want}")
    if not torch.equal(got[:, :p], prompt):
        raise CheckFailed(f"{label}: the result must start with the prompt, unchanged")
    _diagnose_calls(calls, label, shown)
    if len(calls) > n_new + 1:
        raise CheckFailed(f"{label} calls the model {f'{len(calls)} times' if shown else 'too often'}"
                          ": once for the prompt and once per new token is enough")
    if not torch.equal(got, expected):
        raise CheckFailed(f"{label}: the new tokens differ from greedy generation without "
                          "a cache. Pick each token as the argmax of the logits at the "
                          "last position, logits[:, -1], and append it to every row")
    # Passed: publish what was decided (records for the grader), the same for any right loop.
    not_cached = sum(1 for (n0, p0), (n, past) in zip(calls, calls[1:])
                     if n != 1 or past != p0 + n0)
    check_value(not_cached, 0, what=f"{label}: steps not fed one token with the latest cache",
                integer=True)
    check_close(got, expected, what=f"{label}: the tokens", rtol=0.0, atol=0.0)


# --- exercise 2: the size of the cache ----------------------------------------------------------

RANDOM_TAG = "[random shape] "
"""How a label marks an input made at run time."""


def _random_kv_case(seed: str = "lesson5/kv_cache_size") -> dict:
    """A cache shape drawn at run time from ``random.Random(seed)`` (the same on every run, so
    the grader's run of the model answer tries it too): 1 to 8 key/value heads, each serving 1,
    2 or 4 query heads, 2 to 40 layers, d_head 32 to 128, 100 to 20,000 tokens, 1, 2 or 4 bytes
    a number."""
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
heads), and a shape made at run time (:func:`_random_kv_case`), so that an answer ignoring its
arguments fails the visible test."""


def kv_cache_expected(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number) -> int:
    """course_lib's bytes for one sequence's cache of this shape."""
    s = cache_shape(n_layers, n_heads, n_kv_heads, d_head)
    return kv_cache_bytes_per_sequence(s, n_tokens, _dtype(bytes_per_number))


def _merged(mistakes: Mapping[str, float]) -> dict:
    """Join the diagnoses of mistakes that give the same wrong value on this case ("a factor 2
    is missing" and "bytes left out" coincide at 2 bytes a number), so neither hides the
    other."""
    by_value: dict = {}
    for diagnosis, value in mistakes.items():
        by_value.setdefault(value, []).append(diagnosis)
    return {"; or ".join(ds): value for value, ds in by_value.items()}


def kv_mistakes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number) -> dict:
    """``{diagnosis: wrong bytes}`` for the usual slips in a cache size."""
    kv = kv_cache_expected(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number)
    q = kv * n_heads / n_kv_heads
    query_heads = {} if n_heads == n_kv_heads else {
        "that uses the query heads (n_heads); the cache holds the key/value heads "
        "(n_kv_heads)": q,
        "that uses the query heads instead of the key/value heads, and counts keys but not "
        "values": q / 2,
    }
    return _merged({
        "the cache keeps a key AND a value for each token: a factor 2 is missing": kv / 2,
        **query_heads,
        "that counts bits (8 per byte); the question asks for bytes": 8 * kv,
        "that is a count of numbers; multiply by bytes_per_number for bytes": kv / bytes_per_number,
        "every layer keeps its own keys and values: multiply by n_layers": kv / n_layers,
        "that is one token's cache; multiply by n_tokens": kv / n_tokens,
        "that is in GiB; the question asks for bytes": kv / GiB,
        "that is in GB; the question asks for bytes": kv / GB,
    })


def check_kv_cache_size(fn, cases: Sequence[Mapping] = KV_CASES) -> None:
    """Check ``fn(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number)``: the
    bytes of one sequence's KV cache, against ``memory.kv_cache_bytes_per_sequence``."""
    for case in cases:
        got, label = _call(fn, "kv_cache_size", case, is_shown(case, KV_CASES),
                           (_heads_kind(case["n_heads"], case["n_kv_heads"]),))
        if case == RANDOM_KV_CASE:
            label = RANDOM_TAG + label
        check_value(got, kv_cache_expected(**case), what=label, rel=1e-9,
                    mistakes=kv_mistakes(**case))


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
    for case in cases:
        got, label = _call(fn, "flops_per_weight_byte", case, is_shown(case, INTENSITY_CASES))
        if case == RANDOM_INTENSITY_CASE:
            label = RANDOM_TAG + label
        n, b = case["n_tokens"], case["bytes_per_number"]
        expected = 2 * n / b
        check_value(got, expected, what=label, rel=1e-9, mistakes=_merged({
            "that counts multiply-adds; FLOPs = 2 × multiply-adds": n / b,
            "that divides by bits (8 per byte); the question asks per byte": 2 * n / (8 * b),
            "a weight read once serves every token of the pass: the FLOPs grow with n_tokens, "
            "the bytes do not": 2 / b,
            "that is bytes per FLOP: divide FLOPs by bytes": b / (2 * n),
            "that multiplies by bytes_per_number; divide by it (more bytes a weight means "
            "fewer FLOPs per byte)": 2 * n * b,
        }))


# --- exercise 4: the ridge point ----------------------------------------------------------------

RIDGE_CASES = (dict(peak_flops=312e12, bandwidth=2.039e12, bytes_per_number=2),)
"""Visible case of :func:`check_ridge_point`: the A100 at 16-bit."""


def check_ridge_point(fn, cases: Sequence[Mapping] = RIDGE_CASES) -> None:
    """Check ``fn(peak_flops, bandwidth, bytes_per_number) -> (ridge, batch)``: the ridge point
    peak / bandwidth (FLOP per byte), and the decode batch whose FLOPs per weight byte reach it
    (a batch of B sequences does 2·B / bytes_per_number FLOPs per weight byte):
    ridge · bytes_per_number / 2 sequences (a float; no rounding needed)."""
    for case in cases:
        result, label = _call(fn, "ridge_point", case, is_shown(case, RIDGE_CASES))
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise CheckFailed(f"{label}: return 2 numbers, (ridge, batch), got "
                              f"{type(result).__name__} {result!r:.60}")
        ridge_got, batch_got = result
        P, W, b = case["peak_flops"], case["bandwidth"], case["bytes_per_number"]
        ridge = P / W
        check_value(ridge_got, ridge, what=f"{label}[0], the ridge point", rel=1e-6, mistakes={
            "that is bandwidth ÷ peak (bytes per FLOP): the ridge is peak ÷ bandwidth, in FLOP "
            "per byte": W / P,
            "that reads TB/s as TiB/s (2^40 bytes); the data sheet's TB is 10^12 bytes":
                P / (W * 2**40 / 1e12),
            "that halves the peak (multiply-adds per second); the ridge uses FLOP/s": P / 2 / W,
            "that divides by bits per second; the bandwidth is in bytes": P / (8 * W),
        })
        batch = ridge * b / 2
        with builds_on("flops_per_weight_byte"):
            check_value(batch_got, batch, what=f"{label}[1], the decode batch at the ridge",
                        rel=0.005, mistakes=_merged({
                            "a batch of B sequences does 2·B FLOPs per weight read, not B: that "
                            "counts multiply-adds as FLOPs": ridge * b,
                            "that is the ridge itself; the decode batch at the ridge is ridge × "
                            "bytes_per_number / 2 (the same only at 2 bytes a number)": ridge,
                            "that counts bits (8 per byte) for the weights": ridge * 8 * b / 2,
                            "a bigger batch raises the FLOPs per byte; solve 2·B / "
                            "bytes_per_number = ridge for B": ridge * 2 / b,
                        }))


# --- exercise 5: requests that fit --------------------------------------------------------------

REQUEST_CASES = (dict(card="Llama-2-7b-hf", memory_gib=80, n_tokens=4096, bytes_per_number=2),)
"""Visible case of :func:`check_requests_fit`; each case names a shipped card (with no sliding
window, so every token is kept), the memory in GiB, the context length and the bytes per
number of weights and cache."""


def request_args(card, memory_gib, n_tokens, bytes_per_number) -> dict:
    """The arguments the learner's ``requests_fit`` gets for a case: numbers from the card."""
    s = load_card(card)
    if s.sliding_window is not None or s.mla is not None:
        raise ValueError(f"{card} has a sliding window or latent attention: the simple cache "
                         "formula does not hold")
    return dict(memory_gib=memory_gib, n_params=count_params(s).total, n_layers=s.n_layers,
                n_heads=s.n_heads, n_kv_heads=s.n_kv_heads, d_head=s.d_head, n_tokens=n_tokens,
                bytes_per_number=bytes_per_number)


def requests_expected(card, memory_gib, n_tokens, bytes_per_number) -> int:
    """course_lib's requests that fit for a case."""
    return requests_that_fit(load_card(card), n_tokens, int(memory_gib * GiB),
                             _dtype(bytes_per_number))


def request_mistakes(memory_gib, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
                     bytes_per_number) -> dict:
    """``{diagnosis: wrong count}`` for the usual slips, from the learner's arguments."""
    b = bytes_per_number
    mem, weights = memory_gib * GiB, n_params * b
    cache = 2 * n_layers * n_kv_heads * d_head * n_tokens * b

    def fit(memory, w, c):
        return max(0, math.floor((memory - w) / c))

    query_heads = {} if n_heads == n_kv_heads else {
        "the cache uses the key/value heads (n_kv_heads), not the query heads":
            fit(mem, weights, cache * n_heads / n_kv_heads)}
    return _merged({
        "the weights must fit too: subtract their bytes from the memory first":
            math.floor(mem / cache),
        "the memory is in GiB (2^30 bytes), not GB (10^9 bytes)": fit(memory_gib * GB, weights, cache),
        **query_heads,
        "the cache keeps keys and values: its size has a factor 2": fit(mem, weights, cache / 2),
        "count whole requests: round down, a request does not fit in part":
            math.ceil((mem - weights) / cache) if mem > weights else 0,
        "the weights are n_params × bytes_per_number bytes": fit(mem, n_params, cache),
    })


def check_requests_fit(fn, cases: Sequence[Mapping] = REQUEST_CASES) -> None:
    """Check ``fn(memory_gib, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
    bytes_per_number)``: how many sequences of ``n_tokens`` fit in the cache beside the
    weights (a whole number, 0 when the weights alone do not fit), against
    ``memory.requests_that_fit``."""
    for case in cases:
        args = request_args(**case)
        if is_shown(case, REQUEST_CASES):
            got, label = _call(fn, "requests_fit", args)
            label = f"{label} ({case['card']})"
        else:
            got, label = _call(fn, "requests_fit", args, False, (
                f"a card of model_type {load_card(case['card']).model_type}",
                _heads_kind(args["n_heads"], args["n_kv_heads"])))
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        expected = requests_expected(**case)
        if got is not None and not isinstance(got, bool) and isinstance(got, (int, float)) \
                and got < 0:
            raise CheckFailed(f"{label} is negative: when the weights alone do not fit, no "
                              "request fits (0)")
        with builds_on("kv_cache_size"):
            check_value(got, expected, what=label, integer=True,
                        mistakes=request_mistakes(**args))


# --- test yourself --------------------------------------------------------------------------

HOLDS = ("keys and values", "keys", "queries, keys and values", "attention weights")


# The answers of test yourself and the recap are sealed (course_lib.checks.sealed): salted hashes
# of the forms that count as right and of those the usual mistakes give, so neither this file
# nor a message shows them.  Tolerances: tys1_cache_gib 1 %, the two FLOPs per byte 3 % (the
# module's round figures and course_lib's exact counts for a 7B shape both pass), the recap's
# requests exact.  Regenerate with ``python -m course_lib.checks.seal`` (salt lesson5/<what>).

TYS1_HOLDS = Sealed(
    what='tys1_holds', salt='lesson5/tys1_holds', kind='choice', digits=None,
    right=('ce9fa8e4b275b2c1',),
    mistakes=(
        ("the values are kept too: every later token's weighted sum reads them",
         ('8c89d04700c8376e',)),
        ("a token's query is used once, at its own step; later tokens never read it, so it is not kept",
         ('95dc7e51c2d818be',)),
        ("the weights change with every new query; what later queries read is the earlier tokens' keys and values",
         ('ef48979227131996',)),
    ),
    choices=('keys-and-values', 'keys', 'queries,-keys-and-values', 'attention-weights'),
)

TYS1_CACHE_GIB = Sealed(
    what='tys1_cache_gib', salt='lesson5/tys1_cache_gib', kind='number', digits=3,
    right=('06c9d11c0eeba0f6', '0db6d4c663cc6184', '2bc048070dce82c4', '423404f68b87a4fb',
           '4adae3c594d1afc2', '57d828765210bf38', '74e5f0e4783f63e2', '8569b3d6a0630ca9',
           '98a5ade961a6d734',),
    mistakes=(
        ('that is in GB (10^9 bytes); the question asks for GiB (2^30 bytes)',
         ('1f4f8e087207b9fd', '677312479e769b91', '742349a8d5bdccb9', '8d7f0c4401ef92d4',
          '8fe3b68c869c6b70', 'a328137c24c954f2', 'da32b516f85f0690', 'e02a1dee55b6c67b',
          'e3f5415e0504de0c', 'f12a4880662037d3',)),
        ('a key and a value per token: a factor 2 is missing',
         ('654b677445f50ad8', '92319ae7fe399e61', 'b7b4cf3d6ac93454', 'bff1ee1822167721',
          'e23019d7cb65ff0d',)),
        ('16-bit is 2 bytes a number, not 4',
         ('1efad03484231db7', '3e226c9ad3e708f0', '41d9893ef33fd913', '5629072639b262ec',
          '77ff10b69cb74bc4', '7d4ad782fd841898', '7f0fbce4cbfd9d68', '9b31ed05b7e7c811',
          'b11b7ab08810da7d', 'b1867193d4cdbf0f', 'b40a8531e5a7a35c', 'c666002e9a52785d',
          'cb0e54779cecbf03', 'e58dd22c66d6a330', 'e9914004d8244072', 'ec2ff453edf4643c',
          'fc7d2aad2b5d797a',)),
        ('that counts bits; the question asks for bytes (in GiB)',
         ('0bba137f6f62b5c2', '0ef5b135b7db060a', '2d1551d66035a16c', '2e5bfef0e7bd640f',
          '334c01b0c1190b87', '4ee9a2ed3677db96', 'ac6c1d5fc3ce5447',)),
        ('that is in bytes; divide by 2^30 for GiB',
         ('333594baea2ba67d', '4135b2e513c2df61', '4267a8d6549cc72f', '5edbc536d0ca3da8',
          '919bc67079da7145', 'a2eb317b716f7726', 'bb1701be5ea7642c', 'c090979a508f2458',
          'c170a093e98bd96a', 'f2153b37d438d647',)),
        ('that is in MiB; divide by 2^30 for GiB',
         ('065fcfdc50327b0b', '185aa955218c2873', '24ec253a8da928cc', '2cb5f8f16a5e01e8',
          '3a01e85145b55f17', '474c14f530c8b597', '4c6ab4510cb5dcc4', '8c04410cfe3dfed6',
          'c267d6bdde33cc7e',)),
    ),
    decade=0, sign=1,
)


def _choice(x, what: str, options) -> str:
    """``x`` as one of ``options`` (spaces and ``_`` as written there), or CheckFailed."""
    if _option(x) not in options:
        raise CheckFailed(f"{what}: answer with one of {', '.join(map(repr, options))}, "
                          f"got {x!r:.60}")
    return _option(x)


def check_tys1(holds, cache_gib) -> None:
    """Test-yourself 1: what a KV cache holds, and the 7B-class cache at 8,192 tokens in 16-bit,
    in GiB (both sealed)."""
    check_sealed(_choice(holds, "tys1_holds", HOLDS), TYS1_HOLDS)
    with builds_on("kv_cache_size"):
        check_sealed(cache_gib, TYS1_CACHE_GIB)


BOUNDS = ("memory", "compute")


TYS2_DECODE = Sealed(
    what='tys2_decode_flops_per_byte', salt='lesson5/tys2_decode_flops_per_byte', kind='number', digits=3,
    right=('04776b543886fccc', '0b085779ece3a158', '1851c3616a5f68d1', '1cd1e3157e32cead',
           '21478ba83414f3fb', '23a68b441d86a148', '23dd2a9df3e7a594', '24f89cabd874edab',
           '35266314f01f3559', '36c95ff589b54bf7', '37b1fc761a7dc756', '422ed6ea24a9cdfe',
           '48a1ab6e463edfaa', '49199cb2d7cee758', '4c4ea0f40d7cf13e', '4cec5fcbf2c89654',
           '51f1947fdc7286f2', '53e557b94daf07a0', '6927ee6a9f118ee4', '7296801b608a8c04',
           '798651b0e588e016', '7fe485f6cb0a4ee9', '87787a8a1bf0d8cd', '90654d3dc48256db',
           'a5bba0ff3c323ee5', 'bfcf6d7e4942f418', 'c5d84729895cbb05', 'c7e2e39a22128c67',
           'cdc52bac6d1b7c2e', 'd3937f63837401dc', 'd63f13e4ba88a6d9', 'd769af7a33f55622',
           'f6ae6d4c1618073c', 'f94105fa2e972ad2',),
    mistakes=(
        ('that counts multiply-adds; FLOPs = 2 × multiply-adds',
         ('0a65f01368830c4e', '0b64a27164f43451', '1aa1d57849677acc', '1d6aedef186d4cff',
          '362e778a33f08047', '42f9f0991ac62cd3', '4e8082c350949eeb', '571c97f935b25964',
          '64a40eff38d82a10', '6848846462a85b5a', '6ddf9f1fbb286a5c', '752b42a625ea167e',
          '795ae12184523eb6', '80bbb96952b58215', '85ff48c87fc5e258', '94be581d09f5d82a',
          '9d586c989cd7853f', '9f70c2ec7101afc8', 'ac23b16d2c41f4a5', 'ac65ff58efa8d049',
          'ad412dd7c4c35c92', 'bb55e5b1252c3fe2', 'bfb889cee06a6d55', 'cd9ec2d9b4daeedf',
          'd199be8e60855f35', 'd24d8274ca630db4', 'd42a4247cf20a072', 'e69bbc5313de07f1',
          'ee323983e1350961', 'f0b457f1e13f9db1', 'fdcc6993696cb581',)),
        ('that divides by bits, not bytes',
         ('029619328afad6ca', '0bbceea5466a8484', '23f89f10053f7559', '2c53d33548970402',
          '595c994f8319a720', '6282846092051531', '857f188d0c68e933', 'aa5baf4fcfd7dd92',
          'e2687370a0eddcc4',)),
    ),
    decade=0, sign=1,
)

TYS2_PREFILL = Sealed(
    what='tys2_prefill_flops_per_byte', salt='lesson5/tys2_prefill_flops_per_byte', kind='number', digits=3,
    right=('020d42eedf5c2f26', '06465566329938ca', '0ee8684c1e1b9c95', '11c0aa1c5ecc1199',
           '1636b9b587f512cc', '188f3ca83efbad77', '27e13c4a75477e0b', '3fb0165afc242c21',
           '66473b76475eadbc', '6fe1a2c5e4158baf', '76d9cc3e1a8ee787', '813a30244d1d183d',
           '8518f54eaad55799', '8cac6e3074772536', '8ce53c7ca7532150', '8d37884bd69a3741',
           'b711d02c4156ae23', 'b8885c999434f1fe', 'b958ad69b3a77b31', 'ce9a73e011599d15',
           'dc83bcb843e71405', 'dd8e8deb2ca63773', 'de72d95633fabc75', 'e02bf8a2e7f245ea',
           'e469e03cef5f3079', 'eb4451af55f0c2e9', 'ef8a4656a2783960', 'f49b2abfc6d12040',
           'f704ec67c82fcb76', 'f7883b5c26c72110', 'fdb1fc84ca977c47',),
    mistakes=(
        ('that counts multiply-adds; FLOPs = 2 × multiply-adds',
         ('060751400e375e40', '128fb6eb8ecedd7e', '1c2316062bdab9da', '1d2e324d68e16102',
          '2bae691cf94809a6', '34e0f711b307e044', '4a0ebb3f25ee6752', '5cde0a7e128d7d48',
          '631061895709f66d', '6dae2c4359e0ee2b', '752f4ceae7c0fc37', '81b517c0c5dfbd36',
          'b0ffc599ad45f73a', 'd27dba28b3773809', 'dc14e7f1f06ed642', 'e170c037999050c2',
          'f953cdc0ac4e4399',)),
        ('that divides by bits, not bytes',
         ('048a934f953e5c74', '1171239f24912171', '143897a39bf4cfb3', '21ffdbb0051e3a9d',
          '26dac4c9db697ce9', '33cf80a698010c6a', '34c9e911c4582cea', '3c902ef5795ba64a',
          '3fdf679668b97693', '490884fac8a4e572', '4f3010f2fed91008', '514ff05295132c9d',
          '5457f5680224491d', '56a9816464241283', '5b3065a8f092d060', '6bfd5b143f8aa465',
          '6cb2b5bf0027e1cc', '70ac46d3bcf58d26', '7a5e3b62f9f0af11', '81038ff365d4691c',
          '8888202e8e390a22', '8c22acf33072dd50', '932c08a6b99cc957', '9ea3522927858398',
          'a5fa411ec6fb1889', 'a907afcf260c8e62', 'ca762c9339effad3', 'cb83c8f834a4b93d',
          'cc5a651a2e7ccb2a', 'd2af030efd7056ce', 'd4620b079d725bd0', 'd7cd936df937c6e9',
          'db95638ddc2b91a8', 'df2f9ae62b7e0458', 'f1ad3aae1ce9af0c', 'f4e07e350d306ed1',
          'fb7e06e4059da6f7', 'fce416607398033c', 'fd65b0adaaca1528',)),
        ("each weight read in the prompt's pass serves all 512 tokens",
         ('00c46c4f464e3fde', '026a9a049383add6', '071fbb4b3c7083f4', '232105f8fe681d32',
          '29b2562eb69ca48c', '2efb5956b1a86503', '2f4d7712e737bc03', '2fe6dc7087f569cd',
          '42929a682de9d7eb', '435c7af39e4cbb83', '46ba0812cdd97b64', '47e8ae0d675c3563',
          '62b51e25fb03e8ee', '68b6c2c077b73241', '72127305ad4936a3', '7ba70798c48f00bb',
          '875d13330af17c86', '8a7246ca7e66bf3e', '8bda00789ba4afd7', '8d5c69b9d564c58c',
          '90c29a72cfffbe55', 'a6707a5cfe6af984', 'b055fb9409b096f2', 'bba45141758ef354',
          'bc23bc9aedf76d93', 'c38099cdb39957a4', 'ca8549e7d4be1b0a', 'd03d6a936e156fe6',
          'daaa0128bed7e797', 'df2233b7bb592952', 'e2597f9167301e4e', 'e3bf8fd8ee538031',
          'e7a58b7bb6a4d96d', 'f7bc41cb05792485',)),
    ),
    decade=2, sign=1,
)

TYS2_DECODE_BOUND = Sealed(
    what='tys2_decode_bound', salt='lesson5/tys2_decode_bound', kind='choice', digits=None,
    right=('ac7088a99dcad275',),
    mistakes=(
        ("one decode step does few FLOPs per byte it reads, far fewer than the A100's ridge point (about 153), so it waits on memory",
         ('9450651735bdbf76',)),
    ),
    choices=('memory', 'compute'),
)

TYS2_PREFILL_BOUND = Sealed(
    what='tys2_prefill_bound', salt='lesson5/tys2_prefill_bound', kind='choice', digits=None,
    right=('da2b71b63dd06917',),
    mistakes=(
        ("a 512-token prefill's FLOPs per byte are beyond the A100's ridge (about 153): the arithmetic, not the reading, takes the time",
         ('b8d5bd6adbfc1c56',)),
    ),
    choices=('memory', 'compute'),
)


def check_tys2(decode_flops_per_byte, prefill_flops_per_byte, decode_bound,
               prefill_bound) -> None:
    """Test-yourself 2: FLOPs per weight byte of one decode step and of a 512-token prefill in
    16-bit (about; course_lib's exact counts for a 7B shape pass too), and what limits each on
    an A100 ("memory" or "compute").  All sealed."""
    with builds_on("flops_per_weight_byte"):
        check_sealed(decode_flops_per_byte, TYS2_DECODE)
        check_sealed(prefill_flops_per_byte, TYS2_PREFILL)
    check_sealed(_choice(decode_bound, "tys2_decode_bound", BOUNDS), TYS2_DECODE_BOUND)
    check_sealed(_choice(prefill_bound, "tys2_prefill_bound", BOUNDS), TYS2_PREFILL_BOUND)


# --- recap ----------------------------------------------------------------------------------

RECAP_REQUESTS = Sealed(
    what='recap_requests', salt='lesson5/recap_requests', kind='number', digits=None,
    right=('e85688b0cd2e5d60',),
    mistakes=(
        ('the weights must fit too: subtract their bytes from the memory first',
         ('520d2c676d9c86ab',)),
        ('the memory is in GiB (2^30 bytes), not GB (10^9 bytes)',
         ('aa9a3ad84201edf2',)),
        ('the cache keeps keys and values: its size has a factor 2',
         ('9b2be4531f8284b0',)),
        ('count whole requests: round down, a request does not fit in part',
         ('a265e59cd625222e',)),
        ('the weights are n_params × bytes_per_number bytes',
         ('1c3490b959b0120d',)),
    ),
    decade=1, sign=1,
)

RECAP_BOUND = Sealed(
    what='recap_bound', salt='lesson5/recap_bound', kind='choice', digits=None,
    right=('0e5a7c46105df831',),
    mistakes=(
        ("compare the batch that fits with the decode batch at the A100's ridge point: a batch that small still does few FLOPs per byte of weights",
         ('10871b023f38d98e',)),
    ),
    choices=('memory', 'compute'),
)


def check_recap(requests, bound) -> None:
    """The recap's question for :data:`RECAP` (Llama 2 13B, 4,096 tokens, 80 GiB, 16-bit): how
    many requests fit beside the weights, and whether decoding all of them together in one
    batch is limited by "memory" or "compute" on the A100 (weights' FLOPs per byte against the
    ridge point).  Both sealed."""
    with builds_on("requests_fit"):
        check_sealed(requests, RECAP_REQUESTS)
    check_sealed(_choice(bound, "recap_bound", BOUNDS), RECAP_BOUND)


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson5")  # one-line pass and fail messages in a notebook (checks.tutor)
