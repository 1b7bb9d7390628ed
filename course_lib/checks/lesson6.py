"""Checks for lesson 6, "Variants and the model card": each compares a learner's answer with an independent reference
(torch's ``scaled_dot_product_attention(..., enable_gqa=True)``; ``numel`` and ``moe.active_params_per_token``;
course_lib's ``params`` and ``memory``, tested against ``transformers`` on the meta device) and names the likely mistake
(hints/lesson6.toml) without showing the expected value.  A card is a shipped card's name, a :class:`ModelShape` or a
dict of its fields.  The learner's functions may not call course_lib's counters, the MoE layer's own or
``kv_cache_width``."""
from __future__ import annotations

import math
import numbers
import random
from contextlib import nullcontext
from itertools import product
from typing import Mapping, Sequence

from ..cards import load_card
from ..memory import kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, weight_bytes
from ..params import (attention_params_per_layer, count_params, feed_forward_params_per_layer,
                      mlp_params, norm_params, router_params_per_layer)
from ..shapes import ModelShape, llama_shape
from ..units import GB, GiB
from . import (HIDDEN, CheckFailed, as_keyed, as_tuple, builds_on, check_value, got_words, heads_kind, is_shown,
               on_hidden)
from .exercise import (RANDOM_TAG, Question, attempt, call, compare, dtype_name as _dtype, exactly,  # noqa: F401
                       merged, name_mistake, requires, torch_watch)  # RANDOM_TAG: for the tests
from .hints import load as _load_hints, words
from .sealed import load as _load_sealed

SEALED, HINTS, _hints = _load_sealed("lesson6"), _load_hints("lesson6"), words("lesson6")
"""Sealed answers by salt (sealed_answers/lesson6.json); mistakes' words (hints/lesson6.toml), and ``{words: value}`` of
mistakes keyed as there (None: not on this input)."""
SERVE_TOKENS, SERVE_MEMORY, BYTES_16BIT, MIXTRAL = 8192, 80 * GB, 2, "Mixtral-8x7B-v0.1"
"""The requests example: 8,192 tokens on an 80 GB accelerator (an H100 SXM, 80 × 10^9 bytes: its data sheet's figure,
course_lib.units) in 16-bit; the recap's card."""
TOO_BIG_CASE = dict(card="Llama-2-70b-hf", n_tokens=4096, memory_bytes=80 * GB)
"""A visible case of :func:`check_requests_that_fit`: the 16-bit weights alone overflow 80 GB."""
EXPERTS_CASE = dict(card="Mixtral-8x7B-v0.1", n_tokens=32768, memory_bytes=141 * GB, bytes_per_number=1)
"""Another: a mixture of experts in 8-bit on 141 GB (an H200's data sheet)."""
GQA_CASES = (dict(batch=2, n_heads=8, n_kv_heads=2, pos=6, d_head=16, seed=0),
             dict(batch=1, n_heads=6, n_kv_heads=2, pos=5, d_head=8, seed=6))
"""Visible cases of :func:`check_gqa`: groups of 4 query heads, and of 3."""
MOE_LAYERS = (dict(d_model=32, d_ff=48, n_experts=8, top_k=2, mlp="swiglu", bias=False, batch=2, pos=5, seed=0),
              dict(d_model=12, d_ff=20, n_experts=4, top_k=3, mlp="gelu", bias=True, batch=1, pos=4, seed=11))
"""Visible cases of :func:`check_moe_sizes`: Mixtral's routing at toy size; 3 of 4 experts with biases."""
_LLAMA_KINDS = dict(mlp="swiglu", norm="rmsnorm", positions="rotary", qkv_bias=False, out_bias=False, mlp_bias=False)
TOY_MOE = ModelShape(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_head=24, d_ff=80, d_vocab=300, n_ctx=64,
                     n_experts=5, n_experts_per_tok=3, **_LLAMA_KINDS, name="lesson6.TOY_MOE, 3 of 5 experts a token")
CARD_PARAMS_CARDS = (MIXTRAL, "gpt2", "gemma-2-9b", TOY_MOE)
"""Visible cards of :func:`check_card_params`: experts; a tied head, biases and learned positions; d_head · n_heads ≠
d_model with four norms a block; 3 experts a token, tied."""
KV_TOKEN_CARDS, KV_TOKEN_BYTES = ("Meta-Llama-3-8B", "gemma-2-9b", "Qwen2-7B-Instruct"), (BYTES_16BIT, 1)
"""Visible cards of :func:`check_kv_bytes_per_token`, in 16- and 8-bit (:data:`KV_TOKEN_BYTES`): 8 key/value heads in
groups of 4; d_head ≠ d_model / n_heads, groups of 2; 4 in groups of 7."""
FOUR_SIZES_CARDS, FOUR_SIZES_BYTES = (MIXTRAL, "gpt2"), (BYTES_16BIT, 4)
"""Visible inputs of :func:`check_four_sizes`: experts, and a dense card with a tied head; 16- and 32-bit."""
FOUR_SIZES_KEYS = ("total_params", "active_params", "kv_cache_bytes_per_token", "weight_bytes")
EXACT, CLOSE = dict(integer=True), dict(rel=1e-12)  # a count; bytes (check_value's keywords)
_SHORTCUTS = {"moe.py": {"active_params_per_token", "params_touched", "_expert_sizes"}, "shapes.py": {"kv_cache_width"}}


def as_shape(card, plain: bool = False) -> ModelShape:
    """A ModelShape from a shipped card's name, a ModelShape, or a dict of its fields; else TypeError.  ``plain``:
    ValueError for latent attention, shared experts or dense first layers (outside sections 1 to 4)."""
    if not isinstance(card, (str, Mapping, ModelShape)):
        raise TypeError(f"card must be a name, a ModelShape or a dict, got {type(card).__name__}")
    s = load_card(card) if isinstance(card, str) else card if isinstance(card, ModelShape) else ModelShape(**card)
    if plain and (s.mla is not None or s.n_shared_experts or s.n_dense_layers):
        raise ValueError(f"{s.name or s.model_type}: {HINTS['types']['not_plain']}")
    return s


def seven_b(n_kv_heads: int) -> ModelShape:
    """The lesson's 7B-class shape (Llama 2 7B: 32 layers, 32 query heads of 128)."""
    return llama_shape(n_kv_heads=n_kv_heads).with_(name=f"7B-class, {n_kv_heads} kv heads")


def _kinds(s: ModelShape) -> tuple:
    return ("a mixture of experts" if s.is_moe else "dense",
            "" if s.d_model == s.n_heads * s.d_head else "d_head is not d_model / n_heads")


def _check(fn, name, s, case, cases, args, returns, *parts, kinds=(), text="", builds=(), counts="params"):
    """``fn(*args)`` on ``case`` of card ``s`` (:func:`attempt`; label ``text`` or the card's name and ``args[1:]``, or
    ``kinds``), read as ``returns``, each part ``(index, name, expected, mistakes, EXACT or CLOSE)`` checked (an EXACT
    one must be an int: a float, even a whole one, fails); returns (label, result)."""
    if s is not None:
        text = text or ", ".join([s.name or f"a {s.model_type} shape", *map(str, args[1:])])
        kinds = (f"a shipped card of model_type {s.model_type}" if s.name else "a made-up shape", *kinds)
    what, _, got = attempt(fn, name, case, cases, text, args, kinds=kinds, shortcuts=_SHORTCUTS, explain_errors=True)
    if returns is not None:
        got = as_tuple(got, returns.count(",") + 1, what, returns) if isinstance(returns, str) \
            else as_keyed(got, returns, what)
    with builds_on(*builds) if builds else nullcontext():
        for index, part_name, expected, mistakes, tolerance in parts:
            x = got if returns is None else got[index]
            part = what if returns is None else f"{what}[{index!r}]" + (f", {part_name}" if part_name else "")
            check_value(x, expected, what=part, mistakes=mistakes, **tolerance)
            if tolerance is EXACT and not (isinstance(x, numbers.Integral) or (  # right, but not an int
                    dtype := str(getattr(x, "dtype", "")).split(".")[-1]).startswith(("int", "uint"))):
                kind = type(x).__name__ if isinstance(x, numbers.Real) else f"a {dtype} {type(x).__name__.lower()}"
                raise CheckFailed(HINTS["types"]["int"].format(what=part, why=HINTS["types"][counts],
                                                               got=got_words(x, part, 0) if HIDDEN in part
                                                               else f"{kind} {x!r:.40}"))
    return what, got


# --- grouped-query attention -----------------------------------------------------------------

def _attend(q, k, v, causal=True, scale=True, dim=-1):
    """Attention over matched heads (the mistakes' outputs); ``causal`` "diagonal": each token hidden from
    itself too, "earlier": the mask the wrong way round."""
    import torch
    d, n = q.shape[-1], q.shape[-2]
    scores = q @ k.transpose(-2, -1) / {True: math.sqrt(d), False: 1, "d_head": d}[scale]
    ones = torch.ones(n, n, dtype=torch.bool)
    mask = ones.tril(-1) if causal == "earlier" else ones.triu({"diagonal": 0, True: 1, False: n}[causal])
    return scores.masked_fill(mask, float("-inf")).softmax(dim) @ v


def _pairs_heads(func, args, kwargs) -> bool:
    """torch's scaled_dot_product_attention(..., enable_gqa=True) pairing each query head with its key/value head."""
    q, k = [*args[:2], *(kwargs.get(n) for n in ("query", "key")[len(args[:2]):])]
    return getattr(func, "__name__", "") == "scaled_dot_product_attention" and bool(kwargs.get("enable_gqa")) \
        and q.shape[-3] != k.shape[-3]


def check_gqa(fn, cases: Sequence[Mapping] = GQA_CASES) -> None:
    """Check ``fn(q, k, v) -> out``: causal grouped-query attention, q (batch, n_heads, pos, d_head), k and v (batch,
    n_kv_heads, pos, d_head), out like q, query head i reading kv head i // (n_heads // n_kv_heads).  Against torch's
    ``scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)``, float32, tolerance 1e-5."""
    import torch
    import torch.nn.functional as F
    for case in cases:  # q, k, v from their own generator (the notebook's random state is left alone)
        gen, shown, h = torch.Generator().manual_seed(case["seed"]), is_shown(case, GQA_CASES), HINTS["gqa"]
        q, k, v = (torch.randn(case["batch"], n, case["pos"], case["d_head"], generator=gen)
                   for n in (case["n_heads"], case["n_kv_heads"], case["n_kv_heads"]))
        what = f"grouped_query_attention on q {tuple(q.shape)}, k and v {tuple(k.shape)}" if shown \
            else on_hidden("grouped_query_attention", heads_kind(case["n_heads"], case["n_kv_heads"]))
        got = call(fn, what, q.clone(), k.clone(), v.clone(), shown=shown, shortcuts=_SHORTCUTS,
                   explain_errors=True, refuse=[(torch_watch(_pairs_heads), h["enable_gqa"])])
        tensor, g = isinstance(got, torch.Tensor), case["n_heads"] // case["n_kv_heads"]
        ki, vi = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        compare(got.detach().float() if tensor else got, F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True), what=what, shown=shown, rtol=1e-4, atol=1e-5, tensor=True,
            shape_words=h["shape"] + (f"; {h['per_kv_head']}" if tensor and got.shape[1:2] == k.shape[1:2] else ""),
            otherwise=lambda got, e: None if not got.isfinite().all() else h["differs"].format(
                by=float((got - e).abs().max())), mistakes=lambda: _hints(
                "gqa", repeat=_attend(q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)),
                no_mask=_attend(q, ki, vi, causal=False), no_scale=_attend(q, ki, vi, scale=False),
                diagonal=_attend(q, ki, vi, causal="diagonal"), earlier=_attend(q, ki, vi, causal="earlier"),
                scale_d_head=_attend(q, ki, vi, scale="d_head"), softmax_dim=_attend(q, ki, vi, dim=-2),
                head0=_attend(q, k[:, :1].expand_as(ki), v[:, :1].expand_as(vi)),
                swapped=_attend(q, vi, ki)))


# --- a card's four sizes: parameters (total and active), KV cache per token, weight bytes ------------

def _sizes(s: ModelShape, b=BYTES_16BIT, dense: bool = False) -> dict:
    """``{each of FOUR_SIZES_KEYS: (course_lib's count, {words: value} of named mistakes)}``; a dense card's active
    parameters have mistakes only with ``dense``."""
    c, L, d, h, E, k, moe, moe_L = count_params(s), s.n_layers, s.d_model, s.n_heads, s.n_experts, \
        s.n_experts_per_tok, s.is_moe, s.moe_layers
    t, q, attn, mlp, norm, router = c.total, h * s.d_head, attention_params_per_layer(s), mlp_params(s), \
        norm_params(s), router_params_per_layer(s)
    no_bias, norms = count_params(s.with_(qkv_bias=False, out_bias=False, mlp_bias=False)).total, c.norms
    biased = [kind for kind in ("qkv_bias", "out_bias", "mlp_bias") if getattr(s, kind)]  # one missing, if 2 or more
    one_bias = {kind: count_params(s.with_(**{kind: False})).total for kind in biased} if len(biased) > 1 else {}
    ffs, own_head, tied = (E if moe else 1) * L, d % h == 0 and d // h != s.d_head, s.tied_embeddings
    kv, wb, other = 2 * L * s.n_kv_heads * s.d_head * b, weight_bytes(s, _dtype(b)), b != BYTES_16BIT
    return {"total_params": (t, merged(_hints(
        "card_params", active_count=c.active if moe else None, no_routers=t - moe_L * router if moe else None,
        attention_per_expert=t + (E - 1) * L * attn if moe else None,
        one_expert=t - moe_L * (E - 1) * mlp if moe else None,
        tied=t + s.d_vocab * d if tied else None, untied=None if tied else t - s.d_vocab * d,
        kv_query_heads=count_params(s.with_(n_kv_heads=h)).total if s.n_kv_heads != h else None,
        d_head=count_params(s.with_(d_head=d // h)).total if own_head else None,
        gated=t - ffs * d * s.d_ff if s.mlp_matrices == 3 else None, no_norms=t - norms if norms else None,
        final_norm=t - norm if norms else None,
        norms_per_block=t + (2 - s.norms_per_block) * L * norm if norms and s.norms_per_block != 2 else None,
        positions=t - s.n_ctx * d if s.positions == "learned" else None, biases=no_bias if no_bias != t else None,
        ungated=t + ffs * d * s.d_ff if s.mlp_matrices == 2 else None,
        layernorm_weight=t - norms // 2 if s.norm == "layernorm" else None, **one_bias,
        mlp_bias_shape=t + ffs * (s.d_ff - d) if s.mlp_bias and s.d_ff != d else None,
        router_per_expert=t + (E - 1) * moe_L * router if moe else None,
        query_width=t - L * (2 * d + s.qkv_bias) * (q - d) if q != d else None,
        kv_d_head=t - L * (2 * d + 2 * s.qkv_bias) * s.n_kv_heads * (s.d_head - d // h) if own_head else None))),
        "active_params": (c.active, merged(_hints(
            "card_params", every_expert=t, active_no_routers=c.active - moe_L * router, split=t * k / E,
            active_one_expert=c.active - moe_L * (k - 1) * mlp, attention_per_visit=c.active + (k - 1) * L * attn,
            fixed_top_k=c.active - moe_L * (k - 2) * mlp if k != 2 else None)) if moe else merged(_hints(
            "card_params", dense=0, dense_ff=t - L * mlp)) if dense else {}),
        "kv_cache_bytes_per_token": (kv_cache_bytes_per_token(s, _dtype(b)), merged(_hints(
            "kv_bytes_per_token", d_head=2 * L * s.n_kv_heads * (d // h) * b if own_head else None,
            query_heads=2 * L * h * s.d_head * b, fixed_bytes=kv * BYTES_16BIT / b if other else None,
            only_keys=kv / 2, no_layers=kv / L, numbers=kv / b, bits=8 * kv, lesson1=2 * L * d * b))),
        "weight_bytes": (wb, merged(_hints(
            "four_sizes", active=c.active * b, params=t, gib=wb / GiB, gb=wb / GB,
            tied=wb + s.d_vocab * d * b if tied else None, fixed_bytes=t * BYTES_16BIT if other else None)))}


def check_kv_bytes_per_token(fn, cards: Sequence = KV_TOKEN_CARDS,
                             bytes_per_number: Sequence = KV_TOKEN_BYTES) -> None:
    """Check ``fn(s, bytes_per_number) -> bytes`` one token adds to the KV cache, 2 × n_layers × n_kv_heads ×
    d_head × bytes_per_number, against ``memory.kv_cache_bytes_per_token``."""
    for card, b in product(cards, bytes_per_number):
        s = as_shape(card, plain=True)
        _check(fn, "kv_bytes_per_token", s, (card, b), ([*product(KV_TOKEN_CARDS, KV_TOKEN_BYTES)], ()), (s, b), None,
               (None, "", *_sizes(s, b)["kv_cache_bytes_per_token"], CLOSE),
               kinds=(heads_kind(s.n_heads, s.n_kv_heads), _kinds(s)[1]))


def check_card_params(fn, cards: Sequence = CARD_PARAMS_CARDS) -> None:
    """Check ``fn(s) -> (total, active)`` parameters of a card (no latent attention, shared experts or dense first
    layers) against ``count_params(s).total`` and ``.active``."""
    for card in cards:
        s = as_shape(card, plain=True)
        sizes = _sizes(s, dense=True)
        _check(fn, "card_params", s, card, (CARD_PARAMS_CARDS, ()), (s,), "total, active",
               (0, "the total", *sizes["total_params"], EXACT),
               (1, "the active parameters", *sizes["active_params"], EXACT), kinds=_kinds(s))


def check_four_sizes(fn, cards: Sequence = FOUR_SIZES_CARDS,
                     bytes_per_number: Sequence = FOUR_SIZES_BYTES) -> None:
    """Check ``fn(s, bytes_per_number) -> {"total_params", "active_params", "kv_cache_bytes_per_token",
    "weight_bytes"}`` against course_lib's counters."""
    for card, b in product(cards, bytes_per_number):
        s = as_shape(card, plain=True)
        _check(fn, "four_sizes", s, (card, b), ([*product(FOUR_SIZES_CARDS, FOUR_SIZES_BYTES)], ()),
               (s, b), FOUR_SIZES_KEYS, *((key, "", *right, EXACT if key.endswith("params") else CLOSE)
                                          for key, right in _sizes(s, b).items()),
               builds=("card_params", "kv_bytes_per_token"), kinds=_kinds(s)[:1])


# --- a toy mixture-of-experts layer ----------------------------------------------------------

def moe_layer(d_model, d_ff, n_experts, top_k, mlp, bias, batch, pos, seed):
    """A seeded :class:`~course_lib.moe.MoEFeedForward` and x (batch, pos, d_model); the notebook's RNG is kept."""
    import torch
    from ..moe import MoEFeedForward
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return (MoEFeedForward(d_model, d_ff, n_experts, top_k, mlp=mlp, bias=bias),
                torch.randn(batch, pos, d_model))


def check_moe_sizes(fn, layers: Sequence[Mapping] = MOE_LAYERS) -> None:
    """Check ``fn(layer, x) -> (total, active)`` for a MoEFeedForward ``layer``: its parameters (an int), and those each
    token of x passes through, the router and the experts it is sent to (an integer tensor (batch, pos)).  Against
    ``numel``, ``params.router_params_per_layer + n_experts × params.mlp_params`` and ``moe.active_params_per_token``.
    """
    import torch
    from ..moe import active_params_per_token
    for spec in layers:
        (layer, x), shown = moe_layer(**spec), is_shown(spec, MOE_LAYERS)
        E, k, mlp = spec["n_experts"], spec["top_k"], spec["mlp"]
        shape = ModelShape(d_model=spec["d_model"], n_layers=1, n_heads=1, d_ff=spec["d_ff"], d_vocab=1,
                           n_ctx=1, n_experts=E, n_experts_per_tok=k, mlp=mlp, mlp_bias=spec["bias"])
        router, expert = router_params_per_layer(shape), mlp_params(shape)
        total, bias = router + E * expert, sum(p.numel() for n, p in layer.named_parameters() if n.endswith("bias"))
        if total != sum(p.numel() for p in layer.parameters()):  # the check's own premise: not the learner's fault
            raise RuntimeError("moe_sizes: course_lib's count of the layer differs from its numel (a course bug)")
        what, (_, active) = _check(fn, "moe_sizes", None, spec, (MOE_LAYERS, ()), (layer, x), "total, active per token",
            (0, "the total", total, _hints("moe_sizes", one_token=router + k * expert, no_router=total - router,
                                          one_expert=expert, router_per_expert=E * (router + expert),
                                          weights_only=total - bias if bias else None), EXACT),
            text=f"a layer of {E} {mlp} experts, top_k={k}" + (", with biases" if bias else ""),
            kinds=(f"a layer of {mlp} experts", "with biases" if bias else "no biases"))
        with torch.no_grad():
            expected = active_params_per_token(layer, layer.run(x).routing)
        size, dtype = tuple(getattr(active, "shape", ())), str(getattr(active, "dtype", "")).split(".")[-1]
        name_mistake(f"{what}[1]", {HINTS["types"][key].format(
            shape=f"(batch, pos) = {tuple(x.shape[:-1])}" if shown else "(batch, pos)", got=got_words(active, what, 0),
            dtype=dtype, size=f"shape {size}" if shown else "another shape"): wrong for key, wrong in (
            ("active_tensor", not isinstance(active, torch.Tensor)),  # the exercise asks for an integer tensor
            ("active_dtype", lambda: active.is_floating_point() or active.is_complex() or active.dtype == torch.bool),
            ("active_shape", lambda: size != tuple(expected.shape)))}, ": ")
        what, got = f"{what}[1], the active parameters", active.detach().to(torch.int64)
        if not exactly(got.tolist(), expected.tolist(), what, {d: torch.equal(got, w) and not torch.equal(
                w, expected) for d, w in _hints(  # the router has no bias (course_lib.moe): bias / E an expert
                    "moe_sizes", active_no_router=expected - router, every_expert=torch.full_like(expected, total),
                    active_one_expert=expected - (k - 1) * expert, router_top_k=expected + (k - 1) * router,
                    fixed_top_k=expected - (k - 2) * expert if k != 2 else None,
                    active_weights_only=expected - k * bias // E if bias else None).items()}, ", is not right: "):
            how_many = f"{int((got != expected).sum())} of {got.numel()}" if shown else "some"
            raise CheckFailed(f"{what}, is not right for {how_many} tokens")


# --- requests that fit -----------------------------------------------------------------------

def check_requests_that_fit(fn, card_params=None, kv_bytes_per_token=None,
                            cases: Sequence[Mapping] | None = None) -> None:
    """Check ``fn(s, n_tokens, memory_bytes, bytes_per_number) -> int``: floor((memory − weight bytes) / cache bytes
    per sequence), 0 if the weights alone do not fit.  A case: ``card`` (and ``n_kv_heads`` to set), ``n_tokens``,
    ``memory_bytes``, ``bytes_per_number`` (default 2); by default :func:`seven_b` with 32 and 8 kv heads, 8,192
    tokens, 80 GB, :data:`TOO_BIG_CASE` and :data:`EXPERTS_CASE`.  The learner's ``card_params`` and
    ``kv_bytes_per_token``, if given, are re-checked first."""
    shown_cases = [*(dict(card=seven_b(kv), n_tokens=SERVE_TOKENS, memory_bytes=SERVE_MEMORY)
                     for kv in (32, 8)), TOO_BIG_CASE, EXPERTS_CASE]
    for case in shown_cases if cases is None else cases:
        s = as_shape(case["card"], plain=True).with_(**{k: v for k, v in case.items() if k == "n_kv_heads"})
        if s.sliding_window is not None:
            raise ValueError(f"{s.name}: sliding_window={s.sliding_window} is outside this check")
        n, mem, b = case["n_tokens"], case["memory_bytes"], case.get("bytes_per_number", BYTES_16BIT)
        if card_params is not None:
            requires("card_params", check_card_params, card_params, [s])
        if kv_bytes_per_token is not None:
            requires("kv_bytes_per_token", check_kv_bytes_per_token, kv_bytes_per_token, [s], [b])
        w, seq = weight_bytes(s, _dtype(b)), kv_cache_bytes_per_sequence(s, n, _dtype(b))
        mha_w, w2 = weight_bytes(s.with_(n_kv_heads=s.n_heads), _dtype(b)), w * BYTES_16BIT // b
        up, near, fits = math.ceil((mem - w) / seq), round((mem - w) / seq), w <= mem  # rounding's slips
        mistakes = merged(_hints(
            "requests_that_fit", too_big=(mem - w) // seq if w > mem else None,
            too_big_trunc=int((mem - w) / seq) if w > mem else None, memory_gib=max(0, (mem * GiB // GB - w) // seq),
            no_weights=mem // seq, mha_weights=max(0, (mem - mha_w) // seq),
            round_either=up if fits and up == near else None, round_up=up if fits and up != near else None,
            round_nearest=near if fits and up != near else None, keys_only=max(0, (mem - w) // (seq // 2)),
            query_heads=max(0, (mem - w) // (seq * s.group_size)),
            active_weights=max(0, (mem - count_params(s).active * b) // seq) if s.is_moe else None,
            per_token=max(0, (mem - w) // (seq // n)) if n > 1 else None,
            fixed_bytes=max(0, (mem - w2) // (seq * BYTES_16BIT // b)) if b != BYTES_16BIT else None,
            fixed_bytes_weights=max(0, (mem - w2) // seq) if b != BYTES_16BIT else None,
            fixed_bytes_cache=max(0, (mem - w) // (seq * BYTES_16BIT // b)) if b != BYTES_16BIT else None))
        _check(fn, "requests_that_fit", s, case, (shown_cases, ()), (s, n, mem, b), None,
               (None, "", max(0, (mem - w) // seq), mistakes, EXACT), builds=("card_params", "kv_bytes_per_token"),
               counts="requests", kinds=(heads_kind(s.n_heads, s.n_kv_heads),), text=f"{s.name or 'a shape'} "
               f"(n_kv_heads={s.n_kv_heads}), n_tokens={n}, memory_bytes={mem}, bytes_per_number={b}")


# --- the variants of 2025-26: the cache by kind of layer, fine-grained and shared experts ------
# Each visible test also tries a shape drawn at run time from ``random.Random(seed)`` (the same every run, so the
# grader's run of the model answer tries it too), labelled [random shape]: sliding and full layers past the window;
# experts with shared ones of a width of their own (never n_shared_experts × d_ff).

_r = random.Random("lesson6/kv_bytes_per_sequence")
_n_layers, _n_kv = _r.randint(4, 40), _r.choice((1, 2, 4, 8))
_n_heads, _d_head = _n_kv * _r.choice((1, 2, 4)), _r.choice((32, 64, 80, 128))
_window = _r.randint(64, 4096)
RANDOM_SEQ_CASE = dict(card=dict(d_model=_n_heads * _d_head, n_layers=_n_layers, n_heads=_n_heads, n_kv_heads=_n_kv,
                                 d_ff=4 * _n_heads * _d_head, d_vocab=1000, n_ctx=16 * _window, **_LLAMA_KINDS,
                                 tied_embeddings=False, sliding_window=_window,
                                 n_sliding_layers=_r.randint(1, _n_layers - 1)),
                       n_tokens=_window * _r.randint(2, 8), bytes_per_number=_r.choice((1, 2, 4)))
_r = random.Random("lesson6/moe_layer_params")
_d, _n_experts = _r.choice((64, 96, 128, 256)), _r.choice((8, 16, 32, 64))
RANDOM_MOE_CARD = dict(d_model=_d, n_layers=2, n_heads=4, d_ff=_r.choice((32, 48, 96)), d_vocab=100, n_ctx=64,
                       **_LLAMA_KINDS, tied_embeddings=False, n_experts=_n_experts,
                       n_experts_per_tok=_r.randint(2, _n_experts // 2), n_shared_experts=_r.randint(1, 3),
                       d_ff_shared=_r.choice((80, 112, 200)))
SEQ_CASES = (dict(card="gemma-3-1b-it", n_tokens=8192, bytes_per_number=BYTES_16BIT),
             dict(card="gpt-oss-20b", n_tokens=96, bytes_per_number=4),
             dict(card="DeepSeek-V2-Lite", n_tokens=4096, bytes_per_number=1),
             RANDOM_SEQ_CASE)
"""Visible cases of :func:`check_kv_bytes_per_sequence`: Gemma 3 (sliding and global layers) past its window,
gpt-oss-20b in 32-bit inside its 128-token one (a window taken for min(n_tokens, window) fails), DeepSeek-V2-Lite
(latent attention, 8-bit), a run-time shape past its window; not the 32,768 tokens the prose gives caches for."""
MOE_CARDS = ("Qwen3-30B-A3B", "DeepSeek-V2-Lite", "gpt-oss-20b", "Qwen1.5-MoE-A2.7B", RANDOM_MOE_CARD)
"""Visible cards of :func:`check_moe_layer_params`: fine-grained experts without (Qwen3) and with shared experts
(DeepSeek-V2-Lite), biases in router and experts (gpt-oss), a shared expert behind a gate of d_model × 1
(Qwen1.5-MoE), and a shape with shared experts made at run time."""


def check_kv_bytes_per_sequence(fn, cases: Sequence[Mapping] = SEQ_CASES) -> None:
    """Check ``fn(s, n_tokens, bytes_per_number) -> bytes`` of one sequence's KV cache with each layer's kind: full
    attention (n_tokens kept), sliding window (min(n_tokens, window), in ``s.sliding_layers`` of the layers) or
    latent attention (kv_lora_rank + d_head_rope numbers a layer a token); against
    ``memory.kv_cache_bytes_per_sequence``.  A case: ``card``, ``n_tokens``, ``bytes_per_number`` (default 2)."""
    for case in cases:
        s, n, b = as_shape(case["card"]), case["n_tokens"], case.get("bytes_per_number", BYTES_16BIT)
        L, right = s.n_layers, kv_cache_bytes_per_sequence(s, n, _dtype(b))
        per_token, mla, slide = kv_cache_bytes_per_token(s, _dtype(b)), s.mla is not None, s.sliding_layers
        past = bool(slide) and n > s.sliding_window
        some = past and slide < L
        mistakes = merged(_hints(
            "kv_bytes_per_sequence", one_token=per_token, numbers=right / b, only_keys=right / 2,
            latent_pair=2 * right if mla else None, fixed_bytes=right * BYTES_16BIT / b if b != BYTES_16BIT else None,
            no_window=per_token * n if past else None,
            window_always=s.kv_cache_width * b * (slide * s.sliding_window + (L - slide) * n)
            if slide and n < s.sliding_window else None, all_slide=per_token * s.sliding_window if some else None,
            wrong_way=s.kv_cache_width * b * (slide * n + (L - slide) * s.sliding_window) if some else None,
            latent_heads=2 * L * s.n_kv_heads * s.d_head * n * b if mla else None,
            no_rope=L * s.mla.kv_lora_rank * n * b if mla else None, latent_per_head=right * s.n_heads if mla else None,
            query_heads=right * s.group_size if not mla and s.n_kv_heads != s.n_heads else None))
        kinds = ("latent attention" if mla else "every layer full attention" if not slide else "every layer sliding"
                 if slide == L else "sliding and full layers",
                 "shorter than the window" if slide and n <= s.sliding_window else "")
        text = HINTS["labels"]["random_hybrid"].format(s=s, n=n, b=b, heads="s" * (s.n_kv_heads != 1))
        _check(fn, "kv_bytes_per_sequence", s, case, (SEQ_CASES, (RANDOM_SEQ_CASE,)), (s, n, b), None,
               (None, "", right, mistakes, CLOSE), kinds=kinds, text=text if case == RANDOM_SEQ_CASE else "")


def check_moe_layer_params(fn, cards: Sequence = MOE_CARDS) -> None:
    """Check ``fn(s) -> (held, used)`` for one mixture-of-experts layer of ``s``: held = the routed experts, the shared
    experts (one feed-forward layer ``s.shared_width`` wide) and the router; used = the router, the shared experts and
    ``n_experts_per_tok`` routed ones; against ``params.feed_forward_params_per_layer`` and ``router_params_per_layer``.
    """
    for card in cards:
        s = as_shape(card)
        if not s.is_moe:
            raise ValueError(f"{s.name or 'a shape'} has no experts")
        E, k, expert, n_shared = s.n_experts, s.n_experts_per_tok, mlp_params(s), s.n_shared_experts
        held = feed_forward_params_per_layer(s, s.n_layers - 1) + router_params_per_layer(s)  # the last block's
        used, shared = held - (E - k) * expert, mlp_params(s, s.shared_width) if n_shared else 0
        common = _hints("moe_layer_params", no_router=-router_params_per_layer(s), no_shared=-shared,
                        gate=-s.d_model if s.shared_expert_gate else None, router_bias=-E if s.router_bias else None,
                        shared_each=(n_shared - 1) * shared if n_shared > 1 else None,
                        shared_width=mlp_params(s, n_shared * s.d_ff) - shared
                        if n_shared and s.shared_width != n_shared * s.d_ff else None)
        held_m = _hints("moe_layer_params", held_used=used, held_one=held - (E - 1) * expert)
        used_m = _hints("moe_layer_params", all_active=held, used_one=used - (k - 1) * expert, used_share=held * k / E)
        _check(fn, "moe_layer_params", s, card, (MOE_CARDS, (RANDOM_MOE_CARD,)), (s,), "held, used",
               (0, "held", held, merged({**held_m, **{d: held + v for d, v in common.items()}}), EXACT),
               (1, "used", used, merged({**used_m, **{d: used + v for d, v in common.items()}}), EXACT),
               kinds=("shared experts" if n_shared else "no shared experts",),
               text=HINTS["labels"]["random_shared_moe"].format(s=s) if card == RANDOM_MOE_CARD else "")


# --- real-world examples and test yourself: sealed ---------------------------------------------
# Salted hashes of the forms that count as right and of those the usual mistakes give, so neither this file nor a
# message shows them (course_lib.checks.sealed).  Tolerances: 0.2 % for GiB and the fraction, whole numbers exact.
# Regenerate: ``python -m course_tools.seal``.

check_llama2_70b = Question((SEALED["lesson6/llama2_70b_saved_gib"],), builds_on=("kv_bytes_per_token",))
"""GiB of 16-bit cache Llama 2 70B saves per sequence of its full 4,096-token context with 8
key/value heads instead of 64 (multi-head attention)."""
check_mixtral = Question((SEALED["lesson6/mixtral_weights_gib"],))
"""GiB to hold Mixtral 8x7B's weights in 16-bit."""
check_tys1 = Question(tuple(SEALED[f"lesson6/tys1_{k}"] for k in ("cache_fraction", "requests_32", "requests_8")))
"""The 8-head cache as a fraction of the 32-head one; the requests of SERVE_TOKENS tokens that
fit in SERVE_MEMORY in 16-bit with 32 and with 8 kv heads (:func:`seven_b`)."""
check_tys2 = Question((SEALED["lesson6/tys2_total_sets"], SEALED["lesson6/tys2_active_sets"]))
"""What total and what active parameters set: "memory" or "compute"."""


from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson6")  # one-line pass and fail messages in a notebook (course_lib.tutor)
