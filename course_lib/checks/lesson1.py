"""Checks for lesson 1, "The shape of a transformer", declared as exercises
(:mod:`course_lib.checks.exercise`).

Every function exercise is compared with course_lib's own counters (``params``, ``memory``,
``flops``) on GPT-2 small, on two shapes made at run time (seeded) and, in the hidden tests, on
shapes the learner has not seen; a failure names the likely mistake (tied head counted twice,
positions forgotten, biases or norms forgotten, ...) without showing the expected value.  The
test-yourself answers are sealed (``sealed_answers/lesson1.json``).
"""
from __future__ import annotations

import random

from ..flops import forward_flops_per_token
from ..memory import kv_cache_bytes_per_sequence, weight_bytes
from ..params import block_params, count_params
from ..shapes import gpt2_shape
from ..units import GB, GiB
from .exercise import RANDOM_TAG, Exercise, Inputs, Part, Question  # noqa: F401 - RANDOM_TAG: tests
from .sealed import load as _load_sealed

SEALED = _load_sealed("lesson1")
"""This assignment's sealed answers by salt (sealed_answers/lesson1.json)."""

GPT2_SMALL = dict(d_model=768, n_layers=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's four counting numbers (its card also says n_heads = 12)."""

GPT2_SMALL_CARD = dict(n_layers=12, d_model=768, n_heads=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's five spec-sheet numbers, in the order of :data:`check_spec_sheet_costs`."""


def random_shapes(seed: str, n: int = 2, heads: bool = False) -> tuple[dict, ...]:
    """``n`` GPT-2-style shapes drawn at run time from ``random.Random(seed)`` (the same on
    every run, so the grader's run of the model answer tries the same ones): d_model a multiple
    of 32 from 96 to 1,504, 2 to 30 layers, 500 to 60,000 tokens, a context of 128 to 2,560;
    with ``heads``, a card (n_heads 2, 4 or 8) in :data:`GPT2_SMALL_CARD`'s order."""
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
"""Two GPT-2-style cards made at run time (seeded), for :data:`check_spec_sheet_costs`."""
RANDOM_D_MODELS = tuple(s["d_model"] for s in random_shapes("d_models"))
"""Two widths made at run time (seeded), for :data:`check_block_parts`."""

SHAPES = Inputs(shown=[GPT2_SMALL], random=RANDOM_SHAPES, hidden="another GPT-2-style shape")


def _shape(d_model, n_layers=1, d_vocab=1, n_ctx=1, n_heads=1):
    """A GPT-2-style shape.  No parameter count depends on n_heads (n_heads · d_head =
    d_model), so 1 head is used when the question does not give one."""
    return gpt2_shape(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_vocab=d_vocab,
                      n_ctx=n_ctx)


def _not_rounded(expected: float) -> dict:
    """Mistakes a rounded share would match: 2 to 4 decimals (of the fraction and of %)."""
    m = {}
    for k in (2, 3, 4):
        m[f"it looks rounded to {k} decimals: return the unrounded value"] = round(expected, k)
        m[f"it looks like a percentage rounded to {k - 1} decimals: return a fraction "
          f"between 0 and 1"] = round(100 * expected, k - 1)
    m["it looks like a percentage: return a fraction between 0 and 1"] = 100 * expected
    return m


def _counts(a) -> dict:
    """What the checks of a GPT-2 shape compare with: its total, embeddings and one block."""
    d, L = a["d_model"], a["n_layers"]
    c, b = count_params(_shape(**a)), block_params(_shape(d))
    return dict(d=d, L=L, total=c.total, E=c.embedding, tok=a["d_vocab"] * d, pos=a["n_ctx"] * d,
                ff=b["feed_forward"], attn=b["attention"], block=b["total"])


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


check_gpt2_params = Exercise(
    "gpt2_params", SHAPES, reference=lambda a: {"total": count_params(_shape(**a)).total},
    parts=[Part(expected="total", integer=True, mistakes=lambda r: gpt2_param_mistakes(
        r["d_model"], r["n_layers"], r["d_vocab"], r["n_ctx"]))])
"""``gpt2_params(d_model, n_layers, d_vocab, n_ctx)``: a GPT-2 parameter count, exact."""

# --- the embedding share ---------------------------------------------------------------------

check_embedding_share = Exercise(
    "embedding_share", SHAPES, _counts, returns="embedding parameters, share of the model", parts=[
        Part(0, "the embedding parameters", "E", integer=True, mistakes=lambda r: {
            "the position embedding (n_ctx × d_model) is missing": r["tok"],
            "the token embedding (d_vocab × d_model) is missing": r["pos"],
            "the tied output head is the token embedding itself: it is not a "
            "second table": 2 * r["tok"] + r["pos"],
        }),
        Part(1, "the embedding share", lambda r: r["E"] / r["total"], rel=1e-9,
             builds_on=("gpt2_params",), mistakes=lambda r: {
                 "the position embedding is missing from the share": r["tok"] / r["total"],
                 "that is embeddings ÷ the rest of the model: divide by all the "
                 "parameters": r["E"] / (r["total"] - r["E"]),
                 "the total counts the tied head twice": r["E"] / (r["total"] + r["tok"]),
                 **_not_rounded(r["E"] / r["total"]),
             })])
"""``embedding_share(d_model, n_layers, d_vocab, n_ctx) -> (embedding parameters, share)``:
the token and position tables, and their fraction of all parameters."""

# --- inside a block --------------------------------------------------------------------------

check_block_parts = Exercise(
    "block_parts", Inputs(shown=[{"d_model": 768}], random=[{"d_model": d} for d in RANDOM_D_MODELS],
                          hidden="another d_model"),
    lambda a: {**block_params(_shape(a["d_model"])), "d": a["d_model"]}, arg="d_model",
    returns=("attention", "feed_forward", "norms"), parts=[
        Part("attention", expected="attention", integer=True, mistakes=lambda r: {
            "the biases are missing (Q, K, V and the output projection each have "
            "one of d_model)": 4 * r["d"] ** 2,
            "the output projection is missing: attention has four d_model × "
            "d_model matrices": 3 * r["d"] ** 2 + 3 * r["d"],
            "the output projection's bias (d_model) is missing": 4 * r["d"] ** 2 + 3 * r["d"],
            "the K and V projections are missing": 2 * r["d"] ** 2 + 2 * r["d"],
        }),
        Part("feed_forward", expected="feed_forward", integer=True, mistakes=lambda r: {
            "the biases are missing (4·d_model after the first matrix, d_model "
            "after the second)": 8 * r["d"] ** 2,
            "the feed-forward layer is 4·d_model wide in GPT-2, not d_model":
                2 * r["d"] ** 2 + 2 * r["d"],
            "the second bias has d_model entries (the output width), not 4·d_model":
                8 * r["d"] ** 2 + 8 * r["d"],
            "the second bias (d_model) is missing": 8 * r["d"] ** 2 + 4 * r["d"],
            "the first bias has 4·d_model entries (the hidden width), not d_model":
                8 * r["d"] ** 2 + 2 * r["d"],
            "only one of the two matrices is counted": 4 * r["d"] ** 2 + 4 * r["d"],
        }),
        Part("norms", expected="norms", integer=True, mistakes=lambda r: {
            "a GPT-2 block has two LayerNorms (before attention and before the "
            "feed-forward layer), each with a weight and a bias of d_model": 2 * r["d"],
            "the LayerNorms are missing": 0,
            "the final LayerNorm comes once, after the last block: it is not "
            "part of every block": 6 * r["d"],
        })])
"""``block_parts(d_model) -> {"attention", "feed_forward", "norms"}``: one GPT-2 block's
parameters by part (d_ff = 4·d_model, biases and two LayerNorms)."""

check_ff_shares = Exercise(
    "ff_shares", SHAPES, _counts, returns="share of a block, share of the model",
    builds_on=("block_parts", "gpt2_params"), parts=[
        Part(0, "the share of a block", lambda r: r["ff"] / r["block"], rel=1e-9, mistakes=lambda r: {
            "2/3 is the share of the weight matrices alone (8·d² of 12·d²); with "
            "biases and LayerNorms it is a little different: use your counts": 2 / 3,
            "the block's two LayerNorms belong to the block too": r["ff"] / (r["attn"] + r["ff"]),
            "that is feed-forward ÷ attention, a ratio: the share is feed-forward "
            "÷ the whole block": r["ff"] / r["attn"],
            "that is the share of the whole model; the first number is the share "
            "of one block": r["L"] * r["ff"] / r["total"],
            **_not_rounded(r["ff"] / r["block"]),
        }),
        Part(1, "the share of the model", lambda r: r["L"] * r["ff"] / r["total"], rel=1e-9,
             mistakes=lambda r: {
                 "that is the share of one block: the model also holds the "
                 "embeddings, so the feed-forward share of the model is smaller": r["ff"] / r["block"],
                 "that is one layer's feed-forward layer: there are n_layers of them":
                     r["ff"] / r["total"],
                 "that divides by the blocks only: divide by all the parameters":
                     r["L"] * r["ff"] / (r["total"] - r["pos"] - r["tok"]),
                 "the total counts the tied head twice": r["L"] * r["ff"] / (r["total"] + r["tok"]),
                 **_not_rounded(r["L"] * r["ff"] / r["total"]),
             })])
"""``ff_shares(d_model, n_layers, d_vocab, n_ctx) -> (share of a block, share of the model)``:
the feed-forward layers' fraction of one block and of all parameters (exact)."""


def _growth(a) -> dict:
    """How all blocks (b) and the whole model (m) grow when d_model (w) or n_layers (d) doubles."""
    d, L = a["d_model"], a["n_layers"]

    def blocks(d_, L_):
        return L_ * block_params(_shape(d_))["total"]

    def model(d_, L_):
        return count_params(_shape(**{**a, "d_model": d_, "n_layers": L_})).total

    return dict(bw=blocks(2 * d, L) / blocks(d, L), bd=blocks(d, 2 * L) / blocks(d, L),
                mw=model(2 * d, L) / model(d, L), md=model(d, 2 * L) / model(d, L))


check_doubling = Exercise(
    "doubling", SHAPES, _growth, returns="blocks_wide, blocks_deep, model_wide, model_deep",
    builds_on=("block_parts", "gpt2_params"), parts=[
        Part(0, "blocks_wide", "bw", rel=1e-9, mistakes=lambda r: {
            "4 is the ratio of the d_model² terms alone; biases and LayerNorms grow only with "
            "d_model, so compute the ratio from your exact counts": 4,
            "doubling d_model doubles both sides of each d_model × d_model matrix": 2,
            "block parameters grow with d_model², not d_model³": 8,
            "that is the whole model's growth; the first number is the blocks'": r["mw"],
        }),
        Part(1, "blocks_deep", "bd", rel=1e-9, mistakes=lambda r: {
            "one block keeps its size, but there are twice as many blocks": 1,
            "doubling the layers adds blocks; it does not widen them": 4,
            "that is the whole model's growth; the second number is the blocks'": r["md"],
        }),
        Part(2, "model_wide", "mw", rel=1e-9, mistakes=lambda r: {
            "that is the blocks' growth: the embeddings grow only with d_model, so the "
            "whole model grows less": r["bw"],
            "4 is the growth of the d_model² terms; the embeddings only double": 4,
            "the blocks grow by about 4, not 2; only the embeddings double": 2,
        }),
        Part(3, "model_deep", "md", rel=1e-9, mistakes=lambda r: {
            "the embeddings and the final LayerNorm do not grow with the layers, so the whole "
            "model grows by less than 2": 2,
            "one block keeps its size, but there are twice as many blocks": 1,
        })])
"""``doubling(d_model, n_layers, d_vocab, n_ctx) -> (blocks_wide, blocks_deep, model_wide,
model_deep)``: how many times all blocks' parameters, and the whole model's, grow when d_model
doubles (d_ff = 4·d_model follows) or when n_layers doubles."""


# --- test yourself ---------------------------------------------------------------------------
# Sealed (sealed_answers/lesson1.json).  The questions say that whole numbers (tys1, tys3) or
# two decimals (tys2) will do, so the tolerances let such answers pass: tys1 0.5 % (params,
# millions) and 1.6 % (percent), tys2 1.5 %, tys3 1 %.  Every named mistake lies outside them.

TYS1_PARAMS = SEALED["lesson1/tys1_params_millions"]
TYS1_EMBEDDING = SEALED["lesson1/tys1_embedding_percent"]
TYS2_BIGGER = SEALED["lesson1/tys2_bigger"]
TYS2_FF_SHARE = SEALED["lesson1/tys2_ff_share"]
TYS3_WIDTH = SEALED["lesson1/tys3_width_factor"]
TYS3_LAYERS = SEALED["lesson1/tys3_layers_factor"]
check_tys1 = Question((TYS1_PARAMS, TYS1_EMBEDDING), builds_on=("gpt2_params", "embedding_share"))
"""GPT-2 small's parameters (millions, about) and embedding share (%)."""
check_tys2 = Question((TYS2_BIGGER, TYS2_FF_SHARE))
"""Which part of a block is bigger; the feed-forward share of its weight matrices."""
check_tys3 = Question((TYS3_WIDTH, TYS3_LAYERS))
"""How a block grows when d_model doubles, and all blocks when n_layers doubles."""


# --- recap: the three costs of a spec sheet --------------------------------------------------

def _costs(a) -> dict:
    L, d, h, V, n = (a[k] for k in ("n_layers", "d_model", "n_heads", "d_vocab", "n_ctx"))
    s = _shape(d, L, V, n, n_heads=h)
    return dict(L=L, d=d, h=h, V=V, n=n, params=count_params(s).total, wb=weight_bytes(s, "fp16"),
                kv=kv_cache_bytes_per_sequence(s, n, "fp16"), flops=forward_flops_per_token(s, n),
                macs_attn=2 * L * n * d)


check_spec_sheet_costs = Exercise(
    "spec_sheet_costs", Inputs(shown=[GPT2_SMALL_CARD], random=RANDOM_CARDS,
                               hidden="another GPT-2-style card"),
    _costs, returns=("params", "weight_bytes", "kv_cache_bytes", "flops_per_token"),
    builds_on=("gpt2_params",), parts=[
        Part("params", expected="params", integer=True, mistakes=lambda r: gpt2_param_mistakes(
            r["d"], r["L"], r["V"], r["n"])),
        Part("weight_bytes", expected="wb", rel=1e-9, mistakes=lambda r: {
            "that is the number of parameters: each takes 2 bytes in 16-bit": r["params"],
            "that is 32-bit (4 bytes a parameter); the question asks for 16-bit": 4 * r["params"],
            "that is in GiB; the question asks for bytes": r["wb"] / GiB,
            "that is in GB; the question asks for bytes": r["wb"] / GB,
            "the parameter count inside it is off: the tied head is counted twice":
                2 * (r["params"] + r["V"] * r["d"]),
            "the parameter count inside it is off: the positions are missing":
                2 * (r["params"] - r["n"] * r["d"]),
        }),
        Part("kv_cache_bytes", expected="kv", rel=1e-9, mistakes=lambda r: {
            "a factor 2 is missing: the cache holds a key and a value per token "
            "per layer, and each number takes 2 bytes in 16-bit": r["kv"] / 2,
            "both factors of 2 are missing (keys and values; 2 bytes a number)": r["kv"] / 4,
            "n_heads · d_head is d_model already: do not multiply by n_heads again":
                r["kv"] * r["h"],
            "that is one token's cache; the question asks for n_ctx tokens": r["kv"] / r["n"],
            "every layer keeps its own keys and values: multiply by n_layers": r["kv"] / r["L"],
            "that is in GiB; the question asks for bytes": r["kv"] / GiB,
        }),
        Part("flops_per_token", expected="flops", rel=1e-9, mistakes=lambda r: {
            "that is multiply-adds; FLOPs = 2 × multiply-adds": r["flops"] / 2,
            "the output head (d_model × d_vocab multiply-adds) is missing":
                r["flops"] - 2 * r["d"] * r["V"],
            "the attention over n_ctx positions (2·n_layers·n_ctx·d_model "
            "multiply-adds) is missing": r["flops"] - 2 * r["macs_attn"],
            "2 × parameters is a rule of thumb; the question asks for the formula's "
            "count": 2 * r["params"],
            "n_heads · d_head is d_model already: the attention term has no extra "
            "n_heads": r["flops"] + 2 * (r["h"] - 1) * r["macs_attn"],
        })])
"""``spec_sheet_costs(n_layers, d_model, n_heads, d_vocab, n_ctx) -> {"params",
"weight_bytes", "kv_cache_bytes", "flops_per_token"}`` of a GPT-2-style card: parameters,
bytes of 16-bit weights, bytes of 16-bit KV cache for one sequence of n_ctx tokens, forward
FLOPs (= 2 × multiply-adds) for one token attending to n_ctx positions."""


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson1")  # one-line pass and fail messages in a notebook (checks.tutor)
