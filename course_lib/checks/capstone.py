"""Checks for the capstone, "Size a real card".

The learner's ``size_card(config, context, gpu_memory_bytes, dtype)`` reads a Hugging Face
``config.json`` dict of one of :data:`FAMILIES` and returns total and active parameters, KV-cache
bytes per token and the requests of ``context`` tokens that fit beside the weights.  Expected
values come from course_lib: ``cards.shape_from_config`` then ``params`` and ``memory``, which
tests/test_params.py checks against ``transformers`` models built on the meta device (and
tests/test_capstone_cards.py for the notebook's hidden cards).  Reading the card is part of the
exercise, so the learner's functions are called through :func:`own_reading`: like
:func:`~course_lib.checks.own_work` (no counters), and also no ``course_lib.cards``.

Failing checks raise :class:`~course_lib.checks.CheckFailed` naming the likely mistake (an
expert model sized by its active parameters, ``head_dim`` taken as hidden_size / heads, a tied
head counted twice, grouped-query attention ignored in the cache, a sliding window ignored,
multiply-adds reported as FLOPs, ...) without showing the expected value.

The other checks cover the serving scenario, the walk-away question, the module's five
real-world examples and its recap table.
"""
from __future__ import annotations

import copy
import math
from typing import Callable, Mapping, Sequence

from ..cards import card_config, card_names, shape_from_config
from ..memory import (kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, requests_that_fit,
                      weight_bytes)
from ..params import count_params, mlp_params
from ..shapes import ModelShape
from ..units import GB, GiB, TiB, dtype_bytes
from . import (CheckFailed, as_keyed, check_choice, check_equal, check_sealed, check_value,
               is_shown, on_hidden, own_work, watch_calls)
from .sealed import Sealed

# --- what the capstone covers ------------------------------------------------------------------

FAMILIES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma")
"""The ``model_type`` values ``size_card`` must read (the notebook's table of keys says how)."""

SIZE_KEYS = ("total_params", "active_params", "kv_cache_bytes_per_token", "requests_that_fit")

CANDIDATES = tuple(n for n in card_names() if card_config(n)["model_type"] in FAMILIES)
"""The shipped cards of :data:`FAMILIES`: the candidates of the serving scenario."""

SCENARIO = dict(context=8192, gpu_memory_bytes=80 * GiB, dtype="bf16")
"""One 80 GiB accelerator, requests of 8,192 tokens, 16-bit weights and cache (the module
text's serving example)."""

VISIBLE_CARDS = ("gpt2", "Llama-2-7b-hf", "Mistral-7B-v0.1", "Mixtral-8x7B-v0.1",
                 "Qwen2-7B-Instruct", "gemma-2b")
"""One shipped card per family, for the visible test of ``size_card``."""

PAPER_2017 = dict(d_model=512, d_ff=2048, n_heads=8, n_layers=6)
"""The base model of Vaswani et al. 2017 (Table 3): one encoder block is self-attention plus a
feed-forward layer of d_ff = 2048."""

LLAMA2_7B = "Llama-2-7b-hf"
LLAMA2_70B = "Llama-2-70b-hf"
GQA_SCENARIO = dict(context=4096, gpu_memory_bytes=2 * 80 * GiB, dtype="bf16")
"""Llama 2 70B at its full 4,096 positions on two 80 GiB accelerators (its 16-bit weights
alone need more than one)."""
MIXTRAL = "Mixtral-8x7B-v0.1"
ACCELERATOR_BYTES = 80 * GiB

FLASH_CASE = dict(n_tokens=131_072, n_heads=32, bytes_per_number=2)
"""The module text's score matrix: 131,072 tokens, 32 heads, 16-bit numbers."""

COPY_PERIOD = 10
COPY_SEQS, COPY_SEED = 200, 0
"""Evaluation data of the copying example: 200 rows of ``repeated_tokens`` from seed 0."""

RECAP_LESSONS = ("The shape of a transformer", "Attention", "The block",
                 "Position and context", "Generation and the KV cache",
                 "Variants and the model card")
"""The module's six lessons, numbered 1 to 6."""
RECAP_IDEAS = {
    "A": "Keys and values are kept, so memory per request sets how many fit",
    "B": "Heads and feed-forward layers write notes into a shared stream, and the feed-forward "
         "layer holds two thirds of the weights",
    "C": "Five numbers on a spec sheet give parameters, memory and compute",
    "D": "Total parameters set memory, active parameters set compute, and key and value heads "
         "set the cache",
    "E": "Each token blends the values of the tokens it matches",
    "F": "Order must be added, and attention cost grows with the square of the length",
}
"""The ideas of the module's recap table, shuffled, under letters A to F."""
RECAP_QUESTIONS = {
    "P": "What do latency, cost and accuracy look like at our longest input?",
    "Q": "What are total and active parameters and cache per token for each candidate?",
    "R": "For our failures on long inputs, was the information missing or ignored?",
    "S": "How many requests fit beside the weights at our context length?",
    "T": "What are the layers, width, heads, vocabulary and context, and what do they cost?",
    "U": "Where was this model compressed, and what did we test?",
}
"""The questions of the module's recap table, shuffled, under letters P to U."""


# --- the learner's own reading -----------------------------------------------------------------

_READERS = {"cards.py": None, "shapes.py": {"kv_cache_width", "sliding_layers"}}
"""Files (and, where given, functions) that read a card or hold part of the answer."""


def own_reading(fn: Callable, *args, **kwargs):
    """:func:`~course_lib.checks.own_work` that also rejects course_lib's card reader.

    Calls ``fn(*args, **kwargs)`` and returns the result; raises CheckFailed if ``fn`` called
    course_lib's counters (``params``, ``memory``, ``flops``) or ``course_lib.cards``
    (``shape_from_config``, ``load_card``, ...) or the shape's ``kv_cache_width``: in the
    capstone, reading the config's keys is part of the answer."""
    found: list = []

    def reader_used():
        return CheckFailed(f"{getattr(fn, '__name__', 'your function')} calls course_lib's "
                           f"card reader ({found[0]}): read the config's keys yourself (the "
                           "table in section 1 lists them), then use course_lib to check")
    try:
        with watch_calls(found, _READERS):
            result = own_work(fn, *args, **kwargs)
    except CheckFailed:
        raise
    except Exception:
        if found:  # the reader's own error (a CardError is a ValueError) is not the learner's
            raise reader_used() from None
        raise
    if found:
        raise reader_used()
    return result


# --- expected values ---------------------------------------------------------------------------

def _requests(memory: int, weights: float, per_request: float) -> int:
    if memory <= weights:
        return 0
    return int((memory - weights) // per_request)


def expected_size(config: Mapping, context: int, gpu_memory_bytes: int,
                  dtype: str = "bf16") -> dict:
    """What ``size_card`` must return for ``config`` (course_lib's counts)."""
    s = shape_from_config(dict(config))
    c = count_params(s)
    return {"total_params": c.total, "active_params": c.active,
            "kv_cache_bytes_per_token": kv_cache_bytes_per_token(s, dtype),
            "requests_that_fit": requests_that_fit(s, context, gpu_memory_bytes, dtype)}


def context_limit(config: Mapping) -> int:
    """Positions a card's model was built for (``n_positions`` or ``max_position_embeddings``)."""
    return shape_from_config(dict(config)).n_ctx


def expected_servable(cards: Mapping[str, Mapping], context: int, gpu_memory_bytes: int,
                      dtype: str = "bf16") -> dict:
    """``{name: requests}`` of the cards that can serve requests of ``context`` tokens: the
    context fits the card's positions and at least one request fits beside the weights."""
    out = {}
    for name, cfg in cards.items():
        n = expected_size(cfg, context, gpu_memory_bytes, dtype)["requests_that_fit"]
        if context_limit(cfg) >= context and n >= 1:
            out[name] = n
    return out


def _alt_d_head(s: ModelShape) -> int | None:
    """hidden_size / heads when that differs from the card's head_dim (else None)."""
    if s.d_model % s.n_heads == 0 and s.d_model // s.n_heads != s.d_head:
        return s.d_model // s.n_heads
    return None


def size_mistakes(config: Mapping, context: int, gpu_memory_bytes: int,
                  dtype: str = "bf16") -> dict:
    """``{key: {diagnosis: wrong value}}``: what the usual slips give for each of
    :data:`SIZE_KEYS` on this card and scenario (a slip that changes nothing here is dropped by
    ``check_value``)."""
    s = shape_from_config(dict(config))
    c = count_params(s)
    b = dtype_bytes(dtype)
    L, H, KV, d = s.n_layers, s.n_heads, s.n_kv_heads, s.d_model
    head = s.d_vocab * d
    wb = weight_bytes(s, dtype)
    tok = kv_cache_bytes_per_token(s, dtype)
    seq = kv_cache_bytes_per_sequence(s, context, dtype)
    mem = gpu_memory_bytes

    total: dict = {}
    if s.tied_embeddings:
        total["this card ties its output head to the token embedding (the same matrix): "
              "count it once, not twice"] = c.total + head
    else:
        total["this card's output head is not tied (tie_word_embeddings is false): it is a "
              "second d_vocab × d_model matrix"] = c.total - head
    if s.is_moe:
        total["that is the active count: total parameters hold every expert, used or not"] = \
            c.active
        total["the routers are missing: one hidden_size × num_local_experts matrix per layer"] = \
            c.total - L * d * s.n_experts
    alt = _alt_d_head(s)
    if alt:
        total["this card sets head_dim: its heads are head_dim wide, not hidden_size / "
              "num_attention_heads"] = count_params(s.with_(d_head=alt)).total
    if KV < H:
        total["K and V have num_key_value_heads heads, fewer than the query heads (grouped-"
              "query attention): size their projections with num_key_value_heads"] = \
            count_params(s.with_(n_kv_heads=H)).total
    if s.model_type == "qwen2":
        total["qwen2 has biases on the query, key and value projections (not on the output)"] = \
            c.total - L * (H + 2 * KV) * s.d_head
    if s.positions == "learned":
        total["GPT-2 learns its positions: add an n_positions × n_embd table"] = \
            c.total - s.n_ctx * d
    if s.mlp in ("swiglu", "geglu"):
        n_mlps = s.n_experts if s.is_moe else 1
        total["a gated feed-forward layer (SwiGLU, GeGLU) has three matrices: gate, up and "
              "down"] = c.total - L * n_mlps * d * s.d_ff
    if s.model_type == "gpt2":
        total["GPT-2's feed-forward width is n_inner, or 4 × n_embd when n_inner is null"] = \
            count_params(s.with_(d_ff=d)).total
    total["the final norm (after the last block) is missing"] = \
        c.total - count_params(s).norms // (s.norms_per_block * L + 1)

    active: dict = {}
    if s.is_moe:
        active["that counts every expert: each token goes through num_experts_per_tok of "
               "them, and the others do no work for it"] = c.total
        active["a token uses its router too: active parameters are everything except the "
               "experts it is not sent to"] = c.active - L * d * s.n_experts
        active["attention, embeddings and norms work for every token: only the unused experts "
               "drop out"] = L * s.n_experts_per_tok * mlp_params(s)
    else:
        active.update(total)
        active["a dense model uses every parameter for every token, its embeddings included: "
               "active = total"] = c.total - c.embedding

    per_token: dict = {
        "grouped-query attention: each layer caches num_key_value_heads heads, not "
        "num_attention_heads": tok * H // KV,
        "the cache holds a key and a value: a factor 2 is missing": tok / 2,
        "bits are not bytes: a 16-bit number takes 2 bytes": tok * 8,
        "that is one layer: every layer keeps its own keys and values": tok / L,
        "that is per request (times the tokens kept); the key asks for one token": seq,
        "that is times the context; the key asks for one token": tok * context,
    }
    if alt:
        per_token["this card sets head_dim: a cached key or value is head_dim wide, not "
                  "hidden_size / num_attention_heads"] = 2 * L * KV * alt * b

    requests: dict = {
        "the weights come first: subtract their bytes from the memory before dividing":
            _requests(mem, 0, seq),
        "round down: part of a request does not fit": _requests(mem, wb, seq) + 1,
        "grouped-query attention shrinks the cache: cache num_key_value_heads heads":
            _requests(mem, wb, seq * H // KV),
    }
    if s.sliding_window is not None and context > s.sliding_window:
        requests["this card has a sliding window: each layer keeps only the last "
                 "sliding_window tokens, so a request caches at most that many"] = \
            _requests(mem, wb, tok * context)
    if s.is_moe:
        requests["the memory holds every expert: size the weights by total parameters, not "
                 "active"] = _requests(mem, math.ceil(c.active * b), seq)
    if s.tied_embeddings:
        requests["the tied head is stored once: do not count it twice in the weights"] = \
            _requests(mem, wb + head * b, seq)
    if alt:
        requests["this card sets head_dim: use it for the cache"] = \
            _requests(mem, wb, seq * alt // s.d_head)
    return {"total_params": total, "active_params": active,
            "kv_cache_bytes_per_token": per_token, "requests_that_fit": requests}


# --- helpers -----------------------------------------------------------------------------------

def _bytes_label(n: int) -> str:
    if n % GiB == 0:
        return f"{n // GiB} GiB"
    if n % GB == 0:
        return f"{n // GB} GB"
    return f"{n:,} bytes"


def _label(fn_name: str, name: str, context, memory, dtype) -> str:
    return (f"{fn_name}(<{name}>, context={context:,}, gpu_memory_bytes={_bytes_label(memory)}, "
            f"dtype={dtype!r})")


def _card_kind(config: Mapping, shipped: bool) -> tuple:
    """A card of a hidden test in words: shipped or not, its model_type and the features the
    usual slips are about (not its name or sizes)."""
    kinds = [f"{'a shipped' if shipped else 'a hidden'} card of model_type "
             f"{config.get('model_type')}"]
    try:
        s = shape_from_config(dict(config))
    except Exception:  # noqa: BLE001 - the kind is a courtesy; the check itself reports errors
        return tuple(kinds)
    kinds += ["a mixture of experts" if s.is_moe else "",
              "tied embeddings" if s.tied_embeddings else "",
              "head_dim set" if _alt_d_head(s) else "",
              "a sliding window" if s.sliding_window is not None else ""]
    return tuple(kinds)


def _cards(cards) -> dict:
    """``{name: config}`` from shipped names or a mapping of configs."""
    if isinstance(cards, Mapping):
        return {name: dict(cfg) for name, cfg in cards.items()}
    return {name: card_config(name) for name in cards}


def _scenario(sc: Mapping) -> tuple:
    return sc["context"], sc["gpu_memory_bytes"], sc.get("dtype", "bf16")


# --- exercise 1: size_card ---------------------------------------------------------------------

def check_size_card(fn, cards=VISIBLE_CARDS, scenarios: Sequence[Mapping] = (SCENARIO,)) -> None:
    """Check ``fn(config, context, gpu_memory_bytes, dtype) -> {total_params, active_params,
    kv_cache_bytes_per_token, requests_that_fit}`` on every card and scenario.

    ``cards``: shipped card names or ``{name: config dict}`` (the notebook's hidden tests pass
    cards that do not ship with course_lib).  The learner's function gets a copy of each config
    and is called through :func:`own_reading`."""
    shipped = not isinstance(cards, Mapping)
    for name, cfg in _cards(cards).items():
        for sc in scenarios:
            context, memory, dtype = _scenario(sc)
            if shipped and name in VISIBLE_CARDS and is_shown(sc, (SCENARIO,)):
                label = _label("size_card", name, context, memory, dtype)
            else:  # a hidden test's card or scenario: its kind, not its name or numbers
                label = on_hidden("size_card", *_card_kind(cfg, shipped))
            result = own_reading(fn, copy.deepcopy(cfg), context, memory, dtype)
            got = as_keyed(result, SIZE_KEYS, label)
            expected = expected_size(cfg, context, memory, dtype)
            mistakes = size_mistakes(cfg, context, memory, dtype)
            for key in SIZE_KEYS:
                check_value(got[key], expected[key], what=f"{label}[{key!r}]", integer=True,
                            mistakes=mistakes[key])


BERT_CONFIG = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 768,
               "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
               "max_position_embeddings": 512, "vocab_size": 30522, "type_vocab_size": 2}
"""bert-base-uncased's sizes: an encoder, not one of :data:`FAMILIES`."""


_UNKNOWN_OUTCOMES = {
    "returned numbers": "raise ValueError naming the model_type instead of returning numbers for "
                        "an architecture you did not write it for",
    "valueerror without the name": "the ValueError's message should name the model_type "
                                   "('bert'), so the reader knows which card failed",
    "another error": "check model_type first, and raise ValueError naming it (a KeyError from "
                     "a missing key says nothing about the family)",
}


def check_unknown_family(fn) -> None:
    """``fn`` must raise ValueError naming the model_type for a card outside :data:`FAMILIES`
    (a BERT card), not return numbers for an architecture it does not know."""
    label = "size_card(<bert-base-uncased>, ...)"
    try:
        own_reading(fn, copy.deepcopy(BERT_CONFIG), *_scenario(SCENARIO))
        outcome = "returned numbers"
    except (CheckFailed, NotImplementedError):  # an unwritten answer: the grader says so
        raise
    except ValueError as e:
        outcome = "valueerror naming it" if "bert" in str(e) else "valueerror without the name"
    except Exception:  # noqa: BLE001 - which error the learner raised is the feedback
        outcome = "another error"
    check_choice(outcome, "valueerror naming it", what=label,
                 choices=("valueerror naming it", *_UNKNOWN_OUTCOMES), hints=_UNKNOWN_OUTCOMES)


# --- exercise 2: the serving scenario ----------------------------------------------------------

def check_servable(fn, cards=CANDIDATES, scenarios: Sequence[Mapping] = (SCENARIO,)) -> None:
    """Check ``fn(cards, context, gpu_memory_bytes, dtype) -> {name: requests}`` holding exactly
    the cards that can serve the scenario (context within the card's positions, at least one
    request beside the weights) with the requests that fit."""
    configs = _cards(cards)
    cards_shown = not isinstance(cards, Mapping) and tuple(cards) == CANDIDATES
    for sc in scenarios:
        context, memory, dtype = _scenario(sc)
        shown = cards_shown and is_shown(sc, (SCENARIO,))
        label = (f"servable(<{len(configs)} cards>, context={context:,}, "
                 f"gpu_memory_bytes={_bytes_label(memory)}, dtype={dtype!r})" if shown else
                 on_hidden("servable", "the shipped candidates" if cards_shown else "hidden cards"))

        def card(name):  # the visible test's candidates may be named, a hidden test's cards not
            return name if cards_shown else "a card"
        result = own_reading(fn, copy.deepcopy(configs), context, memory, dtype)
        if not isinstance(result, Mapping):
            raise CheckFailed(f"{label}: return a dict {{card name: requests}}, got "
                              f"{type(result).__name__}")
        expected = expected_servable(configs, context, memory, dtype)
        unknown = [k for k in result if k not in configs]
        if unknown:  # the learner's own key
            raise CheckFailed(f"{label}: {unknown[0]!r} is not one of the cards given")
        for name in result:
            if name in expected:
                continue
            size = expected_size(configs[name], context, memory, dtype)
            if context_limit(configs[name]) < context:
                long = f"{context:,}-token requests" if shown else "requests this long"
                raise CheckFailed(f"{label}: {card(name)} cannot serve {long}: "
                                  "its card's positions (n_positions or max_position_embeddings) "
                                  "are fewer than that")
            if size["requests_that_fit"] == 0:
                raise CheckFailed(f"{label}: {card(name)} cannot serve this scenario: not one request "
                                  "fits beside its weights (size them by total parameters, every "
                                  "expert included)")
        for name in expected:
            if name not in result:
                raise CheckFailed(f"{label}: {card(name)} is missing: its context is long enough and "
                                  "at least one request fits")
        check_equal(sorted(result), sorted(expected), what=f"{label}: the cards that serve it")
        for name, n in expected.items():
            m = size_mistakes(configs[name], context, memory, dtype)["requests_that_fit"]
            check_value(result[name], n, what=f"{label}[{card(name)!r}]", integer=True, mistakes=m)


WALKAWAY_MIN_PARAMS = 7_000_000_000
"""The walk-away's model: of the cards that serve :data:`SCENARIO`, those of at least this many
total parameters, and of them the one that serves the most requests."""


# The answers of the walk-away question and of the real-world examples are sealed
# (course_lib.checks.sealed): salted hashes of the forms that count as right and of those the
# usual mistakes give (the slips of :func:`size_mistakes` for the sizes), so neither this file
# nor a message shows them; course_lib's counters compute them, the checks do not.  Counts are
# exact whole numbers; flash_tib and the FLOPs per token have a relative tolerance of 1e-9.  A
# wrong model's hint says why that card is not the one, without naming the one.  Regenerate
# with ``python -m course_lib.checks.seal`` from values worked out in a scratch session (salt
# capstone/<what>, capstone/<what>/<key>).

WALKAWAY_SEALED = {  # key -> its sealed answer
    'model': Sealed(
        what="walkaway['model']", salt='capstone/walkaway/model', kind='choice', digits=None,
        right=('786a5aba2840ef3b',),
        mistakes=(
            ("that card cannot serve the scenario: its positions are fewer than the requests' tokens",
             ('c71ddf99f15bd210',)),
            ("that card cannot serve the scenario: its positions are fewer than the requests' tokens",
             ('a0d982c95d240a5d',)),
            ("that card cannot serve the scenario: its positions are fewer than the requests' tokens",
             ('7ac76c76f2659e1c',)),
            ('that card serves fewer requests than another candidate of 7 billion parameters or more',
             ('c2ec11e5262eb35b',)),
            ('that card serves fewer requests than another candidate of 7 billion parameters or more',
             ('3a2769bea9061f9b',)),
            ('that card cannot serve the scenario: not one request fits beside its weights',
             ('30aa8e408eaa9a9a',)),
            ('that card has fewer than 7 billion parameters',
             ('dd07e256ead554bd',)),
            ("that card cannot serve the scenario: its positions are fewer than the requests' tokens",
             ('fa4ac8b66a926d7b',)),
            ("that card cannot serve the scenario: its positions are fewer than the requests' tokens",
             ('c04b100890801df4',)),
            ("that card cannot serve the scenario: its positions are fewer than the requests' tokens",
             ('314fb5fa4002f817',)),
        ),
        choices=('llama-2-13b-hf', 'llama-2-70b-hf', 'llama-2-7b-hf', 'meta-llama-3-8b', 'mistral-7b-v0.1', 'mixtral-8x7b-v0.1', 'qwen2-7b-instruct', 'gemma-2b', 'gpt2', 'gpt2-large', 'gpt2-medium'),
    ),
    'total_params': Sealed(
        what="walkaway['total_params']", salt='capstone/walkaway/total_params', kind='number', digits=None,
        right=('5fbe6aaaef16b1a0',),
        mistakes=(
            ("this card's output head is not tied (tie_word_embeddings is false): it is a second d_vocab × d_model matrix",
             ('ba60cd2db7345322',)),
            ('K and V have num_key_value_heads heads, fewer than the query heads (grouped-query attention): size their projections with num_key_value_heads',
             ('45604a0604cb03f7',)),
            ('qwen2 has biases on the query, key and value projections (not on the output)',
             ('8bfcecae4e4d7728',)),
            ('a gated feed-forward layer (SwiGLU, GeGLU) has three matrices: gate, up and down',
             ('5ca66921a94d76ad',)),
            ('the final norm (after the last block) is missing',
             ('7758232848da7afe',)),
        ),
        decade=9, sign=1,
    ),
    'active_params': Sealed(
        what="walkaway['active_params']", salt='capstone/walkaway/active_params', kind='number', digits=None,
        right=('8a38743942857d94',),
        mistakes=(
            ("this card's output head is not tied (tie_word_embeddings is false): it is a second d_vocab × d_model matrix",
             ('cc711d6e039c6475',)),
            ('K and V have num_key_value_heads heads, fewer than the query heads (grouped-query attention): size their projections with num_key_value_heads',
             ('17ccc553f098234c',)),
            ('qwen2 has biases on the query, key and value projections (not on the output)',
             ('1c4a33d42a288165',)),
            ('a gated feed-forward layer (SwiGLU, GeGLU) has three matrices: gate, up and down',
             ('994f06966ee370fd',)),
            ('the final norm (after the last block) is missing',
             ('60309c45aed2fa73',)),
            ('a dense model uses every parameter for every token, its embeddings included: active = total',
             ('cc711d6e039c6475',)),
        ),
        decade=9, sign=1,
    ),
    'kv_cache_bytes_per_token': Sealed(
        what="walkaway['kv_cache_bytes_per_token']", salt='capstone/walkaway/kv_cache_bytes_per_token', kind='number', digits=None,
        right=('f594ef5f379ba5ee',),
        mistakes=(
            ('grouped-query attention: each layer caches num_key_value_heads heads, not num_attention_heads',
             ('9bb4882de3579fe6',)),
            ('the cache holds a key and a value: a factor 2 is missing',
             ('5a276aa1abf2a959',)),
            ('bits are not bytes: a 16-bit number takes 2 bytes',
             ('1c151bcbe835f56a',)),
            ('that is one layer: every layer keeps its own keys and values',
             ('b6a4fc3f3f630409',)),
            ('that is per request (times the tokens kept); the key asks for one token',
             ('af97034b9df1da8c',)),
            ('that is times the context; the key asks for one token',
             ('af97034b9df1da8c',)),
        ),
        decade=4, sign=1,
    ),
    'requests_that_fit': Sealed(
        what="walkaway['requests_that_fit']", salt='capstone/walkaway/requests_that_fit', kind='number', digits=None,
        right=('996208350588aa99',),
        mistakes=(
            ('the weights come first: subtract their bytes from the memory before dividing',
             ('95d091a950c6aef4',)),
            ('round down: part of a request does not fit',
             ('394009e402d75ae6',)),
            ('grouped-query attention shrinks the cache: cache num_key_value_heads heads',
             ('cd2b227c7f15f60d',)),
        ),
        decade=2, sign=1,
    ),
}


def check_walkaway(answer) -> None:
    """The walk-away question for the model the scenario picks (of the cards that serve
    :data:`SCENARIO`, the one of at least :data:`WALKAWAY_MIN_PARAMS` total parameters that
    serves the most requests): ``{"model", "total_params", "active_params",
    "kv_cache_bytes_per_token", "requests_that_fit"}``, each sealed."""
    got = as_keyed(answer, ("model", *SIZE_KEYS), "walkaway")
    check_sealed(got["model"], WALKAWAY_SEALED["model"])
    for key in SIZE_KEYS:
        check_sealed(got[key], WALKAWAY_SEALED[key])


# --- real-world examples -----------------------------------------------------------------------

PAPER_BLOCK_WEIGHTS = Sealed(
    what='paper_block_weights', salt='capstone/paper_block_weights', kind='number', digits=None,
    right=('729f2ad13a99307c',),
    mistakes=(
        ('attention has four d_model × d_model matrices (query, key, value, output)',
         ('71949a9548cf4e02',)),
        ('the feed-forward layer has two matrices, d_model × d_ff and d_ff × d_model',
         ('4efb198afa219818',)),
        ('the question asks for one block, not the six of the encoder',
         ('5e5614a35241b721',)),
        ('the feed-forward width is d_ff = 2048, not d_model',
         ('5a1224eaeff6ae37',)),
        ('count the weight matrices only, without biases',
         ('deabd09370cfddb0',)),
    ),
    decade=6, sign=1,
)

LLAMA2_7B_BLOCK_WEIGHTS = Sealed(
    what='llama2_7b_block_weights', salt='capstone/llama2_7b_block_weights', kind='number', digits=None,
    right=('6682da219c276229',),
    mistakes=(
        ("Llama's SwiGLU feed-forward layer has three matrices (gate, up, down), not two",
         ('a58a99e0097f3520',)),
        ("Llama 2 7B's feed-forward width is its card's intermediate_size, not 4 × hidden_size",
         ('abdaa934993a3e0d',)),
        ('the question asks for one block, not all of them',
         ('a4e35ba34e204b9c',)),
        ("count the weight matrices only: the block's two RMSNorms are not matrices",
         ('9e69954f662fc1b3',)),
    ),
    decade=8, sign=1,
)


def check_paper_blocks(paper_block_weights, llama2_7b_block_weights) -> None:
    """2017: the weight matrices of one encoder block of the base Transformer (4·d² of
    attention, 2·d·d_ff of feed-forward) and of one Llama 2 7B block (4·d² + 3·d·d_ff); both
    sealed."""
    check_sealed(paper_block_weights, PAPER_BLOCK_WEIGHTS)
    check_sealed(llama2_7b_block_weights, LLAMA2_7B_BLOCK_WEIGHTS)


def copy_eval_losses(period: int = COPY_PERIOD):
    """Per-token losses (200, 31) of the shipped induction model on ``repeated_tokens`` of this
    period (seed :data:`COPY_SEED`): ``losses[:, i]`` is the loss of predicting token i + 1."""
    import torch

    from ..tasks import repeated_tokens
    from ..training import load_induction_model, next_token_losses
    model, _ = load_induction_model()
    g = torch.Generator().manual_seed(COPY_SEED)
    tokens = repeated_tokens(COPY_SEQS, model.shape.n_ctx, model.shape.d_vocab, period, g)
    with torch.no_grad():
        return next_token_losses(model, tokens)


def check_copy_losses(fn, periods: Sequence[int] = (COPY_PERIOD,), seeds: Sequence[int] = ()) \
        -> None:
    """Check ``fn(losses, period) -> (mean loss on tokens nothing earlier predicts, mean loss on
    tokens a copy predicts)``: with tokens repeated every ``period``, tokens 1 .. period cannot
    be known from earlier ones (the first copy, and its first token again, which follows a
    token seen only once), and tokens period + 1 onward can.  ``losses[:, i]`` is the loss of
    predicting token i + 1, so the split is losses[:, :period] and losses[:, period:].

    Tried on the shipped induction model's losses for each period and on random tensors (one per
    seed)."""
    import torch
    # A hidden test's periods and seeds (random tensors) are not named: only the kind of input.
    cases = [(copy_eval_losses(p), p, f"copy_losses on the induction model's losses, period {p}"
              if p == COPY_PERIOD else on_hidden("copy_losses", "the induction model's losses"))
             for p in periods]
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        n_seqs, pos = 3 + seed % 5, 12 + seed % 9
        p = 2 + seed % (pos - 4)
        cases.append((torch.rand(n_seqs, pos - 1, generator=g) * 5, p,
                      on_hidden("copy_losses", "a random loss tensor")))
    for losses, p, what in cases:
        result = own_work(fn, losses.clone(), p)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise CheckFailed(f"{what}: return 2 numbers, (unpredictable, copied), "
                              f"got {type(result).__name__} {result!r:.60}")
        new, copied = (float(losses[:, :p].mean()), float(losses[:, p:].mean()))
        off_early = (float(losses[:, :p - 1].mean()), float(losses[:, p - 1:].mean()))
        off_late = (float(losses[:, :p + 1].mean()), float(losses[:, p + 1:].mean()))
        names = ("[0], the unpredictable tokens", "[1], the copied tokens")
        for i, (got, exp) in enumerate(zip(result, (new, copied))):
            check_value(got, exp, what=f"{what}{names[i]}", rel=1e-5, mistakes={
                "off by one: token `period` starts the second copy but follows a token seen "
                "only once, so it cannot be predicted; losses[:, i] predicts token i + 1":
                    off_early[i],
                "off by one: token period + 1 is the first one a copy predicts; losses[:, i] "
                "predicts token i + 1": off_late[i],
                "the two means are swapped": (copied, new)[i],
                "that is the mean over all tokens": float(losses.mean()),
                "take the mean over every row and position of the part, not one row":
                    float((losses[0, :p], losses[0, p:])[i].mean()),
            })


def check_score_matrix(fn, cases: Sequence[Mapping] = (FLASH_CASE,)) -> None:
    """Check ``fn(n_tokens, n_heads, bytes_per_number)``: bytes of one layer's full score
    matrices, n_tokens² per head."""
    for case in cases:
        n, h, b = case["n_tokens"], case["n_heads"], case["bytes_per_number"]
        label = (f"score_matrix_bytes({n:,}, {h}, {b})" if is_shown(case, (FLASH_CASE,))
                 else on_hidden("score_matrix_bytes"))
        got = own_work(fn, n, h, b)
        exp = n * n * h * b
        check_value(got, exp, what=label, integer=True, mistakes={
            "each head has its own n_tokens × n_tokens scores: multiply by n_heads": exp / h,
            "bits are not bytes: bytes_per_number is already in bytes": exp * 8,
            "the score matrix is n_tokens × n_tokens, so n_tokens is squared": exp / n,
            "the causal mask leaves half the scores unused, but a kernel that stores the matrix "
            "stores all of it": exp / 2,
            "multiply by bytes_per_number": exp / b,
        })


FLASH_TIB = Sealed(
    what='flash_tib', salt='capstone/flash_tib', kind='number', digits=11,
    right=('007a2ca1fe727806', '00e08e2424fc12f0', '04ba9803ea8e5af0', '05d28641cfab2b29',
           '0bb68c6631d88901', '0df4be86336dfd2b', '0e359d79932c613d', '0ec03aad6e89072b',
           '0f1c987be8a50554', '0fd4e82bbc81efe3', '1531fb3f99f56960', '155c3f50fa41f48e',
           '15b2a9fc9b971cce', '1aa3505c7d65b9d1', '1c4cc6b02f7d5a97', '1dfded008de581c8',
           '1fa2fbaeb8e870f8', '1fb112068c8c8093', '23fbbb0cccdaba78', '28e76aab824b69a9',
           '2a0100f9c9a85eba', '2c92f532e9fcb571', '2d0258fd6d48b30d', '2eb2444347d76362',
           '2ec88f806a15e333', '30c302e356b27e22', '335bb350b1c95947', '36d340e06b5c0299',
           '3a7ee6fae887436c', '3d5de0789a35dce6', '3e32e89e3c01ecd1', '3fdd21ea85b9ab03',
           '47c846a017bdcc3e', '48942aa444d37584', '4d730ecc74f73a31', '4f30065c4ac40552',
           '4f5090196bb6c87b', '50816c73feca7ac3', '51d947773c84ad8d', '527b7eb514d74676',
           '58db201f6d0fe046', '5af2fb74de4e28c9', '5b2eebd92eb4eb27', '5d622e699b13e74a',
           '5dd637daec40e1e1', '601345017523c8e2', '677fb351c93f16b5', '67d1bee34218bd09',
           '68e7cfa5f4ea0e11', '695511eb67ff0d2b', '6f4ac786bd2311aa', '7000de7aabafcd63',
           '773b270f7bd29938', '7c4166e4566eb337', '7dc39b558444fb00', '7e51f36f8cabadde',
           '7fb17ecbb48c5e7d', '815d510061565f83', '8595938e0923d91e', '8e97c19cf536918e',
           '900d704e34be8af2', '90d8081ae33d0a82', '945e2edcabb61c19', '967a640a670e4a33',
           '99260d5b2a86bfd0', '9ce690303acf96b1', 'a24571419d3e7416', 'a46e958ecfe69b13',
           'ab1d502793740a85', 'aef6289e07533ef5', 'b29c2c58d13c6ec3', 'b6e10c99b0567c03',
           'bcc628996e3761b9', 'bcca1c1eb82f3833', 'be6d5e6ff4463f99', 'bf962fa6fa59d170',
           'c103ecf31add5552', 'c11125bd41d131db', 'c3382586e042b69d', 'c5acd14dc5ad6581',
           'c5cc514606bf080a', 'c76af90e726840be', 'c8032f43b4b2f99d', 'd0820443f4115c4f',
           'd0cf476e3fdf4f38', 'd31593a4ee1dd0e0', 'd49f451edee33a7a', 'd4c7ab62cdfa231b',
           'da99c432309844f8', 'dbbc12e6bfded1a7', 'dd0c6c3a422560f3', 'deb59d96d42dbf22',
           'e04ac6ebe3d32435', 'e075603a53c23f59', 'e0841bd09de3802f', 'e72590ff9caf7f4a',
           'e824d0e217ec38b5', 'ef0a094ad9ffcaac', 'f3ad1ed4805647f2', 'f4cfa65bf75bdb5d',
           'f4f0d99c8d75a47e', 'f5db32bf1a71b26f', 'f67ef30525052aa5', 'f6d055a0cafab0ce',
           'f8c0459e7be659ea', 'f8c39e1f67640012', 'f9d229cb0f8f7df9', 'f9ea4271ae169567',
           'fabc93950e625cba', 'fb1ddcec2f70433b', 'fc258397d34bc1b6',),
    mistakes=(
        ('that is in TB (10^12 bytes); TiB are 2^40 bytes',
         ('03c646a4ec0b79f9', '046f5365234efd85', '214833ef23bb0710', '22e1551fde3ae472',
          '2e68bc89ba41dcf6', '332e718f89ce5e28', '429ddf3edbdb0ecd', '53e77ff0c73e06bd',
          '5462f0be28b31d75', '6b7586a0f1aad1a1', '82a109e7aecc53fb', '8411fb9b092a8efb',
          '8ccbecd164a14708', '920719543c94a728', 'a2b195d1c9afbb65', 'aa4f94f9c7bc5e11',
          'b0f8ff65132ac48f', 'c840efcbe6a9079b', 'cc372495c6baf536', 'd2293ff2b134aea1',
          'd54088b69ddedf05', 'd7bf902bcbdf4f92', 'fa0ce5a807c640ce',)),
        ('that is in GiB; the question asks for TiB',
         ('072e5f90eaa11bb8', '098645875c106c41', '29f4d228bc260d43', '3321d67f7e97db37',
          '334b13e7f5592464', '3fd9937627f8213a', '4d53b29ef2f0e071', '76b0963352869723',
          '7767f82031539853', '8b6bdb8e245588f1', '8c88c613aaff3eb2', '9c1a7da2a6df9b31',
          '9dec57048f328a01', '9e6e4a370106c8a8', 'a2ebd4b6ca4fd6d2', 'a9e91d28bb0f43b2',
          'cdb7db4c7abfa3fa', 'd1e031d42dd7a3fc', 'e2ef4ca94e68338f', 'eae6d405f161699f',
          'f89798e53e99f7c0',)),
        ('that is in bytes; divide by cl.units.TiB',
         ('113754da372d8db1', '2d82c9b137a7e138', '364bdb1c5afa1923', '39994fe14e85dc0a',
          '4d7cc0565e3ed1d8', '5843adde814fc9d4', '5ab62d94321cc48d', '5ff78389bf4dc27f',
          '67a555732b86dd79', '746ec06faa7e443e', '7d5c24554476f007', '922911d8e032f20a',
          'a07185779f424ed3', 'a1ff50200d3d1feb', 'a61b8d3e732ae760', 'aff02efde8b11709',
          'bc5f030fef6964b2', 'c0931b3f3c73219d', 'c3f8ec4d1d731318', 'c628f7a80fb0193c',
          'd34ab3ce3791b9e0', 'd9db8d1bc0519214', 'f6ae1c309693a00a',)),
        ("that is one head; the module's case has 32",
         ('087955a27646be7d', '0a06d7b82666457b', '0d4d7f65e0792ea2', '136c9ddbdd8719f8',
          '170328d4209275ac', '190b9bd1afd00f73', '20c69e6d7ea72da8', '2206f8821951ac97',
          '22564f3242cbd5fa', '227d57a7c142172c', '2657489ebde1f1f9', '29c1dbdb056f97ad',
          '2af2af1d5f81019f', '3298a21b4c9eb0cd', '36205852373a2c93', '3ebc4a41509e319d',
          '444946e1d30d4b4f', '47314d104cf4eba1', '489ef69cf2c61834', '511619c1ffb9984e',
          '5131c595e24483b5', '51a377646ae7ed60', '5c136f0b075ff77c', '5d7cb1255a7ca1f3',
          '65871bce381e3314', '6e868ad0bd0e63b2', '6f2d68a66f0792e0', '70ba38d59de3e394',
          '71bfdb8d97efa107', '72e57ad3324186fc', '7c3076c9b489236a', '7cf6036ef6ae08fb',
          '7e5b66e549227af8', '7e94eeb8918f5529', '8106c3191a1d4577', '8202d4cffa17cf72',
          '82e9217408e73480', '83c20e6e7cbaac3e', '8483841aa16b7372', '8856813feea1f404',
          '8a5accf5739f5291', '8f75921482cc4e4d', 'a78ba836575b7e06', 'a8526c6eda1d6891',
          'acfeb771bd12a228', 'ae5febea4bd66ce3', 'b0f5d727c1fb728c', 'b6c3b2e8a555c9f4',
          'bf8342876aac049b', 'c5901b0997241bc2', 'd46eb74e55bddeff', 'd58adb8ba9f86ebd',
          'd89a78c63b308d4e', 'dc107781e0e1437c', 'de24323ed8fe9b9b', 'e4e7cbb54c11bf9b',
          'e970be5ed4f27817', 'efdc111137778912', 'efeb1aec2ef228f7', 'f0aaabc51dc15649',
          'f9beb61aab4e7903', 'fd4670d5eece06f6', 'fe36de2605fd1d16',)),
    ),
    decade=0, sign=1,
)


def check_flash_tib(value) -> None:
    """The module's score matrix (:data:`FLASH_CASE`) in TiB (2^40 bytes); sealed."""
    check_sealed(value, FLASH_TIB)


GQA_KEYS = ("cache_per_token_gqa", "cache_per_token_mha", "requests_gqa", "requests_mha")

GQA_SEALED = {  # key -> its sealed answer
    'cache_per_token_gqa': Sealed(
        what="gqa['cache_per_token_gqa']", salt='capstone/gqa/cache_per_token_gqa', kind='number', digits=None,
        right=('2bea7dc4967ca1b2',),
        mistakes=(
            ("grouped-query attention: the card's 8 key/value heads are cached, not its 64 query heads",
             ('6b28b995ed65fbc3',)),
            ('the cache holds a key and a value: a factor 2 is missing',
             ('87756a107b3b9b9d',)),
            ('that is one layer; Llama 2 70B has 80',
             ('bebbb9dcb833af40',)),
        ),
        decade=5, sign=1,
    ),
    'cache_per_token_mha': Sealed(
        what="gqa['cache_per_token_mha']", salt='capstone/gqa/cache_per_token_mha', kind='number', digits=None,
        right=('72ab00aad6f44842',),
        mistakes=(
            ('with multi-head attention every one of the 64 query heads has its own key and value head',
             ('4dd254e14cb2de17',)),
            ('the cache holds a key and a value: a factor 2 is missing',
             ('0316ec7d102f165c',)),
        ),
        decade=6, sign=1,
    ),
    'requests_gqa': Sealed(
        what="gqa['requests_gqa']", salt='capstone/gqa/requests_gqa', kind='number', digits=None,
        right=('674318b6c54fa978',),
        mistakes=(
            ('grouped-query attention: cache 8 key/value heads, not 64',
             ('fd6f6bee854e06ef',)),
            ("the weights come first: subtract them from the two accelerators' memory",
             ('ac7eb988ea203612',)),
        ),
        decade=1, sign=1,
    ),
    'requests_mha': Sealed(
        what="gqa['requests_mha']", salt='capstone/gqa/requests_mha', kind='number', digits=None,
        right=('18b99e764cc4c2d7',),
        mistakes=(
            ('with 64 key/value heads the K and V projections grow too (8192 × 8192 each instead of 8192 × 1024): size the weights of that model',
             ('0783db5620e740bc',)),
            ("that is the grouped-query model's figure",
             ('fb561d7d55b7aaa9',)),
        ),
        decade=0, sign=1,
    ),
}


def check_gqa(answer) -> None:
    """2023: Llama 2 70B's cache per token with its 8 key/value heads and with 64 (one per
    query head, multi-head attention), and the requests of 4,096 tokens that fit on two 80 GiB
    accelerators in 16-bit either way (the 64-head variant has bigger K and V projections
    too); each sealed."""
    got = as_keyed(answer, GQA_KEYS, "gqa")
    for key in GQA_KEYS:
        check_sealed(got[key], GQA_SEALED[key])


EXPERT_KEYS = ("total_params", "active_params", "accelerators_needed", "flops_per_token")

EXPERTS_SEALED = {  # key -> its sealed answer
    'total_params': Sealed(
        what="experts['total_params']", salt='capstone/experts/total_params', kind='number', digits=None,
        right=('4f509b03087aa2f5',),
        mistakes=(
            ('that is the active count; total parameters hold all 8 experts',
             ('bdc788dbf2f2ed53',)),
        ),
        decade=10, sign=1,
    ),
    'active_params': Sealed(
        what="experts['active_params']", salt='capstone/experts/active_params', kind='number', digits=None,
        right=('a9a181b02d753eea',),
        mistakes=(
            ('that counts all 8 experts; each token uses 2',
             ('49ef06c6c04c36da',)),
        ),
        decade=10, sign=1,
    ),
    'accelerators_needed': Sealed(
        what="experts['accelerators_needed']", salt='capstone/experts/accelerators_needed', kind='number', digits=None,
        right=('5a992b8262cff30d',),
        mistakes=(
            ('memory holds every expert: size the weights by total parameters, not active',
             ('32019c3a37e26f1c',)),
        ),
        decade=0, sign=1,
    ),
    'flops_per_token': Sealed(
        what="experts['flops_per_token']", salt='capstone/experts/flops_per_token', kind='number', digits=10,
        right=('544146995642a20b', '727e2d7285b50ce6', '7df4590bebe29b44', 'a2c6dbbb5fabe83c',
               'd10eaab41c9501b4', 'f164973fc3a615ea',),
        mistakes=(
            ('that is multiply-adds; FLOPs = 2 × multiply-adds',
             ('8ba9bf8595d78886', 'a90caecd0f016fda', 'd3c3c5fff1146e81',)),
            ('compute follows the active parameters: a token never touches the experts it is not sent to',
             ('05d4d01659d6683c', '0609fd56cb50ba51', '0b37819990e72de0', '10dbb96ddafa5667',
              '124a93e97894eb95', '165339cd1632097b', '18779333b7e1b9d3', '2454aeb939eeb9df',
              '37f8b332d61b84f1', '51c69d2edb88bf06', '65ac2359202ab1ae', '6d385fc1c7c5bd6c',
              '6d4649d950890076', '79413fe4f0eca65f', '82a9d71c55753c18', '8e59e0f040adb32a',
              '9fbaeb128d8e3ad6', 'c2dfd2e301838db3', 'e77ab9e0233db386', 'fa0ea077b6e42d29',)),
            ('6 × parameters is a training step (forward and backward); this is one forward pass',
             ('004dfb4783352e7d', '14884e14add270ce', '40e0ebaa9ae7b619', '505f252898972b5b',
              '5e2a1b7c792483fa', '635bdb46bc49a167', '6815f33be0d1deb2', '71185f68509fa288',
              '7444300e976a7f16', '8a7e92acd159be10', 'a5cf95f55108f0df', 'b774b7d7b36280ce',
              'cc224d4de2b1e37d', 'd2e5ca3e20e2de36', 'da733764036c5565', 'facd83cd5e77647b',
              'fd8b456df41b36dc',)),
            ('that is in GFLOPs; give FLOPs',
             ('06ac47e1b97ef376', '30755558297e6cb5', '525735af397b3e59', '5ca4229b042f1d37',
              'c0e65bd345c5d667', 'd79422aac0b8c6e5',)),
        ),
        decade=10, sign=1,
    ),
}


def check_experts(answer) -> None:
    """2024: Mixtral 8x7B's total and active parameters, the fewest 80 GiB accelerators that
    hold its 16-bit weights and one 8,192-token request, and its compute per token by the rule
    of thumb: 2 FLOPs (one multiply-add) per active parameter; each sealed."""
    got = as_keyed(answer, EXPERT_KEYS, "experts")
    for key in EXPERT_KEYS:
        check_sealed(got[key], EXPERTS_SEALED[key])


# --- the module recap --------------------------------------------------------------------------
# Which idea and question belong to which lesson is sealed (course_lib.checks.sealed): salted
# hashes of the right letter and of the letters of the usual confusions, with their hints.
# Regenerate with course_lib.checks.sealed.seal_choice (salt capstone/recap/<lesson>/<kind>).

RECAP_SEALS = {
    1: (
        Sealed(
            what='recap[1] idea', salt='capstone/recap/1/idea', kind='choice', digits=None,
            right=('90bc715568f98676',),
            mistakes=(
                ('that one looks inside one block; lesson 1 reads the whole spec sheet',
                 ('410fccc6c692b83a',)),
                ('that one compares variants of a card; lesson 1 reads the numbers of one spec sheet',
                 ('bef414893b66bcc3',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('a', 'b', 'c', 'd', 'e', 'f'),
        ),
        Sealed(
            what='recap[1] question', salt='capstone/recap/1/question', kind='choice', digits=None,
            right=('b7e8453dc1320faf',),
            mistakes=(
                ('that one compares variants of a card; lesson 1 reads the numbers of one spec sheet',
                 ('50da8b0c0b50dead',)),
                ('that one looks inside one block; lesson 1 reads the whole spec sheet',
                 ('5035b62aa00d1b72',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('p', 'q', 'r', 's', 't', 'u'),
        ),
    ),
    2: (
        Sealed(
            what='recap[2] idea', salt='capstone/recap/2/idea', kind='choice', digits=None,
            right=('7aa63726710c9fc7',),
            mistakes=(
                ('that one is about order and length; lesson 2 is about what attention does',
                 ('f332fe64cae20561',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('a', 'b', 'c', 'd', 'e', 'f'),
        ),
        Sealed(
            what='recap[2] question', salt='capstone/recap/2/question', kind='choice', digits=None,
            right=('fd7be0d1f67f7372',),
            mistakes=(
                ('that one is about order and length; lesson 2 is about what attention does',
                 ('29598fc21281b418',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('p', 'q', 'r', 's', 't', 'u'),
        ),
    ),
    3: (
        Sealed(
            what='recap[3] idea', salt='capstone/recap/3/idea', kind='choice', digits=None,
            right=('5272f390c92a7e0a',),
            mistakes=(
                ('that one reads a whole spec sheet; lesson 3 looks inside one block',
                 ('9056e180b0c860ec',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('a', 'b', 'c', 'd', 'e', 'f'),
        ),
        Sealed(
            what='recap[3] question', salt='capstone/recap/3/question', kind='choice', digits=None,
            right=('61a05e7b43b3c6fe',),
            mistakes=(
                ('that one reads a whole spec sheet; lesson 3 looks inside one block',
                 ('b1d9f1db295a596b',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('p', 'q', 'r', 's', 't', 'u'),
        ),
    ),
    4: (
        Sealed(
            what='recap[4] idea', salt='capstone/recap/4/idea', kind='choice', digits=None,
            right=('e91826fd66cf4180',),
            mistakes=(
                ('that one is about the cache of a request; lesson 4 is about order and the cost of length',
                 ('5ce1b37f799fea4f',)),
                ('that one is about what attention does; lesson 4 is about order and length',
                 ('3e223f42809661d0',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('a', 'b', 'c', 'd', 'e', 'f'),
        ),
        Sealed(
            what='recap[4] question', salt='capstone/recap/4/question', kind='choice', digits=None,
            right=('1814da0169725bad',),
            mistakes=(
                ('that one is about what attention does; lesson 4 is about order and length',
                 ('f36ee9d6fdbb5674',)),
                ('that one is about the cache of a request; lesson 4 is about order and the cost of length',
                 ('d89bf18a29e69b80',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('p', 'q', 'r', 's', 't', 'u'),
        ),
    ),
    5: (
        Sealed(
            what='recap[5] idea', salt='capstone/recap/5/idea', kind='choice', digits=None,
            right=('b35b626559de0332',),
            mistakes=(
                ('that one compares variants of a card; lesson 5 is about what one request keeps',
                 ('12341a586efb7541',)),
                ('that one is about order and the cost of length; lesson 5 is about what a request keeps',
                 ('77c4f718282211a5',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('a', 'b', 'c', 'd', 'e', 'f'),
        ),
        Sealed(
            what='recap[5] question', salt='capstone/recap/5/question', kind='choice', digits=None,
            right=('7d57e76705710c7d',),
            mistakes=(
                ('that one is about order and the cost of length; lesson 5 is about what a request keeps',
                 ('e08bef59a8677924',)),
                ('that one compares variants of a card; lesson 5 is about what one request keeps',
                 ('601fac5978fe7867',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('p', 'q', 'r', 's', 't', 'u'),
        ),
    ),
    6: (
        Sealed(
            what='recap[6] idea', salt='capstone/recap/6/idea', kind='choice', digits=None,
            right=('22a73fa12e837d9b',),
            mistakes=(
                ('that one is about what one request keeps; lesson 6 compares variants of a card',
                 ('282b3aa9019156f1',)),
                ('that one reads the numbers of one spec sheet; lesson 6 compares variants',
                 ('d656b26bac499362',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('a', 'b', 'c', 'd', 'e', 'f'),
        ),
        Sealed(
            what='recap[6] question', salt='capstone/recap/6/question', kind='choice', digits=None,
            right=('e8d985080cf2eb6b',),
            mistakes=(
                ('that one is about what one request keeps; lesson 6 compares variants of a card',
                 ('0787ad89457421e9',)),
                ('that one reads the numbers of one spec sheet; lesson 6 compares variants',
                 ('67cf0e60dcdfa8fb',)),
            ),
            hint='match it by what that lesson made you count',
            choices=('p', 'q', 'r', 's', 't', 'u'),
        ),
    ),
}


def check_recap(answer) -> None:
    """The module's recap table: ``{lesson number: (idea letter, question letter)}`` for lessons
    1 to 6, ideas from :data:`RECAP_IDEAS`, questions from :data:`RECAP_QUESTIONS`."""
    if not isinstance(answer, Mapping) or sorted(answer, key=str) != list(range(1, 7)):
        raise CheckFailed("recap: give a dict with keys 1 to 6 (the lessons), each "
                          "(idea letter, question letter)")
    pairs = {}
    for lesson in range(1, 7):
        pair = answer[lesson]
        if not isinstance(pair, (tuple, list)) or len(pair) != 2 or \
                not all(isinstance(x, str) for x in pair):
            raise CheckFailed(f"recap[{lesson}]: give a pair of letters (idea, question), "
                              f"got {pair!r:.40}")
        pairs[lesson] = tuple(x.strip().upper() for x in pair)
    for i, what, letters in ((0, "idea", RECAP_IDEAS), (1, "question", RECAP_QUESTIONS)):
        used = [p[i] for p in pairs.values()]
        for x in used:
            if x not in letters:
                raise CheckFailed(f"recap: {what} letters are {', '.join(letters)}; got {x!r:.10}")
        twice = sorted({x for x in used if used.count(x) > 1})
        if twice:
            lessons = [str(k) for k, p in pairs.items() if p[i] == twice[0]]
            raise CheckFailed(f"recap: {what} {twice[0]!r} is given to lessons "
                              f"{' and '.join(lessons)}; each {what} belongs to one lesson")
    for lesson in range(1, 7):
        for i in (0, 1):
            check_sealed(pairs[lesson][i], RECAP_SEALS[lesson][i])


__all__ = [
    "FAMILIES", "SIZE_KEYS", "CANDIDATES", "SCENARIO", "VISIBLE_CARDS", "PAPER_2017",
    "GQA_SCENARIO", "FLASH_CASE", "COPY_PERIOD", "RECAP_LESSONS", "RECAP_IDEAS",
    "RECAP_QUESTIONS", "BERT_CONFIG", "WALKAWAY_MIN_PARAMS", "own_reading", "expected_size",
    "context_limit", "expected_servable", "size_mistakes", "check_size_card",
    "check_unknown_family", "check_servable", "check_walkaway", "check_paper_blocks",
    "copy_eval_losses", "check_copy_losses", "check_score_matrix", "check_flash_tib",
    "check_gqa", "check_experts", "check_recap",
]


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "capstone")  # one-line pass and fail messages in a notebook (checks.tutor)
