"""A mixture-of-experts feed-forward layer: many MLPs, each token sent to a few of them.

    logits  = router(x)                        # one score per expert, (n_experts,)
    chosen  = the top_k experts by logit       # (top_k,)
    weights = softmax(logits[chosen])          # (top_k,), sums to 1
    out     = sum_j weights[j] * expert[chosen[j]](x)

Every expert sits in memory (total parameters), but a token only passes through the router and
its ``top_k`` experts (active parameters).  Mixtral 8x7B has 8 SwiGLU experts per layer and
sends each token to 2 (Jiang et al. 2024, "Mixtral of Experts", arxiv.org/abs/2401.04088,
section 2.1: G(x) = Softmax(TopK(x·W_g)), the softmax over the k kept logits only).  Shazeer et
al. 2017 (arxiv.org/abs/1701.06538, section 2.1) set every logit outside the top k to -inf
before the softmax, which gives the same weights (they also add noise to the logits in
training; this layer does not).  ``transformers`` takes the softmax over all experts and
divides the top k by their sum: the same weights again, as the common denominator cancels.
Not every model does this: Switch Transformer (k = 1) keeps the un-renormalised probability,
and DeepSeek-V3 scores experts with a sigmoid; this layer builds neither.

Parameters of one layer: ``params.router_params_per_layer(shape)`` + n_experts ×
``params.mlp_params(shape)``; active per token: the router + top_k × ``mlp_params(shape)``.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .shapes import MLP_KINDS, ModelShape


class Routing(NamedTuple):
    """Where each token went: its ``top_k`` experts, best first."""
    experts: torch.Tensor
    """(batch, pos, top_k) int64: the chosen experts' indices, highest logit first."""
    weights: torch.Tensor
    """(batch, pos, top_k): their weights, a softmax over the chosen logits (each row sums to 1)."""
    logits: torch.Tensor
    """(batch, pos, n_experts): the router's score for every expert."""


class MoEOutput(NamedTuple):
    out: torch.Tensor
    """(batch, pos, d_model)."""
    routing: Routing


def _gelu_tanh(x):
    return nn.functional.gelu(x, approximate="tanh")


ACTIVATIONS = {"gelu": _gelu_tanh, "swiglu": nn.functional.silu, "geglu": _gelu_tanh}
"""The nonlinearity of each MLP kind: GELU in GPT-2's tanh approximation (``gelu_new``; Gemma's
``gelu_pytorch_tanh``), SiLU for SwiGLU (Shazeer 2020, arxiv.org/abs/2002.05202)."""


class Expert(nn.Module):
    """One feed-forward layer, d_model -> d_ff -> d_model, applied to each token on its own.

    ``gelu`` (GPT-2): down(GELU(up(x))).  ``swiglu`` (Mixtral, Llama): down(SiLU(gate(x)) * up(x));
    ``geglu`` (Gemma): the same with GELU.  x: (tokens, d_model) -> (tokens, d_model).
    """

    def __init__(self, d_model: int, d_ff: int, mlp: str, bias: bool):
        super().__init__()
        self.act = ACTIVATIONS[mlp]
        self.gate = None if mlp == "gelu" else nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        if self.gate is None:
            h = self.act(self.up(x))                       # (tokens, d_ff)
        else:
            h = self.act(self.gate(x)) * self.up(x)        # (tokens, d_ff)
        return self.down(h)                                # (tokens, d_model)


class MoEFeedForward(nn.Module):
    """A top-k mixture-of-experts feed-forward layer (Mixtral's routing).

    Args:
        d_model: width of the residual stream.
        d_ff: width of each expert.
        n_experts: experts in the layer.
        top_k: experts each token is sent to (Mixtral: 2 of 8).
        mlp: kind of each expert, ``gelu``, ``swiglu`` or ``geglu`` (see ``Expert``).
        bias: biases on the experts' linear layers (GPT-2 style); Mixtral has none.  The
            router (d_model -> n_experts) never has a bias, as in Mixtral.
    Raises:
        ValueError: a size that is not a positive integer, ``top_k`` above ``n_experts``, an
            unknown ``mlp`` or a ``bias`` that is not True/False.

    ``MoEFeedForward.from_shape(shape)`` builds it from a ModelShape.  Build it under
    ``torch.device("meta")`` to count a full-size layer without allocating it.
    """

    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int,
                 mlp: str = "swiglu", bias: bool = False):
        super().__init__()
        for name, value in (("d_model", d_model), ("d_ff", d_ff), ("n_experts", n_experts),
                            ("top_k", top_k)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        if top_k > n_experts:
            raise ValueError(f"top_k={top_k} is more than n_experts={n_experts}")
        if mlp not in MLP_KINDS:
            raise ValueError(f"mlp={mlp!r} is not one of {', '.join(MLP_KINDS)}")
        if not isinstance(bias, bool):
            raise ValueError(f"bias={bias!r} must be True or False")
        self.d_model, self.n_experts, self.top_k = d_model, n_experts, top_k
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(Expert(d_model, d_ff, mlp, bias) for _ in range(n_experts))

    @classmethod
    def from_shape(cls, shape: ModelShape) -> "MoEFeedForward":
        """The layer for ``shape``: d_model, d_ff, n_experts, n_experts_per_tok, mlp, mlp_bias.

        Raises ValueError for a dense shape (n_experts = 0) or one with shared experts
        (DeepSeek), which route differently."""
        if not shape.is_moe:
            raise ValueError(f"n_experts={shape.n_experts}: the shape has a dense "
                             "feed-forward layer, not a mixture of experts")
        if shape.n_shared_experts:
            raise ValueError(f"n_shared_experts={shape.n_shared_experts}: this layer builds "
                             "Mixtral-style routing only, without shared experts")
        return cls(shape.d_model, shape.d_ff, shape.n_experts, shape.n_experts_per_tok,
                   shape.mlp, shape.mlp_bias)

    def run(self, x: torch.Tensor) -> MoEOutput:
        """x: (batch, pos, d_model) -> MoEOutput(out (batch, pos, d_model), routing)."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x has shape {tuple(x.shape)}; expected (batch, pos, "
                             f"d_model={self.d_model})")
        batch, pos, d_model = x.shape
        tokens = x.reshape(batch * pos, d_model)                  # (tokens, d_model)
        logits = self.router(tokens)                              # (tokens, n_experts)
        top_logits, chosen = logits.topk(self.top_k, dim=-1)      # (tokens, top_k) each
        weights = top_logits.softmax(dim=-1)                      # (tokens, top_k)
        out = torch.zeros_like(tokens)                            # (tokens, d_model)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)                # the tokens sent to e
            y = expert(tokens[token])                             # (tokens sent to e, d_model)
            out.index_add_(0, token, weights[token, slot, None] * y)
        routing = Routing(chosen.reshape(batch, pos, self.top_k),       # (batch, pos, top_k)
                          weights.reshape(batch, pos, self.top_k),      # (batch, pos, top_k)
                          logits.reshape(batch, pos, self.n_experts))   # (batch, pos, n_experts)
        return MoEOutput(out.reshape(batch, pos, d_model), routing)    # (batch, pos, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, pos, d_model) -> (batch, pos, d_model); ``run`` also gives the routing."""
        return self.run(x).out


def _expert_sizes(layer: MoEFeedForward, routing: Routing) -> tuple[int, torch.Tensor]:
    """(router parameters, parameters of each expert as an int64 tensor (n_experts,))."""
    experts = routing.experts
    if experts.dtype != torch.int64 or experts.shape[-1] != layer.top_k:
        raise ValueError(f"routing.experts has shape {tuple(experts.shape)} and dtype "
                         f"{experts.dtype}; expected int64 (..., top_k={layer.top_k})")
    if experts.numel() and not 0 <= int(experts.min()) <= int(experts.max()) < layer.n_experts:
        raise ValueError(f"routing.experts holds indices outside 0 .. {layer.n_experts - 1}")
    sizes = torch.tensor([sum(p.numel() for p in e.parameters()) for e in layer.experts])
    return layer.router.weight.numel(), sizes


def active_params_per_token(layer: MoEFeedForward, routing: Routing) -> torch.Tensor:
    """Parameters each token passes through: the router plus the experts it was sent to.

    Args:
        layer: the layer that made ``routing`` (it may live on the meta device).
        routing: ``layer.run(x).routing``, or any Routing whose ``experts`` are int64
            (..., top_k) indices into ``layer.experts``.
    Returns:
        int64 tensor of shape routing.experts.shape[:-1]: (batch, pos), in parameters.
    Raises:
        ValueError: ``routing.experts`` of the wrong dtype, width or index range.
    """
    router, sizes = _expert_sizes(layer, routing)
    return router + sizes[routing.experts].sum(dim=-1)   # (batch, pos)


def params_touched(layer: MoEFeedForward, routing: Routing) -> int:
    """Parameters the whole batch passes through: the router plus every expert at least one
    token was sent to (what a step must read from memory).  One token touches top_k experts;
    a batch of many tokens touches nearly all of them.  In parameters; errors as
    ``active_params_per_token``."""
    router, sizes = _expert_sizes(layer, routing)
    return router + int(sizes[routing.experts.unique()].sum())
