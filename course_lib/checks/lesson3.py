"""Checks for lesson 3, "The block".

Each check compares a learner's answer with an independent reference and, on failure, raises
:class:`~course_lib.checks.CheckFailed` naming the likely mistake without showing the expected
value:

* the two notes a block writes into the residual stream, against the block's own forward pass
  (which the learner's function may not call);
* a block counted by part, against :func:`course_lib.block_params` (itself tested against
  ``transformers``), through :func:`~course_lib.checks.exercise.call`;
* a block made a no-op, by exact equality (``torch.equal``) of its output and its input, and by
  which parameters changed (it may not call ``TransformerBlock.zero_output_projections``);
* a block added to a model, by exact equality of the logits;
* neuron scores and pruning, against :mod:`course_lib.compression` (which the learner's
  functions may not call);
* a compression report, against parameters counted from the modules and ``ChainTask.accuracy``.

Each case that passes ends in the check primitives (``check_close``, ``check_value``,
``check_sealed``), so the grader gets a record of the learner's values to compare with the model
answer's.  Test blocks, layers and models are made here from small dicts (``dict(style="llama", seed=1)``)
with every parameter drawn at random, biases and norms included, so that a bias left in place
shows.  The notebook's hidden tests pass specs the learner has not seen.
"""
from __future__ import annotations

import copy
import inspect
import random
from typing import Callable, Mapping, Sequence

import torch

from ..block import FeedForward, TransformerBlock
from ..compression import (chain_task, load_chain_model, neuron_scores, prune_feed_forward,
                           share_kv_heads)
from ..params import block_params
from ..shapes import gpt2_shape, llama_shape
from . import check_sealed
from .sealed import load as _load_sealed
from functools import partial

from . import CheckFailed, check_close, check_value, is_shown, watch_calls
from .exercise import HIDDEN, RANDOM_TAG, call, close, label as named  # noqa: F401 - RANDOM_TAG: tests

SEALED = _load_sealed("lesson3")
"""This assignment's sealed answers by salt (sealed_answers/lesson3.json)."""

# --- the lesson's fixed inputs ------------------------------------------------------------------

BLOCK_CASES = (dict(d_model=768, d_ff=3072, style="gpt2"),
               dict(d_model=4096, d_ff=11008, style="llama"))
"""Visible cases of :func:`check_block_parts` and :func:`check_ff_share`: GPT-2 small's block
and Llama 2 7B's."""
STREAM_BLOCKS = NO_OP_BLOCKS = (dict(style="gpt2", seed=0),)
"""Visible blocks of :func:`check_stream_parts` and :func:`check_no_op`."""
ADD_CASES = (dict(model="chain", where=1),)
NEURON_LAYERS = (dict(d_model=32, d_ff=64, seed=0),)
PRUNE_CASES = (dict(model="chain", k=40),)
REPORT_CASES = (dict(how="ff", k=36),)
"""Visible cases of :func:`check_add_block`, :func:`check_neuron_scores`, :func:`check_prune`
and :func:`check_compression_report`; the notebook's hidden tests pass others."""
STYLES = ("gpt2", "llama")
BLOCK_KEYS = ("attention", "feed_forward", "norms")
REPORT_KEYS = ("attention", "feed_forward", "one_step", "eight_step")
LONG_STEPS = 8
"""The multi-step items of the lesson: 8 facts in a row."""
TYS_FACT_ACCURACY = 0.98
"""Test-yourself 2: each fact right with this probability."""
BLOCK_PARTS = ("norm_1", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj",
               "norm_2", "mlp.up", "mlp.down")
"""Names of a GPT-2-style TransformerBlock's parts (test-yourself 1)."""
_ATOL = 1e-5

def _random(name: str) -> random.Random:
    """The seeded generator of one exercise's run-time input: the same on every run, so the
    grader's run of the model answer tries the same inputs as the learner's."""
    return random.Random(f"lesson3/{name}")


def _random_block(name: str) -> dict:
    r = _random(name)
    style, d_model = r.choice(STYLES), r.choice((16, 24, 48))
    return dict(style=style, d_model=d_model, n_heads=r.choice((2, 4)), seed=r.randint(100, 10_000))


# Inputs made at run time (seeded): every visible test of a function tries one besides the
# lesson's fixed cases, so that an answer which ignores its arguments fails in the notebook.
RANDOM_STREAM_BLOCKS = (_random_block("stream"),)
RANDOM_NO_OP_BLOCKS = (_random_block("no_op"),)
_r = _random("sizes")
RANDOM_SIZES = (dict(d_model=64 * _r.randint(4, 40), d_ff=16 * _r.randint(40, 400),
                     style=_r.choice(STYLES)),)
_r = _random("add_block")
_n = _r.randint(2, 3)
RANDOM_ADD = (dict(model="toy", n_layers=_n, seed=_r.randint(100, 10_000), where=_r.randint(0, _n)),)
_r = _random("neurons")
RANDOM_LAYERS = (dict(d_model=_r.randint(8, 40), d_ff=_r.randint(41, 80), seed=_r.randint(100, 10_000)),)
RANDOM_PRUNE = (dict(model="chain", k=_random("prune").randint(8, 60)),)
RANDOM_REPORT = (dict(how="ff", k=_random("report").randint(8, 60)),)
del _r, _n


# --- test material -------------------------------------------------------------------------

def _shake(module: torch.nn.Module, seed: int) -> None:
    """Every parameter drawn at random (norm weights around 1), as a trained model's would be:
    biases are not zero, so a bias left in place changes the output."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = 0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype)
            is_norm_weight = "norm" in name and name.endswith("weight")
            p.copy_(1 + noise if is_norm_weight else noise)


def _shape(style: str, d_model: int, n_heads: int, n_kv_heads, d_ff, n_layers=1, d_vocab=16,
           n_ctx=16):
    if style == "gpt2":
        s = gpt2_shape(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_vocab=d_vocab,
                       n_ctx=n_ctx, d_ff=d_ff)
        return s if n_kv_heads is None else s.with_(n_kv_heads=n_kv_heads)
    if style == "llama":
        # Rotary positions act inside attention and change nothing these checks look at; they
        # are left out because their first use costs seconds (torch imports torch._refs).
        return llama_shape(d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                           n_kv_heads=n_kv_heads, d_ff=d_ff or 3 * d_model, d_vocab=d_vocab,
                           n_ctx=n_ctx).with_(positions="none")
    raise ValueError(f"style={style!r} is not one of {', '.join(STYLES)}")


def toy_block(style="gpt2", d_model=32, n_heads=4, n_kv_heads=None, d_ff=None, seed=0):
    """A TransformerBlock of ``style`` (``gpt2``: LayerNorm, biases, GELU; ``llama``: RMSNorm, no
    biases, SwiGLU; no rotary positions) with random parameters."""
    block = TransformerBlock(_shape(style, d_model, n_heads, n_kv_heads, d_ff))
    _shake(block, seed)
    return block.eval()


def zero_input_projections(block: TransformerBlock) -> TransformerBlock:
    """The tempting wrong way to silence a block, for the notebook's comparison: zero what
    *reads* the stream (query, key, value, up and gate projections, with their biases) in place.
    Returns the block."""
    with torch.no_grad():
        for layer in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj,
                      *((block.mlp.up, block.mlp.gate) if block.mlp is not None else ())):
            if layer is not None:
                torch.nn.init.zeros_(layer.weight)
                if layer.bias is not None:
                    torch.nn.init.zeros_(layer.bias)
    return block


def toy_feed_forward(d_model=32, d_ff=64, seed=0):
    """A GELU FeedForward (with biases) with random parameters."""
    mlp = FeedForward(d_model, d_ff, "gelu")
    _shake(mlp, seed)
    return mlp


def toy_model(model="chain", n_layers=2, d_model=16, n_heads=4, d_ff=24, seed=0):
    """``"chain"``: lesson 3's shipped model; ``"toy"``: a GPT-2-style TinyGPT with random
    parameters (d_vocab = n_ctx = 16)."""
    from ..tiny_gpt import TinyGPT
    if model == "chain":
        return load_chain_model()[0]
    if model != "toy":
        raise ValueError(f"model={model!r} is not one of chain, toy")
    m = TinyGPT(_shape("gpt2", d_model, n_heads, None, d_ff, n_layers=n_layers))
    _shake(m, seed)
    return m.eval()


def _inputs(d_model: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + seed)
    return 2 * torch.randn(2, 6, d_model, generator=g)  # (batch, pos, d_model)


def _tokens(model, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(2000 + seed)
    s = model.shape
    return torch.randint(0, s.d_vocab, (4, min(s.n_ctx, 12)), generator=g)  # (batch, pos)


def _guarded(fn: Callable, forbidden: Mapping[Callable, str], label: str, *args, advice: str = ""):
    """``fn(*args)`` through :func:`~course_lib.checks.exercise.call` (``label`` names the
    input), failing if it called one of ``forbidden`` (function -> how to name it)."""
    if not callable(fn):
        raise CheckFailed(f"expected a function, got {type(fn).__name__}")
    codes = {inspect.unwrap(f).__code__: name for f, name in forbidden.items()}
    found: list = []
    with watch_calls(found, codes=codes):
        result = call(fn, label, *args, shown=HIDDEN not in label)
    if found:
        raise CheckFailed(f"{getattr(fn, '__name__', 'your function')} calls {found[0]}: "
                          f"{advice or 'write it yourself'}")
    return result


_close = partial(close, rtol=_ATOL, atol=_ATOL)


def _tensor(x, shape, what: str, names: str | None = None) -> torch.Tensor:
    """``x`` if it is a tensor of ``shape``; on a hidden test's input give ``names`` (the
    shape in words, e.g. ``"(d_ff,)"``): its sizes are not named."""
    if not isinstance(x, torch.Tensor):
        raise CheckFailed(f"{what}: expected a torch tensor, got {type(x).__name__}")
    if tuple(x.shape) != tuple(shape):
        if names is not None:
            raise CheckFailed(f"{what}: expected shape {names}, got another shape")
        raise CheckFailed(f"{what}: expected shape {tuple(shape)}, got {tuple(x.shape)}")
    return x


def _describe(spec: Mapping) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in spec.items())


def _block_kind(spec: Mapping) -> tuple:
    """The kind of a :func:`toy_block` spec, in words (for a hidden test's block)."""
    style = ("a Llama-style block (RMSNorm, SwiGLU, no biases)" if spec.get("style") == "llama"
             else "a GPT-2-style block")
    kv, heads = spec.get("n_kv_heads"), spec.get("n_heads", 4)
    attn = ("" if kv is None or kv == heads else
            "multi-query attention (one key/value head)" if kv == 1 else "grouped-query attention")
    return style, attn


def _size_kind(case: Mapping) -> tuple:
    """The kind of a :func:`check_block_parts` case, in words (for a hidden test's case)."""
    style = "Llama style" if case["style"] == "llama" else "GPT-2 style"
    return style, ("d_ff is not 4·d_model" if case["style"] == "gpt2"
                   and case["d_ff"] != 4 * case["d_model"] else "")


def _model_kind(spec: Mapping) -> str:
    return "lesson 3's chain model" if spec.get("model", "chain") == "chain" else "a random toy model"


def _option(x):
    return x.strip().lower() if isinstance(x, str) else x


# --- 1. the residual stream ----------------------------------------------------------------

def check_stream_parts(fn, blocks: Sequence[Mapping] = (*STREAM_BLOCKS, *RANDOM_STREAM_BLOCKS)
                       ) -> None:
    """Check ``fn(block, x) -> (attention_note, feed_forward_note)``: what each part of a
    pre-norm block adds to the stream x (batch, pos, d_model), so that block(x) = x + both.
    ``blocks``: specs for :func:`toy_block`."""
    for spec in blocks:
        block = toy_block(**spec)
        x = _inputs(block.norm_1.weight.shape[0], spec.get("seed", 0))
        shown = is_shown(spec, (*STREAM_BLOCKS, *RANDOM_STREAM_BLOCKS))
        label = named("stream_parts", f"block with {_describe(spec)}, x", shown=shown,
                      random=is_shown(spec, RANDOM_STREAM_BLOCKS), kinds=_block_kind(spec))
        names = None if shown else "(batch, pos, d_model), the shape of x"
        with torch.no_grad():
            result = _guarded(fn, {TransformerBlock.run: "the block itself (block(x) or block.run)"},
                              label, block, x, advice="write the block's two steps with block.norm_1, "
                              "block.attn, block.norm_2 and block.mlp")
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise CheckFailed(f"{label}: return two tensors (attention's note, the "
                                  f"feed-forward layer's note), got {type(result).__name__}")
            a = _tensor(result[0], x.shape, f"{label}[0], attention's note", names)
            m = _tensor(result[1], x.shape, f"{label}[1], the feed-forward note", names)
            ref_a = block.attn(block.norm_1(x))
            ref_m = block.mlp(block.norm_2(x + ref_a))
            if not _close(a, ref_a):
                if _close(a, block.attn(x)):
                    raise CheckFailed(f"{label}[0]: attention reads the normalised stream: "
                                      "block.attn(block.norm_1(x)), not block.attn(x)")
                if _close(a, x + ref_a):
                    raise CheckFailed(f"{label}[0]: that is the stream after attention; return "
                                      "only what attention adds to it (its note)")
                raise CheckFailed(f"{label}[0], attention's note, is not right")
            if not _close(m, ref_m):
                hints = [
                    (block.mlp(block.norm_2(x)), "the feed-forward layer reads the stream after "
                     "attention has written to it: norm_2(x + attention's note), not norm_2(x)"),
                    (block.mlp(x + ref_a), "the feed-forward layer reads the normalised stream: "
                     "apply block.norm_2 first"),
                    (block.mlp(block.norm_1(x + ref_a)), "the feed-forward layer has its own "
                     "norm, block.norm_2"),
                    (x + ref_a + ref_m, "that is the stream after the block; return only what the "
                     "feed-forward layer adds"),
                    (ref_a + ref_m, "that is both notes together; return the feed-forward "
                     "layer's note alone"),
                ]
                for wrong, hint in hints:
                    if _close(m, wrong):
                        raise CheckFailed(f"{label}[1]: {hint}")
                raise CheckFailed(f"{label}[1], the feed-forward note, is not right")
            # the same comparisons through the check primitives (records for the grader)
            check_close(a, ref_a, what=f"{label}[0], attention's note", rtol=_ATOL, atol=_ATOL)
            check_close(m, ref_m, what=f"{label}[1], the feed-forward note", rtol=_ATOL, atol=_ATOL)


# --- 2. counting a block by part -------------------------------------------------------------

def _expected_parts(d_model: int, d_ff: int, style: str) -> dict:
    s = _shape(style, d_model, 1, None, d_ff)
    return block_params(s)


def block_part_mistakes(d_model: int, d_ff: int, style: str) -> dict:
    """``{part: {diagnosis: wrong value}}`` for the usual slips in counting one block."""
    d, f = d_model, d_ff
    if style == "gpt2":
        ff_4d = {"the question gives d_ff: use it, not 4·d_model": 8 * d * d + 5 * d} \
            if f != 4 * d else {}
        return {
            "attention": {
                "the biases are missing: Q, K, V and the output projection each have d_model":
                    4 * d * d,
                "Q, K and V have biases too, not only the output projection": 4 * d * d + d,
            },
            "feed_forward": {
                "the biases are missing: d_ff for the up projection, d_model for the down one":
                    2 * d * f,
                "the down projection's bias (d_model) is missing": 2 * d * f + f,
                "the up projection's bias is d_ff wide, the down projection's d_model":
                    2 * d * f + 2 * d,
                "a GPT-2 feed-forward layer has two matrices (up, down), not three": 3 * d * f + 2 * f + d,
                **ff_4d,
            },
            "norms": {
                "a LayerNorm has a weight and a bias of d_model each (and there are two)": 2 * d,
                "the norms are missing: two LayerNorms per block": 0,
                "the final LayerNorm comes once after the last block, not in every block":
                    6 * d,
            },
        }
    return {
        "attention": {
            "Llama's projections have no biases": 4 * d * d + 4 * d,
        },
        "feed_forward": {
            "SwiGLU has three matrices (gate, up and down), not two": 2 * d * f,
            "Llama's feed-forward layer has no biases": 3 * d * f + 2 * f + d,
            "the question gives d_ff: use it, not 4·d_model": 3 * d * 4 * d,
            "SwiGLU has three matrices, and d_ff is given (not 4·d_model)": 8 * d * d,
        },
        "norms": {
            "RMSNorm has a weight only (d_model), no bias": 4 * d,
            "the norms are missing: two RMSNorms per block": 0,
            "there are two RMSNorms per block (before attention and before the feed-forward "
            "layer)": d,
        },
    }


def _parts(result, label: str) -> dict:
    if not isinstance(result, Mapping):
        raise CheckFailed(f"{label}: return a dict with keys {', '.join(map(repr, BLOCK_KEYS))}, "
                          f"got {type(result).__name__}")
    missing = [k for k in BLOCK_KEYS if k not in result]
    if missing:
        raise CheckFailed(f"{label}: the dict is missing {', '.join(map(repr, missing))}")
    return dict(result)


def check_block_parts(fn, cases: Sequence[Mapping] = (*BLOCK_CASES, *RANDOM_SIZES)) -> None:
    """Check ``fn(d_model, d_ff, style) -> {"attention", "feed_forward", "norms"}``: one block's
    parameters by part, style ``"gpt2"`` (biases, two LayerNorms, GELU) or ``"llama"`` (no
    biases, two RMSNorms, SwiGLU), multi-head attention (as many kv heads as heads)."""
    for case in cases:
        label = named("block_parts", _describe(case), shown=is_shown(case, (*BLOCK_CASES, *RANDOM_SIZES)),
                      random=is_shown(case, RANDOM_SIZES), kinds=_size_kind(case))
        got = _parts(call(fn, label, case["d_model"], case["d_ff"], case["style"], shown=HIDDEN not in label), label)
        expected = _expected_parts(**case)
        mistakes = block_part_mistakes(**case)
        for part in BLOCK_KEYS:
            check_value(got[part], expected[part], what=f"{label}[{part!r}]", integer=True,
                        mistakes=mistakes[part])


def check_ff_share(fn, cases: Sequence[Mapping] = (*BLOCK_CASES, *RANDOM_SIZES)) -> None:
    """Check ``fn(d_model, d_ff, style) -> share``: the feed-forward layer's fraction of one
    block's parameters (attention, feed-forward and the block's two norms), not rounded."""
    for case in cases:
        label = named("ff_share", _describe(case), shown=is_shown(case, (*BLOCK_CASES, *RANDOM_SIZES)),
                      random=is_shown(case, RANDOM_SIZES), kinds=_size_kind(case))
        got = call(fn, label, case["d_model"], case["d_ff"], case["style"], shown=HIDDEN not in label)
        p = _expected_parts(**case)
        ff, attn, total = p["feed_forward"], p["attention"], p["total"]
        share = ff / total
        d, f = case["d_model"], case["d_ff"]
        mistakes = {
            "2/3 is the share of the weight matrices in a GPT-2 block (8·d² of 12·d²); compute "
            "it from your counts": 2 / 3,
            "the block's norms belong to the block too": ff / (attn + ff),
            "that is feed-forward ÷ attention, a ratio; the share is feed-forward ÷ the block":
                ff / attn,
            "that is attention's share": attn / total,
            "give a fraction between 0 and 1, not a percentage": 100 * share,
        }
        if case["style"] == "llama":
            mistakes["SwiGLU has three matrices, not two"] = 2 * d * f / (attn + 2 * d * f + p["norms"])
        try:
            check_value(got, share, what=label, rel=1e-9, mistakes=mistakes)
        except CheckFailed as e:
            msg = str(e)
            if "by less than half" in msg or "factor" in msg:
                msg += " If this uses your block_parts, make sure its test passes first."
            raise CheckFailed(msg) from None


# --- 3. a block that changes nothing ---------------------------------------------------------

_OUTPUTS = ("attn.out_proj.weight", "attn.out_proj.bias", "mlp.down.weight", "mlp.down.bias")
_INPUTS = ("attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "mlp.up.weight")


def check_no_op(fn, blocks: Sequence[Mapping] = (*NO_OP_BLOCKS, *RANDOM_NO_OP_BLOCKS)) -> None:
    """Check ``fn(block) -> block``: the block changed in place so that it returns its input
    exactly (``torch.equal``), by zeroing only what writes into the stream (attention's output
    projection and the feed-forward down projection, weights and biases); every other parameter
    keeps its value.  ``blocks``: specs for :func:`toy_block`."""
    for spec in blocks:
        block = toy_block(**spec)
        label = named("make_no_op", f"block with {_describe(spec)}",
                      shown=is_shown(spec, (*NO_OP_BLOCKS, *RANDOM_NO_OP_BLOCKS)),
                      random=is_shown(spec, RANDOM_NO_OP_BLOCKS), kinds=_block_kind(spec))
        before = {n: p.detach().clone() for n, p in block.named_parameters()}
        result = _guarded(fn, {TransformerBlock.zero_output_projections:
                               "block.zero_output_projections"}, label, block,
                          advice="zero the two matrices and their biases yourself")
        if result is not block:
            raise CheckFailed(f"{label}: change the block in place and return it (got "
                              f"{type(result).__name__})")
        after = dict(block.named_parameters())
        outputs = [n for n in _OUTPUTS if n in after]
        zero = {n for n, p in after.items() if not p.detach().any()}
        changed = sorted(n for n in after if not torch.equal(before[n], after[n].detach()))
        x = _inputs(before["norm_1.weight"].shape[0], spec.get("seed", 0))
        with torch.no_grad():
            out = block(x)
        exact = torch.equal(out, x)
        if exact and set(outputs) <= zero and set(changed) <= set(outputs):
            # the same verdict through the check primitives (records for the grader)
            check_close(out, x, what=f"{label}: block(x), which must be x", rtol=0, atol=0)
            check_value(sum(after[n].numel() for n in changed if n not in outputs), 0,
                        what=f"{label}: parameters changed outside the output projections",
                        integer=True)
            continue
        inputs_zero = [n for n in _INPUTS if n in zero]
        if inputs_zero and not set(outputs) <= zero:
            raise CheckFailed(
                f"{label}: you zeroed input projections ({', '.join(inputs_zero)}); the block "
                "still writes into the stream through attn.out_proj and mlp.down and their "
                "biases. Zero what writes into the stream, not what reads from it")
        if exact:
            extra = [n for n in changed if n not in outputs]
            raise CheckFailed(f"{label}: the block is a no-op, but you also changed "
                              f"{', '.join(extra)}. Zero only the two output projections (weights "
                              "and biases) and leave the rest, so the block can still learn")
        weights_zero = {n for n in outputs if n.endswith("weight")} <= zero
        biases_left = [n for n in outputs if n.endswith("bias") and n not in zero]
        if weights_zero and biases_left:
            raise CheckFailed(f"{label}: the output weights are zero but {', '.join(biases_left)} "
                              "still adds a constant to every position: zero the biases too")
        if "attn.out_proj.weight" in zero and "mlp.down.weight" not in zero:
            raise CheckFailed(f"{label}: attention is silenced, but the feed-forward layer writes "
                              "into the stream too (mlp.down)")
        if "mlp.down.weight" in zero and "attn.out_proj.weight" not in zero:
            raise CheckFailed(f"{label}: the feed-forward layer is silenced, but attention writes "
                              "into the stream too (attn.out_proj)")
        if torch.allclose(out, x, atol=1e-3):
            raise CheckFailed(f"{label}: the block changes its input slightly: the output "
                              "projections must be exactly zero, not small")
        raise CheckFailed(f"{label}: the block does not return its input")


def check_add_block(fn, cases: Sequence[Mapping] = (*ADD_CASES, *RANDOM_ADD)) -> None:
    """Check ``fn(model, where) -> new model``: a copy of a TinyGPT with one new block of the same
    shape inserted at index ``where`` of ``blocks``, built to change nothing: the logits are
    exactly (``torch.equal``) the original's.  The original model is left as it was."""
    for case in cases:
        spec = {k: v for k, v in case.items() if k != "where"}
        model, where = toy_model(**spec), case["where"]
        shown = is_shown(case, (*ADD_CASES, *RANDOM_ADD))
        label = named("add_no_op_block", f"{_describe(spec)} model, where={where}", shown=shown,
                      random=is_shown(case, RANDOM_ADD), kinds=(_model_kind(spec),))
        at = f"index {where}" if shown else "index where"  # a hidden input's position unsaid
        before = copy.deepcopy(model.state_dict())
        n_before = len(model.blocks)
        tokens = _tokens(model, where)
        with torch.no_grad():
            expected = model(tokens)
        result = _guarded(fn, {}, label, model, where)
        untouched = len(model.blocks) == n_before and all(
            torch.equal(before[n], t) for n, t in model.state_dict().items())
        if result is model or not untouched:
            raise CheckFailed(f"{label}: leave the original model as it is and return a new one "
                              "(copy.deepcopy(model) first)")
        blocks = getattr(result, "blocks", None)
        if blocks is None or len(blocks) != n_before + 1:
            if not shown:
                raise CheckFailed(f"{label}: the new model should have one block more than the "
                                  "original")
            raise CheckFailed(f"{label}: the new model should have {n_before} + 1 blocks, got "
                              f"{'none' if blocks is None else len(blocks)}")
        new = blocks[where]
        size = sum(p.numel() for p in new.parameters())
        if size != block_params(model.shape)["total"]:
            raise CheckFailed(f"{label}: the block at {at} is not a new block of the "
                              "model's shape (TransformerBlock(model.shape)); is it at the "
                              "right index?")
        old = [b for i, b in enumerate(blocks) if i != where]
        for i, b in enumerate(old):
            if not all(torch.equal(t, before[f"blocks.{i}.{n}"]) for n, t in b.state_dict().items()):
                raise CheckFailed(f"{label}: the model's own blocks should keep their order and "
                                  f"weights around the new one at {at}")
        with torch.no_grad():
            got = result(tokens)
        if torch.equal(got, expected):
            check_value(len(blocks), n_before + 1, what=f"{label}: blocks in the new model",
                        integer=True)
            check_close(got, expected, what=f"{label}: logits, which must be the original's",
                        rtol=0, atol=0)
            continue
        if new.attn.out_proj.weight.detach().any() or new.mlp.down.weight.detach().any():
            raise CheckFailed(f"{label}: the logits change: the new block writes into the stream "
                              "(zero its output projections, as make_no_op does)")
        raise CheckFailed(f"{label}: the logits are not exactly the original model's")


# --- 4. pruning the feed-forward layer -------------------------------------------------------

_FORBIDDEN_PRUNING = {neuron_scores: "course_lib.compression.neuron_scores",
                      prune_feed_forward: "course_lib.compression.prune_feed_forward"}


def check_neuron_scores(fn, layers: Sequence[Mapping] = (*NEURON_LAYERS, *RANDOM_LAYERS)) -> None:
    """Check ``fn(mlp) -> (d_ff,) scores``: ‖row i of up.weight‖ × ‖column i of down.weight‖
    for each neuron of a GELU FeedForward.  ``layers``: specs for :func:`toy_feed_forward`."""
    for spec in layers:
        mlp = toy_feed_forward(**spec)
        shown = is_shown(spec, (*NEURON_LAYERS, *RANDOM_LAYERS))
        square = spec.get("d_ff", 64) == spec.get("d_model", 32)
        label = named("neuron_scores", f"layer with {_describe(spec)}", shown=shown,
                      random=is_shown(spec, RANDOM_LAYERS),
                      kinds=("a square layer (d_ff = d_model)" if square else "",))
        with torch.no_grad():
            got = _guarded(fn, _FORBIDDEN_PRUNING, label, mlp, advice="compute the norms yourself")
            up, down = mlp.up.weight, mlp.down.weight  # (d_ff, d_model), (d_model, d_ff)
            d_ff = up.shape[0]
            if isinstance(got, torch.Tensor) and got.shape == (up.shape[1],) != (d_ff,):
                raise CheckFailed(f"{label}: got d_model scores, one per dimension of the stream; "
                                  "a neuron is a row of up.weight and a column of down.weight: "
                                  "take each norm across the other dimension")
            got = _tensor(got, (d_ff,), label, None if shown else "(d_ff,)")
            expected = neuron_scores(mlp)
            if _close(got, expected):
                check_close(got, expected, what=label, rtol=_ATOL, atol=_ATOL)
                continue
            r_up, r_down = up.norm(dim=1), down.norm(dim=0)
            with_bias = torch.cat([up, mlp.up.bias[:, None]], 1).norm(dim=1) * r_down
            for wrong, hint in (
                    (r_up, "that is the up rows' norms alone; multiply by the down columns' norms"),
                    (r_down, "that is the down columns' norms alone; multiply by the up rows' norms"),
                    (r_up + r_down, "multiply the two norms, do not add them"),
                    (r_up ** 2 * r_down ** 2, "use the norms, not the squared norms"),
                    (with_bias, "leave the biases out of the scores"),
                    (up.norm(dim=0) * down.norm(dim=1) if up.shape[0] == up.shape[1] else r_up,
                     "a neuron is a row of up.weight and a column of down.weight: take each "
                     "norm across the other dimension")):
                if _close(got, wrong):
                    raise CheckFailed(f"{label}: {hint}")
            raise CheckFailed(f"{label}: the scores are not right")


def _matched_rows(rows: torch.Tensor, table: torch.Tensor) -> list:
    """For each row of ``rows``, the index of the equal row of ``table`` (or -1)."""
    out = []
    for r in rows:
        hit = (table == r).all(dim=1).nonzero().flatten()
        out.append(hit[0].item() if len(hit) else -1)
    return out


def check_prune(fn, cases: Sequence[Mapping] = (*PRUNE_CASES, *RANDOM_PRUNE)) -> None:
    """Check ``fn(model, k) -> new model``: every block's feed-forward layer narrowed to the k
    neurons with the largest scores (rows of up with their biases, columns of down; down's bias
    kept), as a FeedForward of width k; the original model left as it was."""
    for case in cases:
        spec = {n: v for n, v in case.items() if n != "k"}
        model, k = toy_model(**spec), case["k"]
        shown = is_shown(case, (*PRUNE_CASES, *RANDOM_PRUNE))
        every = all(k == b.mlp.up.out_features for b in model.blocks)
        label = named("prune", f"{_describe(spec)} model, k={k}", shown=shown,
                      random=is_shown(case, RANDOM_PRUNE),
                      kinds=(_model_kind(spec), "k = d_ff: every neuron kept" if every else ""))
        before = copy.deepcopy(model.state_dict())
        result = _guarded(fn, _FORBIDDEN_PRUNING, label, model, k,
                          advice="use your own neuron_scores and build the narrow layer yourself")
        if result is model or not all(torch.equal(before[n], t)
                                      for n, t in model.state_dict().items()):
            raise CheckFailed(f"{label}: leave the original model as it is and return a pruned "
                              "copy (copy.deepcopy(model) first)")
        if len(getattr(result, "blocks", ())) != len(model.blocks):
            raise CheckFailed(f"{label}: the pruned model should have the original's blocks")
        for i, (b_new, b_old) in enumerate(zip(result.blocks, model.blocks)):
            mlp, old = b_new.mlp, b_old.mlp
            d_model, d_ff = old.up.in_features, old.up.out_features
            blk = f"block {i}" if shown else "in a block"  # a hidden model's blocks unsaid
            if tuple(mlp.up.weight.shape) == (d_ff, d_model) and k < d_ff:
                raise CheckFailed(f"{label}: {f'block {i}' if shown else 'a block'}'s feed-forward "
                                  "layer is still d_ff wide: "
                                  "build a FeedForward of width k (zeroing neurons saves no "
                                  "parameters)")
            if tuple(mlp.up.weight.shape) != (k, d_model) or \
                    tuple(mlp.down.weight.shape) != (d_model, k):
                raise CheckFailed(f"{label}: {blk}: up.weight should be k × d_model and "
                                  "down.weight d_model × k")
            with torch.no_grad():
                kept = _matched_rows(mlp.up.weight, old.up.weight)
                scores = neuron_scores(old)
            order = scores.argsort(descending=True).tolist()
            if -1 in kept or len(set(kept)) != k:
                raise CheckFailed(f"{label}: {blk}: each row of the new up.weight should be a "
                                  "row of the old one (a kept neuron), each neuron once")
            if set(kept) != set(order[:k]):
                if set(kept) == set(order[-k:]):
                    hint = "you kept the neurons with the smallest scores"
                elif set(kept) == set(range(k)):
                    hint = "you kept the first k neurons, not the k with the largest scores"
                else:
                    hint = "these are not the k neurons with the largest scores"
                raise CheckFailed(f"{label}: {blk}: {hint}")
            with torch.no_grad():
                if not torch.equal(mlp.down.weight, old.down.weight[:, kept]):
                    raise CheckFailed(f"{label}: {blk}: each kept neuron's column of "
                                      "down.weight must go with its row of up.weight")
                if old.up.bias is not None and not torch.equal(mlp.up.bias, old.up.bias[kept]):
                    raise CheckFailed(f"{label}: {blk}: each kept neuron's up bias must go "
                                      "with it (up.bias[kept])")
                if old.down.bias is not None and not torch.equal(mlp.down.bias, old.down.bias):
                    raise CheckFailed(f"{label}: {blk}: keep down.bias whole: it belongs to "
                                      "no neuron")
        tokens = _tokens(model, k)
        reference = prune_feed_forward(model, k)
        with torch.no_grad():
            got, expected = result(tokens), reference(tokens)
        if not _close(got, expected):
            raise CheckFailed(f"{label}: the pruned model's logits are not right (is anything "
                              "else changed?)")
        check_value(sum(p.numel() for p in result.parameters()),
                    sum(p.numel() for p in reference.parameters()),
                    what=f"{label}: parameters of the pruned model", integer=True)
        check_close(got, expected, what=f"{label}: logits of the pruned model", rtol=_ATOL,
                    atol=_ATOL)


# --- recap: where was it compressed, and what did we test? ------------------------------------

def compressed_model(how: str, k: int | None = None, n_kv_heads: int | None = None):
    """Lesson 3's chain model compressed ``how``: ``"ff"`` (feed-forward pruned to k neurons),
    ``"kv"`` (n_kv_heads shared key/value heads), or ``"both"``."""
    if how not in ("ff", "kv", "both"):
        raise ValueError(f"how={how!r} is not one of ff, kv, both")
    model = load_chain_model()[0]
    if how in ("kv", "both"):
        model = share_kv_heads(model, n_kv_heads)
    if how in ("ff", "both"):
        model = prune_feed_forward(model, k)
    return model


def _part_sizes(model) -> tuple[int, int]:
    attn = sum(p.numel() for b in model.blocks for p in b.attn.parameters())
    ff = sum(p.numel() for b in model.blocks if b.mlp is not None for p in b.mlp.parameters())
    return attn, ff


def check_compression_report(fn, cases: Sequence[Mapping] = (*REPORT_CASES, *RANDOM_REPORT)
                             ) -> None:
    """Check ``fn(original, compressed, task) -> {"attention", "feed_forward", "one_step",
    "eight_step"}``: parameters removed from the attention layers and from the feed-forward
    layers (all blocks), and the compressed model's share of 1-step and of 8-step items of
    ``task`` answered wholly right.  ``cases``: specs for :func:`compressed_model`."""
    task = chain_task()
    original = load_chain_model()[0]
    for case in cases:
        compressed = compressed_model(**case)
        how = {"ff": "feed-forward pruned", "kv": "key/value heads shared",
               "both": "feed-forward pruned and key/value heads shared"}[case["how"]]
        label = named("compression_report", f"original, model compressed with {_describe(case)}, task",
                      shown=is_shown(case, (*REPORT_CASES, *RANDOM_REPORT)),
                      random=is_shown(case, RANDOM_REPORT), kinds=(how,))
        with torch.no_grad():
            got = _guarded(fn, {}, label, original, compressed, task)
        if not isinstance(got, Mapping) or any(k not in got for k in REPORT_KEYS):
            raise CheckFailed(f"{label}: return a dict with keys "
                              f"{', '.join(map(repr, REPORT_KEYS))}, got "
                              + (f"the keys {sorted(map(str, got))}" if isinstance(got, Mapping)
                                 else type(got).__name__))
        a0, f0 = _part_sizes(original)
        a1, f1 = _part_sizes(compressed)
        total_removed = (a0 - a1) + (f0 - f1)
        for part, removed, left in (("attention", a0 - a1, a1), ("feed_forward", f0 - f1, f1)):
            mistakes = {
                "that is what is left; the report asks what was removed": left,
                "the sign is wrong: count original − compressed": -removed,
            }
            if removed != total_removed:
                mistakes["that is what the whole model lost; split it by part"] = total_removed
            if removed:
                mistakes["this part lost parameters too: count its parameters in both models "
                         "and subtract"] = 0
            check_value(got[part], removed, what=f"{label}[{part!r}]", integer=True,
                        mistakes=mistakes)
        one = task.accuracy(compressed, 1)
        eight = task.accuracy(compressed, LONG_STEPS)
        prompts, answers = task.items(LONG_STEPS)
        with torch.no_grad():
            per_token = (compressed.generate(prompts, LONG_STEPS)[:, 1:] == answers).float().mean().item()
        check_value(got["one_step"], one, what=f"{label}['one_step']", rel=1e-9, mistakes={
            "that is the original model's accuracy; test the compressed one":
                task.accuracy(original, 1),
            "give a fraction between 0 and 1, not a percentage": 100 * one,
        })
        check_value(got["eight_step"], eight, what=f"{label}['eight_step']", rel=1e-9, mistakes={
            "that is an estimate from the 1-step accuracy (p⁸); run the 8-step items": one ** 8,
            "that counts single tokens right; an item counts only if all 8 answers are right":
                per_token,
            "that is the original model's accuracy; test the compressed one":
                task.accuracy(original, LONG_STEPS),
            "that is the 1-step accuracy; the long test asks for 8 facts in a row": one,
            "give a fraction between 0 and 1, not a percentage": 100 * eight,
        })


# --- test yourself -----------------------------------------------------------------------------

# The answers are sealed (course_lib.checks.sealed): salted hashes of the forms that count as
# right and of those the usual mistakes give, so neither this file nor a message shows them.
# The parts to zero are sealed one by one ("yes" or "no" for each name of BLOCK_PARTS, no hint
# attached, so the seals all look alike); the diagnosis comes from which of the learner's parts
# are wrong and whether they were zeroed or kept.  The share is sealed with 0.3 % tolerance (a
# share rounded to two decimals passes).  Regenerate with ``python -m course_lib.checks.seal``
# from values worked out in a scratch session (salt lesson3/<what>, lesson3/<what>/<part>).

TYS_NEW_BLOCK_REASON = SEALED['lesson3/tys_new_block_reason']

TYS_NEW_BLOCK_ZEROED = {part: SEALED[f"lesson3/tys_new_block_zeroed/{part}"] for part in BLOCK_PARTS}
"""Each part's sealed "yes" (zero it) or "no"."""


def check_tys_new_block(reason, zeroed) -> None:
    """Test-yourself 1: why a new block can be added without breaking a model (a choice), and
    which parts of a GPT-2-style block to zero (names from :data:`BLOCK_PARTS`).  Sealed."""
    check_sealed(_option(reason), TYS_NEW_BLOCK_REASON)
    if isinstance(zeroed, str) or not hasattr(zeroed, "__iter__"):
        raise CheckFailed("tys_new_block_zeroed: give a set of part names, e.g. {'norm_1'}")
    got = {_option(z) for z in zeroed}
    unknown = sorted(str(z) for z in got if z not in BLOCK_PARTS)
    if unknown:
        raise CheckFailed(f"tys_new_block_zeroed: unknown part names {unknown}; use names from "
                          f"{', '.join(BLOCK_PARTS)}")
    answers = {part: "yes" if part in got else "no" for part in BLOCK_PARTS}
    wrong = []
    for part in BLOCK_PARTS:  # every part is checked (and published for the grader) ...
        try:
            check_sealed(answers[part], TYS_NEW_BLOCK_ZEROED[part])
        except CheckFailed:
            wrong.append(part)
    # ... then one diagnosis for the whole set
    extra = [p for p in wrong if answers[p] == "yes"]   # zeroed, but should keep its weights
    missing = [p for p in wrong if answers[p] == "no"]  # kept, but should be zeroed
    if extra and missing:
        raise CheckFailed("tys_new_block_zeroed: some of those parts read from the stream (or "
                          "rescale what a part reads); zero the ones that write into it")
    if missing:
        raise CheckFailed("tys_new_block_zeroed: both attention and the feed-forward layer write "
                          "into the stream")
    if extra:
        raise CheckFailed("tys_new_block_zeroed: zero only what writes into the stream (more than "
                          "that stops the block from learning)")


TYS_LONG_REASON = SEALED['lesson3/tys_long_reason']

TYS_LONG_SHARE = SEALED['lesson3/tys_long_eight_step_share']


def check_tys_long_tests(reason, eight_step_share) -> None:
    """Test-yourself 2: why test long multi-step tasks after compression (a choice), and the
    share of 8-step items wholly right when each fact is right with probability
    TYS_FACT_ACCURACY (a fraction).  Sealed."""
    check_sealed(_option(reason), TYS_LONG_REASON)
    check_sealed(eight_step_share, TYS_LONG_SHARE)


from .tutor import announce as _announce  # noqa: E402

_announce(globals(), "lesson3")  # one-line pass and fail messages in a notebook (checks.tutor)
