"""Checks for lesson 6, "Variants and the model card".

Each check compares a learner's answer with an independent reference and, on failure, raises
:class:`~course_lib.checks.CheckFailed` naming the likely mistake without showing the expected
value:

* grouped-query attention against ``torch.nn.functional.scaled_dot_product_attention`` with
  ``enable_gqa=True`` (torch's own grouping of query heads onto key/value heads);
* the parameters of a toy mixture-of-experts layer against ``numel`` and
  :func:`course_lib.moe.active_params_per_token`;
* counts of a model card (total and active parameters, KV cache per token, weight bytes,
  requests that fit) against course_lib's counters (``params``, ``memory``), themselves tested
  against ``transformers`` models built on the meta device.
* the variants of 2025-26: one sequence's KV cache with each layer's kind (full attention,
  a sliding window of ``min(n, window)`` tokens, latent attention's latent and rotary key) against
  ``memory.kv_cache_bytes_per_sequence``, and one mixture-of-experts layer held and used (routed
  experts, shared experts, router) against ``params``; each tried on two real cards of different
  kinds and on a shape made at run time from a seeded ``random.Random`` (named ``[random shape]``).

A card is given as a shipped card's name (``"Mixtral-8x7B-v0.1"``), a :class:`ModelShape`, or
a dict of ModelShape fields.  Functions the learner writes are called through
:func:`~course_lib.checks.own_work` (no calls into course_lib's counters) and, here, may not
call the MoE layer's own counters (``moe.active_params_per_token``, ``moe.params_touched``) or
the shape's ``kv_cache_width``, which would answer the question for them.
"""
from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

from ..cards import load_card
from ..memory import kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, weight_bytes
from ..params import (attention_params_per_layer, count_params, feed_forward_params_per_layer,
                      mlp_params, norm_params, router_params_per_layer)
from ..shapes import ModelShape, llama_shape
from ..units import GB, GiB
from .exercise import merged, requires
from .sealed import load as _load_sealed
from . import (CheckFailed, as_keyed, as_tuple, builds_on, check_equal, check_sealed,
               check_value, confirm_close, is_shown, on_hidden, own_work, watch_calls)

SEALED = _load_sealed("lesson6")
"""This assignment's sealed answers by salt (sealed_answers/lesson6.json)."""

# --- the lesson's fixed figures (inputs, not answers) -----------------------------------------

TOO_BIG_CASE = dict(card="Llama-2-70b-hf", n_tokens=4096, memory_bytes=80 * GB)
"""A visible case of :func:`check_requests_that_fit` whose 16-bit weights alone overflow one
80 GB accelerator: no request fits."""
SERVE_TOKENS = 8192
"""The context length of the requests example (8,192 tokens)."""
SERVE_MEMORY = 80 * GB
"""An 80 GB accelerator (an H100 SXM): 80 × 10^9 bytes, its data sheet's figure, by the
course's convention (course_lib.units); the driver shows about 79.6 GiB."""
BYTES_16BIT = 2
LLAMA2_70B = "Llama-2-70b-hf"
LLAMA2_70B_MHA_KV_HEADS = 64
"""Llama 2 70B has 64 query heads; with multi-head attention it would have 64 key/value heads."""
MIXTRAL = "Mixtral-8x7B-v0.1"

GQA_CASES = (dict(batch=2, n_heads=8, n_kv_heads=2, pos=6, d_head=16, seed=0),)
"""Visible case of :func:`check_gqa`; the notebook's hidden tests pass others."""
MOE_LAYERS = (dict(d_model=32, d_ff=48, n_experts=8, top_k=2, mlp="swiglu", bias=False,
                   batch=2, pos=5, seed=0),
              dict(d_model=12, d_ff=20, n_experts=3, top_k=2, mlp="gelu", bias=True,
                   batch=1, pos=4, seed=11))
"""Visible cases of :func:`check_moe_sizes`: Mixtral's routing at toy size, and experts with
biases (a count of ``.weight`` alone fails it)."""
CARD_PARAMS_CARDS = (MIXTRAL, "gpt2", "gemma-2-9b")
"""Visible cards of :func:`check_card_params`: a mixture of experts; a tied head, biases and
learned positions; d_head · n_heads ≠ d_model with four norms a block."""
KV_TOKEN_CARDS = ("Meta-Llama-3-8B", "gemma-2-9b")
"""Visible cards of :func:`check_kv_bytes_per_token`: grouped-query, and d_head ≠ d_model / n_heads."""
FOUR_SIZES_KEYS = ("total_params", "active_params", "kv_cache_bytes_per_token", "weight_bytes")
_DTYPE = {1: "int8", 2: "bf16", 4: "fp32"}


# --- helpers ---------------------------------------------------------------------------------

def as_shape(card) -> ModelShape:
    """A ModelShape from a shipped card's name, a ModelShape, or a dict of its fields."""
    if isinstance(card, ModelShape):
        return card
    if isinstance(card, str):
        return load_card(card)
    if isinstance(card, Mapping):
        return ModelShape(**card)
    raise TypeError(f"card must be a name, a ModelShape or a dict, got {type(card).__name__}")


def seven_b(n_kv_heads: int) -> ModelShape:
    """The lesson's 7B-class shape (Llama 2 7B: 32 layers, 32 query heads of 128) with
    ``n_kv_heads`` key/value heads."""
    return llama_shape(n_kv_heads=n_kv_heads).with_(name=f"7B-class, {n_kv_heads} kv heads")


def _label(fn_name: str, s: ModelShape, *extra) -> str:
    return f"{fn_name}({s.name or 'a ' + s.model_type + ' shape'}{''.join(', ' + str(e) for e in extra)})"


def _card_kind(s: ModelShape) -> str:
    """A hidden test's card in words: shipped or made up, and its model_type (not its name)."""
    return f"a shipped card of model_type {s.model_type}" if s.name else "a made-up shape"


def _heads_kind(n_heads: int, n_kv_heads: int) -> str:
    if n_kv_heads == n_heads:
        return "multi-head attention (a key/value head per query head)"
    return ("multi-query attention (one key/value head)" if n_kv_heads == 1
            else "grouped-query attention")


def _own_d_head(s: ModelShape) -> str:
    return "" if s.d_model == s.n_heads * s.d_head else "d_head is not d_model / n_heads"


def _dtype(bytes_per_number) -> str:
    if bytes_per_number not in _DTYPE:
        raise ValueError(f"bytes_per_number={bytes_per_number!r} must be one of {sorted(_DTYPE)}")
    return _DTYPE[bytes_per_number]


def _plain(s: ModelShape) -> None:
    """The learner's counters cover every shipped family but DeepSeek's extras."""
    if s.mla is not None or s.n_shared_experts or s.n_dense_layers:
        raise ValueError(f"{s.name or s.model_type}: latent attention, shared experts and dense "
                         "first layers are outside this lesson's exercises")


_SHORTCUTS = {"moe.py": {"active_params_per_token", "params_touched", "_expert_sizes"},
              "shapes.py": {"kv_cache_width"}}


def _own(fn, *args, **kwargs):
    """``own_work(fn, ...)``, also failing if ``fn`` used a shortcut that holds the answer."""
    found: list = []
    with watch_calls(found, _SHORTCUTS):
        result = own_work(fn, *args, **kwargs)
    if found:
        raise CheckFailed(f"{getattr(fn, '__name__', 'your function')} uses course_lib's "
                          f"{found[0]}, which computes this answer: build it yourself, then "
                          "use course_lib to check it")
    return result


# --- grouped-query attention -----------------------------------------------------------------

def gqa_inputs(batch: int, n_heads: int, n_kv_heads: int, pos: int, d_head: int, seed: int):
    """Seeded float32 q (batch, n_heads, pos, d_head), k and v (batch, n_kv_heads, pos, d_head),
    drawn from their own generator (the notebook's random state is left alone)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, n_heads, pos, d_head, generator=g)
    k = torch.randn(batch, n_kv_heads, pos, d_head, generator=g)
    v = torch.randn(batch, n_kv_heads, pos, d_head, generator=g)
    return q, k, v


def _attend(q, k, v, causal=True, scale=True):
    """Plain attention over already-matched heads (the mistakes' outputs)."""
    import torch
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


def check_gqa(fn, cases: Sequence[Mapping] = GQA_CASES) -> None:
    """Check ``fn(q, k, v) -> out``: causal grouped-query attention, q (batch, n_heads, pos,
    d_head), k and v (batch, n_kv_heads, pos, d_head), out (batch, n_heads, pos, d_head), query
    head i reading key/value head i // (n_heads // n_kv_heads).  Reference: torch's
    ``scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)``; float32,
    tolerance 1e-5."""
    import torch
    import torch.nn.functional as F
    for case in cases:
        q, k, v = gqa_inputs(**case)
        shown = is_shown(case, GQA_CASES)
        label = (f"grouped_query_attention on q {tuple(q.shape)}, k and v {tuple(k.shape)}" if shown
                 else on_hidden("grouped_query_attention",
                                _heads_kind(case["n_heads"], case["n_kv_heads"])))
        got = _own(fn, q.clone(), k.clone(), v.clone())
        if not isinstance(got, torch.Tensor):
            raise CheckFailed(f"{label}: return a tensor, got {type(got).__name__}")
        if tuple(got.shape) != tuple(q.shape):
            hint = (" (that is one output per key/value head: every query head needs its own)"
                    if got.shape[1:2] == k.shape[1:2] else "")
            sizes = f" = {tuple(q.shape)}, got {tuple(got.shape)}" if shown else \
                ", got another shape"
            raise CheckFailed(f"{label}: the output should have the queries' shape "
                              f"(batch, n_heads, pos, d_head){sizes}{hint}")
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        got = got.detach().to(torch.float32)
        if torch.allclose(got, expected, atol=1e-5, rtol=1e-4):
            confirm_close(got, expected, what=label, atol=1e-5, rtol=1e-4)
            continue
        group = case["n_heads"] // case["n_kv_heads"]
        ki, vi = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        kr, vr = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        mistakes = {
            "the query heads are paired with the wrong key/value heads: consecutive query heads "
            "share one (head i reads kv head i // group, as repeat_interleave gives), not every "
            "n_kv_heads-th (i % n_kv_heads, as repeat gives)": _attend(q, kr, vr),
            "later positions are not masked: this is a decoder, so use a causal mask":
                _attend(q, ki, vi, causal=False),
            "the scores are not divided by sqrt(d_head)": _attend(q, ki, vi, scale=False),
            "every query head reads key/value head 0: each group of query heads has its own "
            "key/value head": _attend(q, k[:, :1].expand_as(ki), v[:, :1].expand_as(vi)),
            "keys and values are swapped": _attend(q, vi, ki),
        }
        for diagnosis, wrong in mistakes.items():
            if not torch.allclose(wrong, expected, atol=1e-5) and \
                    torch.allclose(got, wrong, atol=1e-5, rtol=1e-4):
                raise CheckFailed(f"{label} is not right: {diagnosis}")
        raise CheckFailed(f"{label} is not right: it differs from torch's grouped-query "
                          "attention by up to {:.2g}".format(float((got - expected).abs().max())))


# --- the KV cache per token ------------------------------------------------------------------

def kv_mistakes(s: ModelShape, b) -> dict:
    """``{diagnosis: wrong bytes per token}`` for the usual slips in a cache count."""
    L, d_head = s.n_layers, s.d_head
    right = 2 * L * s.n_kv_heads * d_head * b
    m = {
        "the cache is sized with the query heads (n_heads): only the n_kv_heads key/value "
        "heads are cached, which is what grouped-query attention saves":
            2 * L * s.n_heads * d_head * b,
        "only keys are counted: every token keeps a key and a value per key/value head":
            right / 2,
        "the layers are missing: every layer keeps its own keys and values": right / L,
        "that is numbers, not bytes: multiply by bytes_per_number": right / b,
        "that is bits: a byte is 8 bits, and bytes_per_number already counts bytes": 8 * right,
        "2·n_layers·d_model is lesson 1's cache for multi-head attention with d_head = "
        "d_model / n_heads; here use n_kv_heads and the card's d_head": 2 * L * s.d_model * b,
    }
    if s.d_model % s.n_heads == 0 and s.d_model // s.n_heads != d_head:
        m = {"d_head is not d_model / n_heads on this card: it sets d_head itself, so use "
             "the shape's d_head": 2 * L * s.n_kv_heads * (s.d_model // s.n_heads) * b, **m}
    return merged(m)


def check_kv_bytes_per_token(fn, cards: Sequence = KV_TOKEN_CARDS,
                             bytes_per_number: Sequence = (BYTES_16BIT,)) -> None:
    """Check ``fn(s, bytes_per_number) -> bytes``: the KV cache one token adds, 2 × n_layers ×
    n_kv_heads × d_head × bytes_per_number, against ``memory.kv_cache_bytes_per_token``."""
    shown_cases = [(c, b) for c in KV_TOKEN_CARDS for b in (BYTES_16BIT,)]
    for card in cards:
        s = as_shape(card)
        _plain(s)
        for b in bytes_per_number:
            label = (_label("kv_bytes_per_token", s, b) if is_shown((card, b), shown_cases) else
                     on_hidden("kv_bytes_per_token", _card_kind(s),
                               _heads_kind(s.n_heads, s.n_kv_heads), _own_d_head(s)))
            got = _own(fn, s, b)
            check_value(got, kv_cache_bytes_per_token(s, _dtype(b)), what=label, rel=1e-12,
                        mistakes=kv_mistakes(s, b))


# --- a toy mixture-of-experts layer ----------------------------------------------------------

def moe_layer(d_model, d_ff, n_experts, top_k, mlp, bias, batch, pos, seed):
    """A seeded :class:`~course_lib.moe.MoEFeedForward` and an input x (batch, pos, d_model),
    made without touching the notebook's random state."""
    import torch
    from ..moe import MoEFeedForward
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = MoEFeedForward(d_model, d_ff, n_experts, top_k, mlp=mlp, bias=bias)
        x = torch.randn(batch, pos, d_model)
    return layer, x


def check_moe_sizes(fn, layers: Sequence[Mapping] = MOE_LAYERS) -> None:
    """Check ``fn(layer, x) -> (total, active)`` for a MoEFeedForward ``layer``: ``total`` its
    parameters (an int), ``active`` the parameters each token of x passes through, an integer
    tensor (batch, pos): the router and the experts the routing sent it to.  References:
    ``numel``, ``params.router_params_per_layer + n_experts × params.mlp_params`` and
    ``moe.active_params_per_token``."""
    import torch
    from ..moe import active_params_per_token
    for spec in layers:
        layer, x = moe_layer(**spec)
        shown = is_shown(spec, MOE_LAYERS)
        label = (f"moe_sizes(a layer of {spec['n_experts']} {spec['mlp']} experts, top_k="
                 f"{spec['top_k']}{', with biases' if spec['bias'] else ''})" if shown else
                 on_hidden("moe_sizes", f"a layer of {spec['mlp']} experts",
                           "with biases" if spec["bias"] else "no biases"))
        per_token = f"(batch, pos) = {tuple(x.shape[:-1])}" if shown else "(batch, pos)"
        total, active = as_tuple(_own(fn, layer, x), 2, label, "total, active per token")
        shape = ModelShape(d_model=spec["d_model"], n_layers=1, n_heads=1, d_ff=spec["d_ff"],
                           d_vocab=1, n_ctx=1, n_experts=spec["n_experts"],
                           n_experts_per_tok=spec["top_k"], mlp=spec["mlp"],
                           mlp_bias=spec["bias"])
        router, expert = router_params_per_layer(shape), mlp_params(shape)
        expected_total = router + spec["n_experts"] * expert
        assert expected_total == sum(p.numel() for p in layer.parameters())  # course_lib == numel
        k = spec["top_k"]
        check_value(total, expected_total, what=f"{label}[0], the total", integer=True,
                    mistakes={
                        "that is one token's share (the router and top_k experts): the layer "
                        "holds every expert, and memory must hold them all": router + k * expert,
                        "the router (d_model × n_experts) is missing": expected_total - router,
                        "that is one expert: the layer has n_experts of them": expert,
                        "the router is counted once per expert: there is one router per layer":
                            spec["n_experts"] * (router + expert),
                    })
        with torch.no_grad():
            routing = layer.run(x).routing
        expected = active_params_per_token(layer, routing)
        if not isinstance(active, torch.Tensor):  # the exercise asks for an integer tensor
            raise CheckFailed(f"{label}[1]: return the active parameters as an integer torch "
                              f"tensor of shape {per_token}, got {type(active).__name__}")
        got = active.detach()
        if tuple(got.shape) != tuple(expected.shape):
            raise CheckFailed(f"{label}[1]: the active parameters should have one value per "
                              f"token, shape {per_token}, got "
                              + (f"shape {tuple(got.shape)}" if shown else "another shape"))
        if got.is_floating_point() and not torch.equal(got, got.round()):
            raise CheckFailed(f"{label}[1]: parameters are whole numbers")
        got = got.to(torch.int64)
        if torch.equal(got, expected):  # recorded, so the grader compares it too
            check_equal(got.tolist(), expected.tolist(), what=f"{label}[1], the active parameters")
            continue
        mistakes = {
            "the router is missing: every token passes through it to be routed":
                expected - router,
            "that counts every expert: a token passes through only the top_k it is sent to":
                torch.full_like(expected, expected_total),
            "that counts one expert: each token is sent to top_k of them":
                expected - (k - 1) * expert,
            "that counts the router top_k times: a token is scored once": expected + (k - 1) * router,
        }
        for diagnosis, wrong in mistakes.items():
            if not torch.equal(wrong, expected) and torch.equal(got, wrong):
                raise CheckFailed(f"{label}[1], the active parameters, is not right: {diagnosis}")
        how_many = f"{int((got != expected).sum())} of {got.numel()}" if shown else "some"
        raise CheckFailed(f"{label}[1], the active parameters, is not right for {how_many} "
                          "tokens")


# --- total and active parameters of a card ---------------------------------------------------

def total_mistakes(s: ModelShape) -> dict:
    """``{diagnosis: wrong total}`` for the usual slips in counting a card."""
    c = count_params(s)
    total, L, d, V = c.total, s.n_layers, s.d_model, s.d_vocab
    attn, mlp, router, norm = (attention_params_per_layer(s), mlp_params(s),
                               router_params_per_layer(s), norm_params(s))
    E, moe_L = s.n_experts, s.moe_layers
    ff_mats = (E if s.is_moe else 1) * L
    m = {}
    if s.is_moe:
        m.update({
            "that is the active count: a mixture of experts holds every expert, so the total "
            "counts all n_experts of each layer": c.active,
            "the routers (d_model × n_experts per layer) are missing": total - moe_L * router,
            "attention is counted once per expert: only the feed-forward layer is split into "
            "experts, each block has one attention": total + (E - 1) * L * attn,
            "only one expert per layer is counted: a layer holds n_experts": total - moe_L * (E - 1) * mlp,
        })
    if s.tied_embeddings:
        m["the output head is tied to the token embedding: count it once"] = total + V * d
    else:
        m["the output head is not tied on this card: it is a second d_vocab × d_model "
          "matrix"] = total - V * d
    if s.n_kv_heads != s.n_heads:
        m["K and V are sized with the query heads: with grouped-query attention their "
          "projections are d_model × n_kv_heads·d_head"] = count_params(
              s.with_(n_kv_heads=s.n_heads)).total
    if s.d_model % s.n_heads == 0 and s.d_model // s.n_heads != s.d_head:
        m["d_head is not d_model / n_heads on this card: use the shape's d_head"] = count_params(
            s.with_(d_head=s.d_model // s.n_heads)).total
    if s.mlp_matrices == 3:
        m["a gated feed-forward layer (swiglu, geglu) has three matrices, not two"] = \
            total - ff_mats * d * s.d_ff
    if c.norms:
        m["the norms are missing"] = total - c.norms
        m["the final norm (after the last block) is missing"] = total - norm
        if s.norms_per_block != 2:
            m["this card sets norms_per_block: it does not have 2 norms in each block"] = \
                total + (2 - s.norms_per_block) * L * norm
    if s.positions == "learned":
        m["the learned position table (n_ctx × d_model) is missing"] = total - s.n_ctx * d
    no_bias = count_params(s.with_(qkv_bias=False, out_bias=False, mlp_bias=False)).total
    if no_bias != total:
        m["biases are missing: see qkv_bias, out_bias and mlp_bias"] = no_bias
    return merged(m)


def active_mistakes(s: ModelShape) -> dict:
    """``{diagnosis: wrong active count}`` for a mixture of experts."""
    c = count_params(s)
    if not s.is_moe:
        return {}
    E, k, L, moe_L = s.n_experts, s.n_experts_per_tok, s.n_layers, s.moe_layers
    mlp, router, attn = mlp_params(s), router_params_per_layer(s), attention_params_per_layer(s)
    return merged({
        "that counts every expert: a token passes through only n_experts_per_tok of them":
            c.total,
        "the routers are missing: every token is scored by its layer's router":
            c.active - moe_L * router,
        "active is not total × n_experts_per_tok / n_experts: attention, embeddings, norms "
        "and routers are used by every token; only the experts are split": c.total * k / E,
        "that counts one expert per layer: each token goes to n_experts_per_tok": c.active - moe_L * (k - 1) * mlp,
        "attention is counted once per expert the token visits: each block has one attention":
            c.active + (k - 1) * L * attn,
    })


def check_card_params(fn, cards: Sequence = CARD_PARAMS_CARDS) -> None:
    """Check ``fn(s) -> (total, active)`` parameters of a card (no latent attention, shared
    experts or dense first layers) against ``count_params(s).total`` and ``.active``."""
    for card in cards:
        s = as_shape(card)
        _plain(s)
        label = (_label("card_params", s) if is_shown(card, CARD_PARAMS_CARDS) else
                 on_hidden("card_params", _card_kind(s),
                           "a mixture of experts" if s.is_moe else "dense", _own_d_head(s)))
        total, active = as_tuple(_own(fn, s), 2, label, "total, active")
        c = count_params(s)
        check_value(total, c.total, what=f"{label}[0], the total", integer=True,
                    mistakes=total_mistakes(s))
        check_value(active, c.active, what=f"{label}[1], the active parameters", integer=True,
                    mistakes=active_mistakes(s) or {
                        "a dense model uses every parameter for every token: active = total":
                            0})


# --- requests that fit -----------------------------------------------------------------------

def check_requests_that_fit(fn, card_params=None, kv_bytes_per_token=None,
                            cases: Sequence[Mapping] | None = None) -> None:
    """Check ``fn(s, n_tokens, memory_bytes, bytes_per_number) -> int``: sequences of
    n_tokens whose cache fits beside the weights, floor((memory − weight bytes) / cache bytes
    per sequence), 0 when the weights alone do not fit; against ``memory.requests_that_fit``'s
    formula.  Each case: ``card`` (plus optional ``n_kv_heads`` to set on it), ``n_tokens``,
    ``memory_bytes``, ``bytes_per_number`` (default 2).  Cards with a sliding window are
    refused (the window caps the cache; this exercise leaves it out).  By default: the module
    lesson's 7B-class shape with 32 and with 8 kv heads, 8,192 tokens, 80 GB, 16-bit, and
    :data:`TOO_BIG_CASE`.  Given
    the learner's ``card_params`` and ``kv_bytes_per_token``, each case first re-checks them
    on its card, so a wrong count is blamed on them, not on this step (checks.exercise.requires)."""
    shown_cases = [*(dict(card=seven_b(kv), n_tokens=SERVE_TOKENS, memory_bytes=SERVE_MEMORY)
                     for kv in (32, 8)), TOO_BIG_CASE]
    if cases is None:
        cases = shown_cases
    for case in cases:
        s = as_shape(case["card"])
        if "n_kv_heads" in case:
            s = s.with_(n_kv_heads=case["n_kv_heads"])
        _plain(s)
        if s.sliding_window is not None:
            raise ValueError(f"{s.name}: sliding_window={s.sliding_window} is outside this check")
        n, mem, b = case["n_tokens"], case["memory_bytes"], case.get("bytes_per_number", BYTES_16BIT)
        dt = _dtype(b)
        label = (f"requests_that_fit({s.name or 'a shape'} (n_kv_heads={s.n_kv_heads}), "
                 f"n_tokens={n}, memory_bytes={mem}, bytes_per_number={b})"
                 if is_shown(case, shown_cases) else
                 on_hidden("requests_that_fit", _card_kind(s),
                           _heads_kind(s.n_heads, s.n_kv_heads)))
        if card_params is not None:
            requires("card_params", check_card_params, card_params, [s])
        if kv_bytes_per_token is not None:
            requires("kv_bytes_per_token", check_kv_bytes_per_token, kv_bytes_per_token, [s], [b])
        got = _own(fn, s, n, mem, b)
        w, seq = weight_bytes(s, dt), kv_cache_bytes_per_sequence(s, n, dt)
        expected = max(0, (mem - w) // seq)
        mha_w = weight_bytes(s.with_(n_kv_heads=s.n_heads), dt)
        mistakes = {
            "the weights must fit too: the cache gets only the memory they leave": mem // seq,
            "the weights are sized with K and V projections for every query head: with "
            "n_kv_heads key/value heads those projections, and so the weights, shrink too":
                max(0, (mem - mha_w) // seq),
            "a request needs its whole cache: round down, not up": math.ceil((mem - w) / seq),
            "a request needs its whole cache: round down, not to the nearest": round((mem - w) / seq),
            "the cache is sized with keys only: each token keeps a key and a value":
                max(0, (mem - w) // (seq // 2)),
            "the cache is sized with the query heads": max(0, (mem - w) // (seq * s.group_size)),
        }
        if w > mem:
            mistakes = {"the weights alone do not fit, so no request fits: return 0":
                        (mem - w) // seq, **mistakes}
        with builds_on("card_params", "kv_bytes_per_token"):
            check_value(got, expected, what=label, integer=True, mistakes=merged(mistakes))


# --- the four sizes (the recap) ----------------------------------------------------------------

def weight_mistakes(s: ModelShape, b) -> dict:
    """``{diagnosis: wrong weight bytes}``."""
    c, wb = count_params(s), weight_bytes(s, _dtype(b))
    m = {"the weights are sized by the active parameters: memory holds every expert, so use "
         "the total": c.active * b,
         "that is parameters: multiply by bytes_per_number": c.total,
         "that is in GiB; the question asks for bytes": wb / GiB,
         "that is in GB; the question asks for bytes": wb / GB}
    if s.tied_embeddings:
        m["the tied head is stored once"] = wb + s.d_vocab * s.d_model * b
    return merged(m)


def check_four_sizes(fn, cards: Sequence = (MIXTRAL,),
                     bytes_per_number: Sequence = (BYTES_16BIT,)) -> None:
    """Check ``fn(s, bytes_per_number) -> {"total_params", "active_params",
    "kv_cache_bytes_per_token", "weight_bytes"}`` against course_lib's counters."""
    for card in cards:
        s = as_shape(card)
        _plain(s)
        c = count_params(s)
        for b in bytes_per_number:
            label = (_label("four_sizes", s, b) if is_shown((card, b), [(MIXTRAL, BYTES_16BIT)])
                     else on_hidden("four_sizes", _card_kind(s),
                                    "a mixture of experts" if s.is_moe else "dense"))
            got = as_keyed(_own(fn, s, b), FOUR_SIZES_KEYS, label)
            with builds_on("card_params", "kv_bytes_per_token"):
                check_value(got["total_params"], c.total, what=f"{label}['total_params']",
                            integer=True, mistakes=total_mistakes(s))
                check_value(got["active_params"], c.active, what=f"{label}['active_params']",
                            integer=True, mistakes=active_mistakes(s))
                check_value(got["kv_cache_bytes_per_token"], kv_cache_bytes_per_token(s, _dtype(b)),
                            what=f"{label}['kv_cache_bytes_per_token']", rel=1e-12,
                            mistakes=kv_mistakes(s, b))
                wb = weight_bytes(s, _dtype(b))
                check_value(got["weight_bytes"], wb, what=f"{label}['weight_bytes']", rel=1e-12,
                            mistakes=weight_mistakes(s, b))


# --- the variants of 2025-26: the cache by kind of layer ---------------------------------------

RANDOM_TAG = "[random shape] "
"""How a label marks an input made at run time."""


def _random_hybrid(seed: str = "lesson6/kv_bytes_per_sequence") -> dict:
    """A shape of sliding and full layers drawn at run time from ``random.Random(seed)`` (the
    same every run, so the grader's run of the model answer tries it too): 4 to 40 layers of
    which 1 to all but one slide, 1 to 8 key/value heads serving 1, 2 or 4 query heads each,
    d_head 32 to 128, a window of 64 to 4,096 and a sequence 2 to 8 times as long."""
    rng = random.Random(seed)
    n_layers, n_kv = rng.randint(4, 40), rng.choice((1, 2, 4, 8))
    n_heads, d_head = n_kv * rng.choice((1, 2, 4)), rng.choice((32, 64, 80, 128))
    window = rng.randint(64, 4096)
    card = dict(d_model=n_heads * d_head, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                d_ff=4 * n_heads * d_head, d_vocab=1000, n_ctx=16 * window, mlp="swiglu",
                norm="rmsnorm", positions="rotary", qkv_bias=False, out_bias=False,
                mlp_bias=False, tied_embeddings=False, sliding_window=window,
                n_sliding_layers=rng.randint(1, n_layers - 1))
    return dict(card=card, n_tokens=window * rng.randint(2, 8), bytes_per_number=rng.choice((1, 2, 4)))


RANDOM_SEQ_CASE = _random_hybrid()
SEQ_CASES = (dict(card="gemma-3-1b-it", n_tokens=32768, bytes_per_number=BYTES_16BIT),
             dict(card="DeepSeek-V2-Lite", n_tokens=32768, bytes_per_number=BYTES_16BIT),
             RANDOM_SEQ_CASE)
"""Visible cases of :func:`check_kv_bytes_per_sequence`: Gemma 3 (sliding and global layers),
DeepSeek-V2-Lite (latent attention) and a shape made at run time, all past their windows."""


def _layer_kinds(s: ModelShape) -> str:
    if s.mla is not None:
        return "latent attention"
    if not s.sliding_layers:
        return "every layer full attention"
    return ("every layer sliding" if s.sliding_layers == s.n_layers
            else "sliding and full layers")


def seq_mistakes(s: ModelShape, n: int, b) -> dict:
    """``{diagnosis: wrong bytes}`` for the usual slips in one sequence's cache."""
    L, right = s.n_layers, kv_cache_bytes_per_sequence(s, n, _dtype(b))
    width, per_token = s.kv_cache_width, kv_cache_bytes_per_token(s, _dtype(b))
    m = {"that is one token's cache: multiply by the tokens each layer keeps": per_token,
         "that is numbers, not bytes: multiply by bytes_per_number": right / b,
         "only keys are counted: a layer keeps a key and a value per key/value head": right / 2}
    if s.sliding_layers and n > s.sliding_window:
        m["the window is ignored: a sliding layer keeps only the last sliding_window tokens, "
          "min(n_tokens, sliding_window)"] = per_token * n
        if s.sliding_layers < L:
            m["every layer is given the window: only s.sliding_layers of the layers slide, the "
              "others keep every token"] = per_token * s.sliding_window
            m["the layers are the wrong way round: s.sliding_layers is the number that slide"] \
                = width * b * (s.sliding_layers * n + (L - s.sliding_layers) * s.sliding_window)
    if s.mla is not None:
        m["latent attention caches one latent (kv_lora_rank) and one rotary key (d_head_rope) "
          "per layer, not a key and a value per head"] = 2 * L * s.n_kv_heads * s.d_head * n * b
        m["the rotary key (d_head_rope) is missing: it is cached beside the latent"] = \
            L * s.mla.kv_lora_rank * n * b
        m["the latent is cached once per head: all heads rebuild their keys and values from "
          "the same latent"] = right * s.n_heads
    elif s.n_kv_heads != s.n_heads:
        m["the cache is sized with the query heads: only n_kv_heads are cached"] = \
            right * s.group_size
    return merged(m)


def check_kv_bytes_per_sequence(fn, cases: Sequence[Mapping] = SEQ_CASES) -> None:
    """Check ``fn(s, n_tokens, bytes_per_number) -> bytes``: one sequence's KV cache with each
    layer's kind, full attention (n_tokens kept), sliding window (min(n_tokens, window) kept, in
    ``s.sliding_layers`` of the layers) or latent attention (kv_lora_rank + d_head_rope numbers
    per layer per token); against ``memory.kv_cache_bytes_per_sequence``.  Each case:
    ``card``, ``n_tokens``, ``bytes_per_number`` (default 2)."""
    for case in cases:
        s, n = as_shape(case["card"]), case["n_tokens"]
        b = case.get("bytes_per_number", BYTES_16BIT)
        if case is RANDOM_SEQ_CASE or case == RANDOM_SEQ_CASE:
            label = (f"{RANDOM_TAG}kv_bytes_per_sequence(a shape of {s.n_layers} layers, "
                     f"{s.sliding_layers} of them sliding with a window of {s.sliding_window}, "
                     f"{s.n_kv_heads} kv heads of {s.d_head}, {n}, {b})")
        elif is_shown(case, SEQ_CASES):
            label = _label("kv_bytes_per_sequence", s, n, b)
        else:
            label = on_hidden("kv_bytes_per_sequence", _card_kind(s), _layer_kinds(s),
                              "shorter than the window" if s.sliding_layers
                              and n <= s.sliding_window else "")
        got = _own(fn, s, n, b)
        check_value(got, kv_cache_bytes_per_sequence(s, n, _dtype(b)), what=label, rel=1e-12,
                    mistakes=seq_mistakes(s, n, b))


# --- the variants of 2025-26: fine-grained and shared experts ----------------------------------

def _random_shared_moe(seed: str = "lesson6/moe_layer_params") -> dict:
    """A mixture of experts with shared experts drawn at run time (seeded, as above)."""
    rng = random.Random(seed)
    d, n_experts = rng.choice((64, 96, 128, 256)), rng.choice((8, 16, 32, 64))
    return dict(d_model=d, n_layers=2, n_heads=4, d_ff=rng.choice((32, 48, 96)), d_vocab=100,
                n_ctx=64, mlp="swiglu", norm="rmsnorm", positions="rotary", qkv_bias=False,
                out_bias=False, mlp_bias=False, tied_embeddings=False, n_experts=n_experts,
                n_experts_per_tok=rng.randint(2, n_experts // 2),
                n_shared_experts=rng.randint(1, 3))


RANDOM_MOE_CARD = _random_shared_moe()
MOE_CARDS = ("Qwen3-30B-A3B", "DeepSeek-V2-Lite", RANDOM_MOE_CARD)
"""Visible cards of :func:`check_moe_layer_params`: fine-grained experts without (Qwen3) and
with shared experts (DeepSeek-V2-Lite), and a shape with shared experts made at run time."""


def moe_layer_sizes(s: ModelShape) -> tuple:
    """(held, used): the parameters of one mixture-of-experts layer's feed-forward part and
    router (its last block's), and those one token passes through."""
    held = feed_forward_params_per_layer(s, s.n_layers - 1) + router_params_per_layer(s)
    return held, held - (s.n_experts - s.n_experts_per_tok) * mlp_params(s)


def check_moe_layer_params(fn, cards: Sequence = MOE_CARDS) -> None:
    """Check ``fn(s) -> (held, used)`` for one mixture-of-experts layer of ``s``: held = the
    routed experts, the shared experts (one feed-forward layer ``s.shared_width`` wide) and
    the router; used = the router, the shared experts and ``n_experts_per_tok`` routed ones;
    against ``params.feed_forward_params_per_layer`` and ``router_params_per_layer``."""
    for card in cards:
        s = as_shape(card)
        if not s.is_moe:
            raise ValueError(f"{s.name or 'a shape'} has no experts")
        if card == RANDOM_MOE_CARD:
            label = (f"{RANDOM_TAG}moe_layer_params(d_model={s.d_model}, {s.n_experts} experts of "
                     f"{s.d_ff}, {s.n_experts_per_tok} per token, {s.n_shared_experts} shared)")
        elif is_shown(card, MOE_CARDS):
            label = _label("moe_layer_params", s)
        else:
            label = on_hidden("moe_layer_params", _card_kind(s),
                              "shared experts" if s.n_shared_experts else "no shared experts")
        held, used = as_tuple(_own(fn, s), 2, label, "held, used")
        right_held, right_used = moe_layer_sizes(s)
        E, k, expert = s.n_experts, s.n_experts_per_tok, mlp_params(s)
        router = router_params_per_layer(s)
        shared = mlp_params(s, s.shared_width) if s.n_shared_experts else 0
        common = {"the router is missing: every layer has one, and every token is scored by it":
                  -router, "the shared experts are missing: every layer holds them and every "
                  "token passes through them besides its routed experts": -shared}
        if s.shared_expert_gate:
            common["the shared expert's gate (d_model × 1) is missing: it is part of the router "
                   "on this card"] = -s.d_model
        if s.router_bias:
            common["the router's bias (n_experts) is missing"] = -E
        if s.n_shared_experts and s.shared_width != s.n_shared_experts * s.d_ff:
            common["this card sets the shared experts' width: use s.shared_width"] = \
                mlp_params(s, s.n_shared_experts * s.d_ff) - shared
        held_m = {"that is what one token uses: the layer holds all n_experts routed experts":
                  right_used, "that counts one routed expert: the layer holds n_experts":
                  right_held - (E - 1) * expert, **{d: right_held + v for d, v in common.items()}}
        used_m = {"all experts are counted active: a token passes through only "
                  "n_experts_per_tok routed experts (and the shared ones)": right_held,
                  "that counts one routed expert: each token goes to n_experts_per_tok":
                  right_used - (k - 1) * expert,
                  "used is not held × n_experts_per_tok / n_experts: the router and shared "
                  "experts work for every token": right_held * k / E,
                  **{d: right_used + v for d, v in common.items()}}
        check_value(held, right_held, what=f"{label}[0], held", integer=True,
                    mistakes=merged(held_m))
        check_value(used, right_used, what=f"{label}[1], used", integer=True,
                    mistakes=merged(used_m))


# --- real-world examples -----------------------------------------------------------------------

# The answers of the real-world examples and of test yourself are sealed
# (course_lib.checks.sealed): salted hashes of the forms that count as right and of those the
# usual mistakes give, so neither this file nor a message shows them (course_lib's counters
# compute them, but the checks do not).  Tolerances: 0.2 % for GiB and the fraction (a figure
# to three significant figures passes), whole numbers exact.  Regenerate with
# ``python -m course_lib.checks.seal`` (salt lesson6/<what>).

LLAMA2_70B_SAVED = SEALED['lesson6/llama2_70b_saved_gib']


@builds_on("kv_bytes_per_token")
def check_llama2_70b(saved_gib) -> None:
    """GiB of 16-bit cache Llama 2 70B saves per sequence of its full 4,096-token context with
    8 key/value heads instead of LLAMA2_70B_MHA_KV_HEADS (sealed)."""
    check_sealed(saved_gib, LLAMA2_70B_SAVED)


MIXTRAL_WEIGHTS = SEALED['lesson6/mixtral_weights_gib']


def check_mixtral(weights_gib) -> None:
    """GiB to hold Mixtral 8x7B's weights in 16-bit (sealed)."""
    check_sealed(weights_gib, MIXTRAL_WEIGHTS)


# --- test yourself -----------------------------------------------------------------------------

TYS1_CACHE_FRACTION = SEALED['lesson6/tys1_cache_fraction']

TYS1_REQUESTS_32 = SEALED['lesson6/tys1_requests_32']

TYS1_REQUESTS_8 = SEALED['lesson6/tys1_requests_8']


def check_tys1(cache_fraction, requests_32, requests_8) -> None:
    """Test-yourself 1: the 8-head cache as a fraction of the 32-head one, and the requests of
    SERVE_TOKENS tokens that fit in SERVE_MEMORY in 16-bit with 32 and with 8 kv heads
    (:func:`seven_b`).  Sealed."""
    check_sealed(cache_fraction, TYS1_CACHE_FRACTION)
    check_sealed(requests_32, TYS1_REQUESTS_32)
    check_sealed(requests_8, TYS1_REQUESTS_8)


TYS2_TOTAL_SETS = SEALED['lesson6/tys2_total_sets']

TYS2_ACTIVE_SETS = SEALED['lesson6/tys2_active_sets']


def check_tys2(total_sets, active_sets) -> None:
    """Test-yourself 2: what total and active parameters each set ("memory" or "compute");
    sealed."""
    check_sealed(total_sets, TYS2_TOTAL_SETS)
    check_sealed(active_sets, TYS2_ACTIVE_SETS)


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson6")  # one-line pass and fail messages in a notebook (checks.tutor)
