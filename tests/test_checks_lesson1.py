"""Unit tests of course_lib.checks.lesson1: a right answer passes, each named mistake gets its
message, a hard-coded or counter-calling answer fails, and no message shows the hidden value.

The right answers here are written from the GPT-2 architecture (not from course_lib), so they
also cross-check the counters the checks compare against."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import lesson1 as L1
from notebook_cells import fails, graded_cells
from scans import shows_none_of

SMALL = L1.GPT2_SMALL
HIDDEN_LIKE = [dict(d_model=1024, n_layers=24, d_vocab=50257, n_ctx=1024),
               dict(d_model=64, n_layers=3, d_vocab=1000, n_ctx=128),
               dict(d_model=96, n_layers=1, d_vocab=7, n_ctx=4096)]
NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "lesson1" / "lesson1.ipynb"


# --- right answers, from the architecture ----------------------------------------------------

def blocks_right(d_model):
    d = d_model
    return {"attention": 4 * d * d + 4 * d, "feed_forward": 8 * d * d + 5 * d, "norms": 4 * d}


def gpt2_right(d_model, n_layers, d_vocab, n_ctx):
    return ((d_vocab + n_ctx) * d_model + n_layers * sum(blocks_right(d_model).values())
            + 2 * d_model)


def embedding_right(d_model, n_layers, d_vocab, n_ctx):
    e = (d_vocab + n_ctx) * d_model
    return e, e / gpt2_right(d_model, n_layers, d_vocab, n_ctx)


def ff_right(d_model, n_layers, d_vocab, n_ctx):
    b = blocks_right(d_model)
    return (b["feed_forward"] / sum(b.values()),
            n_layers * b["feed_forward"] / gpt2_right(d_model, n_layers, d_vocab, n_ctx))


def doubling_right(d_model, n_layers, d_vocab, n_ctx):
    def blocks(d, n):
        return n * sum(blocks_right(d).values())

    def model(d, n):
        return gpt2_right(d, n, d_vocab, n_ctx)

    d, n = d_model, n_layers
    return (blocks(2 * d, n) / blocks(d, n), blocks(d, 2 * n) / blocks(d, n),
            model(2 * d, n) / model(d, n), model(d, 2 * n) / model(d, n))


def costs_right(n_layers, d_model, n_heads, d_vocab, n_ctx):
    p = gpt2_right(d_model, n_layers, d_vocab, n_ctx)
    macs = n_layers * (12 * d_model**2 + 2 * n_ctx * d_model) + d_model * d_vocab
    return {"params": p, "weight_bytes": 2 * p, "kv_cache_bytes": 2 * 2 * n_layers * n_ctx * d_model,
            "flops_per_token": 2 * macs}


# --- right answers pass ------------------------------------------------------------------------

def test_right_answers_pass_on_gpt2_small_and_hidden_like_shapes(capsys):
    L1.check_gpt2_params(gpt2_right, shapes=[SMALL, *HIDDEN_LIKE])
    L1.check_embedding_share(embedding_right, shapes=[SMALL, *HIDDEN_LIKE])
    L1.check_block_parts(blocks_right, d_models=[768, 64, 1024, 4096, 100])
    L1.check_ff_shares(ff_right, shapes=[SMALL, *HIDDEN_LIKE])
    L1.check_doubling(doubling_right, shapes=[SMALL, *HIDDEN_LIKE])
    L1.check_spec_sheet_costs(costs_right, cards=[
        L1.GPT2_SMALL_CARD, dict(n_layers=24, d_model=1024, n_heads=16, d_vocab=50257, n_ctx=1024),
        dict(n_layers=4, d_model=256, n_heads=4, d_vocab=5000, n_ctx=2048)])
    L1.check_tys1(124, 31.6)
    L1.check_tys1(124, 32)
    L1.check_tys1(124.44, 31.65)
    L1.check_tys2("feed-forward", 2 / 3)
    L1.check_tys2(" Feed_Forward ", 0.667)
    L1.check_tys2("feed-forward", 0.66)
    L1.check_tys3(4, 2)
    L1.check_tys3(3.997, 2.0)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # a check writes nothing (stderr costs the cell)


def test_the_module_figures():
    assert gpt2_right(**SMALL) == 124_439_808
    e, share = embedding_right(**SMALL)
    assert e == 39_383_808 and round(100 * share, 1) == 31.6
    b = blocks_right(768)
    assert b["attention"] - 4 * 768 == 4 * 768**2 and b["feed_forward"] - 5 * 768 == 8 * 768**2


def test_numpy_and_torch_scalars_are_accepted():
    np = pytest.importorskip("numpy")
    L1.check_gpt2_params(lambda **s: np.int64(gpt2_right(**s)))
    L1.check_embedding_share(lambda **s: tuple(np.float64(x) for x in embedding_right(**s)))


# --- the GPT-2 count: each mistake is named ---------------------------------------------------

def _off(delta):
    return lambda d_model, n_layers, d_vocab, n_ctx: (
        gpt2_right(d_model, n_layers, d_vocab, n_ctx) + delta(d_model, n_layers, d_vocab, n_ctx))


GPT2_MISTAKES = [
    (_off(lambda d, L, V, n: V * d), "tied to the token embedding"),
    (_off(lambda d, L, V, n: -n * d), "position embedding"),
    (_off(lambda d, L, V, n: -9 * L * d), "biases are missing"),
    (_off(lambda d, L, V, n: -4 * L * d - 2 * d), "LayerNorms are missing"),
    (_off(lambda d, L, V, n: -2 * d), "final LayerNorm"),
    (_off(lambda d, L, V, n: -(2 * L + 1) * d), "bias as well as a weight"),
    (_off(lambda d, L, V, n: -13 * L * d - 2 * d), "12·d_model² per block"),
    (_off(lambda d, L, V, n: -L * (6 * d * d + 3 * d)), "4·d_model wide"),
    (_off(lambda d, L, V, n: -L * (d * d + d)), "output projection is missing"),
    (_off(lambda d, L, V, n: V * d - n * d), "counted twice and the position"),
    (_off(lambda d, L, V, n: -(V + n) * d), "embeddings (token table and position table) are missing"),
    (_off(lambda d, L, V, n: -(L - 1) * (12 * d * d + 13 * d)), "only one block"),
]


@pytest.mark.parametrize("fn, phrase", GPT2_MISTAKES, ids=[p for _, p in GPT2_MISTAKES])
def test_gpt2_mistake_is_named(fn, phrase):
    msg = fails(L1.check_gpt2_params, fn)
    assert phrase in msg
    assert "d_model=768, n_layers=12" in msg  # says which shape it tried
    shows_none_of(msg, 124_439_808)


@pytest.mark.parametrize("shape", [SMALL, *HIDDEN_LIKE])
def test_gpt2_mistakes_are_distinct_on_the_graded_shapes(shape):
    """On every shape the notebook grades, the named mistakes give distinct wrong totals (a
    mistake that changes nothing on a shape, such as "only one block" at n_layers=1, is
    skipped by check_value there)."""
    values = [v for v in L1.gpt2_param_mistakes(**shape).values() if v != gpt2_right(**shape)]
    assert len(set(values)) == len(values)
    assert len(values) >= len(L1.gpt2_param_mistakes(**shape)) - 1


def test_unknown_gpt2_mistake_gets_a_size_hint_not_the_value():
    msg = fails(L1.check_gpt2_params, lambda **s: 10**9)
    assert "too large" in msg
    shows_none_of(msg, 124_439_808)
    msg = fails(L1.check_gpt2_params, lambda **s: gpt2_right(**s) + 1)
    assert msg.endswith("is not right: it is too large by less than 1%."), msg


def test_hard_coded_gpt2_small_fails_the_visible_test_on_a_random_shape():
    """The visible test also tries shapes made at run time: an answer that ignores its
    arguments fails in the learner's own notebook, on an input the message names and labels."""
    L1.check_gpt2_params(lambda **s: 124_439_808, shapes=[SMALL])  # GPT-2 small alone cannot tell
    msg = fails(L1.check_gpt2_params, lambda **s: 124_439_808)
    shape = L1.RANDOM_SHAPES[0]
    assert msg.startswith(L1.RANDOM_TAG + "gpt2_params(" + ", ".join(f"{k}={v}" for k, v in shape.items())), msg
    assert "is not right" in msg


@pytest.mark.parametrize("check, fn", [
    (L1.check_embedding_share, lambda **s: embedding_right(**SMALL)),
    (L1.check_block_parts, lambda d_model: blocks_right(768)),
    (L1.check_ff_shares, lambda **s: ff_right(**SMALL)),
    (L1.check_doubling, lambda **s: doubling_right(**SMALL)),
    (L1.check_spec_sheet_costs, lambda **c: costs_right(**L1.GPT2_SMALL_CARD)),
])
def test_every_visible_test_catches_an_answer_that_ignores_its_arguments(check, fn):
    msg = fails(check, fn)
    assert msg.startswith(L1.RANDOM_TAG), msg


def test_random_shapes_are_the_same_on_every_run_and_differ_from_gpt2_small():
    assert L1.random_shapes("shapes") == L1.RANDOM_SHAPES
    assert SMALL not in L1.RANDOM_SHAPES and len(set(map(str, L1.RANDOM_SHAPES))) == 2
    for card in L1.RANDOM_CARDS:
        assert card["d_model"] % card["n_heads"] == 0


def test_hard_coded_gpt2_small_fails_a_hidden_shape():
    msg = fails(L1.check_gpt2_params, lambda **s: 124_439_808, shapes=HIDDEN_LIKE)
    assert msg.startswith("gpt2_params on a hidden test's input (another GPT-2-style shape) is "
                          "not right")
    assert "d_model=1024" not in msg  # the hidden test's inputs are not shown either
    shows_none_of(msg, gpt2_right(**HIDDEN_LIKE[0]))


@pytest.mark.parametrize("check, fn, inputs, start", [
    (L1.check_embedding_share, lambda **s: (embedding_right(**s)[0], 0.5), dict(shapes=HIDDEN_LIKE),
     "embedding_share on a hidden test's input (another GPT-2-style shape): the embedding share "
     "is not right"),
    (L1.check_block_parts, lambda d_model: {**blocks_right(d_model), "norms": 2 * d_model},
     dict(d_models=[64]), "block_parts on a hidden test's input (another d_model): its 'norms' "
     "is not right"),
    (L1.check_doubling, lambda **s: (*doubling_right(**s)[:3], 2), dict(shapes=HIDDEN_LIKE),
     "doubling on a hidden test's input (another GPT-2-style shape): model_deep is not right"),
    (L1.check_spec_sheet_costs, lambda **c: {**costs_right(**c), "flops_per_token": 1},
     dict(cards=[dict(n_layers=4, d_model=256, n_heads=4, d_vocab=5000, n_ctx=2048)]),
     "spec_sheet_costs on a hidden test's input (another GPT-2-style card): its "
     "'flops_per_token' is not right"),
])
def test_a_hidden_part_reads_cleanly(check, fn, inputs, start):
    """A part of a hidden test's result is named after a colon (no index glued to the words
    of the label), and the label is the same whatever the answer (records pair by it)."""
    msg = fails(check, fn, **inputs)
    assert msg.startswith(start), msg
    assert not re.search(r"(input|\))\[", msg.split(" is not right")[0]), msg


def test_a_visible_part_keeps_its_index():
    msg = fails(L1.check_embedding_share, lambda **s: (embedding_right(**s)[0], 0.5))
    assert msg.startswith("embedding_share(d_model=768, n_layers=12, d_vocab=50257, n_ctx=1024)"
                          "[1], the embedding share is not right"), msg


def test_calling_course_lib_counters_fails():
    def lazy(d_model, n_layers, d_vocab, n_ctx):
        return cl.count_params(cl.gpt2_shape(d_model=d_model, n_layers=n_layers,
                                             d_vocab=d_vocab, n_ctx=n_ctx)).total

    assert "course_lib's own counter" in fails(L1.check_gpt2_params, lazy)

    def lazy_costs(n_layers, d_model, n_heads, d_vocab, n_ctx):
        s = cl.gpt2_shape(d_model, n_layers, n_heads, d_vocab, n_ctx)
        return {**costs_right(n_layers, d_model, n_heads, d_vocab, n_ctx),
                "kv_cache_bytes": cl.kv_cache_bytes_per_sequence(s, n_ctx, "fp16")}

    assert "course_lib's own counter" in fails(L1.check_spec_sheet_costs, lazy_costs)


def test_not_a_whole_number():
    assert "whole number" in fails(L1.check_gpt2_params, lambda **s: gpt2_right(**s) + 0.5)


# --- embedding share ---------------------------------------------------------------------------

def _emb(params=None, share=None):
    def fn(d_model, n_layers, d_vocab, n_ctx):
        e, s = embedding_right(d_model, n_layers, d_vocab, n_ctx)
        total = gpt2_right(d_model, n_layers, d_vocab, n_ctx)
        args = dict(d=d_model, V=d_vocab, n=n_ctx, e=e, s=s, total=total)
        return (params(**args) if params else e), (share(**args) if share else s)
    return fn


EMB_MISTAKES = [
    (_emb(params=lambda d, V, n, **_: V * d), "position embedding (n_ctx × d_model) is missing"),
    (_emb(params=lambda d, V, n, **_: 2 * V * d + n * d), "not a second table"),
    (_emb(params=lambda d, V, n, **_: n * d), "token embedding"),
    (_emb(share=lambda d, V, total, **_: V * d / total), "missing from the share"),
    (_emb(share=lambda e, total, **_: e / (total - e)), "the rest of the model"),
    (_emb(share=lambda e, total, d, V, **_: e / (total + V * d)), "tied head twice"),
    (_emb(share=lambda s, **_: 100 * s), "percentage"),
    (_emb(share=lambda s, **_: round(s, 3)), "rounded to 3 decimals"),
    (_emb(share=lambda s, **_: round(100 * s, 1)), "percentage rounded"),
]


@pytest.mark.parametrize("fn, phrase", EMB_MISTAKES, ids=[p for _, p in EMB_MISTAKES])
def test_embedding_mistake_is_named(fn, phrase):
    msg = fails(L1.check_embedding_share, fn)
    assert phrase in msg
    shows_none_of(msg, 39_383_808, embedding_right(**SMALL)[1])


def test_embedding_share_wants_two_numbers():
    assert "return 2 numbers" in fails(L1.check_embedding_share, lambda **s: 39_383_808)


# --- one block ---------------------------------------------------------------------------------

def _block(**changes):
    return lambda d_model: {**blocks_right(d_model),
                            **{k: f(d_model) for k, f in changes.items()}}


BLOCK_MISTAKES = [
    (_block(attention=lambda d: 4 * d * d), "biases are missing (Q, K, V"),
    (_block(attention=lambda d: 3 * d * d + 3 * d), "output projection is missing"),
    (_block(attention=lambda d: 4 * d * d + 3 * d), "output projection's bias"),
    (_block(feed_forward=lambda d: 8 * d * d), "biases are missing (4·d_model"),
    (_block(feed_forward=lambda d: 2 * d * d + 2 * d), "4·d_model wide"),
    (_block(feed_forward=lambda d: 8 * d * d + 8 * d), "second bias has d_model entries"),
    (_block(feed_forward=lambda d: 8 * d * d + 4 * d), "second bias (d_model) is missing"),
    (_block(norms=lambda d: 2 * d), "two LayerNorms"),
    (_block(norms=lambda d: 0), "LayerNorms are missing"),
    (_block(norms=lambda d: 6 * d), "final LayerNorm comes once"),
]


@pytest.mark.parametrize("fn, phrase", BLOCK_MISTAKES, ids=[p for _, p in BLOCK_MISTAKES])
def test_block_mistake_is_named(fn, phrase):
    msg = fails(L1.check_block_parts, fn)
    assert phrase in msg
    shows_none_of(msg, *blocks_right(768).values())


def test_block_parts_wants_the_three_keys():
    msg = fails(L1.check_block_parts, lambda d_model: {"attention": 1, "ffn": 2})
    assert "'feed_forward'" in msg and "'norms'" in msg
    assert "dict" in fails(L1.check_block_parts, lambda d_model: [1, 2, 3])


# --- feed-forward shares -------------------------------------------------------------------------

def _ff(block=None, model=None):
    def fn(d_model, n_layers, d_vocab, n_ctx):
        b = blocks_right(d_model)
        total = gpt2_right(d_model, n_layers, d_vocab, n_ctx)
        args = dict(b=b, L=n_layers, total=total, tok=d_vocab * d_model, pos=n_ctx * d_model)
        right = ff_right(d_model, n_layers, d_vocab, n_ctx)
        return (block(**args) if block else right[0]), (model(**args) if model else right[1])
    return fn


FF_MISTAKES = [
    (_ff(block=lambda **_: 2 / 3), "weight matrices alone"),
    (_ff(block=lambda b, **_: b["feed_forward"] / (b["attention"] + b["feed_forward"])),
     "two LayerNorms belong to the block"),
    (_ff(block=lambda b, **_: b["feed_forward"] / b["attention"]), "a ratio"),
    (_ff(block=lambda b, L, total, **_: L * b["feed_forward"] / total), "share of the whole model"),
    (_ff(model=lambda b, **_: b["feed_forward"] / sum(b.values())), "the share of one block"),
    (_ff(model=lambda b, total, **_: b["feed_forward"] / total), "one layer's feed-forward"),
    (_ff(model=lambda b, L, total, tok, pos: L * b["feed_forward"] / (total - tok - pos)),
     "blocks only"),
    (_ff(model=lambda b, L, total, tok, **_: L * b["feed_forward"] / (total + tok)),
     "tied head twice"),
]


@pytest.mark.parametrize("fn, phrase", FF_MISTAKES, ids=[p for _, p in FF_MISTAKES])
def test_ff_mistake_is_named(fn, phrase):
    msg = fails(L1.check_ff_shares, fn)
    assert phrase in msg
    shows_none_of(msg, *ff_right(**SMALL))


# --- doubling ----------------------------------------------------------------------------------

def _dbl(i, value):
    def fn(**s):
        r = list(doubling_right(**s))
        r[i] = value(r) if callable(value) else value
        return tuple(r)
    return fn


DOUBLING_MISTAKES = [
    (_dbl(0, 4), "d_model² terms alone"),
    (_dbl(0, 2), "both sides"),
    (_dbl(0, 8), "not d_model³"),
    (_dbl(0, lambda r: r[2]), "the blocks'"),
    (_dbl(1, 1), "twice as many blocks"),
    (_dbl(1, 4), "does not widen"),
    (_dbl(2, lambda r: r[0]), "embeddings grow only with d_model"),
    (_dbl(2, 4), "only double"),
    (_dbl(3, 2), "do not grow with the layers"),
]


@pytest.mark.parametrize("fn, phrase", DOUBLING_MISTAKES, ids=[p for _, p in DOUBLING_MISTAKES])
def test_doubling_mistake_is_named(fn, phrase):
    msg = fails(L1.check_doubling, fn)
    assert phrase in msg
    shows_none_of(msg, *doubling_right(**SMALL)[:1], *doubling_right(**SMALL)[2:])


def test_doubling_wants_four_numbers():
    assert "return 4 numbers" in fails(L1.check_doubling, lambda **s: (4, 2))


# --- test yourself -------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, phrase", [
    ((163.0, 31.6), "tied head a second time"),
    ((85.1, 31.6), "blocks alone"),
    ((124_439_808, 31.6), "in millions"),
    ((124.4, 0.3165), "not a fraction"),
    ((124.4, 31.0), "position embedding is missing (it is part"),
    ((124, 31), "position embedding is missing (it is part"),
    ((124.4, 46.3), "not by the rest"),
    ((124.4, 24.2), "tied head twice"),
])
def test_tys1_mistakes(answer, phrase):
    msg = fails(L1.check_tys1, *answer)
    assert phrase in msg
    shows_none_of(msg, 124_439_808)


@pytest.mark.parametrize("answer, phrase", [
    (("attention", 2 / 3), "four d_model × d_model"),
    (("equal", 2 / 3), "4·d_model wide"),
    (("mlp", 2 / 3), "answer with one of"),
    (("feed-forward", 2), "a ratio"),
    (("feed-forward", 1 / 3), "attention's share"),
    (("feed-forward", 66.7), "not a percentage"),
])
def test_tys2_mistakes(answer, phrase):
    assert phrase in fails(L1.check_tys2, *answer)


@pytest.mark.parametrize("answer, phrase", [
    ((2, 2), "both sides"), ((8, 2), "not d_model³"), ((4, 1), "twice as many"),
    ((4, 4), "does not widen"),
])
def test_tys3_mistakes(answer, phrase):
    assert phrase in fails(L1.check_tys3, *answer)


# --- test yourself: "about" answers pass when sensibly rounded --------------------------------
# The values come from the architecture (gpt2_right, embedding_right), not from the seals.
# Tolerances: the embedding share in percent within 1.6 %, the feed-forward share within 1.5 %.

def _tys_values():
    e, share = embedding_right(**SMALL)
    return gpt2_right(**SMALL) / 1e6, 100 * share, 8 / 12


def _judge(sealed, got):
    from course_lib.checks.sealed import judge
    return judge(sealed, got)


def _question(n: int) -> str:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (text,) = [c.source for c in nb.cells if c.cell_type == "markdown"
               and re.search(rf"^\*\*{n}\.\*\*", c.source, re.M)]
    return text[text.index(f"**{n}.**"):]


def test_tys_prose_says_how_rounded_and_that_rounding_passes():
    """The questions say how far to round, and an answer rounded that far passes."""
    params, percent, ff = _tys_values()
    assert "Whole numbers will do" in _question(1)
    assert "Two decimals will do" in _question(2)
    assert "Whole numbers will do" in _question(3)
    L1.check_tys1(round(params), round(percent))
    L1.check_tys2("feed-forward", round(ff, 2))
    L1.check_tys3(4, 2)


@pytest.mark.parametrize("percent", [32, 32.0, 31.6, 31.65, 31.5, 31.7, 31.649])
def test_tys1_rounded_share_passes(percent):
    L1.check_tys1(124, percent)


@pytest.mark.parametrize("share", [0.66, 0.67, 0.667, 0.6667, 2 / 3, 8 / 12, np.float32(2 / 3)])
def test_tys2_rounded_share_passes(share):
    L1.check_tys2("feed-forward", share)


@pytest.mark.parametrize("sealed, value, rel", [
    (L1.TYS1_EMBEDDING, _tys_values()[1], 0.016),
    (L1.TYS2_FF_SHARE, _tys_values()[2], 0.015),
], ids=["tys1-embedding", "tys2-ff-share"])
def test_everything_within_the_tolerance_passes_and_is_never_a_mistake(sealed, value, rel):
    """Every answer within the stated tolerance passes (so no mistake's diagnosis can fire on
    it), and nothing more than 1.5 times the tolerance away does."""
    for i in range(-10, 11):
        v = _judge(sealed, value * (1 + rel * i / 10))
        assert v.ok and v.mistake is None, (i, v)
    for k in (-1, 1):
        for far in (1.55, 2, 3):
            assert not _judge(sealed, value * (1 + k * far * rel)).ok, (k, far)


@pytest.mark.parametrize("answer, phrase", [
    (31, "position embedding is missing (it is part"),     # that mistake's whole number: not the answer's
    (31.0, "round to the nearest whole percent"),
    (31.02, "position embedding is missing (it is part"),
    (0.32, "not a fraction"),
    (0.3165, "not a fraction"),
    (46, "not by the rest"),
    (24, "tied head twice"),
])
def test_tys1_rounded_mistakes_keep_their_diagnosis(answer, phrase):
    """The share without the position table (31.02 %) is 2 % below the answer (31.65 %),
    beyond the 1.6 % tolerance.  31 is 0.02 from that mistake and 0.65 from the answer,
    whose whole number is 32: 31 is diagnosed as the mistake, with a hint to round to
    nearest in case the positions were counted and the share cut down."""
    msg = fails(L1.check_tys1, 124, answer)
    assert phrase in msg
    shows_none_of(msg, 124_439_808, _tys_values()[1] / 100)


@pytest.mark.parametrize("answer, phrase", [
    (66, "not a percentage"), (67, "not a percentage"), (66.7, "not a percentage"),
    (0.33, "attention's share"), (1 / 3, "attention's share"), (0.5, "not equal in size"),
    (2, "a ratio"), (2.0, "a ratio"),
])
def test_tys2_rounded_mistakes_keep_their_diagnosis(answer, phrase):
    assert phrase in fails(L1.check_tys2, "feed-forward", answer)


@pytest.mark.parametrize("share", [0.65, 0.68, 0.7, 0.6])
def test_tys2_a_share_rounded_too_far_fails(share):
    """Two decimals is what the question asks: one decimal (0.7) is too coarse."""
    assert "count the weight matrices" in fails(L1.check_tys2, "feed-forward", share)
    v = _judge(L1.TYS2_FF_SHARE, share)
    assert not v.ok and v.mistake is None  # the general hint, not a named mistake


# --- spec-sheet costs --------------------------------------------------------------------------

def _cost(key, f):
    def fn(n_layers, d_model, n_heads, d_vocab, n_ctx):
        c = costs_right(n_layers, d_model, n_heads, d_vocab, n_ctx)
        c[key] = f(c, L=n_layers, d=d_model, h=n_heads, V=d_vocab, n=n_ctx)
        return c
    return fn


COST_MISTAKES = [
    (_cost("params", lambda c, V, d, **_: c["params"] + V * d), "tied to the token embedding"),
    (_cost("weight_bytes", lambda c, **_: c["params"]), "each takes 2 bytes"),
    (_cost("weight_bytes", lambda c, **_: 4 * c["params"]), "32-bit"),
    (_cost("weight_bytes", lambda c, **_: c["weight_bytes"] / 2**30), "in GiB"),
    (_cost("kv_cache_bytes", lambda c, **_: c["kv_cache_bytes"] / 2), "a factor 2 is missing"),
    (_cost("kv_cache_bytes", lambda c, **_: c["kv_cache_bytes"] / 4), "both factors of 2"),
    (_cost("kv_cache_bytes", lambda c, h, **_: c["kv_cache_bytes"] * h), "do not multiply by n_heads"),
    (_cost("kv_cache_bytes", lambda c, n, **_: c["kv_cache_bytes"] / n), "one token's cache"),
    (_cost("kv_cache_bytes", lambda c, L, **_: c["kv_cache_bytes"] / L), "multiply by n_layers"),
    (_cost("flops_per_token", lambda c, **_: c["flops_per_token"] / 2), "FLOPs = 2 × multiply-adds"),
    (_cost("flops_per_token", lambda c, d, V, **_: c["flops_per_token"] - 2 * d * V), "output head"),
    (_cost("flops_per_token", lambda c, L, n, d, **_: c["flops_per_token"] - 4 * L * n * d),
     "attention over n_ctx positions"),
    (_cost("flops_per_token", lambda c, **_: 2 * c["params"]), "rule of thumb"),
    (_cost("flops_per_token", lambda c, L, n, d, h, **_: c["flops_per_token"] + 4 * (h - 1) * L * n * d),
     "no extra n_heads"),
]


@pytest.mark.parametrize("fn, phrase", COST_MISTAKES, ids=[p for _, p in COST_MISTAKES])
def test_cost_mistake_is_named(fn, phrase):
    msg = fails(L1.check_spec_sheet_costs, fn)
    assert phrase in msg
    shows_none_of(msg, *costs_right(**L1.GPT2_SMALL_CARD).values())


def test_costs_want_the_four_keys():
    msg = fails(L1.check_spec_sheet_costs, lambda **c: {"params": 1})
    assert all(repr(k) in msg for k in ("weight_bytes", "kv_cache_bytes", "flops_per_token"))


def test_costs_do_not_depend_on_heads():
    for h in (1, 4, 8, 32, 256):
        card = dict(L1.GPT2_SMALL_CARD, d_model=256, n_heads=h)
        L1.check_spec_sheet_costs(costs_right, cards=[card])


# --- the notebook's graded cells ---------------------------------------------------------------

CHECK_CALL = re.compile(r"^(lesson1\.check_\w+\(|assert\b)")


def test_notebook_grading_cells_are_well_formed():
    nb, answers, tests = graded_cells(NOTEBOOK, CHECK_CALL)
    assert set(tests) >= {"gpt2-params", "embedding-share", "block-parts", "ff-shares",
                          "doubling", "spec-sheet-costs", "tys1", "tys2", "tys3"}


def test_a_wrong_earlier_answer_is_pointed_at():
    """A share built on a wrong gpt2_params fails with a size hint that points back to it."""
    def wrong_total(d_model, n_layers, d_vocab, n_ctx):  # positions forgotten
        return gpt2_right(d_model, n_layers, d_vocab, n_ctx) - n_ctx * d_model

    def share(d_model, n_layers, d_vocab, n_ctx):
        e = (d_vocab + n_ctx) * d_model
        return e, e / wrong_total(d_model, n_layers, d_vocab, n_ctx)

    msg = fails(L1.check_embedding_share, share)
    assert "too large" in msg and "your gpt2_params, make sure its test passes" in msg
    msg = fails(L1.check_doubling, lambda **s: (*doubling_right(**s)[:2], 3.0, 1.5))
    assert "your block_parts or gpt2_params, make sure their tests pass" in msg
    # a named mistake needs no pointer
    assert "make sure" not in fails(L1.check_gpt2_params, _off(lambda d, L, V, n: -2 * d))


def test_a_hard_coded_answer_is_told_so():
    """Right on GPT-2 small, wrong on the shapes made at run time: the message says the answer
    may ignore its arguments (#16), on top of the size words."""
    msg = fails(L1.check_gpt2_params, lambda **s: gpt2_right(**SMALL))
    assert msg.startswith(L1.RANDOM_TAG) and "does it use its arguments" in msg, msg
    msg = fails(L1.check_gpt2_params, lambda **s: gpt2_right(**s) + 1)  # wrong everywhere
    assert "does it use its arguments" not in msg, msg
