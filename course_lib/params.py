"""Parameter counts by part, exact to the parameter.

Checked in tests/test_params.py against the same architecture built by Hugging Face
``transformers`` on the meta device (sum of ``p.numel()`` over ``model.parameters()``, tied
weights once), for every shipped card and for random small shapes of each supported family.
Units: parameters (a count, not bytes).  Buffers are not parameters: DeepSeek-V3's router
keeps a bias of n_experts numbers per layer (``e_score_correction_bias``) as a buffer, so it
is not counted, as ``model.parameters()`` does not count it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .shapes import NORM_PARAMS_PER_WIDTH, ModelShape


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of a whole model, by part (all layers summed).

    ``attention`` holds the projections with their biases (and, for latent attention, the
    norms of its latents); ``feed_forward`` every feed-forward layer: all experts of a mixture
    of experts, its shared experts and its dense layers; ``router`` the routers; ``norms``
    the norms of the blocks and the final norm.  ``active`` counts what one token uses:
    everything except the routed experts it is not sent to.
    """

    token_embedding: int
    position_embedding: int
    attention: int
    feed_forward: int
    router: int
    norms: int
    output_head: int
    active: int

    def __init__(self, token_embedding: int, position_embedding: int, attention: int,
                 feed_forward: int, router: int, norms: int, output_head: int,
                 active: int) -> None:
        # Hand-written: a frozen dataclass's generated __init__ sets each field through
        # object.__setattr__, a measurable share of sizing a card (benchmarks/size_vs_meta.py).
        object.__setattr__(self, "__dict__", dict(
            token_embedding=token_embedding, position_embedding=position_embedding,
            attention=attention, feed_forward=feed_forward, router=router, norms=norms,
            output_head=output_head, active=active))

    @property
    def embedding(self) -> int:
        """Token and position embeddings (parameters)."""
        return self.token_embedding + self.position_embedding

    @property
    def total(self) -> int:
        """Every parameter, a tied head counted once."""
        return (self.token_embedding + self.position_embedding + self.attention
                + self.feed_forward + self.router + self.norms + self.output_head)

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(embedding=self.embedding, total=self.total)
        return d


def norm_params(s: ModelShape, width: int | None = None) -> int:
    """One normalisation layer over ``width`` numbers (d_model by default): 2·width for
    LayerNorm (weight, bias), width for RMSNorm, 0 for LayerNorm without weights (OLMo)."""
    return NORM_PARAMS_PER_WIDTH[s.norm] * (s.d_model if width is None else width)


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def latent_attention_params_per_layer(s: ModelShape) -> int:
    """Multi-head latent attention of one block (DeepSeek-V2/V3, as ``transformers`` builds
    it), with H = n_heads and the widths of ``s.mla``:

        queries  d_model × q_lora_rank, a norm, q_lora_rank × H·d_head
                 (or d_model × H·d_head when q_lora_rank is 0)
        kv_a     d_model × (kv_lora_rank + d_head_rope), a norm of kv_lora_rank
        kv_b     kv_lora_rank × H·(d_head − d_head_rope + d_head_v)
        output   H·d_head_v × d_model

    ``qkv_bias`` puts biases on the two down-projections, ``out_bias`` on the output.
    """
    m, H = s.mla, s.n_heads
    if m.q_lora_rank:
        q = (_linear(s.d_model, m.q_lora_rank, s.qkv_bias) + norm_params(s, m.q_lora_rank)
             + _linear(m.q_lora_rank, H * s.d_head, False))
    else:
        q = _linear(s.d_model, H * s.d_head, False)
    kv = (_linear(s.d_model, m.kv_lora_rank + m.d_head_rope, s.qkv_bias)
          + norm_params(s, m.kv_lora_rank)
          + _linear(m.kv_lora_rank, H * (s.d_head - m.d_head_rope + m.d_head_v), False))
    return q + kv + _linear(H * m.d_head_v, s.d_model, s.out_bias)


def attention_params_per_layer(s: ModelShape) -> int:
    """Query, key, value and output projections of one block (with their biases).

    Q and O are d_model × (n_heads·d_head); K and V are d_model × (n_kv_heads·d_head) each,
    so grouped-query attention shrinks K and V, not Q and O.  For GPT-2 shapes: 4·d_model² + 4·d_model.
    Fused layouts (GPT-2's ``c_attn``, Phi-3's ``qkv_proj``, Falcon's ``query_key_value``)
    hold the same numbers.  Latent attention: see ``latent_attention_params_per_layer``.
    """
    if s.mla is not None:
        return latent_attention_params_per_layer(s)
    q, kv = s.n_heads * s.d_head, s.n_kv_heads * s.d_head
    n = s.d_model * (q + 2 * kv) + q * s.d_model
    if s.qkv_bias:
        n += q + 2 * kv
    if s.out_bias:
        n += s.d_model
    return n + qk_norm_params_per_layer(s) + (s.n_heads if s.attention_sinks else 0)


def qk_norm_params_per_layer(s: ModelShape) -> int:
    """The query and key norms of one block (of the block's norm kind): 2 norms of d_head for
    ``qk_norm="head"`` (Qwen3, Gemma 3), norms of n_heads·d_head and n_kv_heads·d_head for
    ``"heads"`` (OLMo 2, Cohere), none without.  Counted with attention."""
    if s.qk_norm == "head":
        return 2 * norm_params(s, s.d_head)
    if s.qk_norm == "heads":
        return norm_params(s, s.n_heads * s.d_head) + norm_params(s, s.n_kv_heads * s.d_head)
    return 0


def mlp_params(s: ModelShape, d_ff: int | None = None) -> int:
    """One feed-forward layer of width ``d_ff`` (``s.d_ff`` by default: one dense layer or one
    expert): 2 matrices for GELU, 3 for SwiGLU/GeGLU, with biases if ``s.mlp_bias``.

    For GPT-2 shapes (d_ff = 4·d_model): 8·d_model² + 5·d_model with biases.
    """
    d_ff = s.d_ff if d_ff is None else d_ff
    n_in = s.mlp_matrices - 1  # matrices into d_ff: up (and gate)
    n = s.mlp_matrices * s.d_model * d_ff
    if s.mlp_bias:
        n += n_in * d_ff + s.d_model
    return n


def router_params_per_layer(s: ModelShape) -> int:
    """The top-k router of a mixture-of-experts layer: d_model × n_experts (Mixtral,
    DeepSeek-V3), with a bias of n_experts if ``router_bias`` (gpt-oss), and the shared
    expert's gate d_model × 1 if ``shared_expert_gate`` (Qwen2-MoE)."""
    if not s.is_moe:
        return 0
    return (_linear(s.d_model, s.n_experts, s.router_bias)
            + (s.d_model if s.shared_expert_gate else 0))


def _is_moe_layer(s: ModelShape, layer: int) -> bool:
    return s.is_moe_layer(layer)


def feed_forward_params_per_layer(s: ModelShape, layer: int) -> int:
    """The feed-forward part of block ``layer`` (0-based): one MLP for a dense model or a
    dense layer (width ``d_ff_dense``); every routed expert plus the shared experts (one MLP
    of width ``s.shared_width``) for a mixture-of-experts layer."""
    if not _is_moe_layer(s, layer):
        return mlp_params(s, s.d_ff_dense if s.is_moe and s.d_ff_dense else s.d_ff)
    shared = mlp_params(s, s.shared_width) if s.n_shared_experts else 0
    return s.n_experts * mlp_params(s) + shared


def count_params(s: ModelShape) -> ParamCounts:
    """Count a model's parameters by part.

    Args:
        s: the model's shape.
    Returns:
        ParamCounts; ``total`` and ``active`` in parameters.
    Source: the architectures as built in ``transformers`` 5 (every family of
    ``cards.SUPPORTED_MODEL_TYPES``): ``norms_per_block`` norms per block plus a final norm;
    query/key norms and attention sinks with attention; a shared expert's gate with the
    router; a head bias with the head.
    """
    L = s.n_layers
    token = s.d_vocab * s.d_model
    position = s.n_ctx * s.d_model if s.positions == "learned" else 0
    attention = L * attention_params_per_layer(s)
    moe_layers = s.moe_layers
    expert = mlp_params(s)
    dense_ff = mlp_params(s, s.d_ff_dense) if s.n_experts and s.d_ff_dense else expert
    moe_ff = s.n_experts * expert + (mlp_params(s, s.shared_width) if s.n_shared_experts else 0)
    feed_forward = (L - moe_layers) * dense_ff + moe_layers * moe_ff
    router = moe_layers * router_params_per_layer(s)
    norms = (s.norms_per_block * L + 1) * norm_params(s)
    head = (0 if s.tied_embeddings else token) + (s.d_vocab if s.head_bias else 0)
    unused_experts = moe_layers * (s.n_experts - s.n_experts_per_tok) * expert
    total = token + position + attention + feed_forward + router + norms + head
    return ParamCounts(token_embedding=token, position_embedding=position, attention=attention,
                       feed_forward=feed_forward, router=router, norms=norms, output_head=head,
                       active=total - unused_experts)


def block_params(s: ModelShape, layer: int | None = None) -> dict:
    """One block's parameters by part: ``attention``, ``feed_forward`` (all experts),
    ``router``, ``norms`` and ``total`` (parameters).

    ``layer`` (0-based) matters only when blocks differ, as in DeepSeek-V3 whose first
    ``n_dense_layers`` are dense; None means the last block.  Raises ValueError for a layer
    outside 0 .. n_layers − 1."""
    if layer is None:
        layer = s.n_layers - 1
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < s.n_layers:
        raise ValueError(f"layer={layer!r} must be an integer from 0 to {s.n_layers - 1}")
    moe = _is_moe_layer(s, layer)
    parts = {"attention": attention_params_per_layer(s),
             "feed_forward": feed_forward_params_per_layer(s, layer),
             "router": router_params_per_layer(s) if moe else 0,
             "norms": s.norms_per_block * norm_params(s)}
    parts["total"] = sum(parts.values())
    return parts
