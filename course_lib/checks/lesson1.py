"""Checks for lesson 1, "The shape of a transformer".

Every check of a function compares the learner's function with course_lib's own counters
(``params``, ``memory``, ``flops``) on GPT-2-style shapes, and on failure raises
:class:`~course_lib.checks.CheckFailed` naming the likely mistake (tied head counted twice,
positions forgotten, biases or norms forgotten, ...) without showing the expected value.
Functions the learner writes are called through :func:`~course_lib.checks.own_work`, so an
answer that calls course_lib's counters fails.  The test-yourself answers are sealed
(:mod:`course_lib.checks.sealed`): this module holds hashes of them, not the values.

A shape is given as a dict of the spec-sheet numbers, e.g. :data:`GPT2_SMALL`; the checks of
functions take several (the notebook's hidden tests pass shapes the learner has not seen).
"""
from __future__ import annotations

import random
from typing import Mapping, Sequence

from ..flops import forward_flops_per_token
from ..memory import kv_cache_bytes_per_sequence, weight_bytes
from ..params import block_params, count_params
from ..shapes import gpt2_shape
from ..units import GB, GiB
from . import (CheckFailed, as_keyed, as_tuple, builds_on, check_sealed, check_value,
               on_hidden, own_work)
from .sealed import load as _load_sealed

SEALED = _load_sealed("lesson1")
"""This assignment's sealed answers by salt (sealed_answers/lesson1.json)."""

GPT2_SMALL = dict(d_model=768, n_layers=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's four counting numbers (its card also says n_heads = 12)."""

GPT2_SMALL_CARD = dict(n_layers=12, d_model=768, n_heads=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's five spec-sheet numbers, in the order of :func:`check_spec_sheet_costs`."""



def random_shapes(seed: str, n: int = 2, heads: bool = False) -> tuple[dict, ...]:
    """``n`` GPT-2-style shapes drawn at run time from ``random.Random(seed)`` (the same on
    every run, so the grader's run of the model answer tries the same ones): d_model a multiple
    of 32 from 96 to 1,504, 2 to 30 layers, 500 to 60,000 tokens, a context of 128 to 2,560;
    with ``heads``, a card (n_heads 2, 4 or 8) in :data:`GPT2_SMALL_CARD`'s order.  The visible
    tests try them besides GPT-2 small, so that an answer which ignores its arguments fails in
    the learner's own notebook."""
    rng = random.Random(f"lesson1/{seed}")
    out = []
    for _ in range(n):
        shape = dict(d_model=32 * rng.randint(3, 47), n_layers=rng.randint(2, 30),
                     d_vocab=rng.randint(500, 60_000), n_ctx=64 * rng.randint(2, 40))
        if heads:
            shape = dict(n_layers=shape["n_layers"], d_model=shape["d_model"],
                         n_heads=rng.choice((2, 4, 8)), d_vocab=shape["d_vocab"],
                         n_ctx=shape["n_ctx"])
        out.append(shape)
    return tuple(out)


RANDOM_SHAPES = random_shapes("shapes")
"""Two GPT-2-style shapes made at run time (seeded): every visible test of a function tries them."""
RANDOM_CARDS = random_shapes("cards", heads=True)
"""Two GPT-2-style cards made at run time (seeded), for :func:`check_spec_sheet_costs`."""
RANDOM_D_MODELS = tuple(s["d_model"] for s in random_shapes("d_models"))
"""Two widths made at run time (seeded), for :func:`check_block_parts`."""

_RANDOM_INPUTS = (*RANDOM_SHAPES, *RANDOM_CARDS, *({"d_model": d} for d in RANDOM_D_MODELS))
_PUBLIC_INPUTS = (GPT2_SMALL, GPT2_SMALL_CARD, {"d_model": 768}, *_RANDOM_INPUTS)
"""Inputs the notebook shows (its visible tests' defaults); a failure on any other input does
not name it (hidden tests)."""
RANDOM_TAG = "[random shape] "
"""How a label marks an input made at run time."""
_HIDDEN = on_hidden("")
"""The words that mark a hidden test's label (" on a hidden test's input")."""

COST_KEYS = ("params", "weight_bytes", "kv_cache_bytes", "flops_per_token")
BLOCK_KEYS = ("attention", "feed_forward", "norms")


# --- helpers -------------------------------------------------------------------------------

def _shape(d_model, n_layers=1, d_vocab=1, n_ctx=1, n_heads=1):
    """A GPT-2-style shape.  No parameter count depends on n_heads (n_heads · d_head =
    d_model), so 1 head is used when the question does not give one."""
    return gpt2_shape(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_vocab=d_vocab,
                      n_ctx=n_ctx)


_HIDDEN_KINDS = {"block_parts": "another d_model", "spec_sheet_costs": "another GPT-2-style card"}
"""How a hidden test's input is described, by function (default: another GPT-2-style shape)."""


def _call(fn, name: str, shape: Mapping):
    """``fn(**shape)`` through own_work, and a label: ``gpt2_params(d_model=768, ...)`` for an
    input the notebook shows; for a hidden test's input only the function and the kind of input
    (:func:`~course_lib.checks.on_hidden`), e.g. ``gpt2_params on a hidden test's input
    (another GPT-2-style shape)``.  The label depends on the input alone (records use it)."""
    if dict(shape) in _PUBLIC_INPUTS:
        label = f"{name}({', '.join(f'{k}={v}' for k, v in shape.items())})"
        if dict(shape) in _RANDOM_INPUTS:
            label = RANDOM_TAG + label
    else:  # a hidden test's shape: say which check failed, not what it tried
        label = on_hidden(name, _HIDDEN_KINDS.get(name, "another GPT-2-style shape"))
    return own_work(fn, **shape), label


def _part(label: str, index: str, name: str = "") -> str:
    """How a message names one part of a result: ``embedding_share(d_model=768, ...)[1], the
    embedding share`` or ``block_parts(d_model=768)['norms']`` for a visible input; after a
    hidden input's label, which ends in words, an index would read as part of them, so there it
    is ``... (another GPT-2-style shape): the embedding share`` or ``...: its 'norms'``."""
    if _HIDDEN in label:
        return f"{label}: {name or 'its ' + index.strip('[]')}"
    return f"{label}{index}" + (f", {name}" if name else "")


def _not_rounded(expected: float) -> dict:
    """Mistakes a rounded share would match: 2 to 4 decimals (of the fraction and of %)."""
    m = {}
    for k in (2, 3, 4):
        m[f"it looks rounded to {k} decimals: return the unrounded value"] = round(expected, k)
        m[f"it looks like a percentage rounded to {k - 1} decimals: return a fraction "
          f"between 0 and 1"] = round(100 * expected, k - 1)
    m["it looks like a percentage: return a fraction between 0 and 1"] = 100 * expected
    return m


# --- the GPT-2 parameter count ---------------------------------------------------------------

def gpt2_param_mistakes(d_model: int, n_layers: int, d_vocab: int, n_ctx: int) -> dict:
    """``{diagnosis: wrong total}`` for the usual slips in a GPT-2 parameter count."""
    d, L = d_model, n_layers
    total = count_params(_shape(d, L, d_vocab, n_ctx)).total
    tok, pos = d_vocab * d, n_ctx * d
    return {
        "the output head is tied to the token embedding (the same matrix): count it once, "
        "not twice": total + tok,
        "the position embedding (n_ctx × d_model, learned in GPT-2) is missing": total - pos,
        "the head is counted twice and the position embedding is missing": total + tok - pos,
        "the embeddings (token table and position table) are missing": total - tok - pos,
        "the biases are missing: every linear layer in GPT-2 has one (3·d_model for Q, K, V, "
        "d_model for the attention output, 4·d_model and d_model in the feed-forward layer)":
            total - 9 * L * d,
        "the LayerNorms are missing: two per block and one after the last block, each with "
        "a weight and a bias of d_model": total - 4 * L * d - 2 * d,
        "the final LayerNorm (after the last block) is missing": total - 2 * d,
        "each LayerNorm has a bias as well as a weight (2·d_model, not d_model)":
            total - (2 * L + 1) * d,
        "biases and LayerNorms are missing: 12·d_model² per block counts only the weight "
        "matrices": total - 13 * L * d - 2 * d,
        "the feed-forward layer is 4·d_model wide in GPT-2, not d_model":
            total - L * (6 * d * d + 3 * d),
        "the attention output projection is missing: attention has four d_model × d_model "
        "matrices (query, key, value and output)": total - L * (d * d + d),
        "the blocks are missing: there are n_layers of them": total - L * (12 * d * d + 13 * d),
        "only one block is counted: multiply by n_layers": total - (L - 1) * (12 * d * d + 13 * d),
    }


def check_gpt2_params(fn, shapes: Sequence[Mapping] = (GPT2_SMALL, *RANDOM_SHAPES)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx)``, a GPT-2 parameter count, on each shape
    against ``count_params(gpt2_shape(...)).total`` (parameters, exact)."""
    for shape in shapes:
        got, label = _call(fn, "gpt2_params", shape)
        expected = count_params(_shape(**shape)).total
        check_value(got, expected, what=label, integer=True,
                    mistakes=gpt2_param_mistakes(**shape))


# --- the embedding share ---------------------------------------------------------------------

def check_embedding_share(fn, shapes: Sequence[Mapping] = (GPT2_SMALL, *RANDOM_SHAPES)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx) -> (embedding parameters, share)``: the
    token and position tables of a GPT-2 shape, and their fraction of all parameters."""
    for shape in shapes:
        result, label = _call(fn, "embedding_share", shape)
        params, share = as_tuple(result, 2, label, "embedding parameters, share of the model")
        d, V, n = shape["d_model"], shape["d_vocab"], shape["n_ctx"]
        c = count_params(_shape(**shape))
        tok, pos, total = V * d, n * d, c.total
        check_value(params, c.embedding, what=_part(label, "[0]", "the embedding parameters"),
                    integer=True, mistakes={
                        "the position embedding (n_ctx × d_model) is missing": tok,
                        "the token embedding (d_vocab × d_model) is missing": pos,
                        "the tied output head is the token embedding itself: it is not a "
                        "second table": 2 * tok + pos,
                    })
        E = c.embedding
        with builds_on("gpt2_params"):
            check_value(share, E / total, what=_part(label, "[1]", "the embedding share"), rel=1e-9,
                        mistakes={
                            "the position embedding is missing from the share": tok / total,
                            "that is embeddings ÷ the rest of the model: divide by all the "
                            "parameters": E / (total - E),
                            "the total counts the tied head twice": E / (total + tok),
                            **_not_rounded(E / total),
                        })


# --- inside a block --------------------------------------------------------------------------

def check_block_parts(fn, d_models: Sequence[int] = (768, *RANDOM_D_MODELS)) -> None:
    """Check ``fn(d_model) -> {"attention": ..., "feed_forward": ..., "norms": ...}``: one
    GPT-2 block's parameters by part (d_ff = 4·d_model, biases and two LayerNorms)."""
    for d in d_models:
        result, label = _call(fn, "block_parts", {"d_model": d})
        got = as_keyed(result, BLOCK_KEYS, label)
        expected = block_params(_shape(d))
        check_value(got["attention"], expected["attention"], what=_part(label, "['attention']"),
                    integer=True, mistakes={
                        "the biases are missing (Q, K, V and the output projection each have "
                        "one of d_model)": 4 * d * d,
                        "the output projection is missing: attention has four d_model × "
                        "d_model matrices": 3 * d * d + 3 * d,
                        "the output projection's bias (d_model) is missing": 4 * d * d + 3 * d,
                        "the K and V projections are missing": 2 * d * d + 2 * d,
                    })
        check_value(got["feed_forward"], expected["feed_forward"],
                    what=_part(label, "['feed_forward']"), integer=True, mistakes={
                        "the biases are missing (4·d_model after the first matrix, d_model "
                        "after the second)": 8 * d * d,
                        "the feed-forward layer is 4·d_model wide in GPT-2, not d_model":
                            2 * d * d + 2 * d,
                        "the second bias has d_model entries (the output width), not 4·d_model":
                            8 * d * d + 8 * d,
                        "the second bias (d_model) is missing": 8 * d * d + 4 * d,
                        "the first bias has 4·d_model entries (the hidden width), not d_model":
                            8 * d * d + 2 * d,
                        "only one of the two matrices is counted": 4 * d * d + 4 * d,
                    })
        check_value(got["norms"], expected["norms"], what=_part(label, "['norms']"), integer=True,
                    mistakes={
                        "a GPT-2 block has two LayerNorms (before attention and before the "
                        "feed-forward layer), each with a weight and a bias of d_model": 2 * d,
                        "the LayerNorms are missing": 0,
                        "the final LayerNorm comes once, after the last block: it is not "
                        "part of every block": 6 * d,
                    })


@builds_on("block_parts", "gpt2_params")
def check_ff_shares(fn, shapes: Sequence[Mapping] = (GPT2_SMALL, *RANDOM_SHAPES)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx) -> (share of a block, share of the model)``:
    the feed-forward layers' fraction of one block and of all parameters (exact, with biases
    and norms)."""
    for shape in shapes:
        result, label = _call(fn, "ff_shares", shape)
        block_share, model_share = as_tuple(result, 2, label,
                                            "share of a block, share of the model")
        d, L = shape["d_model"], shape["n_layers"]
        b = block_params(_shape(d))
        ff, attn, block = b["feed_forward"], b["attention"], b["total"]
        total = count_params(_shape(**shape)).total
        tok = shape["d_vocab"] * d
        check_value(block_share, ff / block, what=_part(label, "[0]", "the share of a block"), rel=1e-9,
                    mistakes={
                        "2/3 is the share of the weight matrices alone (8·d² of 12·d²); with "
                        "biases and LayerNorms it is a little different: use your counts":
                            2 / 3,
                        "the block's two LayerNorms belong to the block too": ff / (attn + ff),
                        "that is feed-forward ÷ attention, a ratio: the share is feed-forward "
                        "÷ the whole block": ff / attn,
                        "that is the share of the whole model; the first number is the share "
                        "of one block": L * ff / total,
                        **_not_rounded(ff / block),
                    })
        check_value(model_share, L * ff / total, what=_part(label, "[1]", "the share of the model"),
                    rel=1e-9, mistakes={
                        "that is the share of one block: the model also holds the "
                        "embeddings, so the feed-forward share of the model is smaller": ff / block,
                        "that is one layer's feed-forward layer: there are n_layers of them":
                            ff / total,
                        "that divides by the blocks only: divide by all the parameters":
                            L * ff / (total - shape["n_ctx"] * d - tok),
                        "the total counts the tied head twice": L * ff / (total + tok),
                        **_not_rounded(L * ff / total),
                    })


@builds_on("block_parts", "gpt2_params")
def check_doubling(fn, shapes: Sequence[Mapping] = (GPT2_SMALL, *RANDOM_SHAPES)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx) -> (blocks_wide, blocks_deep, model_wide,
    model_deep)``: how many times the parameters of all blocks, and of the whole model, grow
    when d_model doubles (d_ff = 4·d_model follows) or when n_layers doubles."""
    names = "blocks_wide, blocks_deep, model_wide, model_deep"
    for shape in shapes:
        result, label = _call(fn, "doubling", shape)
        got = as_tuple(result, 4, label, names)
        d, L = shape["d_model"], shape["n_layers"]

        def blocks(d_, L_):
            return L_ * block_params(_shape(d_))["total"]

        def model(d_, L_):
            return count_params(_shape(**{**shape, "d_model": d_, "n_layers": L_})).total

        bw, bd = blocks(2 * d, L) / blocks(d, L), blocks(d, 2 * L) / blocks(d, L)
        mw, md = model(2 * d, L) / model(d, L), model(d, 2 * L) / model(d, L)
        check_value(got[0], bw, what=_part(label, "[0]", "blocks_wide"), rel=1e-9, mistakes={
            "4 is the ratio of the d_model² terms alone; biases and LayerNorms grow only with "
            "d_model, so compute the ratio from your exact counts": 4,
            "doubling d_model doubles both sides of each d_model × d_model matrix": 2,
            "block parameters grow with d_model², not d_model³": 8,
            "that is the whole model's growth; the first number is the blocks'": mw,
        })
        check_value(got[1], bd, what=_part(label, "[1]", "blocks_deep"), rel=1e-9, mistakes={
            "one block keeps its size, but there are twice as many blocks": 1,
            "doubling the layers adds blocks; it does not widen them": 4,
            "that is the whole model's growth; the second number is the blocks'": md,
        })
        check_value(got[2], mw, what=_part(label, "[2]", "model_wide"), rel=1e-9, mistakes={
            "that is the blocks' growth: the embeddings grow only with d_model, so the "
            "whole model grows less": bw,
            "4 is the growth of the d_model² terms; the embeddings only double": 4,
            "the blocks grow by about 4, not 2; only the embeddings double": 2,
        })
        check_value(got[3], md, what=_part(label, "[3]", "model_deep"), rel=1e-9, mistakes={
            "the embeddings and the final LayerNorm do not grow with the layers, so the whole "
            "model grows by less than 2": 2,
            "one block keeps its size, but there are twice as many blocks": 1,
        })


# --- test yourself ---------------------------------------------------------------------------
# The answers are sealed (course_lib.checks.sealed): salted hashes of the forms that count as
# right and of those the usual mistakes give, so neither this file nor a message shows them.
# The questions ask "about how many" and say that whole numbers (tys1, tys3) or two decimals
# (tys2) will do, so each tolerance lets such a rounded answer pass: tys1 0.5 % (params,
# millions) and 1.6 % (percent), tys2 1.5 %, tys3 1 %; an answer up to half as much again
# further out may also pass (see sealed.py).  Every named mistake lies outside its answer's
# tolerance, and sealing drops any form that a right answer rounds to, so a right answer is
# never diagnosed as a mistake.  The share without the position table is 2 % below the
# answer: its whole number is not the answer's, so that whole number gets the position hint,
# which also says to round to nearest (tests/test_checks_lesson1.py).  Regenerate with
# ``python -m course_lib.checks.seal`` from values computed in a scratch session.

TYS1_PARAMS = SEALED['lesson1/tys1_params_millions']

TYS1_EMBEDDING = SEALED['lesson1/tys1_embedding_percent']

TYS2_BIGGER = SEALED['lesson1/tys2_bigger']

TYS2_FF_SHARE = SEALED['lesson1/tys2_ff_share']

TYS3_WIDTH = SEALED['lesson1/tys3_width_factor']

TYS3_LAYERS = SEALED['lesson1/tys3_layers_factor']


@builds_on("gpt2_params", "embedding_share")
def check_tys1(params_millions, embedding_percent) -> None:
    """Test-yourself 1: GPT-2 small's parameters (millions, about) and embedding share (%)."""
    check_sealed(params_millions, TYS1_PARAMS)
    check_sealed(embedding_percent, TYS1_EMBEDDING)


def check_tys2(bigger, ff_share) -> None:
    """Test-yourself 2: which part of a block is bigger, and the feed-forward share of a
    block's weight matrices (biases and norms ignored)."""
    check_sealed(bigger, TYS2_BIGGER)
    check_sealed(ff_share, TYS2_FF_SHARE)


def check_tys3(width_factor, layers_factor) -> None:
    """Test-yourself 3: how a block grows when d_model doubles, and all blocks together when
    n_layers doubles (to the nearest whole factor)."""
    check_sealed(width_factor, TYS3_WIDTH)
    check_sealed(layers_factor, TYS3_LAYERS)


# --- recap: the three costs of a spec sheet --------------------------------------------------

@builds_on("gpt2_params")
def check_spec_sheet_costs(fn, cards: Sequence[Mapping] = (GPT2_SMALL_CARD, *RANDOM_CARDS)) -> None:
    """Check ``fn(n_layers, d_model, n_heads, d_vocab, n_ctx) -> {"params", "weight_bytes",
    "kv_cache_bytes", "flops_per_token"}`` for GPT-2-style cards: parameters, bytes of 16-bit
    weights, bytes of 16-bit KV cache for one sequence of n_ctx tokens, and forward FLOPs
    (= 2 × multiply-adds) for one token attending to n_ctx positions."""
    for card in cards:
        result, label = _call(fn, "spec_sheet_costs", card)
        got = as_keyed(result, COST_KEYS, label)
        L, d, h, V, n = (card[k] for k in ("n_layers", "d_model", "n_heads", "d_vocab", "n_ctx"))
        s = _shape(d, L, V, n, n_heads=h)
        params = count_params(s).total
        check_value(got["params"], params, what=_part(label, "['params']"), integer=True,
                    mistakes=gpt2_param_mistakes(d, L, V, n))
        wb = weight_bytes(s, "fp16")
        check_value(got["weight_bytes"], wb, what=_part(label, "['weight_bytes']"), rel=1e-9,
                    mistakes={
                        "that is the number of parameters: each takes 2 bytes in 16-bit": params,
                        "that is 32-bit (4 bytes a parameter); the question asks for 16-bit":
                            4 * params,
                        "that is in GiB; the question asks for bytes": wb / GiB,
                        "that is in GB; the question asks for bytes": wb / GB,
                        "the parameter count inside it is off: the tied head is counted twice":
                            2 * (params + V * d),
                        "the parameter count inside it is off: the positions are missing":
                            2 * (params - n * d),
                    })
        kv = kv_cache_bytes_per_sequence(s, n, "fp16")
        check_value(got["kv_cache_bytes"], kv, what=_part(label, "['kv_cache_bytes']"), rel=1e-9,
                    mistakes={
                        "a factor 2 is missing: the cache holds a key and a value per token "
                        "per layer, and each number takes 2 bytes in 16-bit": kv / 2,
                        "both factors of 2 are missing (keys and values; 2 bytes a number)":
                            kv / 4,
                        "n_heads · d_head is d_model already: do not multiply by n_heads again":
                            kv * h,
                        "that is one token's cache; the question asks for n_ctx tokens": kv / n,
                        "every layer keeps its own keys and values: multiply by n_layers":
                            kv / L,
                        "that is in GiB; the question asks for bytes": kv / GiB,
                    })
        flops = forward_flops_per_token(s, n)
        macs_head, macs_attn = d * V, 2 * L * n * d
        check_value(got["flops_per_token"], flops, what=_part(label, "['flops_per_token']"), rel=1e-9,
                    mistakes={
                        "that is multiply-adds; FLOPs = 2 × multiply-adds": flops / 2,
                        "the output head (d_model × d_vocab multiply-adds) is missing":
                            flops - 2 * macs_head,
                        "the attention over n_ctx positions (2·n_layers·n_ctx·d_model "
                        "multiply-adds) is missing": flops - 2 * macs_attn,
                        "2 × parameters is a rule of thumb; the question asks for the formula's "
                        "count": 2 * params,
                        "n_heads · d_head is d_model already: the attention term has no extra "
                        "n_heads": flops + 2 * (h - 1) * macs_attn,
                    })


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson1")  # one-line pass and fail messages in a notebook (checks.tutor)
