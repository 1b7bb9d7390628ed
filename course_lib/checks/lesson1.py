"""Checks for lesson 1, "The shape of a transformer", declared on :mod:`.exercise`.

Every function exercise is compared with course_lib's counters (``params``, ``memory``, ``flops``)
on GPT-2 small, two shapes made at run time (seeded) and, in the hidden tests, shapes the learner
has not seen; mistakes' words: ``hints/lesson1.toml``; test-yourself answers: sealed."""
from __future__ import annotations

import random

from ..flops import forward_flops_per_token
from ..memory import kv_cache_bytes_per_sequence, weight_bytes
from ..params import block_params, count_params
from ..shapes import gpt2_shape
from ..units import GB, GiB
from .exercise import RANDOM_TAG, Exercise, Inputs, Part, Question  # noqa: F401 - RANDOM_TAG: tests
from .hints import load as _load_hints, words
from .sealed import load as _load_sealed

SEALED, HINTS, _hints = _load_sealed("lesson1"), _load_hints("lesson1"), words("lesson1")

GPT2_SMALL = dict(d_model=768, n_layers=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's four counting numbers (its card also says n_heads = 12)."""

GPT2_SMALL_CARD = dict(n_layers=12, d_model=768, n_heads=12, d_vocab=50257, n_ctx=1024)
"""GPT-2 small's five spec-sheet numbers, in the order of :data:`check_spec_sheet_costs`."""


def random_shapes(seed: str, n: int = 2, heads: bool = False) -> tuple[dict, ...]:
    """``n`` GPT-2-style shapes drawn at run time from ``random.Random(seed)`` (the same on every run, so the
    grader's run of the model answer tries the same ones): d_model a multiple of 32 from 96 to 1,504, 2 to 30
    layers, 500 to 60,000 tokens, a context of 128 to 2,560; with ``heads``, a card (n_heads 2, 4 or 8)."""
    rng, out = random.Random(f"lesson1/{seed}"), []
    for _ in range(n):
        s = dict(d_model=32 * rng.randint(3, 47), n_layers=rng.randint(2, 30), d_vocab=rng.randint(500, 60_000),
                 n_ctx=64 * rng.randint(2, 40))
        out.append({k: s[k] if k in s else rng.choice((2, 4, 8)) for k in GPT2_SMALL_CARD} if heads else s)
    return tuple(out)


RANDOM_SHAPES = random_shapes("shapes")
"""Two GPT-2-style shapes made at run time (seeded): every visible test of a function tries them."""
RANDOM_CARDS = random_shapes("cards", heads=True)
"""Two GPT-2-style cards made at run time (seeded), for :data:`check_spec_sheet_costs`."""
RANDOM_D_MODELS = tuple(s["d_model"] for s in random_shapes("d_models"))
"""Two widths made at run time (seeded), for :data:`check_block_parts`."""

SHAPES = Inputs(shown=[GPT2_SMALL], random=RANDOM_SHAPES, hidden="another GPT-2-style shape")


def _shape(d_model, n_layers=1, d_vocab=1, n_ctx=1, n_heads=1):
    """A GPT-2-style shape.  No parameter count depends on n_heads (n_heads · d_head = d_model), so 1 head is
    used when the question does not give one."""
    return gpt2_shape(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_vocab=d_vocab, n_ctx=n_ctx)


def _not_rounded(expected: float) -> dict:
    """Mistakes a rounded share would match: 2 to 4 decimals (of the fraction and of %)."""
    rounded, m = HINTS["rounded"], {}
    for k in (2, 3, 4):
        m[rounded["decimals"].format(k=k)] = round(expected, k)
        m[rounded["percent_decimals"].format(k=k - 1)] = round(100 * expected, k - 1)
    return {**m, rounded["percent"]: 100 * expected}


def _counts(a) -> dict:
    """What the checks of a GPT-2 shape compare with: its total, embeddings, one block and shares."""
    d, L = a["d_model"], a["n_layers"]
    c, b = count_params(_shape(**a)), block_params(_shape(d))
    return dict(L=L, total=c.total, E=c.embedding, tok=a["d_vocab"] * d, pos=a["n_ctx"] * d,
                E_share=c.embedding / c.total, ff=b["feed_forward"], attn=b["attention"], block=b["total"],
                ff_block=b["feed_forward"] / b["total"], ff_model=L * b["feed_forward"] / c.total)


# --- the GPT-2 parameter count ---------------------------------------------------------------

def gpt2_param_mistakes(d_model: int, n_layers: int, d_vocab: int, n_ctx: int) -> dict:
    """``{diagnosis: wrong total}`` for the usual slips in a GPT-2 parameter count (the words:
    ``[gpt2_params]`` in hints/lesson1.toml)."""
    d, L = d_model, n_layers
    total = count_params(_shape(d, L, d_vocab, n_ctx)).total
    tok, pos, block = d_vocab * d, n_ctx * d, 12 * d * d + 13 * d
    return _hints(
        "gpt2_params", tied_twice=total + tok, no_positions=total - pos, tied_twice_no_positions=total + tok - pos,
        no_embeddings=total - tok - pos, no_biases=total - 9 * L * d, no_norms=total - 4 * L * d - 2 * d,
        no_final_norm=total - 2 * d, norm_bias=total - (2 * L + 1) * d, weights_only=total - 13 * L * d - 2 * d,
        ff_width=total - L * (6 * d * d + 3 * d), no_attn_output=total - L * (d * d + d), no_blocks=total - L * block,
        one_block=total - (L - 1) * block)


check_gpt2_params = Exercise(
    "gpt2_params", SHAPES, reference=lambda a: {"total": count_params(_shape(**a)).total},
    parts=[Part(expected="total", integer=True, mistakes=lambda r: gpt2_param_mistakes(
        **{k: r[k] for k in GPT2_SMALL}))])
"""``gpt2_params(d_model, n_layers, d_vocab, n_ctx)``: a GPT-2 parameter count, exact."""

# --- the embedding share ---------------------------------------------------------------------

check_embedding_share = Exercise(
    "embedding_share", SHAPES, _counts, returns="embedding parameters, share of the model", parts=[
        Part(0, "the embedding parameters", "E", integer=True, mistakes=lambda r: _hints(
            "embedding_share", no_positions=r["tok"], no_tokens=r["pos"], second_table=2 * r["tok"] + r["pos"])),
        Part(1, "the embedding share", "E_share", rel=1e-9, builds_on=("gpt2_params",), mistakes=lambda r: {
            **_hints("embedding_share", share_no_positions=r["tok"] / r["total"],
                     rest_of_model=r["E"] / (r["total"] - r["E"]), tied_twice=r["E"] / (r["total"] + r["tok"])),
            **_not_rounded(r["E_share"])})])
"""``embedding_share(d_model, n_layers, d_vocab, n_ctx) -> (embedding parameters, share)``:
the token and position tables, and their fraction of all parameters."""

# --- inside a block --------------------------------------------------------------------------

check_block_parts = Exercise(
    "block_parts", Inputs(shown=[{"d_model": 768}], random=[{"d_model": d} for d in RANDOM_D_MODELS],
                          hidden="another d_model"),
    lambda a: {**block_params(_shape(a["d_model"])), "d": a["d_model"], "d2": a["d_model"] ** 2}, arg="d_model",
    returns=("attention", "feed_forward", "norms"), parts=[
        Part("attention", expected="attention", integer=True, mistakes=lambda r: _hints(
            "block_parts", attn_no_biases=4 * r["d2"], no_output=3 * r["d2"] + 3 * r["d"],
            no_output_bias=4 * r["d2"] + 3 * r["d"], no_kv=2 * r["d2"] + 2 * r["d"])),
        Part("feed_forward", expected="feed_forward", integer=True, mistakes=lambda r: _hints(
            "block_parts", ff_no_biases=8 * r["d2"], ff_width=2 * r["d2"] + 2 * r["d"],
            second_bias_width=8 * r["d2"] + 8 * r["d"], no_second_bias=8 * r["d2"] + 4 * r["d"],
            first_bias_width=8 * r["d2"] + 2 * r["d"], one_matrix=4 * r["d2"] + 4 * r["d"])),
        Part("norms", expected="norms", integer=True, mistakes=lambda r: _hints(
            "block_parts", one_norm=2 * r["d"], no_norms=0, final_norm_per_block=6 * r["d"]))])
"""``block_parts(d_model) -> {"attention", "feed_forward", "norms"}``: one GPT-2 block's
parameters by part (d_ff = 4·d_model, biases and two LayerNorms)."""

check_ff_shares = Exercise(
    "ff_shares", SHAPES, _counts, returns="share of a block, share of the model",
    builds_on=("block_parts", "gpt2_params"), parts=[
        Part(0, "the share of a block", "ff_block", rel=1e-9, mistakes=lambda r: {
            **_hints("ff_shares", weights_only=2 / 3, no_norms=r["ff"] / (r["attn"] + r["ff"]),
                     ratio=r["ff"] / r["attn"], model_share=r["ff_model"]), **_not_rounded(r["ff_block"])}),
        Part(1, "the share of the model", "ff_model", rel=1e-9, mistakes=lambda r: {
            **_hints("ff_shares", block_share=r["ff_block"], one_layer=r["ff"] / r["total"],
                     blocks_only=r["L"] * r["ff"] / (r["total"] - r["pos"] - r["tok"]),
                     tied_twice=r["L"] * r["ff"] / (r["total"] + r["tok"])), **_not_rounded(r["ff_model"])})])
"""``ff_shares(d_model, n_layers, d_vocab, n_ctx) -> (share of a block, share of the model)``:
the feed-forward layers' fraction of one block and of all parameters (exact)."""


def _growth(a) -> dict:
    """How all blocks (b) and the whole model (m) grow when d_model (w) or n_layers (d) doubles."""
    def size(w=1, k=1):  # (all blocks, the whole model) at w·d_model and k·n_layers
        d, L = w * a["d_model"], k * a["n_layers"]
        return L * block_params(_shape(d))["total"], count_params(_shape(**{**a, "d_model": d, "n_layers": L})).total

    (b, m), (bw, mw), (bd, md) = size(), size(w=2), size(k=2)
    return dict(bw=bw / b, bd=bd / b, mw=mw / m, md=md / m)


check_doubling = Exercise(
    "doubling", SHAPES, _growth, returns="blocks_wide, blocks_deep, model_wide, model_deep",
    builds_on=("block_parts", "gpt2_params"), parts=[
        Part(0, "blocks_wide", "bw", rel=1e-9, mistakes=lambda r: _hints(
            "doubling", squares_only=4, both_sides=2, cubed=8, whole_model_wide=r["mw"])),
        Part(1, "blocks_deep", "bd", rel=1e-9, mistakes=lambda r: _hints(
            "doubling", same_block=1, not_wider=4, whole_model_deep=r["md"])),
        Part(2, "model_wide", "mw", rel=1e-9, mistakes=lambda r: _hints(
            "doubling", blocks_growth=r["bw"], embeddings_double=4, blocks_grow_4=2)),
        Part(3, "model_deep", "md", rel=1e-9, mistakes=lambda r: _hints("doubling", less_than_2=2, same_block=1))])
"""``doubling(d_model, n_layers, d_vocab, n_ctx) -> (blocks_wide, blocks_deep, model_wide, model_deep)``:
how many times all blocks', and the whole model's, parameters grow when d_model or n_layers doubles."""


# --- test yourself ---------------------------------------------------------------------------
# Sealed.  The questions say that whole numbers (tys1, tys3) or two decimals (tys2) will do, so the tolerances
# let such answers pass: tys1 0.5 % (params, millions) and 1.6 % (percent), tys2 1.5 %, tys3 1 %.  Every named
# mistake lies outside them.

TYS1_PARAMS, TYS1_EMBEDDING, TYS2_BIGGER, TYS2_FF_SHARE, TYS3_WIDTH, TYS3_LAYERS = (SEALED[f"lesson1/{k}"] for k in (
    "tys1_params_millions", "tys1_embedding_percent", "tys2_bigger", "tys2_ff_share", "tys3_width_factor",
    "tys3_layers_factor"))
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
    "spec_sheet_costs", Inputs(shown=[GPT2_SMALL_CARD], random=RANDOM_CARDS, hidden="another GPT-2-style card"),
    _costs, returns=("params", "weight_bytes", "kv_cache_bytes", "flops_per_token"), builds_on=("gpt2_params",),
    parts=[
        Part("params", expected="params", integer=True, mistakes=lambda r: gpt2_param_mistakes(
            **{k: r[k] for k in GPT2_SMALL})),
        Part("weight_bytes", expected="wb", rel=1e-9, mistakes=lambda r: _hints(
            "spec_sheet_costs", param_count=r["params"], fp32=4 * r["params"], gib=r["wb"] / GiB, gb=r["wb"] / GB,
            tied_twice=2 * (r["params"] + r["V"] * r["d"]), no_positions=2 * (r["params"] - r["n"] * r["d"]))),
        Part("kv_cache_bytes", expected="kv", rel=1e-9, mistakes=lambda r: _hints(
            "spec_sheet_costs", one_factor_2=r["kv"] / 2, both_factors_2=r["kv"] / 4, kv_n_heads=r["kv"] * r["h"],
            one_token=r["kv"] / r["n"], one_layer=r["kv"] / r["L"], gib=r["kv"] / GiB)),
        Part("flops_per_token", expected="flops", rel=1e-9, mistakes=lambda r: _hints(
            "spec_sheet_costs", macs=r["flops"] / 2, no_head=r["flops"] - 2 * r["d"] * r["V"],
            no_attention=r["flops"] - 2 * r["macs_attn"], rule_of_thumb=2 * r["params"],
            attn_n_heads=r["flops"] + 2 * (r["h"] - 1) * r["macs_attn"]))])
"""``spec_sheet_costs(n_layers, d_model, n_heads, d_vocab, n_ctx) -> {"params", "weight_bytes", "kv_cache_bytes",
"flops_per_token"}`` of a GPT-2-style card: parameters, bytes of 16-bit weights and of one sequence's 16-bit KV
cache at n_ctx tokens, forward FLOPs (2 per multiply-add) of one token attending to n_ctx positions."""


from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson1")  # one-line pass and fail messages in a notebook (course_lib.tutor)
