"""Checks for the capstone, "Size a real card".

The learner's ``size_card(config, context, gpu_memory_bytes, dtype)`` reads a Hugging Face
``config.json`` of one of :data:`FAMILIES`; expected values come from course_lib
(``cards.shape_from_config``, then ``params`` and ``memory``; tests/test_params.py and
tests/test_capstone_cards.py check them against ``transformers``).  A failure names the likely
mistake (its words in hints/capstone.toml) without the expected value; fixed answers are sealed.
"""
from __future__ import annotations

import copy
import math
import numbers
from contextlib import suppress
from functools import partial
from itertools import product
from typing import Callable, Mapping, Sequence

import torch

from ..cards import card_config, card_names, shape_from_config
from ..memory import kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, requests_that_fit, weight_bytes
from ..params import count_params, mlp_params
from ..units import ACCELERATORS, GB, H100_SXM_BYTES, GiB, dtype_bytes
from . import (CheckFailed, as_keyed, as_tuple, check_choice, check_equal, check_value, got_words, is_shown, own_work,
               watch_calls, withheld)
from .exercise import HIDDEN, Question, blames, call, label, merged
from .hints import load as _load_hints, words
from .lesson4 import _UNSET, RANDOM_CASES, check_score_bytes
from .sealed import as_option, load as _load_sealed

SEALED, HINTS, _words = _load_sealed("capstone"), _load_hints("capstone"), words("capstone")
"""This assignment's sealed answers by salt, and the words of its named mistakes."""
FAMILIES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma",  # six of 2023-24, five of 2025-26
            "qwen3", "qwen3_moe", "gemma3_text", "deepseek_v2", "deepseek_v3")
"""The ``model_type`` values ``size_card`` must read; SHIPPED: every shipped card of them."""
SHIPPED = tuple(n for n in card_names() if card_config(n)["model_type"] in FAMILIES)
SIZE_KEYS = ("total_params", "active_params", "kv_cache_bytes_per_token", "requests_that_fit")
ACCELERATOR, ACCELERATOR_BYTES = "H200 SXM", H100_SXM_BYTES
ACCELERATOR_MEMORY = ACCELERATORS[ACCELERATOR].memory_bytes
"""The scenario's H200: 141 × 10^9 bytes (course_lib/accelerators.json); ACCELERATOR_BYTES: an 80 GB H100 SXM."""
SCENARIO = dict(context=32768, gpu_memory_bytes=ACCELERATOR_MEMORY, dtype="bf16")
"""One H200, requests of 32,768 tokens, 16-bit weights and cache; served by CANDIDATES (2024-26)."""
CANDIDATES = ("Meta-Llama-3-8B", "Qwen3-8B", "Qwen3-30B-A3B", "gemma-3-1b-it", "DeepSeek-V2-Lite", "DeepSeek-V3")
VISIBLE_CARDS = ("gpt2", "Llama-2-7b-hf", "Meta-Llama-3-8B", "Mistral-7B-v0.1", "Mixtral-8x7B-v0.1",
                 "Qwen2-7B-Instruct", "gemma-2b", "Qwen3-8B", "Qwen3-30B-A3B", "gemma-3-1b-it",
                 "DeepSeek-V2-Lite", "DeepSeek-V3")
"""A shipped card per family (Llama: with and without grouped-query attention) and every candidate."""
SHORT_SCENARIO = dict(context=400, gpu_memory_bytes=ACCELERATOR_BYTES, dtype="fp32")
"""The visible test's second scenario: requests shorter than every window, 32-bit, one 80 GB H100."""
GQA_SCENARIO = dict(context=4096, gpu_memory_bytes=2 * H100_SXM_BYTES, dtype="bf16")
"""Llama 2 70B at 4,096 positions on two H100 SXM of 80 × 10^9 bytes (course_lib.units)."""
GQA_CARDS = {"Llama-2-70b-hf": card_config("Llama-2-70b-hf"),
             "Llama-2-70b-hf, 64 key/value heads": {**card_config("Llama-2-70b-hf"), "num_key_value_heads": 64}}
"""The GQA example's two configs: the real card, and the same model with a key/value head per query head."""
EXPERTS_SCENARIOS = tuple(dict(context=8192, gpu_memory_bytes=n * ACCELERATOR_BYTES, dtype="bf16") for n in (1, 2))
"""The experts example's Mixtral on one and on two 80 GB accelerators, 8,192-token requests, 16-bit."""
VARIANTS = {f"{n} without {k}": {key: v for key, v in card_config(n).items() if key != k} for n, k in (
    ("Meta-Llama-3-8B", "num_key_value_heads"), ("Mistral-7B-v0.1", "num_key_value_heads"),
    ("Mistral-7B-v0.1", "sliding_window"), ("Mixtral-8x7B-v0.1", "sliding_window"), ("Qwen3-30B-A3B", "head_dim"),
    ("gemma-3-1b-it", "sliding_window"))} | {
    "gpt2 with tie_word_embeddings false": {**card_config("gpt2"), "tie_word_embeddings": False},
    "Mistral-7B-v0.1 with num_key_value_heads null": {**card_config("Mistral-7B-v0.1"), "num_key_value_heads": None},
    "gemma-3-1b-it with layer_types, every third layer global": {
        **{k: v for k, v in card_config("gemma-3-1b-it").items() if k != "sliding_window_pattern"},
        "layer_types": ["full_attention" if (i + 1) % 3 == 0 else "sliding_attention"
                        for i in range(card_config("gemma-3-1b-it")["num_hidden_layers"])]}}
"""Shipped cards with a key left out (section 1's default then holds); GPT-2 untied; Mistral 7B with
``num_key_value_heads`` null (a key/value head per query head, not the family's default); Gemma 3 1B
listing ``layer_types`` (a global layer every third, not every sixth as the absent pattern says)."""
_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=128, vocab_size=512, max_position_embeddings=2048)
SMALL_CARDS = {f"a small {family} card without head_dim": {"model_type": family, **_SMALL, **extra}
               for family, extra in (("qwen3", {}), ("gemma", {}), ("gemma3_text", {"sliding_window": 256}))}
"""Made-up cards of the families whose absent ``head_dim`` is not hidden_size / num_attention_heads
(128 for Qwen3, 256 for Gemma and Gemma 3; here 64 / 4 = 16), which every real card of theirs sets."""
NULL_KEYS = ("num_key_value_heads", "head_dim", "n_inner", "sliding_window", "sliding_window_pattern",
             "layer_types", "q_lora_rank", "tie_word_embeddings")
"""Keys whose null has a meaning (section 1's tables): a TypeError about None on a card holding one is named."""
VISIBLE_CASES = ((VISIBLE_CARDS, (SCENARIO, SHORT_SCENARIO)), (VARIANTS, (SCENARIO,)), (SMALL_CARDS, (SCENARIO,)),
                 (GQA_CARDS, (GQA_SCENARIO,)), (("Mixtral-8x7B-v0.1",), EXPERTS_SCENARIOS))
"""``size_card``'s visible test, (cards, scenarios): every input a later check builds on (its blame then holds)."""
FLASH_CASE = dict(n_tokens=131_072, n_heads=32, bytes_per_number=2)
"""The module text's score matrix: 131,072 tokens, 32 heads, 16-bit numbers."""
COPY_PERIOD, COPY_SEQS, COPY_SEED = 10, 200, 0
"""The copying example's period; its data: 200 rows of ``repeated_tokens`` from seed 0."""
BERT_CONFIG = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 768,
               "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
               "max_position_embeddings": 512, "vocab_size": 30522, "type_vocab_size": 2}
"""bert-base-uncased's sizes: an encoder, not one of :data:`FAMILIES`."""
RECAP_LESSONS = ("The shape of a transformer", "Attention", "The block", "Position and context",
                 "Generation and the KV cache", "Variants and the model card")
"""The module's six lessons, numbered 1 to 6; the recap table's ideas and questions, shuffled (hints/capstone.toml):"""
RECAP_IDEAS, RECAP_QUESTIONS = HINTS["options"]["recap_ideas"], HINTS["options"]["recap_questions"]
RECAP_SEALS = {n: (SEALED[f"capstone/recap/{n}/idea"], SEALED[f"capstone/recap/{n}/question"]) for n in range(1, 7)}
"""Lesson -> sealed (idea letter, question letter), with the usual confusions' hints."""


READING = [(partial(watch_calls, files={"cards.py": None, "shapes.py": {"kv_cache_width", "sliding_layers"}}),
            HINTS["reading"]["card_reader"])]
"""What the learner's reading of a card may not call: ``course_lib.cards``, a shape's ``kv_cache_width`` or
``sliding_layers`` (reading keys is the answer), even if that code then raised (a CardError is not theirs)."""


def own_reading(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` through :func:`~course_lib.checks.own_work` (no counters), refusing :data:`READING`."""
    return own_work(fn, *args, refuse=READING, **kwargs)


def expected_size(config: Mapping, context: int, gpu_memory_bytes: int, dtype: str = "bf16") -> dict:
    """What ``size_card`` must return for ``config`` (course_lib's counts)."""
    s = shape_from_config(dict(config))
    c = count_params(s)
    return dict(zip(SIZE_KEYS, (c.total, c.active, kv_cache_bytes_per_token(s, dtype),
                                requests_that_fit(s, context, gpu_memory_bytes, dtype))))


def context_limit(config: Mapping) -> int:
    """Positions a card's model was built for (``n_positions`` or ``max_position_embeddings``)."""
    return shape_from_config(dict(config)).n_ctx


def expected_servable(cards: Mapping[str, Mapping], context: int, gpu_memory_bytes: int, dtype: str = "bf16") -> dict:
    """``{name: requests}`` of the cards whose positions cover ``context`` and beside whose weights a request fits."""
    return {n: r for n, c in cards.items() if context_limit(c) >= context
            and (r := expected_size(c, context, gpu_memory_bytes, dtype)["requests_that_fit"]) >= 1}


def _alt_d_head(s) -> int | None:
    d = s.d_model // s.n_heads
    return d if s.mla is None and s.d_model % s.n_heads == 0 and d != s.d_head else None


def size_mistakes(config: Mapping, context: int, gpu_memory_bytes: int, dtype: str = "bf16") -> dict:
    """``{key of SIZE_KEYS: {diagnosis: wrong value}}``: the usual slips on this card and scenario, those of
    one value named together.  One equal to the answer is ignored, so a slip gets a condition only where,
    on a card that cannot make it, it would give another value (or could not be computed)."""
    s = shape_from_config(dict(config))
    c, b, mem, tied, sw = count_params(s), dtype_bytes(dtype), gpu_memory_bytes, s.tied_embeddings, s.sliding_window
    L, H, KV, d, moe_L, E, T = s.n_layers, s.n_heads, s.n_kv_heads, s.d_model, s.moe_layers, s.n_experts, c.total
    mla, gpt2, qwen2 = s.mla is not None, s.model_type == "gpt2", s.model_type == "qwen2"
    plain, glu = not gpt2 and not mla, s.mlp in ("swiglu", "geglu")
    head, wb, tok = s.d_vocab * d, weight_bytes(s, dtype), kv_cache_bytes_per_token(s, dtype)
    seq, shared = kv_cache_bytes_per_sequence(s, context, dtype), mlp_params(s, s.shared_width)

    def fit(weights, per_request, memory=mem):
        return 0 if memory <= weights else int((memory - weights) // per_request)

    def slide(sliding: int, kept: int = min(context, sw or context)) -> int:
        """The requests that fit if ``sliding`` layers keep ``kept`` tokens of a request, the others all."""
        return fit(wb, tok // L * ((L - sliding) * context + sliding * kept))

    # Gemma 3's layer pattern read wrong: a card's layer_types read by sliding_window_pattern; else the
    # global layers counted from layer 0, or the pattern the wrong way round
    gemma3, types, p = s.model_type == "gemma3_text" and sw, config.get("layer_types"), \
        config.get("sliding_window_pattern") or 6
    # a d_head of hidden_size / num_attention_heads: head_dim set on the card and not read, or
    # absent and its family's default (section 1's table) not known
    alt, hd = _alt_d_head(s), (lambda key: key if config.get("head_dim") is not None else "head_dim_default")
    hd_total, hd_cache, hd_requests = (count_params(s.with_(d_head=alt)).total, 2 * L * KV * alt * b,
                                       fit(wb, seq * alt // s.d_head)) if alt else (None, None, None)
    total = _words(
        "size_card", tied=T + head if tied else None, untied=None if tied else T - head, active_count=c.active,
        routers=T - moe_L * d * E, shared=T - moe_L * shared, dense_first=count_params(s.with_(
            n_dense_layers=0, d_ff_dense=None)).total, qk_norm=T - 2 * L * s.d_head if s.qk_norm == "head" else None,
        four_norms=T - 2 * L * d if s.norms_per_block == 4 else None, **{hd("head_dim"): hd_total},
        kv_heads=count_params(s.with_(n_kv_heads=H)).total, qkv_bias=T - L * (H + 2 * KV) * s.d_head if qwen2 else None,
        positions=T - s.n_ctx * d if s.positions == "learned" else None,
        gpt2_mlp_bias=T - L * (s.d_ff + d) if gpt2 else None, gpt2_attn_bias=T - L * 4 * d if gpt2 else None,
        gated=T - d * (moe_L * (E * s.d_ff + s.shared_width) + (L - moe_L) * (s.d_ff_dense or s.d_ff)) if glu else None,
        n_inner=count_params(s.with_(d_ff=d)).total if gpt2 else None,
        final_norm=T - c.norms // (s.norms_per_block * L + 1), norms=T - c.norms,
        layer_norm_bias=T - (2 * L + 1) * d if gpt2 else None, latent_norms=T - L * s.mla.kv_lora_rank if mla else None,
        query_latent_norm=T - L * s.mla.q_lora_rank if mla and s.mla.q_lora_rank else None,
        q_width=T + 2 * L * d * (d - H * s.d_head) if plain else None,
        mlp_bias=T + L * (2 * s.d_ff + d) if plain and glu and not s.is_moe else None,
        attn_bias=T + L * ((H + 2 * KV) * s.d_head * (not qwen2) + d) if plain else None)
    active = _words("size_card", every_expert=T, router_too=c.active - moe_L * d * E,
                    only_experts=moe_L * s.n_experts_per_tok * mlp_params(s), shared_active=c.active - moe_L * shared) \
        if s.is_moe else {**total, **_words("size_card", dense_active=T - c.embedding)}
    per_token = _words(
        "size_card", latent_pair=2 * tok if mla else None, bytes_16=tok * 2 / b, bytes_32=tok * 4 / b,
        cache_gqa=tok * H // KV, key_and_value=tok / 2, bits=tok * 8, one_layer=tok / L, per_request=seq,
        times_context=tok * context, **{hd("cache_head_dim"): hd_cache},
        latent=2 * L * H * s.d_head * b if mla else None, rotary_key=L * s.mla.kv_lora_rank * b if mla else None)
    requests = _words(
        "size_card", memory_gib=fit(wb, seq, mem * GiB // GB), weights_first=fit(0, seq), round_down=fit(wb, seq) + 1,
        requests_gqa=fit(wb, seq * H // KV), window=fit(wb, tok * context),
        global_layers=fit(wb, tok * sw) if sw and context > sw else None,
        by_total=fit(math.ceil(c.active * b), seq), shared_weights=fit(wb - moe_L * shared * b, seq),
        requests_latent=fit(wb, 2 * H * s.d_head * seq // s.kv_cache_width) if mla else None,
        tied_once=fit(wb + head * b, seq) if tied else None, **{hd("requests_head_dim"): hd_requests},
        window_short=slide(s.sliding_layers, sw) if sw else None,
        layer_types_ignored=slide(L - L // p) if gemma3 and types else None,
        pattern_offset=slide(L - math.ceil(L / p)) if gemma3 and not types else None,
        pattern_inverted=slide(L // p) if gemma3 and not types else None)
    found = dict(zip(SIZE_KEYS, (total, active, per_token, requests)))
    if config.get("num_key_value_heads", 0) is None:  # a null read as absent: the family's default
        with suppress(ValueError):  # a CardError: that default does not divide the heads
            absent = expected_size({k: v for k, v in config.items() if k != "num_key_value_heads"}, context, mem, dtype)
            found = {key: {**found[key], **_words("size_card", kv_null=absent[key])} for key in SIZE_KEYS}
    return {key: merged(found[key]) for key in SIZE_KEYS}


def _label(fn_name: str, what: str, context: int, memory: int, dtype: str, **shown_kinds) -> str:
    """A shown call: ``size_card(<gpt2>, context=32,768, gpu_memory_bytes=141 GB, dtype='bf16')``; else its kinds."""
    mem = next((f"{memory // u} {w}" for u, w in ((GiB, "GiB"), (GB, "GB")) if memory % u == 0), f"{memory:,} bytes")
    return label(fn_name, f"<{what}>, context={context:,}, gpu_memory_bytes={mem}, dtype={dtype!r}", **shown_kinds)


def _card_kind(config: Mapping, shipped: bool) -> tuple:
    """A hidden test's card in words: shipped or not, its model_type, the features slips are about (no name, size)."""
    s = shape_from_config(dict(config))
    layers = "sliding and global layers" if 0 < s.sliding_layers < s.n_layers else "a sliding window"
    return (f"{'a shipped' if shipped else 'a hidden'} card of model_type {config.get('model_type')}",
            "a mixture of experts" if s.is_moe else "", "shared experts" if s.n_shared_experts else "",
            "latent attention" if s.mla is not None else "", "tied embeddings" if s.tied_embeddings else "",
            "head_dim set" if _alt_d_head(s) else "", layers if s.sliding_layers else "")


def _cases(cards, scenarios) -> tuple[dict, list]:
    configs = ({n: dict(c) for n, c in cards.items()} if isinstance(cards, Mapping)
               else {n: card_config(n) for n in cards})
    return configs, [(sc["context"], sc["gpu_memory_bytes"], sc.get("dtype", "bf16")) for sc in scenarios]


_VISIBLE = [(n, c, sc) for cards, scs in VISIBLE_CASES for n, c in _cases(cards, ())[0].items() for sc in scs]


def _count(got, expected, what: str, mistakes: Mapping, rel: float = 0.0) -> None:
    check_value(got, expected, what=what, rel=rel, integer=not rel, mistakes=mistakes)
    if not isinstance(got, numbers.Real if rel else numbers.Integral) or isinstance(got, bool):
        raise CheckFailed(f"{what}: expected {HINTS['reading']['float' if rel else 'int']}, "
                          f"got {got_words(got, what, 40)}")


def check_size_card(fn, cards=None, scenarios: Sequence[Mapping] = (SCENARIO,), explain_errors: bool = False) -> None:
    """``fn(config, context, gpu_memory_bytes, dtype) -> {total_params, active_params,
    kv_cache_bytes_per_token, requests_that_fit}``, ints, exact, on every card (shipped names or
    ``{name: config}``) and scenario (default: :data:`VISIBLE_CASES`); ``fn`` gets a copy of
    each config, refused :data:`READING`; ``explain_errors``: an error it raises fails too (a later check's blame)."""
    for group, scs in VISIBLE_CASES if cards is None else ((cards, scenarios),):
        configs, args = _cases(group, scs)
        for (name, cfg), (sc, a) in product(configs.items(), zip(scs, args)):
            what = _label("size_card", name, *a, shown=(name, cfg, dict(sc)) in _VISIBLE,
                          kinds=_card_kind(cfg, not isinstance(group, Mapping)))
            try:
                got = as_keyed(call(fn, what, copy.deepcopy(cfg), *a, refuse=READING, explain_errors=explain_errors),
                               SIZE_KEYS, what)
            except (CheckFailed, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - a null taken for its key's default: say so
                nulls = [k for k in NULL_KEYS if k in cfg and cfg[k] is None] \
                    if isinstance(e, TypeError) and "NoneType" in str(e) else []
                if not nulls and HIDDEN not in what:
                    raise
                if not nulls:  # another error on a hidden card: as call words it, its numbers withheld
                    raise CheckFailed(f"{what} raised {got_words(e, what, 0)}: {withheld(e)}") from None
                kv = f" ({HINTS['size_card']['null_kv']})" if "num_key_value_heads" in nulls else ""
                raise CheckFailed(f"{what} raised TypeError ({e if HIDDEN not in what else withheld(e)}): "
                                  + HINTS["size_card"]["null"].format(keys=", ".join(nulls)) + kv) from None
            expected, mistakes = expected_size(cfg, *a), size_mistakes(cfg, *a)
            for key in SIZE_KEYS:
                _count(got[key], expected[key], f"{what}[{key!r}]", mistakes[key])


def check_unknown_family(fn) -> None:
    """``fn`` must raise ValueError naming the model_type for a BERT card (not of :data:`FAMILIES`)."""
    try:
        returned = own_reading(fn, copy.deepcopy(BERT_CONFIG), *SCENARIO.values())
        outcome, error = "returned without raising", "None" if returned is None else "a result"
    except (CheckFailed, NotImplementedError):  # an unwritten answer: the grader says so
        raise
    except Exception as e:  # noqa: BLE001 - which error the learner raised is the feedback
        outcome, error = ("another error" if not isinstance(e, ValueError) else "valueerror naming it"
                          if "bert" in str(e) else "valueerror without the name"), type(e).__name__
    words, what = HINTS["unknown_family"], "size_card(<bert-base-uncased>, ...)"
    try:  # the outcome recorded as a choice; the learner reads what their function did
        check_choice(outcome, "valueerror naming it", what=what, choices=("valueerror naming it", *words), hints=words)
    except CheckFailed:
        raise CheckFailed(f"{what} {HINTS['unknown_family_did'][outcome].format(error=error)}: {words[outcome]}") \
            from None


_size_card_right = partial(check_size_card, explain_errors=True)  # a later check's blame


def check_servable(fn, size_card=None, cards=CANDIDATES, scenarios: Sequence[Mapping] = (SCENARIO,)) -> None:
    """``fn(cards, context, gpu_memory_bytes, dtype) -> {name: requests}`` holding exactly the
    cards that can serve each scenario (:func:`expected_servable`), with the requests that fit.
    Given the learner's ``size_card`` (which ``fn`` uses), a failure on a scenario blames it if
    it is wrong there on a card whose positions cover the context (:func:`~.exercise.blames`)."""
    (configs, args), words = _cases(cards, scenarios), HINTS["servable"]
    cards_shown = not isinstance(cards, Mapping) and tuple(cards) == CANDIDATES
    card = {n: n if cards_shown else "a card" for n in configs}  # a hidden test's cards: not named
    for sc, (context, memory, dtype) in zip(scenarios, args):
        shown = cards_shown and is_shown(sc, (SCENARIO,))
        what = _label("servable", f"{len(configs)} cards", context, memory, dtype, shown=shown,
                      kinds=("the shipped candidates" if cards_shown else "hidden cards",))
        reach = {n: c for n, c in configs.items() if context_limit(c) >= context}  # the others' sizes: no matter
        with blames(("size_card", _size_card_right, size_card, reach, [sc])):
            result = call(fn, what, copy.deepcopy(configs), context, memory, dtype, shown=shown, refuse=READING)
            if not isinstance(result, Mapping):
                raise CheckFailed(f"{what}: " + words["not_a_dict"].format(type=got_words(result, what, 0)))
            expected = expected_servable(configs, context, memory, dtype)
            # the first wrong card: the learner's own key, one too short or with no room, one missing
            for why, name in ([("not_given", n) for n in result if n not in configs] or [
                    ("too_short" if context_limit(configs[n]) < context else "no_room", n)
                    for n in result if n not in expected] or [("missing", n) for n in expected if n not in result])[:1]:
                raise CheckFailed(f"{what}: " + words[why].format(name=name, card=card.get(name), long=(
                    f"{context:,}-token requests" if shown else "requests this long")))
            check_equal(sorted(result), sorted(expected), what=f"{what}: the cards that serve it")
            for name, n in expected.items():
                _count(result[name], n, f"{what}[{card[name]!r}]",
                       size_mistakes(configs[name], context, memory, dtype)["requests_that_fit"])


def _sealed_dict(what: str, *keys: str, cards=(), scenarios: Sequence[Mapping] = ()) -> Callable:
    """A check of a dict answer holding ``keys``, each compared with its sealed answer
    ``capstone/<what>/<key>`` in order; ``check(answer, size_card)`` also blames size_card on
    the ``cards`` and ``scenarios`` the answer is built from (:func:`~.exercise.blames`)."""
    question = Question(tuple(SEALED[f"capstone/{what}/{key}"] for key in keys))

    def check(answer, size_card=None) -> None:
        with blames(("size_card", _size_card_right, size_card, cards, scenarios)):
            question(*map(as_keyed(answer, keys, what).get, keys))
    check.__name__ = check.__qualname__ = f"check_{what}"
    return check


check_walkaway = _sealed_dict("walkaway", "model", *SIZE_KEYS, scenarios=(SCENARIO,), cards=tuple(
    n for n in CANDIDATES if context_limit(card_config(n)) >= SCENARIO["context"]))
"""The walk-away: of the cards serving :data:`SCENARIO` with at least 7 billion total parameters, the one
serving the most requests, and its four sizes, sealed; blamed on size_card if wrong on a candidate there."""
check_gqa = _sealed_dict("gqa", "cache_per_token_gqa", "cache_per_token_mha", "requests_gqa",
                         "requests_mha", cards=GQA_CARDS, scenarios=(GQA_SCENARIO,))
"""2023: Llama 2 70B's cache per token (bytes) with its 8 key/value heads and with 64, and the
4,096-token requests that fit in :data:`GQA_SCENARIO` either way; sealed."""
check_experts = _sealed_dict("experts", "total_params", "active_params", "accelerators_needed",
                             "flops_per_token", cards=("Mixtral-8x7B-v0.1",), scenarios=EXPERTS_SCENARIOS)
"""2024: Mixtral 8x7B's total and active parameters, the fewest 80 GB accelerators for its 16-bit
weights and one 8,192-token request, and FLOPs per token (2 per active parameter); sealed."""
check_paper_blocks = Question((SEALED["capstone/paper_block_weights"], SEALED["capstone/llama2_7b_block_weights"]))
"""2017: weights of one encoder block of the base Transformer (d_model 512, d_ff 2048: 4·d² +
2·d·d_ff) and of one Llama 2 7B block (4·d² + 3·d·d_ff), both sealed."""
check_flash_tib = Question((SEALED["capstone/flash_tib"],))
"""The score matrix of :data:`FLASH_CASE` in TiB (2^40 bytes); sealed."""


def copy_eval_losses(period: int = COPY_PERIOD):
    """Per-token losses (200, 31), in nats, of the shipped induction model on ``repeated_tokens``
    of this period (seed :data:`COPY_SEED`): ``losses[:, i]`` is the loss of predicting token i + 1."""
    from ..tasks import repeated_tokens
    from ..training import load_induction_model, next_token_losses
    model, _ = load_induction_model()
    tokens = repeated_tokens(COPY_SEQS, model.shape.n_ctx, model.shape.d_vocab, period,
                             torch.Generator().manual_seed(COPY_SEED))
    with torch.no_grad():
        return next_token_losses(model, tokens)


def check_copy_losses(fn, periods: Sequence[int] = (COPY_PERIOD,), seeds: Sequence[int] = ()) -> None:
    """``fn(losses, period) -> (mean loss of tokens 1 .. period, which nothing earlier predicts;
    mean loss of the copied tokens after them)``: ``losses[:, :period]`` and ``losses[:, period:]``,
    on the induction model's losses for each period and on a random tensor per seed."""
    model = "the induction model's losses"
    cases = [(copy_eval_losses(p), p, model) for p in periods] + [(torch.rand(
        3 + s % 5, 11 + s % 9, generator=torch.Generator().manual_seed(s)) * 5, 2 + s % (8 + s % 9),
        "a random loss tensor") for s in seeds]
    for losses, p, kind in cases:
        what = label("copy_losses", f"{model}, {p}", shown=(kind, p) == (model, COPY_PERIOD), kinds=(kind,))
        result = as_tuple(call(fn, what, losses.clone(), p, shown=HIDDEN not in what), 2, what, "unpredictable, copied")
        right, early, late, row = ((float(x[..., :k].mean()), float(x[..., k:].mean())) for x, k in (
            (losses, p), (losses, p - 1), (losses, p + 1), (losses[0], p)))
        for i, name in enumerate(("[0], the unpredictable tokens", "[1], the copied tokens")):
            _count(result[i], right[i], f"{what}{name}", _words("copy_losses", early=early[i], late=late[i],
                   swapped=right[1 - i], everything=float(losses.mean()), one_row=row[i]), rel=1e-5)


FLASH_CASES = (FLASH_CASE, RANDOM_CASES["score_bytes"])
"""The visible test's inputs: the module text's score matrix and lesson 4's run-time one."""


def check_score_matrix(fn, cases: Sequence[Mapping] = FLASH_CASES, flash_tib=_UNSET) -> None:
    """``fn(n_tokens, n_heads, bytes_per_number)``: bytes of one layer's full score matrices, n_tokens² per
    head, exact: lesson 4's exercise, checked as there (:func:`~course_lib.checks.lesson4.check_score_bytes`);
    given ``flash_tib``, it is checked too (:data:`check_flash_tib`), a failure of both named in one message."""
    check_score_bytes(fn, cases, visible=FLASH_CASES,
                      then=None if flash_tib is _UNSET else lambda: check_flash_tib(flash_tib))


def check_recap(answer) -> None:
    """The recap table: ``{lesson 1 to 6: (idea letter, question letter)}``, from
    :data:`RECAP_IDEAS` and :data:`RECAP_QUESTIONS`; each letter sealed (:data:`RECAP_SEALS`)."""
    words = HINTS["recap"]
    if not isinstance(answer, Mapping) or sorted(answer, key=str) != list(range(1, 7)):
        got = f"keys {sorted(answer, key=str)!r:.50}" if isinstance(answer, Mapping) else type(answer).__name__
        raise CheckFailed(words["not_a_dict"].format(got=got))
    for lesson, pair in sorted(answer.items()):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise CheckFailed(words["not_a_pair"].format(lesson=lesson, pair=pair))
    pairs = {n: (as_option(answer[n][0], RECAP_IDEAS), as_option(answer[n][1], RECAP_QUESTIONS)) for n in range(1, 7)}
    for i, what, letters in ((0, "idea", RECAP_IDEAS), (1, "question", RECAP_QUESTIONS)):
        used = [p[i] for p in pairs.values()]
        for x in (x for x in used if x not in letters):
            raise CheckFailed(words["unknown_letter"].format(what=what, letters=", ".join(letters), x=x))
        for x in sorted({x for x in used if used.count(x) > 1})[:1]:
            raise CheckFailed(words["twice"].format(what=what, x=x, lessons=" and ".join(
                str(k) for k, p in pairs.items() if p[i] == x)))
    Question(sum(RECAP_SEALS.values(), ()))(*sum(pairs.values(), ()))  # each letter against its seal, in order


from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "capstone")  # one-line pass and fail messages in a notebook (course_lib.tutor)
