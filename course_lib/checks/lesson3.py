"""Checks for lesson 3, "The block": a block's two notes to the stream, a block counted by part, a no-op block,
pruning, a compression report, two sealed test-yourself questions.  Each compares with course_lib's block, counters
and compression (which the learner's functions may not call) on the visible inputs, one made at run time (seeded)
and the hidden tests'; a failure names the likely mistake (hints/lesson3.toml), never the expected value.  Test
models have every parameter random."""
from __future__ import annotations

import copy
import random
from typing import Mapping, Sequence

import torch

from ..block import FeedForward, TransformerBlock
from ..compression import chain_task, load_chain_model, neuron_scores, prune_feed_forward, share_kv_heads
from ..params import block_params
from ..shapes import gpt2_shape, llama_shape
from ..tiny_gpt import TinyGPT
from . import HIDDEN, CheckFailed, check_close, check_sealed, check_value, got_words, heads_kind
from .exercise import RANDOM_TAG  # noqa: F401 - the tests read it here
from .exercise import Exercise, Inputs, Part, Question, attempt, close, compare, name_mistake, sealed_picks
from .hints import load as _load_hints, named as _named
from .sealed import as_option, load as _load_sealed

SEALED, H = _load_sealed("lesson3"), _load_hints("lesson3")
"""Sealed answers by salt (sealed_answers/lesson3.json); words of named mistakes by exercise (hints/lesson3.toml)."""

BLOCK_CASES = (dict(d_model=768, d_ff=3072, style="gpt2"), dict(d_model=4096, d_ff=11008, style="llama"))
"""Visible cases of :func:`check_block_parts` and :func:`check_ff_share`: GPT-2 small's and Llama 2 7B's."""
STREAM_BLOCKS = NO_OP_BLOCKS = (dict(style="gpt2", seed=0),)
ADD_CASES = (dict(model="chain", where=1), dict(model="toy", n_layers=3, where=0))  # appended, and put first
PRUNE_CASES = (dict(model="chain", k=40),)
NEURON_LAYERS, REPORT_CASES = (dict(d_model=32, d_ff=64, seed=0),), (dict(how="ff", k=36), dict(how="kv", n_kv_heads=2))
"""The other checks' visible cases; the notebook's hidden tests pass others."""
STYLES, BLOCK_KEYS = ("gpt2", "llama"), ("attention", "feed_forward", "norms")
REPORT_KEYS, LONG_STEPS = ("attention", "feed_forward", "one_step", "eight_step"), 8
"""The report's keys; the lesson's long items (8 facts in a row)."""
BLOCK_PARTS = ("norm_1", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "norm_2", "mlp.up", "mlp.down")
"""Names of a GPT-2-style TransformerBlock's parts (test-yourself 1)."""
_TENSOR = dict(rtol=1e-5, atol=1e-5, record=(1e-5, 1e-5), tensor=True)  # compare's options: float32 sums
_OUTPUTS = ("attn.out_proj.weight", "attn.out_proj.bias", "mlp.down.weight", "mlp.down.bias")
_INPUTS = ("attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "mlp.up.weight")
_PRUNING = dict(forbidden={neuron_scores: "course_lib.compression.neuron_scores",
                           prune_feed_forward: "course_lib.compression.prune_feed_forward"})
_HOW = {"ff": "feed-forward pruned", "kv": "key/value heads shared",
        "both": "feed-forward pruned and key/value heads shared"}
_MODEL_KIND = {"chain": "lesson 3's chain model", "toy": "a random toy model"}


def _drawn(name: str, draw) -> tuple:
    return (draw(random.Random(f"lesson3/{name}")),)


RANDOM_STREAM_BLOCKS, RANDOM_NO_OP_BLOCKS = (_drawn(name, lambda r: dict(
    style=r.choice(STYLES), d_model=r.choice((16, 24, 48)), n_heads=r.choice((2, 4)), seed=r.randint(100, 10_000)))
    for name in ("stream", "no_op"))
RANDOM_SIZES = _drawn("sizes", lambda r: dict(d_model=64 * r.randint(4, 40), d_ff=16 * r.randint(40, 400),
                                              style=r.choice(STYLES)))
RANDOM_ADD = _drawn("add_block", lambda r: dict(model="toy", n_layers=(n := r.randint(2, 3)),
                                                seed=r.randint(100, 10_000), where=r.randint(0, n)))
RANDOM_LAYERS = _drawn("neurons", lambda r: dict(d_model=r.randint(8, 40), d_ff=r.randint(41, 80),
                                                 seed=r.randint(100, 10_000)))
RANDOM_PRUNE = _drawn("prune", lambda r: dict(model="chain", k=r.randint(8, 60)))
RANDOM_REPORT = _drawn("report", lambda r: dict(how="ff", k=r.randint(8, 60)))


# --- test material -------------------------------------------------------------------------

def _shake(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = 0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype)
            p.copy_(1 + noise if "norm" in name and name.endswith("weight") else noise)
    return module


def _shape(style: str, d_model: int, n_heads: int, n_kv_heads, d_ff, n_layers=1):
    sizes = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_vocab=16, n_ctx=16)
    if style == "gpt2":
        return gpt2_shape(**sizes, d_ff=d_ff).with_(n_kv_heads=n_kv_heads or n_heads)
    if style == "llama":  # no rotary positions: they change nothing checked here, and cost seconds
        return llama_shape(**sizes, n_kv_heads=n_kv_heads, d_ff=d_ff or 3 * d_model).with_(positions="none")
    raise ValueError(f"style={style!r} is not one of {', '.join(STYLES)}")


def toy_block(style="gpt2", d_model=32, n_heads=4, n_kv_heads=None, d_ff=None, seed=0):
    """A TransformerBlock of ``style`` (``gpt2``: LayerNorm, biases, GELU; ``llama``: RMSNorm, no
    biases, SwiGLU; no rotary positions) with random parameters."""
    return _shake(TransformerBlock(_shape(style, d_model, n_heads, n_kv_heads, d_ff)), seed).eval()


def zero_input_projections(block: TransformerBlock) -> TransformerBlock:
    """The tempting wrong way to silence a block (for the notebook): zero in place what *reads* the
    stream (query, key, value, up and gate projections, with their biases).  Returns the block."""
    mlp = (block.mlp.up, block.mlp.gate) if block.mlp is not None else ()
    layers = (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj, *mlp)
    for p in (p for layer in layers if layer is not None for p in (layer.weight, layer.bias) if p is not None):
        torch.nn.init.zeros_(p)
    return block


def toy_feed_forward(d_model=32, d_ff=64, seed=0):
    """A GELU FeedForward (with biases) with random parameters."""
    return _shake(FeedForward(d_model, d_ff, "gelu"), seed)


def toy_model(model="chain", n_layers=2, d_model=16, n_heads=4, d_ff=24, seed=0):
    """``"chain"``: lesson 3's shipped model; ``"toy"``: a GPT-2-style TinyGPT with random
    parameters (d_vocab = n_ctx = 16)."""
    if model not in _MODEL_KIND:
        raise ValueError(f"model={model!r} is not one of chain, toy")
    return load_chain_model()[0] if model == "chain" else _shake(TinyGPT(_shape(
        "gpt2", d_model, n_heads, None, d_ff, n_layers=n_layers)), seed).eval()


def _inputs(d_model: int, seed: int) -> torch.Tensor:
    return 2 * torch.randn(2, 6, d_model, generator=torch.Generator().manual_seed(1000 + seed))


def _tokens(model, seed: int) -> torch.Tensor:
    return torch.randint(0, model.shape.d_vocab, (4, min(model.shape.n_ctx, 12)),
                         generator=torch.Generator().manual_seed(2000 + seed))


# --- the shared steps of this lesson's checks: how an input is written, which mistake it is ---

def _describe(spec: Mapping) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in spec.items())


def _first(exercise: str, label: str, fields: Mapping | None = None, **when) -> None:
    name_mistake(label, {H[exercise][key].format(**(fields or {})): c for key, c in when.items()}, ": ")


def _block_kind(spec: Mapping) -> tuple:
    kv, heads = spec.get("n_kv_heads"), spec.get("n_heads", 4)
    return ("a Llama-style block (RMSNorm, SwiGLU, no biases)" if spec.get("style") == "llama" else
            "a GPT-2-style block", "" if kv is None or kv == heads else heads_kind(heads, kv))


# --- 1. the residual stream ----------------------------------------------------------------

def check_stream_parts(fn, blocks: Sequence[Mapping] = (*STREAM_BLOCKS, *RANDOM_STREAM_BLOCKS)) -> None:
    """Check ``fn(block, x) -> (attention_note, feed_forward_note)``: what each part of a pre-norm block adds to the
    stream x (batch, pos, d_model), so that block(x) = x + both.  ``blocks``: specs for :func:`toy_block`."""
    h = H["stream_parts"]
    for spec in blocks:
        block = toy_block(**spec)
        x = _inputs(block.norm_1.weight.shape[0], spec.get("seed", 0))
        with torch.no_grad():
            label, shown, result = attempt(fn, "stream_parts", spec, (STREAM_BLOCKS, RANDOM_STREAM_BLOCKS),
                                           f"block with {_describe(spec)}, x", (block, x), kinds=_block_kind(spec),
                                           forbidden={TransformerBlock.run: h["calls_block"]}, advice=h["advice"])
            _first("stream_parts", label, dict(got=got_words(result, label, 0)),
                   two_tensors=not isinstance(result, (tuple, list)) or len(result) != 2)
            a = block.attn(block.norm_1(x))
            m = block.mlp(block.norm_2(x + a))
            notes = (("[0], attention's note", a, dict(attn_of_x=block.attn(x), stream_after_attention=x + a)),
                     ("[1], the feed-forward note", m, dict(
                         ff_before_attention=block.mlp(block.norm_2(x)), ff_no_norm=block.mlp(x + a),
                         ff_norm_1=block.mlp(block.norm_1(x + a)), stream_after_block=x + a + m, both_notes=a + m)))
            for publish in (False, True):  # both notes right before either is recorded
                for got, (part, ref, slip) in zip(result, notes):
                    compare(got, ref, what=label + part, shown=shown, **_TENSOR, publish=publish,
                            mistakes=_named(h, **slip), shape_words="(batch, pos, d_model), the shape of x")


# --- 2. counting a block by part -------------------------------------------------------------

def block_part_mistakes(d_model: int, d_ff: int, style: str) -> dict:
    """``{part: {diagnosis: wrong value}}`` for the usual slips in counting one block."""
    d, f, h = d_model, d_ff, H["block_parts"]
    if style == "gpt2":
        return dict(attention=_named(h, gpt2_attn_no_biases=4 * d * d, gpt2_attn_out_bias_only=4 * d * d + d),
                    feed_forward=_named(h, gpt2_ff_no_biases=2 * d * f, gpt2_ff_no_down_bias=2 * d * f + f,
                                        gpt2_ff_bias_widths=2 * d * f + 2 * d, gpt2_ff_three=3 * d * f + 2 * f + d,
                                        d_ff_given=8 * d * d + 5 * d if f != 4 * d else None),
                    norms=_named(h, gpt2_layernorm_bias=2 * d, gpt2_no_norms=0, gpt2_final_norm=6 * d))
    return dict(attention=_named(h, llama_attn_biases=4 * d * d + 4 * d),
                feed_forward=_named(h, llama_ff_two=2 * d * f, llama_ff_biases=3 * d * f + 2 * f + d,
                                    d_ff_given=3 * d * 4 * d, llama_ff_two_4d=8 * d * d),
                norms=_named(h, llama_rmsnorm_bias=4 * d, llama_no_norms=0, llama_one_norm=d))


SIZES = dict(inputs=Inputs(BLOCK_CASES, RANDOM_SIZES, text=_describe, kinds=lambda c: (
    "GPT-2 style" if c["style"] == "gpt2" else "Llama style",
    "d_ff is not 4·d_model" if c["style"] == "gpt2" and c["d_ff"] != 4 * c["d_model"] else "")),
    reference=lambda a: {**block_params(_shape(a["style"], a["d_model"], 1, None, a["d_ff"])),
                         "slips": block_part_mistakes(**a)}, positional=True, fixed_note=False)
"""What both size exercises share: their inputs, and the learner's function gets ``(d_model, d_ff, style)``."""
check_block_parts = Exercise("block_parts", **SIZES, returns=BLOCK_KEYS, parts=[Part(
    k, expected=k, integer=True, mistakes=lambda r, k=k: r["slips"][k], suffix=f"[{k!r}]") for k in BLOCK_KEYS])
"""``block_parts(d_model, d_ff, style) -> {"attention", "feed_forward", "norms"}``: one block's
parameters by part, style ``"gpt2"`` (biases, two LayerNorms, GELU) or ``"llama"`` (no biases,
two RMSNorms, SwiGLU), multi-head attention (as many kv heads as heads)."""
check_ff_share = Exercise("ff_share", **SIZES, parts=[Part(
    expected=lambda r: r["feed_forward"] / r["total"], rel=1e-9, builds_on=("block_parts",), mistakes=lambda r: _named(
        H["ff_share"], two_thirds=2 / 3, no_norms=r["feed_forward"] / (r["attention"] + r["feed_forward"]),
        ratio=r["feed_forward"] / r["attention"], attention=r["attention"] / r["total"],
        percent=100 * (r["feed_forward"] / r["total"]), swiglu_two=2 * r["d_model"] * r["d_ff"] / (
            r["attention"] + 2 * r["d_model"] * r["d_ff"] + r["norms"]) if r["style"] == "llama" else None) | {
        H["ff_share"]["decimals"].format(k=k): round(r["feed_forward"] / r["total"], k) for k in (2, 3, 4)})])
"""``ff_share(d_model, d_ff, style) -> share``: the feed-forward layer's fraction of one block's
parameters (attention, feed-forward and the block's two norms), not rounded."""


# --- 3. a block that changes nothing ---------------------------------------------------------

def check_no_op(fn, blocks: Sequence[Mapping] = (*NO_OP_BLOCKS, *RANDOM_NO_OP_BLOCKS)) -> None:
    """Check ``fn(block) -> block``: the block changed in place to return its input exactly
    (``torch.equal``) by zeroing only what writes into the stream (attn.out_proj and mlp.down,
    weights and biases), every other parameter as it was.  ``blocks``: specs for :func:`toy_block`."""
    for spec in blocks:
        block = toy_block(**spec)
        before = {n: p.detach().clone() for n, p in block.named_parameters()}
        label, _, result = attempt(
            fn, "make_no_op", spec, (NO_OP_BLOCKS, RANDOM_NO_OP_BLOCKS), f"block with {_describe(spec)}", (block,),
            kinds=_block_kind(spec), advice=H["no_op"]["advice"],
            forbidden={TransformerBlock.zero_output_projections: "block.zero_output_projections"})
        _first("no_op", label, dict(got=got_words(result, label, 0)), in_place=result is not block)
        after = dict(block.named_parameters())
        outputs, zero = [n for n in _OUTPUTS if n in after], {n for n, p in after.items() if not p.detach().any()}
        extra = sorted(n for n in after if n not in outputs and not torch.equal(before[n], after[n].detach()))
        x = _inputs(before["norm_1.weight"].shape[0], spec.get("seed", 0))
        with torch.no_grad():
            out = block(x)
        if (exact := torch.equal(out, x)) and set(outputs) <= zero and not extra:  # records for the grader
            check_close(out, x, what=f"{label}: block(x), which must be x", rtol=0, atol=0)
            check_value(sum(after[n].numel() for n in extra), 0, integer=True,
                        what=f"{label}: parameters changed outside the output projections")
            continue
        attn_zero, ff_zero = "attn.out_proj.weight" in zero, "mlp.down.weight" in zero
        inputs_zero = ", ".join(n for n in _INPUTS if n in zero)
        biases_left = ", ".join(n for n in outputs if n.endswith("bias") and n not in zero)
        _first("no_op", label, dict(inputs=inputs_zero, extra=", ".join(extra), biases=biases_left),
               inputs_zeroed=inputs_zero and not set(outputs) <= zero, also_changed=exact,
               biases_left=biases_left and attn_zero and ff_zero, attention_only=attn_zero and not ff_zero,
               ff_only=ff_zero and not attn_zero, slightly=torch.allclose(out, x, atol=1e-3), not_its_input=True)


def check_add_block(fn, cases: Sequence[Mapping] = (*ADD_CASES, *RANDOM_ADD)) -> None:
    """Check ``fn(model, where) -> new model``: a copy of a TinyGPT with one new block of its shape
    at index ``where`` of ``blocks``, built so that the logits are exactly (``torch.equal``) the
    original's.  The original model is left as it was."""
    for case in cases:
        spec, where = {k: v for k, v in case.items() if k != "where"}, case["where"]
        model = toy_model(**spec)
        before, n_before, tokens = copy.deepcopy(model.state_dict()), len(model.blocks), _tokens(model, where)
        with torch.no_grad():
            expected = model(tokens)
        label, shown, result = attempt(fn, "add_no_op_block", case, (ADD_CASES, RANDOM_ADD),
                                       f"{_describe(spec)} model, where={where}", (model, where),
                                       kinds=(_MODEL_KIND[spec.get("model", "chain")],))
        blocks = getattr(result, "blocks", None)
        n = "none" if blocks is None else len(blocks)
        _first("add_block", label, dict(n=n_before, got=n, at=f"index {where}" if shown else "index where"),
               copy_first=result is model or len(model.blocks) != n_before or not all(
                   torch.equal(before[name], t) for name, t in model.state_dict().items()),
               one_more=n != n_before + 1 and not shown, n_plus_one=n != n_before + 1,
               not_new=lambda: sum(p.numel() for p in blocks[where].parameters()) != block_params(model.shape)["total"],
               order=lambda: not all(torch.equal(t, before[f"blocks.{i}.{k}"]) for i, b in enumerate(
                   b for j, b in enumerate(blocks) if j != where) for k, t in b.state_dict().items()))
        with torch.no_grad():
            got = result(tokens)
        _first("add_block", label, writes=lambda: not torch.equal(got, expected) and (
            blocks[where].attn.out_proj.weight.detach().any() or blocks[where].mlp.down.weight.detach().any()),
            not_exact=lambda: not torch.equal(got, expected))
        check_value(len(blocks), n_before + 1, what=f"{label}: blocks in the new model", integer=True)
        check_close(got, expected, what=f"{label}: logits, which must be the original's", rtol=0, atol=0)


# --- 4. pruning the feed-forward layer -------------------------------------------------------

def check_neuron_scores(fn, layers: Sequence[Mapping] = (*NEURON_LAYERS, *RANDOM_LAYERS)) -> None:
    """Check ``fn(mlp) -> (d_ff,) scores``: ‖row i of up.weight‖ × ‖column i of down.weight‖
    for each neuron of a GELU FeedForward.  ``layers``: specs for :func:`toy_feed_forward`."""
    for spec in layers:
        mlp = toy_feed_forward(**spec)
        square = "a square layer (d_ff = d_model)" if spec.get("d_ff", 64) == spec.get("d_model", 32) else ""
        with torch.no_grad():
            label, shown, got = attempt(
                fn, "neuron_scores", spec, (NEURON_LAYERS, RANDOM_LAYERS), f"layer with {_describe(spec)}", (mlp,),
                kinds=(square,), **_PRUNING, advice=H["neuron_scores"]["advice"])
            up, down = mlp.up.weight, mlp.down.weight  # (d_ff, d_model), (d_model, d_ff)
            _first("neuron_scores", label, d_model_scores=isinstance(got, torch.Tensor)
                   and got.shape == (up.shape[1],) != (up.shape[0],))
            r_up, r_down, r_bias = up.norm(dim=1), down.norm(dim=0), torch.column_stack([up, mlp.up.bias]).norm(dim=1)
            compare(got, neuron_scores(mlp), what=label, shown=shown, **_TENSOR, shape_words="(d_ff,)",
                    mistakes=lambda: _named(H["neuron_scores"], up_only=r_up, down_only=r_down, added=r_up + r_down,
                                            squared=r_up ** 2 * r_down ** 2, with_bias=r_bias * r_down,
                                            transposed=up.norm(dim=0) * down.norm(dim=1) if square else None))


def check_prune(fn, cases: Sequence[Mapping] = (*PRUNE_CASES, *RANDOM_PRUNE)) -> None:
    """Check ``fn(model, k) -> new model``: every block's feed-forward layer narrowed to the k
    neurons with the largest scores (rows of up with their biases, columns of down; down's bias
    kept), as a FeedForward of width k; the original model left as it was."""
    for case in cases:
        spec, k = {n: v for n, v in case.items() if n != "k"}, case["k"]
        model = toy_model(**spec)
        before, every = copy.deepcopy(model.state_dict()), all(k == b.mlp.up.out_features for b in model.blocks)
        label, shown, result = attempt(
            fn, "prune", case, (PRUNE_CASES, RANDOM_PRUNE), f"{_describe(spec)} model, k={k}", (model, k), **_PRUNING,
            kinds=(_MODEL_KIND[spec.get("model", "chain")], "k = d_ff: every neuron kept" if every else ""),
            advice=H["prune"]["advice"])
        _first("prune", label, copy_first=result is model or not all(
            torch.equal(before[n], t) for n, t in model.state_dict().items()),
            blocks=lambda: len(getattr(result, "blocks", ())) != len(model.blocks))
        for i, (new, old) in enumerate((a.mlp, b.mlp) for a, b in zip(result.blocks, model.blocks)):  # i: shown only
            (d_ff, d_model), shape = old.up.weight.shape, tuple(new.up.weight.shape)
            where = dict(blk=f"block {i}" if shown else "in a block", a_blk=f"block {i}" if shown else "a block")
            _first("prune", label, where, still_wide=shape == (d_ff, d_model) and k < d_ff,
                   shapes=shape != (k, d_model) or tuple(new.down.weight.shape) != (d_model, k))
            with torch.no_grad():  # for each new row of up, the index of the equal old row (or -1)
                kept = [next(iter((old.up.weight == r).all(dim=1).nonzero().flatten().tolist()), -1)
                        for r in new.up.weight]
                order = neuron_scores(old).argsort(descending=True).tolist()
                top = set(kept) == set(order[:k])
                _first("prune", label, where, rows=-1 in kept or len(set(kept)) != k,
                       smallest=not top and set(kept) == set(order[-k:]),
                       first_k=not top and set(kept) == set(range(k)), not_largest=not top,
                       down_columns=lambda: not torch.equal(new.down.weight, old.down.weight[:, kept]),
                       up_bias=lambda: old.up.bias is not None and not torch.equal(new.up.bias, old.up.bias[kept]),
                       down_bias=lambda: old.down.bias is not None and not torch.equal(new.down.bias, old.down.bias))
        tokens, reference = _tokens(model, k), prune_feed_forward(model, k)
        with torch.no_grad():
            got, expected = result(tokens), reference(tokens)
        _first("prune", label, logits=not close(got, expected, rtol=1e-5, atol=1e-5))
        check_value(sum(p.numel() for p in result.parameters()), sum(p.numel() for p in reference.parameters()),
                    what=f"{label}: parameters of the pruned model", integer=True)
        check_close(got, expected, what=f"{label}: logits of the pruned model", rtol=1e-5, atol=1e-5)


# --- recap: where was it compressed, and what did we test? ------------------------------------

def compressed_model(how: str, k: int | None = None, n_kv_heads: int | None = None):
    """Lesson 3's chain model compressed ``how``: ``"ff"`` (feed-forward pruned to k neurons),
    ``"kv"`` (n_kv_heads shared key/value heads), or ``"both"``."""
    if how not in _HOW:
        raise ValueError(f"how={how!r} is not one of ff, kv, both")
    model = share_kv_heads(load_chain_model()[0], n_kv_heads) if how != "ff" else load_chain_model()[0]
    return prune_feed_forward(model, k) if how != "kv" else model


def check_compression_report(fn, cases: Sequence[Mapping] = (*REPORT_CASES, *RANDOM_REPORT)) -> None:
    """Check ``fn(original, compressed, task) -> {"attention", "feed_forward", "one_step", "eight_step"}``:
    parameters removed from the attention and from the feed-forward layers (all blocks), and the compressed
    model's share of 1-step and of 8-step items of ``task`` wholly right.  ``cases``: :func:`compressed_model`'s."""
    task, original, h = chain_task(), load_chain_model()[0], H["compression_report"]

    def size(m, part: str) -> int:  # parameters of that part of every block
        return sum(p.numel() for b in m.blocks if getattr(b, part) is not None for p in getattr(b, part).parameters())
    for case in cases:
        compressed = compressed_model(**case)
        with torch.no_grad():
            label, _, got = attempt(fn, "compression_report", case, (REPORT_CASES, RANDOM_REPORT),
                                    f"original, model compressed with {_describe(case)}, task",
                                    (original, compressed, task), kinds=(_HOW[case["how"]],))
        if not isinstance(got, Mapping) or any(k not in got for k in REPORT_KEYS):
            raise CheckFailed(f"{label}: return a dict with keys {', '.join(map(repr, REPORT_KEYS))}, got " + (
                f"the keys {sorted(map(str, got))}" if isinstance(got, Mapping) and HIDDEN not in label
                else got_words(got, label, 0)))
        (a0, f0), (a1, f1) = ((size(m, "attn"), size(m, "mlp")) for m in (original, compressed))
        whole = a0 - a1 + f0 - f1
        for part, cut, left in (("attention", a0 - a1, a1), ("feed_forward", f0 - f1, f1)):
            check_value(got[part], cut, what=f"{label}[{part!r}]", integer=True, mistakes=_named(
                h, left=left, sign=-cut, whole=whole if cut != whole else None, lost_too=0 if cut else None))
        one, eight = task.accuracy(compressed, 1), task.accuracy(compressed, LONG_STEPS)
        prompts, answers = task.items(LONG_STEPS)
        with torch.no_grad():
            per_token = (compressed.generate(prompts, LONG_STEPS)[:, 1:] == answers).float().mean().item()
        check_value(got["one_step"], one, what=f"{label}['one_step']", rel=1e-9,
                    mistakes=_named(h, original=task.accuracy(original, 1), percent=100 * one))
        check_value(got["eight_step"], eight, what=f"{label}['eight_step']", rel=1e-9, mistakes=_named(
            h, estimate=one ** 8, per_token=per_token, original=task.accuracy(original, LONG_STEPS), one_step=one,
            percent=100 * eight))


# --- test yourself (sealed: neither this file nor a message shows the answers) ----------------
# Each part to zero is sealed alone ("yes" or "no", no hint, so the seals look alike); the diagnosis
# comes from which parts are wrong.  The share is sealed with 0.3 % tolerance.

def check_tys_new_block(reason, zeroed) -> None:
    """Test-yourself 1: why a new block can be added without breaking a model (a choice), and
    which parts of a GPT-2-style block to zero (names from :data:`BLOCK_PARTS`).  Sealed."""
    check_sealed(reason, SEALED["lesson3/tys_new_block_reason"])
    tys = ("tys_new_block", "tys_new_block_zeroed")  # the hints' table, the message's label
    _first(*tys, a_set=isinstance(zeroed, str) or not hasattr(zeroed, "__iter__"))
    got = {as_option(z, BLOCK_PARTS) for z in zeroed}
    unknown = sorted(str(z) for z in got if z not in BLOCK_PARTS)
    _first(*tys, dict(unknown=unknown, parts=", ".join(BLOCK_PARTS)), unknown=unknown)
    extra, missing = sealed_picks(got, {part: SEALED[f"lesson3/tys_new_block_zeroed/{part}"] for part in BLOCK_PARTS})
    _first(*tys, mixed=extra and missing, missing=missing, extra=extra)


check_tys_long_tests = Question((SEALED["lesson3/tys_long_reason"], SEALED["lesson3/tys_long_eight_step_share"]))
"""Test-yourself 2: why test long multi-step tasks after compression (a choice), and the share of
8-step items wholly right when each fact is right with probability 0.98 (a fraction)."""


from ..tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson3")  # one-line pass and fail messages in a notebook (course_lib.tutor)
