"""Parameter counts by part, exact to the parameter.

Checked in tests/test_params.py against the same architecture built by Hugging Face
``transformers`` on the meta device (sum of ``p.numel()``, tied weights once).
Units: parameters (a count, not bytes).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .shapes import ModelShape


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of a whole model, by part (all layers summed).

    ``feed_forward`` holds every expert of a mixture of experts; ``router`` the routers.
    ``active`` counts what one token uses: everything except the experts it is not sent to.
    """

    token_embedding: int
    position_embedding: int
    attention: int
    feed_forward: int
    router: int
    norms: int
    output_head: int
    active: int

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


def attention_params_per_layer(s: ModelShape) -> int:
    """Query, key, value and output projections of one block (with their biases).

    Q and O are d_model × (n_heads·d_head); K and V are d_model × (n_kv_heads·d_head) each,
    so grouped-query attention shrinks K and V, not Q and O.  For GPT-2 shapes: 4·d_model² + 4·d_model.
    """
    q, kv = s.n_heads * s.d_head, s.n_kv_heads * s.d_head
    n = s.d_model * (q + 2 * kv) + q * s.d_model
    if s.qkv_bias:
        n += q + 2 * kv
    if s.out_bias:
        n += s.d_model
    return n


def mlp_params(s: ModelShape) -> int:
    """One dense feed-forward layer (or one expert): 2 matrices for GELU, 3 for SwiGLU.

    For GPT-2 shapes (d_ff = 4·d_model): 8·d_model² + 5·d_model with biases.
    """
    n_in = 1 if s.mlp == "gelu" else 2  # matrices into d_ff: up (and gate)
    n = (n_in + 1) * s.d_model * s.d_ff
    if s.mlp_bias:
        n += n_in * s.d_ff + s.d_model
    return n


def norm_params(s: ModelShape) -> int:
    """One normalisation layer: 2·d_model for LayerNorm (weight, bias), d_model for RMSNorm."""
    return 2 * s.d_model if s.norm == "layernorm" else s.d_model


def router_params_per_layer(s: ModelShape) -> int:
    """The top-k router of a mixture-of-experts layer: d_model × n_experts, no bias (Mixtral)."""
    return s.d_model * s.n_experts if s.is_moe else 0


def count_params(s: ModelShape) -> ParamCounts:
    """Count a model's parameters by part.

    Args:
        s: the model's shape.
    Returns:
        ParamCounts; ``total`` and ``active`` in parameters.
    Source: the architectures as built in ``transformers`` (GPT-2, Llama, Mistral, Mixtral);
    two norms per block plus a final norm.
    """
    L = s.n_layers
    token = s.d_vocab * s.d_model
    position = s.n_ctx * s.d_model if s.positions == "learned" else 0
    attention = L * attention_params_per_layer(s)
    n_mlps = s.n_experts if s.is_moe else 1
    feed_forward = L * n_mlps * mlp_params(s)
    router = L * router_params_per_layer(s)
    norms = (2 * L + 1) * norm_params(s)
    head = 0 if s.tied_embeddings else s.d_vocab * s.d_model
    unused_experts = L * (s.n_experts - s.n_experts_per_tok) * mlp_params(s) if s.is_moe else 0
    total = token + position + attention + feed_forward + router + norms + head
    return ParamCounts(token_embedding=token, position_embedding=position, attention=attention,
                       feed_forward=feed_forward, router=router, norms=norms, output_head=head,
                       active=total - unused_experts)


def block_params(s: ModelShape) -> dict:
    """One block's parameters by part: ``attention``, ``feed_forward`` (all experts),
    ``router``, ``norms`` and ``total`` (parameters)."""
    n_mlps = s.n_experts if s.is_moe else 1
    parts = {"attention": attention_params_per_layer(s),
             "feed_forward": n_mlps * mlp_params(s),
             "router": router_params_per_layer(s),
             "norms": 2 * norm_params(s)}
    parts["total"] = sum(parts.values())
    return parts
