"""Cutting the feed-forward layer, and the toy model of lesson 3 that shows what a cut costs.

- ``neuron_scores`` and ``prune_feed_forward``: keep the ``k`` neurons of each feed-forward
  layer with the largest weight norms and drop the rest, giving a narrower model (magnitude
  pruning, the simplest kind: Han et al. 2015, arxiv.org/abs/1506.02626, pruned single weights
  by magnitude; here whole neurons go, so the layer really shrinks).
- ``share_kv_heads``: compress attention instead, by giving groups of query heads one shared
  key/value head, the mean of the group's (the mean-pooling that Ainslie et al. 2023,
  arxiv.org/abs/2305.13245, use to start grouped-query attention from a trained model).
- ``CHAIN_SHAPE``, ``CHAIN_RECIPE``, ``train_chain_model`` and ``load_chain_model``: a one-layer
  TinyGPT trained on ``course_lib.tasks.ChainTask`` (64 facts), shipped as
  course_lib/weights/chain_1l.pt by scripts/train_chain.py.

A feed-forward neuron ``i`` of a GELU layer (course_lib.block.FeedForward) is row ``i`` of
``up.weight`` (d_ff × d_model) with ``up.bias[i]``, and column ``i`` of ``down.weight``
(d_model × d_ff).  ``down.bias`` belongs to no neuron and is kept whole.
"""
from __future__ import annotations

import copy
import json

import torch

from .block import FeedForward
from .shapes import ModelShape
from .tasks import ChainTask
from .tiny_gpt import TinyGPT
from .training import WEIGHTS_DIR, train


def neuron_scores(mlp: FeedForward) -> torch.Tensor:
    """How much each neuron of a GELU feed-forward layer can read and write.

    Args:
        mlp: a course_lib.block.FeedForward of kind ``gelu`` (up: d_model → d_ff, down: d_ff →
            d_model).
    Returns:
        (d_ff,) float tensor: score[i] = ‖up.weight[i, :]‖ × ‖down.weight[:, i]‖ (Euclidean
        norms of the neuron's input row and output column; biases left out).
    Raises:
        ValueError: a SwiGLU layer (its gate matrix would need cutting too; not done here).
    """
    if getattr(mlp, "kind", None) != "gelu":
        raise ValueError(f"mlp kind={getattr(mlp, 'kind', None)!r}: only GELU feed-forward "
                         "layers are pruned here")
    with torch.no_grad():
        return mlp.up.weight.norm(dim=1) * mlp.down.weight.norm(dim=0)  # (d_ff,) * (d_ff,)


def prune_feed_forward(model, k: int):
    """A copy of ``model`` whose every feed-forward layer keeps only its ``k`` top-scoring
    neurons (``neuron_scores``), as a real FeedForward of width ``k``.

    Args:
        model: a course_lib.TinyGPT (or anything with ``blocks``, each with a GELU ``mlp``).
        k: neurons to keep in each layer, 1 <= k <= d_ff.
    Returns:
        a new model (``model`` is not changed; its ``shape``, if it has one, gets d_ff = k).
        Each layer loses (d_ff − k)·(2·d_model + 1)
        parameters: d_ff − k rows of ``up`` with their biases and d_ff − k columns of ``down``.
    Raises:
        ValueError: k outside 1..d_ff.
    """
    pruned = copy.deepcopy(model)
    for block in pruned.blocks:
        mlp = block.mlp
        d_ff = mlp.up.out_features
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= d_ff:
            raise ValueError(f"k={k!r} must be an integer from 1 to d_ff={d_ff}")
        keep = neuron_scores(mlp).topk(k).indices.sort().values  # (k,), in the layer's order
        narrow = FeedForward(mlp.up.in_features, k, mlp.kind, bias=mlp.up.bias is not None)
        narrow.to(dtype=mlp.up.weight.dtype, device=mlp.up.weight.device)
        with torch.no_grad():
            narrow.up.weight.copy_(mlp.up.weight[keep])         # (k, d_model): rows
            narrow.down.weight.copy_(mlp.down.weight[:, keep])  # (d_model, k): columns
            if mlp.up.bias is not None:
                narrow.up.bias.copy_(mlp.up.bias[keep])         # (k,)
                narrow.down.bias.copy_(mlp.down.bias)           # (d_model,): no neuron's
        block.mlp = narrow
    if getattr(pruned, "shape", None) is not None:
        pruned.shape = pruned.shape.with_(d_ff=k)  # the shape says what the model now is
    return pruned


def share_kv_heads(model, n_kv_heads: int):
    """A copy of a TinyGPT with ``n_kv_heads`` key/value heads per layer (grouped-query
    attention): each group of n_heads / n_kv_heads consecutive heads gets the mean of the group's
    key and value projections (weights and biases).  Everything else is copied.

    Args:
        model: a course_lib.TinyGPT (not attention-only).
        n_kv_heads: must divide the model's n_kv_heads.
    Returns:
        a new TinyGPT for ``model.shape.with_(n_kv_heads=n_kv_heads)``; each layer loses
        2·(n_kv_heads_before − n_kv_heads)·d_head·(d_model + 1) parameters with biases (K and V
        shrink, Q and the output projection keep their size).
    Raises:
        ValueError: ``n_kv_heads`` that does not divide the current number of kv heads.
    """
    s = model.shape
    if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, int) or n_kv_heads < 1 \
            or s.n_kv_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads!r} must be a positive divisor of the model's "
                         f"n_kv_heads={s.n_kv_heads}")
    group = s.n_kv_heads // n_kv_heads
    weight = next(model.parameters())
    new = TinyGPT(s.with_(n_kv_heads=n_kv_heads), causal=model.causal)
    new.to(dtype=weight.dtype, device=weight.device)
    state = {}
    for name, t in model.state_dict().items():
        if ".attn.k_proj." in name or ".attn.v_proj." in name:
            # (n_kv·d_head, ...) -> (n_kv_heads, group, d_head, ...) -> mean over the group
            t = t.reshape(n_kv_heads, group, s.d_head, *t.shape[1:]).mean(1)
            t = t.reshape(n_kv_heads * s.d_head, *t.shape[2:])
        state[name] = t.clone()
    new.load_state_dict(state)
    return new.eval()


# ---------------------------------------------------------------------------------------------
# Lesson 3's model: one GPT-2-style layer that stores the 64 facts of a ChainTask.

CHAIN_SHAPE = ModelShape(d_model=32, n_layers=1, n_heads=4, d_ff=64, d_vocab=64, n_ctx=16,
                         model_type="chain-1l")
"""GPT-2 style (LayerNorm, biases, learned positions, GELU, tied head): one block of 4 heads of 8
and a feed-forward layer of 64 neurons, 64 tokens.  11,168 parameters."""

CHAIN_RECIPE = dict(task_seed=0, steps=600, lr=1e-2, batch=32, seq_len=9, seed=0)
"""Training settings: AdamW at a constant lr on chains x, f(x), ... of 9 tokens from uniform
starts (``ChainTask(64, seed=task_seed)``, skew 0); the model is initialised with ``seed``."""


def chain_task() -> ChainTask:
    """The ChainTask lesson 3's model was trained on: 64 tokens, f drawn with task_seed."""
    return ChainTask(CHAIN_SHAPE.d_vocab, seed=CHAIN_RECIPE["task_seed"])


def train_chain_model(seed=None, steps=None, progress=True):
    """Train lesson 3's model from scratch with CHAIN_RECIPE (about 5 s on one thread here;
    scripts/train_chain.py stores the result).  Returns (model, TrainResult)."""
    r = dict(CHAIN_RECIPE)
    r.update({k: v for k, v in (("seed", seed), ("steps", steps)) if v is not None})
    task = chain_task()
    model = TinyGPT(CHAIN_SHAPE, seed=r["seed"])
    result = train(model, lambda g: task.sequences(r["batch"], r["seq_len"], g), r["steps"],
                   lr=r["lr"], seed=r["seed"], progress=progress)
    return model, result


def load_chain_model():
    """The shipped weights of lesson 3's model (course_lib/weights/chain_1l.pt, made by
    scripts/train_chain.py) and the record saved beside them (recipe, seconds, losses, and
    accuracies after pruning).  Returns (model in eval mode, info dict)."""
    model = TinyGPT(CHAIN_SHAPE)
    model.load_state_dict(torch.load(WEIGHTS_DIR / "chain_1l.pt", weights_only=True))
    info = json.loads((WEIGHTS_DIR / "chain_1l.json").read_text())
    return model.eval(), info
