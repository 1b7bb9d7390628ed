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
from .. import units
from ..units import GB, GiB, dtype_bytes
from . import (CheckFailed, as_keyed, check_choice, check_equal, check_sealed, check_value,
               is_shown, on_hidden, own_work, watch_calls)
from .sealed import load as _load_sealed
from .exercise import merged

SEALED = _load_sealed("capstone")
"""This assignment's sealed answers by salt (sealed_answers/capstone.json)."""

# --- what the capstone covers ------------------------------------------------------------------

FAMILIES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma",
            "qwen3", "qwen3_moe", "gemma3_text", "deepseek_v2", "deepseek_v3")
"""The ``model_type`` values ``size_card`` must read (the notebook's tables of keys say how):
six of 2023-24 and five of 2025-26 (a dense grouped-query model with q/k norms, fine-grained
experts, sliding and global layers, latent attention with shared experts)."""

SIZE_KEYS = ("total_params", "active_params", "kv_cache_bytes_per_token", "requests_that_fit")

SHIPPED = tuple(n for n in card_names() if card_config(n)["model_type"] in FAMILIES)
"""Every shipped card of :data:`FAMILIES` (the hidden tests size them all)."""

ACCELERATORS = units.ACCELERATORS
"""Accelerators with their data-sheet memory and its source (course_lib/accelerators.json)."""
ACCELERATOR = "H200 SXM"
ACCELERATOR_MEMORY = ACCELERATORS[ACCELERATOR].memory_bytes
"""The scenario's accelerator: NVIDIA H200, 141 GB of HBM3e on its data sheet, 141 × 10^9
bytes."""

CANDIDATES = ("Meta-Llama-3-8B", "Qwen3-8B", "Qwen3-30B-A3B", "gemma-3-1b-it",
              "DeepSeek-V2-Lite", "DeepSeek-V3")
"""The serving scenario's candidates, cards of 2024-26: dense grouped-query (Llama 3, Qwen3),
fine-grained experts (Qwen3-30B-A3B), sliding and global layers (Gemma 3), latent attention
with shared experts (DeepSeek-V2-Lite, DeepSeek-V3)."""

SCENARIO = dict(context=32768, gpu_memory_bytes=ACCELERATOR_MEMORY, dtype="bf16")
"""One H200 (141 GB), requests of 32,768 tokens, 16-bit weights and cache."""

VISIBLE_CARDS = ("gpt2", "Llama-2-7b-hf", "Mistral-7B-v0.1", "Mixtral-8x7B-v0.1",
                 "Qwen2-7B-Instruct", "gemma-2b", "Qwen3-8B", "Qwen3-30B-A3B", "gemma-3-1b-it",
                 "DeepSeek-V2-Lite", "DeepSeek-V3")
"""One shipped card per family, for the visible test of ``size_card``."""

PAPER_2017 = dict(d_model=512, d_ff=2048, n_heads=8, n_layers=6)
"""The base model of Vaswani et al. 2017 (Table 3): one encoder block is self-attention plus a
feed-forward layer of d_ff = 2048."""

LLAMA2_7B = "Llama-2-7b-hf"
LLAMA2_70B = "Llama-2-70b-hf"
GQA_SCENARIO = dict(context=4096, gpu_memory_bytes=2 * units.H100_SXM_BYTES, dtype="bf16")
"""Llama 2 70B at its full 4,096 positions on two 80 GB accelerators (H100 SXM, 80 × 10^9 bytes
each by the course's convention, course_lib.units; its 16-bit weights alone need more than one)."""
MIXTRAL = "Mixtral-8x7B-v0.1"
ACCELERATOR_BYTES = units.H100_SXM_BYTES
"""One 80 GB accelerator of the experts exercise (H100 SXM, 80 × 10^9 bytes)."""

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
    """hidden_size / heads when that differs from the card's head_dim (else None; latent
    attention's heads are qk_nope_head_dim + qk_rope_head_dim wide, read from their keys)."""
    if s.mla is None and s.d_model % s.n_heads == 0 and s.d_model // s.n_heads != s.d_head:
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

    moe_L, E = s.moe_layers, s.n_experts
    shared = mlp_params(s, s.shared_width) if s.n_shared_experts else 0
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
        total["the routers are missing: one hidden_size × (number of experts) matrix in each "
              "layer of experts"] = c.total - moe_L * d * E
    if s.n_shared_experts:
        total["the shared experts are missing: every layer of experts also holds one "
              "feed-forward layer n_shared_experts × moe_intermediate_size wide"] = \
            c.total - moe_L * shared
    if s.n_dense_layers:
        total["the first first_k_dense_replace layers are dense (one feed-forward layer "
              "intermediate_size wide), not experts"] = count_params(
                  s.with_(n_dense_layers=0, d_ff_dense=None)).total
    if s.qk_norm == "head":
        total["this family norms queries and keys: an RMSNorm of head_dim each (q_norm, "
              "k_norm) in every layer"] = c.total - 2 * L * s.d_head
    if s.norms_per_block == 4:
        total["gemma3_text has four norms in each block (before and after attention and the "
              "feed-forward layer), not two"] = c.total - 2 * L * d
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
        ff_widths = (moe_L * (E * s.d_ff + s.shared_width)
                     + (L - moe_L) * (s.d_ff_dense or s.d_ff))
        total["a gated feed-forward layer (SwiGLU, GeGLU) has three matrices: gate, up and "
              "down"] = c.total - d * ff_widths
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
               "experts it is not sent to"] = c.active - moe_L * d * E
        active["attention, embeddings and norms work for every token: only the unused experts "
               "drop out"] = moe_L * s.n_experts_per_tok * mlp_params(s)
        if s.n_shared_experts:
            active["the shared experts are missing: every token passes through them besides its "
                   "routed experts"] = c.active - moe_L * shared
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
    if s.mla is not None:
        per_token["latent attention caches one latent (kv_lora_rank) and one rotary key "
                  "(qk_rope_head_dim) per layer, not a key and a value per head"] = \
            2 * L * H * s.d_head * b
        per_token["the rotary key (qk_rope_head_dim) is cached beside the latent"] = \
            L * s.mla.kv_lora_rank * b

    requests: dict = {
        "the weights come first: subtract their bytes from the memory before dividing":
            _requests(mem, 0, seq),
        "round down: part of a request does not fit": _requests(mem, wb, seq) + 1,
        "grouped-query attention shrinks the cache: cache num_key_value_heads heads":
            _requests(mem, wb, seq * H // KV),
    }
    if s.sliding_window is not None and context > s.sliding_window:
        requests["this card has a sliding window: each sliding layer keeps only the last "
                 "sliding_window tokens, so a request caches at most that many there"] = \
            _requests(mem, wb, tok * context)
        if s.sliding_layers < L:
            requests["only the sliding layers keep the window: the global (full_attention) "
                     "layers keep every token"] = _requests(mem, wb, tok * s.sliding_window)
    if s.is_moe:
        requests["the memory holds every expert: size the weights by total parameters, not "
                 "active"] = _requests(mem, math.ceil(c.active * b), seq)
    if s.n_shared_experts:
        requests["the shared experts are left out of the weights: every layer of experts holds "
                 "them too"] = \
            _requests(mem, wb - moe_L * shared * b, seq)
    if s.mla is not None:
        requests["latent attention caches the latent and the rotary key, not keys and values "
                 "per head"] = _requests(mem, wb, 2 * H * s.d_head * seq // s.kv_cache_width)
    if s.tied_embeddings:
        requests["the tied head is stored once: do not count it twice in the weights"] = \
            _requests(mem, wb + head * b, seq)
    if alt:
        requests["this card sets head_dim: use it for the cache"] = \
            _requests(mem, wb, seq * alt // s.d_head)
    # slips that give the same wrong value here are named together, so none hides another
    return {"total_params": merged(total), "active_params": merged(active),
            "kv_cache_bytes_per_token": merged(per_token), "requests_that_fit": merged(requests)}


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
              "shared experts" if s.n_shared_experts else "",
              "latent attention" if s.mla is not None else "",
              "tied embeddings" if s.tied_embeddings else "",
              "head_dim set" if _alt_d_head(s) else "",
              ("sliding and global layers" if 0 < s.sliding_layers < s.n_layers
               else "a sliding window") if s.sliding_layers else ""]
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
    "returned without raising": "raise ValueError naming the model_type instead of returning "
                                "a result for an architecture you did not write it for",
    "valueerror without the name": "the ValueError's message should name the model_type "
                                   "('bert'), so the reader knows which card failed",
    "another error": "check model_type first, and raise ValueError naming it (a KeyError from "
                     "a missing key says nothing about the family)",
}


def check_unknown_family(fn) -> None:
    """``fn`` must raise ValueError naming the model_type for a card outside :data:`FAMILIES`
    (a BERT card), not return a result for an architecture it does not know."""
    label = "size_card(<bert-base-uncased>, ...)"
    try:
        own_reading(fn, copy.deepcopy(BERT_CONFIG), *_scenario(SCENARIO))
        outcome = "returned without raising"
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
    'model': SEALED['capstone/walkaway/model'],
    'total_params': SEALED['capstone/walkaway/total_params'],
    'active_params': SEALED['capstone/walkaway/active_params'],
    'kv_cache_bytes_per_token': SEALED['capstone/walkaway/kv_cache_bytes_per_token'],
    'requests_that_fit': SEALED['capstone/walkaway/requests_that_fit'],
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

PAPER_BLOCK_WEIGHTS = SEALED['capstone/paper_block_weights']

LLAMA2_7B_BLOCK_WEIGHTS = SEALED['capstone/llama2_7b_block_weights']


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


FLASH_TIB = SEALED['capstone/flash_tib']


def check_flash_tib(value) -> None:
    """The module's score matrix (:data:`FLASH_CASE`) in TiB (2^40 bytes); sealed."""
    check_sealed(value, FLASH_TIB)


GQA_KEYS = ("cache_per_token_gqa", "cache_per_token_mha", "requests_gqa", "requests_mha")

GQA_SEALED = {  # key -> its sealed answer
    'cache_per_token_gqa': SEALED['capstone/gqa/cache_per_token_gqa'],
    'cache_per_token_mha': SEALED['capstone/gqa/cache_per_token_mha'],
    'requests_gqa': SEALED['capstone/gqa/requests_gqa'],
    'requests_mha': SEALED['capstone/gqa/requests_mha'],
}


def check_gqa(answer) -> None:
    """2023: Llama 2 70B's cache per token with its 8 key/value heads and with 64 (one per
    query head, multi-head attention), and the requests of 4,096 tokens that fit on two 80 GB
    accelerators in 16-bit either way (the 64-head variant has bigger K and V projections
    too); each sealed."""
    got = as_keyed(answer, GQA_KEYS, "gqa")
    for key in GQA_KEYS:
        check_sealed(got[key], GQA_SEALED[key])


EXPERT_KEYS = ("total_params", "active_params", "accelerators_needed", "flops_per_token")

EXPERTS_SEALED = {  # key -> its sealed answer
    'total_params': SEALED['capstone/experts/total_params'],
    'active_params': SEALED['capstone/experts/active_params'],
    'accelerators_needed': SEALED['capstone/experts/accelerators_needed'],
    'flops_per_token': SEALED['capstone/experts/flops_per_token'],
}


def check_experts(answer) -> None:
    """2024: Mixtral 8x7B's total and active parameters, the fewest 80 GB accelerators that
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
        SEALED['capstone/recap/1/idea'],
        SEALED['capstone/recap/1/question'],
    ),
    2: (
        SEALED['capstone/recap/2/idea'],
        SEALED['capstone/recap/2/question'],
    ),
    3: (
        SEALED['capstone/recap/3/idea'],
        SEALED['capstone/recap/3/question'],
    ),
    4: (
        SEALED['capstone/recap/4/idea'],
        SEALED['capstone/recap/4/question'],
    ),
    5: (
        SEALED['capstone/recap/5/idea'],
        SEALED['capstone/recap/5/question'],
    ),
    6: (
        SEALED['capstone/recap/6/idea'],
        SEALED['capstone/recap/6/question'],
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
    "FAMILIES", "SIZE_KEYS", "CANDIDATES", "SHIPPED", "ACCELERATORS", "ACCELERATOR",
    "ACCELERATOR_MEMORY", "SCENARIO", "VISIBLE_CARDS", "PAPER_2017",
    "GQA_SCENARIO", "FLASH_CASE", "COPY_PERIOD", "RECAP_LESSONS", "RECAP_IDEAS",
    "RECAP_QUESTIONS", "BERT_CONFIG", "WALKAWAY_MIN_PARAMS", "own_reading", "expected_size",
    "context_limit", "expected_servable", "size_mistakes", "check_size_card",
    "check_unknown_family", "check_servable", "check_walkaway", "check_paper_blocks",
    "copy_eval_losses", "check_copy_losses", "check_score_matrix", "check_flash_tib",
    "check_gqa", "check_experts", "check_recap",
]


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "capstone")  # one-line pass and fail messages in a notebook (checks.tutor)
