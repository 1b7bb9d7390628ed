"""A small, seeded training loop for the toy models (next-token prediction, AdamW), and the
recipe of lesson 2's induction-head model with a loader for its shipped weights.

Sized for a laptop CPU: the lessons' models have about ten thousand parameters.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from tqdm.auto import tqdm

from .shapes import ModelShape
from .tasks import repeated_tokens
from .tiny_gpt import TinyGPT


def next_token_losses(model, tokens) -> torch.Tensor:
    """Cross-entropy of predicting each token from the ones before it.

    Args:
        model: maps tokens (batch, pos) to logits (batch, pos, d_vocab).
        tokens: (batch, pos) ids.
    Returns:
        (batch, pos - 1) losses in nats: entry [b, i] is -log p(tokens[b, i+1] | tokens[b, :i+1]).
    """
    logits = model(tokens)[:, :-1]  # (batch, pos-1, d_vocab): predictions for tokens 1..pos-1
    targets = tokens[:, 1:]         # (batch, pos-1)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view(targets.shape)           # (batch * (pos-1),) -> (batch, pos-1)


@contextmanager
def num_threads(n):
    """Run the block with ``torch.set_num_threads(n)`` (None: leave it), then restore."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TrainResult(NamedTuple):
    losses: list
    """Mean training loss (nats per token) at each step."""
    seconds: float
    """Wall-clock time of the loop."""


def train(model, make_batch: Callable, steps: int, lr: float = 3e-3, weight_decay: float = 0.0,
          seed: int = 0, n_threads: int | None = 1, progress: bool = True) -> TrainResult:
    """Train ``model`` in place to predict the next token.

    Args:
        model: a torch module mapping tokens (batch, pos) to logits (batch, pos, d_vocab).
        make_batch: called as ``make_batch(generator)`` each step; returns tokens (batch, pos).
        steps: optimiser steps.
        lr, weight_decay: AdamW's (the learning rate is constant).
        seed: seeds ``torch.manual_seed`` and the data generator, so a run repeats exactly on
            the same machine.  (Initialise the model with its own seed.)
        n_threads: torch threads during training; 1 is fastest for models this small.
        progress: show a tqdm progress bar.
    Returns:
        TrainResult(losses, seconds).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r} must be a positive integer")
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    model.train()
    start = time.perf_counter()
    with num_threads(n_threads):
        bar = tqdm(range(steps), disable=not progress, desc="training")
        for step in bar:
            loss = next_token_losses(model, make_batch(generator)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step % 20 == 0:
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return TrainResult(losses, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# Lesson 2's induction-head model: two attention-only layers trained on repeated random tokens.

INDUCTION_SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=4, d_ff=128, d_vocab=64, n_ctx=32,
                             positions="rotary", norm="layernorm", model_type="induction-2l")
"""Two layers of 4 heads of 8; rotary positions (with learned positions the heads formed far
more slowly in our runs); d_ff is unused (attention only)."""

INDUCTION_RECIPE = dict(steps=1500, lr=1e-2, batch=32, period=(8, 16), init_std=0.2, seed=0)
"""Training settings: AdamW, constant lr; each row repeats a random block of 8..16 tokens, so
the model must look at content, not at a fixed distance back."""

WEIGHTS_DIR = Path(__file__).parent / "weights"


def train_induction_model(seed=None, steps=None, progress=True):
    """Train lesson 2's model from scratch with INDUCTION_RECIPE (20-25 s on one thread here;
    scripts/train_induction.py stores the result).  Returns (model, TrainResult)."""
    r = dict(INDUCTION_RECIPE)
    r.update({k: v for k, v in (("seed", seed), ("steps", steps)) if v is not None})
    model = TinyGPT(INDUCTION_SHAPE, attention_only=True)
    model.init_weights(torch.Generator().manual_seed(r["seed"]), std=r["init_std"])
    s = INDUCTION_SHAPE
    result = train(model, lambda g: repeated_tokens(r["batch"], s.n_ctx, s.d_vocab, r["period"], g),
                   r["steps"], lr=r["lr"], seed=r["seed"], progress=progress)
    return model, result


def load_induction_model():
    """The shipped weights of lesson 2's model (course_lib/weights/induction_2l.pt, made by
    scripts/train_induction.py), and the training record (seed, steps, seconds, losses, scores)
    saved beside them.  Returns (model, info dict)."""
    model = TinyGPT(INDUCTION_SHAPE, attention_only=True)
    model.load_state_dict(torch.load(WEIGHTS_DIR / "induction_2l.pt", weights_only=True))
    info = json.loads((WEIGHTS_DIR / "induction_2l.json").read_text())
    return model.eval(), info
