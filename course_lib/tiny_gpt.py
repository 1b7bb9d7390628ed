"""A tiny GPT built from a ModelShape: embeddings, ``n_layers`` blocks, a final norm and a head.

    tokens (batch, pos) -> embed (+ positions) -> blocks -> final norm -> head -> logits

Its parameters add up to ``course_lib.count_params(shape).total`` exactly (tests/test_tiny_gpt.py
builds many random shapes), and with copied weights it gives the logits of ``transformers``'
GPT-2 and Llama.  ``generate`` decodes with or without a KV cache; both give the same tokens.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .block import TransformerBlock, make_norm
from .positions import sinusoidal_positions
from .shapes import ModelShape


class ModelOutput(NamedTuple):
    logits: torch.Tensor
    """(batch, pos, d_vocab): unnormalised next-token scores at each position."""
    kvs: list
    """One (k, v) per layer, each (batch, n_kv_heads, past + pos, d_head): the KV cache."""
    patterns: torch.Tensor | None
    """(n_layers, batch, n_heads, pos, past + pos) attention weights, if asked for."""


class TinyGPT(nn.Module):
    """A decoder-only transformer for ``shape`` (a course_lib.ModelShape).

    Args:
        shape: positions ``learned`` (a table of n_ctx × d_model), ``sinusoidal``, ``rotary``
            (inside attention) or ``none``; ``tied_embeddings`` shares the head with the token
            embedding.  Mixture-of-experts shapes are not built (ValueError).
        causal: mask later positions.  Lesson 2 trains with ``causal=False`` to show the failure.
        attention_only: blocks without feed-forward layers (their parameters and second norm are
            then missing from the count).
        seed: if given, initialise from ``torch.Generator().manual_seed(seed)`` (normal, std 0.02,
            zero biases, as GPT-2) without touching torch's global random state.
    """

    def __init__(self, shape: ModelShape, causal: bool = True, attention_only: bool = False,
                 seed: int | None = None):
        super().__init__()
        self.shape, self.causal = shape, causal
        self.embed = nn.Embedding(shape.d_vocab, shape.d_model)
        learned = shape.positions == "learned"
        self.pos_embed = nn.Embedding(shape.n_ctx, shape.d_model) if learned else None
        self.blocks = nn.ModuleList(TransformerBlock(shape, causal, attention_only)
                                    for _ in range(shape.n_layers))
        self.norm_f = make_norm(shape.norm, shape.d_model)
        self.head = nn.Linear(shape.d_model, shape.d_vocab, bias=False)
        if shape.tied_embeddings:
            self.head.weight = self.embed.weight  # one tensor, counted once
        if seed is not None:
            self.init_weights(torch.Generator().manual_seed(seed))

    @torch.no_grad()
    def init_weights(self, generator=None, std=0.02) -> "TinyGPT":
        """GPT-2's initialisation: matrices and embeddings ~ Normal(0, std), biases 0, norms 1.
        Returns self."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, std, generator=generator)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
            elif isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
                m.reset_parameters()
        return self

    def set_causal(self, causal: bool) -> "TinyGPT":
        """Turn the causal mask on or off in every layer (e.g. to test a model trained without
        it on the task it will really face).  Returns self."""
        self.causal = causal
        for block in self.blocks:
            block.attn.causal = causal
        return self

    def _check_tokens(self, tokens, past):
        if tokens.dtype not in (torch.int64, torch.int32) or tokens.dim() != 2:
            raise ValueError(f"tokens must be an integer tensor (batch, pos), got {tokens.dtype} "
                             f"of shape {tuple(tokens.shape)}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.shape.d_vocab):
            raise ValueError(f"token ids must be in 0..{self.shape.d_vocab - 1} (d_vocab="
                             f"{self.shape.d_vocab}), got {tokens.min().item()}.."
                             f"{tokens.max().item()}")
        if self.pos_embed is not None and past + tokens.shape[1] > self.shape.n_ctx:
            raise ValueError(f"{past + tokens.shape[1]} positions but n_ctx={self.shape.n_ctx}: "
                             "the learned position table has n_ctx rows")

    def run(self, tokens, past_kvs=None, return_patterns=False) -> ModelOutput:
        """tokens: (batch, pos) ids, the tokens after those in ``past_kvs`` (a previous
        ``kvs``, or None).  Returns ModelOutput(logits, kvs, patterns)."""
        past = 0 if past_kvs is None else past_kvs[0][0].shape[2]
        self._check_tokens(tokens, past)
        x = self.embed(tokens)  # (batch, pos, d_model)
        if self.pos_embed is not None:
            x = x + self.pos_embed(torch.arange(past, past + tokens.shape[1], device=x.device))
        elif self.shape.positions == "sinusoidal":
            table = sinusoidal_positions(past + tokens.shape[1], self.shape.d_model, dtype=x.dtype)
            x = x + table[past:]  # (pos, d_model): the rows of the new tokens
        kvs, patterns = [], []
        for i, block in enumerate(self.blocks):
            out = block.run(x, None if past_kvs is None else past_kvs[i], return_patterns)
            x = out.x  # (batch, pos, d_model)
            kvs.append(out.kv)
            patterns.append(out.pattern)
        logits = self.head(self.norm_f(x))  # (batch, pos, d_vocab)
        return ModelOutput(logits, kvs, torch.stack(patterns) if return_patterns else None)

    def forward(self, tokens):
        """tokens: (batch, pos) ids -> logits (batch, pos, d_vocab)."""
        return self.run(tokens).logits

    def attention_patterns(self, tokens) -> torch.Tensor:
        """(n_layers, batch, n_heads, pos, pos): every head's attention weights on ``tokens``."""
        return self.run(tokens, return_patterns=True).patterns

    @torch.no_grad()
    def generate(self, prompt, n_new, temperature=0.0, generator=None, use_cache=True):
        """Append ``n_new`` tokens to ``prompt``, one at a time.

        Args:
            prompt: (batch, pos) or (pos,) token ids, at least one token.
            n_new: tokens to add (>= 0).
            temperature: 0 picks the most likely token (greedy); > 0 samples from
                softmax(logits / temperature) with ``generator`` (a torch.Generator).
            use_cache: feed only the newest token and the cached keys/values (lesson 5);
                False recomputes the whole sequence each step.  Both give the same tokens.
        Returns:
            prompt followed by the new tokens, (batch, pos + n_new) (or 1-D like the prompt).
        Raises:
            ValueError: n_new < 0, temperature < 0, an empty prompt, a cache on a model without
                the causal mask (its earlier positions change as tokens arrive: a cache goes stale),
                more positions than n_ctx with learned positions.
        """
        if not isinstance(n_new, int) or n_new < 0:
            raise ValueError(f"n_new={n_new!r} must be a non-negative integer")
        if not temperature >= 0:
            raise ValueError(f"temperature={temperature!r} must be >= 0 (0 means greedy)")
        if use_cache and not self.causal:
            raise ValueError("use_cache=True needs causal=True: without the mask every position "
                             "reads the later ones, so cached keys and values go stale")
        tokens = prompt[None] if prompt.dim() == 1 else prompt  # (batch, pos)
        if tokens.shape[1] == 0:
            raise ValueError("prompt must hold at least one token")
        out = self.run(tokens)
        for i in range(n_new):
            logits = out.logits[:, -1]  # (batch, d_vocab): the next-token scores
            if temperature == 0:
                new = logits.argmax(dim=-1, keepdim=True)  # (batch, 1)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                new = torch.multinomial(probs, 1, generator=generator)  # (batch, 1)
            tokens = torch.cat([tokens, new], dim=1)  # (batch, pos + i + 1)
            if i < n_new - 1:
                out = self.run(new, out.kvs) if use_cache else self.run(tokens)
        return tokens[0] if prompt.dim() == 1 else tokens


def n_params(model: nn.Module) -> int:
    """Parameters of a torch model (a shared tensor once): sum of p.numel()."""
    return sum(p.numel() for p in model.parameters())


def kv_cache_bytes(kvs) -> int:
    """Bytes held by a KV cache (the ``kvs`` of ModelOutput): keys and values of every layer."""
    return sum(t.numel() * t.element_size() for kv in kvs for t in kv)
