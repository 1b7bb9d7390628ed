"""A model's shape: the handful of numbers on a spec sheet, with the field's names.

Names follow the course glossary (README.md, "Glossary"), the ones TransformerLens and
Kaplan et al. (2020, arxiv.org/abs/2001.08361) use:

    d_model     width of the residual stream
    n_layers    number of blocks
    n_heads     query heads per block
    n_kv_heads  key/value heads per block (fewer than n_heads: grouped-query attention)
    d_head      width of one head
    d_ff        width of the feed-forward layer (per expert for a mixture of experts)
    n_ctx       positions the model was trained for (its context length)
    d_vocab     tokens in the vocabulary

Everything else is a switch that real architectures differ on (kind of MLP and norm, biases,
tied head, experts, sliding window).  A shape is validated when it is built: a bad value
raises ``ValueError`` naming the field and the value.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

MLP_KINDS = ("gelu", "swiglu")
"""``gelu``: two matrices, d_model→d_ff→d_model (GPT-2).  ``swiglu``: three matrices, a gate
and an up projection d_model→d_ff and a down projection d_ff→d_model (Llama; Shazeer 2020,
arxiv.org/abs/2002.05202).  Any gated MLP (GeGLU too) counts like ``swiglu``."""

NORM_KINDS = ("layernorm", "rmsnorm")
"""``layernorm``: a weight and a bias of d_model each (Ba et al. 2016).  ``rmsnorm``: a weight
only (Zhang and Sennrich 2019)."""

POSITION_KINDS = ("learned", "rotary", "sinusoidal", "none")
"""``learned``: a table of n_ctx × d_model parameters (GPT-2).  ``rotary`` (Su et al. 2021) and
``sinusoidal`` (Vaswani et al. 2017) have no parameters."""


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder-only transformer.

    Required: ``d_model, n_layers, n_heads, d_ff, d_vocab, n_ctx`` (positive integers).
    ``n_kv_heads`` defaults to ``n_heads`` (multi-head attention) and ``d_head`` to
    ``d_model // n_heads``, which must then divide exactly.

    Raises:
        ValueError: a size that is not a positive integer; ``n_heads`` not dividing ``d_model``
            when ``d_head`` is not given; ``n_kv_heads`` not dividing ``n_heads``; more experts
            per token than experts; an unknown ``mlp``, ``norm`` or ``positions`` kind.
    """

    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    d_vocab: int
    n_ctx: int
    n_kv_heads: int | None = None
    d_head: int | None = None
    mlp: str = "gelu"
    norm: str = "layernorm"
    positions: str = "learned"
    qkv_bias: bool = True
    out_bias: bool = True
    mlp_bias: bool = True
    tied_embeddings: bool = True
    n_experts: int = 0
    """Feed-forward experts per layer; 0 means a dense feed-forward layer."""
    n_experts_per_tok: int = 0
    """Experts each token is routed to (top-k); 0 for a dense model."""
    sliding_window: int | None = None
    """Each token attends to at most this many positions (Mistral); None means all."""
    dtype: str | None = None
    """The dtype the card stores its weights in (``torch_dtype``), if it says."""
    model_type: str = "custom"
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for f in ("d_model", "n_layers", "n_heads", "d_ff", "d_vocab", "n_ctx"):
            _check_positive(f, getattr(self, f))
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        _check_positive("n_kv_heads", self.n_kv_heads)
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"n_heads={self.n_heads} does not divide d_model={self.d_model}; "
                    "give d_head explicitly if the heads are not d_model / n_heads wide"
                )
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        _check_positive("d_head", self.d_head)
        if self.n_kv_heads > self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} does not divide n_heads={self.n_heads}: "
                "each key/value head must serve a whole group of query heads"
            )
        for f, kinds in (("mlp", MLP_KINDS), ("norm", NORM_KINDS), ("positions", POSITION_KINDS)):
            if getattr(self, f) not in kinds:
                raise ValueError(f"{f}={getattr(self, f)!r} is not one of {', '.join(kinds)}")
        _check_int("n_experts", self.n_experts, minimum=0)
        _check_int("n_experts_per_tok", self.n_experts_per_tok, minimum=0)
        if self.n_experts and not self.n_experts_per_tok:
            raise ValueError(f"n_experts_per_tok={self.n_experts_per_tok} must be at least 1 "
                             f"when n_experts={self.n_experts}")
        if self.n_experts_per_tok > self.n_experts:
            raise ValueError(
                f"n_experts_per_tok={self.n_experts_per_tok} is more than n_experts={self.n_experts}"
            )
        if self.sliding_window is not None:
            _check_positive("sliding_window", self.sliding_window)
        for f in ("qkv_bias", "out_bias", "mlp_bias", "tied_embeddings"):
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"{f}={getattr(self, f)!r} must be True or False")

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts feed-forward layer."""
        return self.n_experts > 0

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head (1 for multi-head attention)."""
        return self.n_heads // self.n_kv_heads

    def with_(self, **changes) -> "ModelShape":
        """A copy with some fields changed, validated again (``dataclasses.replace``).

        Values that were derived follow the change unless given: when ``d_model`` or
        ``n_heads`` changes, a ``d_head`` equal to d_model // n_heads is derived again, and
        when ``n_heads`` changes, an ``n_kv_heads`` equal to n_heads follows it."""
        if "d_head" not in changes and {"d_model", "n_heads"} & changes.keys() \
                and self.d_head * self.n_heads == self.d_model:
            changes["d_head"] = None
        if "n_kv_heads" not in changes and "n_heads" in changes and self.n_kv_heads == self.n_heads:
            changes["n_kv_heads"] = None
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """The fields as a plain dict (JSON-ready)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r} must be an integer")
    if value < minimum:
        raise ValueError(f"{name}={value!r} must be at least {minimum}")


def _check_positive(name: str, value) -> None:
    _check_int(name, value, minimum=1)


def gpt2_shape(d_model: int = 768, n_layers: int = 12, n_heads: int = 12,
               d_vocab: int = 50257, n_ctx: int = 1024, d_ff: int | None = None) -> ModelShape:
    """A GPT-2-style shape (Radford et al. 2019): LayerNorm, biases, learned positions,
    GELU MLP of width ``d_ff`` (4·d_model by default), head tied to the token embedding.
    Defaults give GPT-2 small."""
    return ModelShape(d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                      d_ff=4 * d_model if d_ff is None else d_ff, d_vocab=d_vocab, n_ctx=n_ctx,
                      model_type="gpt2")


def llama_shape(d_model: int = 4096, n_layers: int = 32, n_heads: int = 32,
                n_kv_heads: int | None = None, d_ff: int = 11008, d_vocab: int = 32000,
                n_ctx: int = 4096) -> ModelShape:
    """A Llama-style shape (Touvron et al. 2023): RMSNorm, no biases, rotary positions,
    SwiGLU MLP, untied head.  Defaults give Llama 2 7B."""
    return ModelShape(d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
                      d_ff=d_ff, d_vocab=d_vocab, n_ctx=n_ctx, mlp="swiglu", norm="rmsnorm",
                      positions="rotary", qkv_bias=False, out_bias=False, mlp_bias=False,
                      tied_embeddings=False, model_type="llama")
