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
from .sealed import Sealed

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

TYS1_PARAMS = Sealed(
    what='tys1_params_millions', salt='lesson1/tys1_params_millions', kind='number', digits=4,
    right=('03064ed92168d851', '1f74c1e22a3c4bab', '2012ba20e1012aa1', '34b1c236c99679f2',
           '479c73fa3f129683', '4fbb2e14bc505ef0', '788a37391eb85625', '8330c048d517561c',
           '9ebfbc6dc2e8c8df', 'a3c240e687bc5a4b', 'a5c789476e30d3e9', 'b85c21330eeaa90b',
           'c727e18509331652', 'c7e0b6209eb0003b',),
    mistakes=(
        ('that counts the tied head a second time',
         ('1373dabe8ee3015b', '1db86413260f8972', '1e6a37c561d2a576', '2c189cadd9b4d51d',
          '4746316633269a5b', '477cece6171d8c97', '5c07f61c2200bdcb', '63e28ecd5fae38dd',
          '65cce2d42cfd5cad', '761bd78270ac3892', '7d55fd7307e37412', 'a1ec597a7e6cba2f',
          'ae97021e73a18aa9', 'b9a3f314a7bc3fd7', 'bec1945b9f0c096b', 'e334ca10c875f977',
          'f1cc9b5b2ad27c05', 'f6a60a13020127af',)),
        ('that is the blocks alone: add the embeddings',
         ('0348c8b003cccbcc', '05cf004b2011b582', '05f4654ffb7e9933', '0726b186e3b52d99',
          '0aca1615315b2ee9', '0fbba8fba6a048e8', '11411182e2912d57', '17383e52435604d2',
          '17927b9bc6552f3e', '1a70aa7def605de1', '1d2d17d6b3b6e5d2', '1ee35d62c8f92220',
          '249c9aa85d0dd1bd', '250a438f3974bb9a', '2594c248ddd4f33b', '28fc816caa4b37db',
          '2bdaff553d5c7f7a', '2d684dc5e911843f', '2d7cbb1df121c056', '30237b54336c25e0',
          '30a609395f9ad79d', '32ef8dde1ae19de9', '34ac4a35316b3c1e', '35623ff0cf839f49',
          '3816b9d131043ff2', '3935037ca57e46f0', '4bd61f0743cb98e6', '4c1d4359c72ae259',
          '538696f287f6c44a', '5954416d0c5137a4', '5a2faef83d87be4b', '5e69a0374b3bcab7',
          '614ed94f9143d9f2', '626605a404235a00', '6c213f1fa7b3ebac', '778e139ba9b2ec04',
          '79798a5b64b6d6f4', '79f3782000db1284', '7d8edb32a48fb2aa', '859f90c7009c2085',
          '860b8fc77fe98b03', '8680ea0d38864d1a', '86b89ae0af066fd6', '86f63ac9077fad16',
          '89f7ead0c156f32c', '8af8e542a3e99376', '8ed023160dbfda84', '8fbf0655977a86a5',
          '90195cfa5944dbd7', '9263b3bf986e1efe', '94d31edd2840ee2f', '95a0c3c51b3310db',
          '960c2adfd409fad3', '988abdc306ad7869', '99c8f5810b1b2195', '9fae791cf25d945e',
          'ab3b4f0f6d255235', 'b3667e56380506a4', 'b7f46e92d522d96b', 'b886db5e42741b2f',
          'b9ef7a50d9fa2251', 'bb689a35ce4bc971', 'bc4c1e910eeafc7b', 'bfbfc05f58f10c4c',
          'c41b633d679ba1dc', 'c53b890b1927ec61', 'c57a36317ab48a1d', 'c5cedbe5690d1dce',
          'c9ee6f9a8eb8bfaa', 'cd99f1b69ac79bb6', 'd1df4f4dcabc535d', 'd7caf1241fb03fa7',
          'd801f61751f4ec0b', 'd878d8a676c1c8f2', 'e1ac39b3ae11f9bc', 'e1e96ff0aba5cc77',
          'e4f2d15589482e7a', 'e58ca5b6ea45371b', 'eb3c4f4715b64465', 'eceba5220acd1b66',
          'efa80640aceaf6c0', 'f028c10fb4aaabad', 'f1a3ce45b867a660', 'f1bb926eb9fe3fdf',
          'f3ff0eb929952cc3', 'ffd21e0c343d833c',)),
        ('the answer is in millions: divide the count by 1,000,000',
         ('0624817f1e161967', '1bd99ea5cbf8ac75', '1e092618b0c47064', '3689d6875e2b3ae2',
          '4264b31804148ec6', '5e198b14a059f54d', '6f3c5717f571f237', '85b21a82a2d6bb02',
          '8ff1655a8b1dea7c', '9bdc81eea553b3a4', '9edb69ff82d6aabb', 'a832c4f6d2665113',
          'a866ec68f1e0165b', 'c96a462c267dcfe4',)),
        ('the answer is in millions, not billions',
         ('04a845ac1e2c63a7', '0c944f7efa112b5c', '15ef2bc74edcc0d8', '1db8c91f9b1f303f',
          '215649561b2cd580', '2da706584203a78a', '5e4f204a697a2984', '698149622d3ca7e6',
          '847f4da41424fab2', 'a3cb57ccb15023ec', 'acc8f43595e22b46', 'b89c5d8a8c26cc07',
          'c9d229797f59b784', 'f48821eb049f972b',)),
    ),
    hint='build it from your gpt2_params',
    decade=2, sign=1,
)

TYS1_EMBEDDING = Sealed(
    what='tys1_embedding_percent', salt='lesson1/tys1_embedding_percent', kind='number', digits=3,
    right=('3d2758ab131804e5', '3d3a2dddf7dee8ef', '3effb9fde6d922ce', '5c3661a28943e8d4',
           '702eb54411b1b3e7', '72e473627bb340f1', '7b9ecfbf5c4db81f', '7bc851851d32bdc9',
           '7fca275255c0aab0', '8895c895c89d92d2', 'e08ef14cd45a1a68', 'e70ea08852d54028',),
    mistakes=(
        ('give a percentage (0 to 100), not a fraction',
         ('0ee7824f4e856dda', '4b23c9a4f224c926', '687236bf4b1a6f75', '733e195ec9b44589',
          '8c82d9ed06983418', '9e78c45c716fd2f3', 'a34cc714f6bce3b3', 'af511eae851aea9d',
          'b12854bdcdfa07bd', 'b9b6981a4c242134', 'd7ce7b087e0de3d9', 'eba1373f1515efd4',)),
        ('the position embedding is part of the embeddings too (if you did count it, round to '
         'the nearest whole percent, not down)',
         ('2a22d3a7bd6b5627', '33205dd7f9cfe1ff', '449712acf063c6b2', '99d4d6d07fe2f9b0',
          'b4304b645d5077f8', 'c806d759ec8dc8d9',)),
        ('divide by all the parameters, not by the rest of the model',
         ('10bad55fe632aa05', '3af6fdb36c228e29', '4aa36d76553e2abe', '50c11db2f8b10adc',
          '5a4186854a323ed1', '5d11aeb53e11e7b9', '6b11df9147a2cc75', '710515461ccfdb5c',
          '7aacbe07c183115a', '9b6aa9d0a37e7240', 'c81e8d78dafb733f', 'cb6ec1fddb4afb8c',
          'cce23627a5c630ff', 'eda80646385cfc2a', 'fadad35ae6d60bc0',)),
        ('the total counts the tied head twice',
         ('14a3ed94c7af50ab', '2dc6529dfb7173f5', '74f17f986348d60b', 'ab68a5bce49f926f',
          'b0ae497095abe669', 'b576cdfe20a6a05b', 'c006e13da6e40c55', 'fa64ec74077c3b4a',)),
    ),
    hint='build it from your embedding_share',
    decade=1, sign=1,
)

TYS2_BIGGER = Sealed(
    what='tys2_bigger', salt='lesson1/tys2_bigger', kind='choice', digits=None,
    right=('2d41a612db348cff',),
    mistakes=(
        ("attention has four d_model × d_model matrices; count the feed-forward layer's two "
         "matrices and their shape",
         ('dac680fa06248c37',)),
        ('count the entries of each matrix: the feed-forward ones are 4·d_model wide on one side',
         ('a58181af945d1f9e',)),
    ),
    choices=('attention', 'feed-forward', 'equal'),
)

TYS2_FF_SHARE = Sealed(
    what='tys2_ff_share', salt='lesson1/tys2_ff_share', kind='number', digits=3,
    right=('24ab708cfd0ce531', '27d1166e8bfba6b3', '2d3d8d58bd26304d', '300b5228b9e526f6',
           '30b5b3f536c6e892', '3a5aa51da14ba29e', '3e137622155dd833', '523e7b16c1839651',
           '5677463fcf57509d', '63c68ef25568e0d9', '6b538041bf767553', '919cf625612bc9aa',
           '91b65d98610cb913', '94fbb4ad3529514e', '97f3508ff9aa7841', '9a581f65eed6defd',
           'c01bc0a973a14105', 'd2ca9432e7d8b32a', 'd3fa4a3e695ab949', 'd98769e7be20ceeb',
           'd9c0993c631638c2',),
    mistakes=(
        ('that is feed-forward ÷ attention, a ratio; the share is feed-forward ÷ the block',
         ('1b6c6c2df71726e4', '9bccdf0244675ad7', 'a8dca1cfcfe92431', 'b63d9cafcc66898b',
          'dceb986c769a0b39', 'de34d3df833da6ea', 'fdf897fe24d0af51',)),
        ("that is attention's share",
         ('114fb3f141b48646', '21fa639088eb75e8', '28b9e443bd69569a', '30c8283084bc119a',
          '3b5f1bc1c7bb9c82', '48e0400bff0512cc', '53b3b5d5feba69b2', '74cedc10504f1c36',
          '7b124c622bf4bf00', '865a0e300ef07596', 'd32d7db82548b4e1',)),
        ('the two parts are not equal in size',
         ('0b90633196fbf266', '1ca11563bea73cdc', '206ffec0e9c90cae', '47ca905e6efa4eb4',
          '6ba8b6e8267dc9b4', '75b8b64eff367b4d', '86dc5ea569ea9963', '9184c6eaad632f04',
          'ae231ee7103168a0', 'ba035d72a59ec80b', 'c88243edbc21690b', 'ca6182330f6ec4d8',
          'd188f38186b2dc93', 'dcfd1ce5b9040966', 'e58b4f4692686e09', 'f245fd5cfa25f864',)),
        ('give a fraction between 0 and 1, not a percentage',
         ('02f170fbe6059be4', '0ebd89dc87d84f91', '1235d15c2dbb3fd8', '1670ac04f8038f82',
          '1ac764fc8fd992a3', '3062d4bfa550b3e1', '3e6090d538cf0452', '430b0d1db27aa242',
          '4617b3734f7324f5', '48b67198b5e439e7', '4b3de99adcdfc325', '51e03c7b8d29471e',
          '74d9835e56e6584b', 'a1c56d0b120b398e', 'a2e138024aeb8a56', 'c45e42922cc68346',
          'e0af03df30390954', 'e964b505fa59bf6b', 'e9bb787a1773811c', 'f5a7448dc960e57b',
          'fba59398a8eed4bc',)),
    ),
    hint='count the weight matrices of each part (section 4)',
    decade=-1, sign=1,
)

TYS3_WIDTH = Sealed(
    what='tys3_width_factor', salt='lesson1/tys3_width_factor', kind='number', digits=3,
    right=('4228f1e1dea1bdbf', '6eb0ae4070c5dd3c', '848ada4096a7c050', '89088ee9e591d317',
           'b9093ffc387f7674', 'd6e6b4e6b2eb91c7', 'dca293c6535f2ed2', 'f3cb36d280ac5f24',
           'f82cb95b2c2f216b',),
    mistakes=(
        ('a d_model × d_model matrix doubles along both sides',
         ('109f019471fd9d77', '305872ca6eedda20', '3886f6888fcc4219', '8e01e15430e692d0',
          'c10da113e3f9685a',)),
        ('block parameters grow with d_model², not d_model³',
         ('185be4c810d942ae', '21287d373bb6f208', '2304d3edea58998c', '46911fdeb9321438',
          '4953398973bab01b', '585351a16065c277', '7175b43c158864e5', '75e913f81b894880',
          'b7f4f4617e2c06a5', 'c0ae78fa77c7c035', 'c15406a18c062b67', 'c9440f143741e892',
          'ca753ef4f35de78d', 'e2ef0b12fc7381cc', 'ed4147cb74dd89b6', 'f2e114bf00c70fca',
          'f5c1a5ddc3704672',)),
        ('doubling d_model grows every matrix in the block',
         ('0a146a6f032b049f', '15e1d1ecd5a2182e', '25f18d444ec478d3', '4b9d2e265eb7be9b',
          '6744bc81162aa129', '72083cef8ff060d2', '728c79c6595abcc6', '8f303c2f372b3c09',
          'a5a4a3f8e4b9f8be', 'c0e0be4b098e49d5', 'ed383c5f6303cee5', 'f968b9bc7c186c9d',)),
    ),
    hint='how does a d_model × d_model matrix grow when d_model doubles?',
    decade=0, sign=1,
)

TYS3_LAYERS = Sealed(
    what='tys3_layers_factor', salt='lesson1/tys3_layers_factor', kind='number', digits=3,
    right=('28b18add89a0ff87', '3b6c4b96c5b86dea', '7649fd6af35352c8', 'a8cac5309202c268',
           'fd1c4fa2c2edb01b',),
    mistakes=(
        ('each block keeps its size, but there are twice as many blocks',
         ('010fa026ad9986a1', '02e334661ea4fe0d', '130dc32d751f6353', '169b988b2cca20dd',
          '207b3b19cdd53c97', '21d1e2c0f09ffaab', '37298980346b0d1d', '419ef42f0adf1f42',
          '569c133d05b50686', '56fd91c02115bb64', 'a2fe121d8c47c1e6', 'acd050326943d9c9',)),
        ('doubling the layers adds blocks; it does not widen them',
         ('293bd1a15cb9c572', '30a7b9f345090a20', '326422808acfa41d', '5b3113bed6f7a236',
          '76199d1626d99a07', 'a7ae8ab54e1dad7b', 'ae0ca153eb452ca9', 'd3f4cf1c3a5c2c5b',
          'dc41e7f12e47e85f',)),
    ),
    hint='each block keeps its size',
    decade=0, sign=1,
)


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
