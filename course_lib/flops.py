"""Compute: multiply-adds and FLOPs of a forward pass, arithmetic intensity, training cost.

One multiply-add (MAC) is two floating-point operations: FLOPs = 2 × multiply-adds.  Only
matrix multiplications are counted; norms, softmax, activations and residual additions are
O(n·d) and left out (Kaplan et al. 2020, arxiv.org/abs/2001.08361, section 2.1, do the same).
``torch.utils.flop_counter.FlopCounterMode`` counts the same matmuls (tests/test_flops.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .memory import weight_bytes
from .params import count_params
from .shapes import ModelShape


@dataclass(frozen=True)
class ForwardMacs:
    """Multiply-adds of a forward pass, by kind (unit: multiply-adds)."""

    attention_scores: int
    """Q·Kᵀ and the weighted sum of V: 2·n_heads·d_head per attended position per layer."""
    weights: int
    """Every product with a weight matrix in the blocks (projections, feed-forward, router)."""
    output_head: int
    """The unembedding, d_model × d_vocab per token."""

    @property
    def total(self) -> int:
        return self.attention_scores + self.weights + self.output_head

    @property
    def flops(self) -> int:
        """FLOPs = 2 × multiply-adds."""
        return 2 * self.total


def attention_weight_macs_per_layer(s: ModelShape) -> int:
    """Multiply-adds per token against one block's attention projections (one per weight):
    d_model·(q + 2·kv) + q·d_model for q = n_heads·d_head, kv = n_kv_heads·d_head.  Latent
    attention, computed as written (the latent expanded to every head, as transformers does):
    its down- and up-projections and the output."""
    if s.mla is not None:
        m, H = s.mla, s.n_heads
        q = (s.d_model * m.q_lora_rank + m.q_lora_rank * H * s.d_head if m.q_lora_rank
             else s.d_model * H * s.d_head)
        kv = (s.d_model * (m.kv_lora_rank + m.d_head_rope)
              + m.kv_lora_rank * H * (s.d_head - m.d_head_rope + m.d_head_v))
        return q + kv + H * m.d_head_v * s.d_model
    q, kv = s.n_heads * s.d_head, s.n_kv_heads * s.d_head
    return s.d_model * (q + 2 * kv) + q * s.d_model


def weight_macs_per_token(s: ModelShape) -> int:
    """Multiply-adds per token against the blocks' weight matrices (one per weight, biases and
    norms aside).  A mixture of experts counts the ``n_experts_per_tok`` experts a token uses,
    its shared experts and its router; its first ``n_dense_layers`` a dense MLP of
    ``d_ff_dense``.  For GPT-2 shapes: 12·d_model² per layer."""
    attn = attention_weight_macs_per_layer(s)
    dense = s.mlp_matrices * s.d_model * (s.d_ff_dense or s.d_ff if s.is_moe else s.d_ff)
    moe = (s.mlp_matrices * s.d_model * (s.n_experts_per_tok * s.d_ff + s.shared_width)
           + s.d_model * (s.n_experts + s.shared_expert_gate))
    return s.n_layers * attn + (s.n_layers - s.moe_layers) * dense + s.moe_layers * moe


def score_macs_per_position(s: ModelShape) -> int:
    """Multiply-adds of one layer's attention for one (query, key) pair: Q·Kᵀ over d_head and
    the weighted sum of V over d_head (d_head_v for latent attention), for every query head."""
    d_v = s.mla.d_head_v if s.mla is not None else s.d_head
    return s.n_heads * (s.d_head + d_v)


def attended_positions(s: ModelShape, position: int) -> int:
    """Keys the token at ``position`` (1-based) attends to in a layer with the sliding window:
    all earlier ones and itself, or the last ``sliding_window``.  (Layers without it attend to
    all ``position``.)"""
    return position if s.sliding_window is None else min(position, s.sliding_window)


def attended_layer_positions(s: ModelShape, position: int) -> int:
    """``attended_positions`` summed over layers (windowed layers and the others)."""
    return ((s.n_layers - s.sliding_layers) * position
            + s.sliding_layers * attended_positions(s, position))


def forward_macs_per_token(s: ModelShape, n_ctx: int) -> ForwardMacs:
    """Multiply-adds to run one token that attends to ``n_ctx`` positions (a decode step at
    context length ``n_ctx``, a sliding window capping it).

    Attention scores cost 2·n_layers·n_heads·d_head·n_ctx; for a GPT-2 shape that is 2·n·d per
    layer, so a whole sequence of n tokens without a causal mask costs 2n²d against 12nd² for
    the weights, equal at n = 6d."""
    if n_ctx <= 0:
        raise ValueError(f"n_ctx={n_ctx} must be positive")
    scores = score_macs_per_position(s) * attended_layer_positions(s, n_ctx)
    return ForwardMacs(attention_scores=scores, weights=weight_macs_per_token(s),
                       output_head=s.d_model * s.d_vocab)


def forward_flops_per_token(s: ModelShape, n_ctx: int) -> int:
    """FLOPs (= 2 × multiply-adds) to run one token at context length ``n_ctx``."""
    return forward_macs_per_token(s, n_ctx).flops


def forward_macs(s: ModelShape, n_tokens: int, causal: bool = True) -> ForwardMacs:
    """Multiply-adds of one forward pass over a prompt of ``n_tokens`` (prefill).

    ``causal=True`` counts only the scores a causal mask keeps, token i attending to i
    positions (n(n+1)/2 pairs); ``causal=False`` counts the full n×n matrix, which is what a
    kernel that ignores the mask computes (2n²d per layer)."""
    if n_tokens <= 0:
        raise ValueError(f"n_tokens={n_tokens} must be positive")
    if causal:
        windowed = sum(attended_positions(s, i) for i in range(1, n_tokens + 1)) \
            if s.sliding_window is not None and s.sliding_window < n_tokens \
            else n_tokens * (n_tokens + 1) // 2
        layer_pairs = ((s.n_layers - s.sliding_layers) * (n_tokens * (n_tokens + 1) // 2)
                       + s.sliding_layers * windowed)
    else:
        layer_pairs = s.n_layers * n_tokens * n_tokens
    scores = score_macs_per_position(s) * layer_pairs
    return ForwardMacs(attention_scores=scores, weights=n_tokens * weight_macs_per_token(s),
                       output_head=n_tokens * s.d_model * s.d_vocab)


def arithmetic_intensity(s: ModelShape, n_tokens: int, dtype: str | None = None) -> float:
    """FLOPs per byte of weights read, when one pass handles ``n_tokens`` tokens at once.

    Every weight is read once per pass and used once per token, so this is
    2·n_tokens·(weight multiply-adds per token) / weight bytes: about 1 FLOP/byte for a decode
    step (n_tokens = 1) in 16-bit and about 512 for a 512-token prefill.  Attention over the
    cache is left out (it reads the cache, not the weights)."""
    flops = 2 * n_tokens * (weight_macs_per_token(s) + s.d_model * s.d_vocab)
    return flops / weight_bytes(s, dtype)


def training_flops_per_token(s: ModelShape) -> int:
    """≈ 6 × active parameters FLOPs per training token: 2 for the forward pass and 4 for the
    backward pass (Kaplan et al. 2020, C ≈ 6N per token)."""
    return 6 * count_params(s).active

