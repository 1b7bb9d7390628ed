"""Checks for lesson 1, "The shape of a transformer".

Every check compares a learner's answer with course_lib's own counters (``params``, ``memory``,
``flops``) on GPT-2-style shapes, and on failure raises :class:`~course_lib.checks.CheckFailed`
naming the likely mistake (tied head counted twice, positions forgotten, biases or norms
forgotten, ...) without showing the expected value.  Functions the learner writes are called
through :func:`~course_lib.checks.own_work`, so an answer that calls course_lib's counters fails.

A shape is given as a dict of the spec-sheet numbers, e.g. :data:`GPT2_SMALL`; the checks of
functions take several (the notebook's hidden tests pass shapes the learner has not seen).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Mapping, Sequence

from ..flops import forward_flops_per_token
from ..memory import kv_cache_bytes_per_sequence, weight_bytes
from ..params import block_params, count_params
from ..shapes import gpt2_shape
from ..units import GB, GiB
from . import CheckFailed, check_choice, check_value, own_work

GPT2_SMALL = dict(d_model=768, n_layers=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's four counting numbers (its card also says n_heads = 12)."""

GPT2_SMALL_CARD = dict(n_layers=12, d_model=768, n_heads=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's five spec-sheet numbers, in the order of :func:`check_spec_sheet_costs`."""

COST_KEYS = ("params", "weight_bytes", "kv_cache_bytes", "flops_per_token")
BLOCK_KEYS = ("attention", "feed_forward", "norms")


# --- helpers -------------------------------------------------------------------------------

def _shape(d_model, n_layers=1, d_vocab=1, n_ctx=1, n_heads=1):
    """A GPT-2-style shape.  No parameter count depends on n_heads (n_heads · d_head =
    d_model), so 1 head is used when the question does not give one."""
    return gpt2_shape(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_vocab=d_vocab,
                      n_ctx=n_ctx)


def _call(fn, name: str, shape: Mapping):
    """``fn(**shape)`` through own_work, and a label such as ``gpt2_params(d_model=768, ...)``."""
    label = f"{name}({', '.join(f'{k}={v}' for k, v in shape.items())})"
    return own_work(fn, **shape), label


def _numbers(result, n: int, what: str, names: str) -> tuple:
    """``result`` as a tuple of ``n`` values, or CheckFailed saying what to return."""
    if not isinstance(result, (tuple, list)) or len(result) != n:
        raise CheckFailed(f"{what}: return {n} numbers, ({names}), "
                          f"got {type(result).__name__} {result!r:.60}")
    return tuple(result)


def _keyed(result, keys: Sequence[str], what: str) -> dict:
    """``result`` as a dict with exactly the keys needed, or CheckFailed naming them."""
    if not isinstance(result, Mapping):
        raise CheckFailed(f"{what}: return a dict with keys {', '.join(map(repr, keys))}, "
                          f"got {type(result).__name__}")
    missing = [k for k in keys if k not in result]
    if missing:
        raise CheckFailed(f"{what}: the dict is missing {', '.join(map(repr, missing))} "
                          f"(it needs {', '.join(map(repr, keys))})")
    return dict(result)


_GENERIC = ("too large", "too small", "you returned 0", "its sign is wrong")
"""Phrases of the generic size hint (no named mistake matched)."""


@contextmanager
def _builds_on(*names: str):
    """Add a pointer to the earlier exercises an answer builds on when a failure inside is
    not a named mistake: a wrong ``gpt2_params`` shows up again in every share built on it."""
    try:
        yield
    except CheckFailed as e:
        msg = str(e)
        if any(p in msg for p in _GENERIC):
            msg += (f" If this uses your {' or '.join(names)}, make sure "
                    f"{'its test passes' if len(names) == 1 else 'their tests pass'} first.")
        raise CheckFailed(msg) from None


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


def check_gpt2_params(fn, shapes: Sequence[Mapping] = (GPT2_SMALL,)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx)``, a GPT-2 parameter count, on each shape
    against ``count_params(gpt2_shape(...)).total`` (parameters, exact)."""
    for shape in shapes:
        got, label = _call(fn, "gpt2_params", shape)
        expected = count_params(_shape(**shape)).total
        check_value(got, expected, what=label, integer=True,
                    mistakes=gpt2_param_mistakes(**shape))


# --- the embedding share ---------------------------------------------------------------------

def check_embedding_share(fn, shapes: Sequence[Mapping] = (GPT2_SMALL,)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx) -> (embedding parameters, share)``: the
    token and position tables of a GPT-2 shape, and their fraction of all parameters."""
    for shape in shapes:
        result, label = _call(fn, "embedding_share", shape)
        params, share = _numbers(result, 2, label, "embedding parameters, share of the model")
        d, V, n = shape["d_model"], shape["d_vocab"], shape["n_ctx"]
        c = count_params(_shape(**shape))
        tok, pos, total = V * d, n * d, c.total
        check_value(params, c.embedding, what=f"{label}[0], the embedding parameters",
                    integer=True, mistakes={
                        "the position embedding (n_ctx × d_model) is missing": tok,
                        "the token embedding (d_vocab × d_model) is missing": pos,
                        "the tied output head is the token embedding itself: it is not a "
                        "second table": 2 * tok + pos,
                    })
        E = c.embedding
        with _builds_on("gpt2_params"):
            check_value(share, E / total, what=f"{label}[1], the embedding share", rel=1e-9,
                        mistakes={
                            "the position embedding is missing from the share": tok / total,
                            "that is embeddings ÷ the rest of the model: divide by all the "
                            "parameters": E / (total - E),
                            "the total counts the tied head twice": E / (total + tok),
                            **_not_rounded(E / total),
                        })


# --- inside a block --------------------------------------------------------------------------

def check_block_parts(fn, d_models: Sequence[int] = (768,)) -> None:
    """Check ``fn(d_model) -> {"attention": ..., "feed_forward": ..., "norms": ...}``: one
    GPT-2 block's parameters by part (d_ff = 4·d_model, biases and two LayerNorms)."""
    for d in d_models:
        result, label = _call(fn, "block_parts", {"d_model": d})
        got = _keyed(result, BLOCK_KEYS, label)
        expected = block_params(_shape(d))
        check_value(got["attention"], expected["attention"], what=f"{label}['attention']",
                    integer=True, mistakes={
                        "the biases are missing (Q, K, V and the output projection each have "
                        "one of d_model)": 4 * d * d,
                        "the output projection is missing: attention has four d_model × "
                        "d_model matrices": 3 * d * d + 3 * d,
                        "the output projection's bias (d_model) is missing": 4 * d * d + 3 * d,
                        "the K and V projections are missing": 2 * d * d + 2 * d,
                    })
        check_value(got["feed_forward"], expected["feed_forward"],
                    what=f"{label}['feed_forward']", integer=True, mistakes={
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
        check_value(got["norms"], expected["norms"], what=f"{label}['norms']", integer=True,
                    mistakes={
                        "a GPT-2 block has two LayerNorms (before attention and before the "
                        "feed-forward layer), each with a weight and a bias of d_model": 2 * d,
                        "the LayerNorms are missing": 0,
                        "the final LayerNorm comes once, after the last block: it is not "
                        "part of every block": 6 * d,
                    })


@_builds_on("block_parts", "gpt2_params")
def check_ff_shares(fn, shapes: Sequence[Mapping] = (GPT2_SMALL,)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx) -> (share of a block, share of the model)``:
    the feed-forward layers' fraction of one block and of all parameters (exact, with biases
    and norms)."""
    for shape in shapes:
        result, label = _call(fn, "ff_shares", shape)
        block_share, model_share = _numbers(result, 2, label,
                                            "share of a block, share of the model")
        d, L = shape["d_model"], shape["n_layers"]
        b = block_params(_shape(d))
        ff, attn, block = b["feed_forward"], b["attention"], b["total"]
        total = count_params(_shape(**shape)).total
        tok = shape["d_vocab"] * d
        check_value(block_share, ff / block, what=f"{label}[0], the share of a block", rel=1e-9,
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
        check_value(model_share, L * ff / total, what=f"{label}[1], the share of the model",
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


@_builds_on("block_parts", "gpt2_params")
def check_doubling(fn, shapes: Sequence[Mapping] = (GPT2_SMALL,)) -> None:
    """Check ``fn(d_model, n_layers, d_vocab, n_ctx) -> (blocks_wide, blocks_deep, model_wide,
    model_deep)``: how many times the parameters of all blocks, and of the whole model, grow
    when d_model doubles (d_ff = 4·d_model follows) or when n_layers doubles."""
    names = "blocks_wide, blocks_deep, model_wide, model_deep"
    for shape in shapes:
        result, label = _call(fn, "doubling", shape)
        got = _numbers(result, 4, label, names)
        d, L = shape["d_model"], shape["n_layers"]

        def blocks(d_, L_):
            return L_ * block_params(_shape(d_))["total"]

        def model(d_, L_):
            return count_params(_shape(**{**shape, "d_model": d_, "n_layers": L_})).total

        bw, bd = blocks(2 * d, L) / blocks(d, L), blocks(d, 2 * L) / blocks(d, L)
        mw, md = model(2 * d, L) / model(d, L), model(d, 2 * L) / model(d, L)
        check_value(got[0], bw, what=f"{label}[0], blocks_wide", rel=1e-9, mistakes={
            "4 is the ratio of the d_model² terms alone; biases and LayerNorms grow only with "
            "d_model, so compute the ratio from your exact counts": 4,
            "doubling d_model doubles both sides of each d_model × d_model matrix": 2,
            "block parameters grow with d_model², not d_model³": 8,
            "that is the whole model's growth; the first number is the blocks'": mw,
        })
        check_value(got[1], bd, what=f"{label}[1], blocks_deep", rel=1e-9, mistakes={
            "one block keeps its size, but there are twice as many blocks": 1,
            "doubling the layers adds blocks; it does not widen them": 4,
            "that is the whole model's growth; the second number is the blocks'": md,
        })
        check_value(got[2], mw, what=f"{label}[2], model_wide", rel=1e-9, mistakes={
            "that is the blocks' growth: the embeddings grow only with d_model, so the "
            "whole model grows less": bw,
            "4 is the growth of the d_model² terms; the embeddings only double": 4,
            "the blocks grow by about 4, not 2; only the embeddings double": 2,
        })
        check_value(got[3], md, what=f"{label}[3], model_deep", rel=1e-9, mistakes={
            "the embeddings and the final LayerNorm do not grow with the layers, so the whole "
            "model grows by less than 2": 2,
            "one block keeps its size, but there are twice as many blocks": 1,
        })


# --- test yourself ---------------------------------------------------------------------------

@_builds_on("gpt2_params", "embedding_share")
def check_tys1(params_millions, embedding_percent) -> None:
    """Test-yourself 1: GPT-2 small's parameters (millions, about) and embedding share (%)."""
    s = GPT2_SMALL
    c = count_params(_shape(**s))
    total, E, tok = c.total, c.embedding, s["d_vocab"] * s["d_model"]
    check_value(params_millions, total / 1e6, what="tys1_params_millions", rel=0.005,
                mistakes={
                    "that counts the tied head a second time": (total + tok) / 1e6,
                    "that is the blocks alone: add the embeddings": (total - E) / 1e6,
                    "the answer is in millions: divide the count by 1,000,000": total,
                    "the answer is in millions, not billions": total / 1e9,
                })
    check_value(embedding_percent, 100 * E / total, what="tys1_embedding_percent", rel=0.002,
                mistakes={
                    "give a percentage (0 to 100), not a fraction": E / total,
                    "the position embedding is part of the embeddings too": 100 * tok / total,
                    "divide by all the parameters, not by the rest of the model":
                        100 * E / (total - E),
                    "the total counts the tied head twice": 100 * E / (total + tok),
                })


def _option(x) -> str:
    return x.strip().lower().replace("_", "-").replace(" ", "-") if isinstance(x, str) else x


def check_tys2(bigger, ff_share) -> None:
    """Test-yourself 2: which part of a block is bigger, and the feed-forward share of a
    block's weight matrices (biases and norms ignored)."""
    check_choice(_option(bigger), "feed-forward", what="tys2_bigger",
                 choices=("attention", "feed-forward", "equal"), hints={
                     "attention": "attention has four d_model × d_model matrices; count the "
                                  "feed-forward layer's two matrices and their shape",
                     "equal": "count the entries of each matrix: the feed-forward ones are "
                              "4·d_model wide on one side",
                 })
    check_value(ff_share, 2 / 3, what="tys2_ff_share", rel=0.002, mistakes={
        "that is feed-forward ÷ attention, a ratio; the share is feed-forward ÷ the block": 2,
        "that is attention's share": 1 / 3,
        "the two parts are not equal in size": 1 / 2,
        "give a fraction between 0 and 1, not a percentage": 200 / 3,
    })


def check_tys3(width_factor, layers_factor) -> None:
    """Test-yourself 3: how a block grows when d_model doubles, and all blocks together when
    n_layers doubles (to the nearest whole factor)."""
    check_value(width_factor, 4, what="tys3_width_factor", rel=0.01, mistakes={
        "a d_model × d_model matrix doubles along both sides": 2,
        "block parameters grow with d_model², not d_model³": 8,
        "doubling d_model grows every matrix in the block": 1,
    })
    check_value(layers_factor, 2, what="tys3_layers_factor", rel=0.01, mistakes={
        "each block keeps its size, but there are twice as many blocks": 1,
        "doubling the layers adds blocks; it does not widen them": 4,
    })


# --- recap: the three costs of a spec sheet --------------------------------------------------

@_builds_on("gpt2_params")
def check_spec_sheet_costs(fn, cards: Sequence[Mapping] = (GPT2_SMALL_CARD,)) -> None:
    """Check ``fn(n_layers, d_model, n_heads, d_vocab, n_ctx) -> {"params", "weight_bytes",
    "kv_cache_bytes", "flops_per_token"}`` for GPT-2-style cards: parameters, bytes of 16-bit
    weights, bytes of 16-bit KV cache for one sequence of n_ctx tokens, and forward FLOPs
    (= 2 × multiply-adds) for one token attending to n_ctx positions."""
    for card in cards:
        result, label = _call(fn, "spec_sheet_costs", card)
        got = _keyed(result, COST_KEYS, label)
        L, d, h, V, n = (card[k] for k in ("n_layers", "d_model", "n_heads", "d_vocab", "n_ctx"))
        s = _shape(d, L, V, n, n_heads=h)
        params = count_params(s).total
        check_value(got["params"], params, what=f"{label}['params']", integer=True,
                    mistakes=gpt2_param_mistakes(d, L, V, n))
        wb = weight_bytes(s, "fp16")
        check_value(got["weight_bytes"], wb, what=f"{label}['weight_bytes']", rel=1e-9,
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
        check_value(got["kv_cache_bytes"], kv, what=f"{label}['kv_cache_bytes']", rel=1e-9,
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
        check_value(got["flops_per_token"], flops, what=f"{label}['flops_per_token']", rel=1e-9,
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
