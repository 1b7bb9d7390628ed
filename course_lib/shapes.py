"""A model's shape: the handful of numbers on a spec sheet, with the field's names.

Names follow the course glossary (README.md, "Glossary"), the ones TransformerLens and
Kaplan et al. (2020, arxiv.org/abs/2001.08361) use:

    d_model     width of the residual stream
    n_layers    number of blocks
    n_heads     query heads per block
    n_kv_heads  key/value heads per block (fewer than n_heads: grouped-query attention)
    d_head      width of one head (of a query and key head for latent attention)
    d_ff        width of the feed-forward layer (per expert for a mixture of experts)
    n_ctx       positions the model was trained for (its context length)
    d_vocab     tokens in the vocabulary

Everything else is a switch that real architectures differ on (kind of MLP and norm, norms
per block, biases, tied head, experts, shared experts, dense layers, sliding window, latent
attention, query/key norms, attention sinks).  Partial rotary positions (Phi-2, GPT-NeoX,
GLM-4.5) and layers without positions (SmolLM3) have no parameters and cache nothing extra,
so a shape does not record them.
A shape is validated when it is built: a bad value raises ``ValueError`` naming the field and
the value.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

MLP_MATRICES = {"gelu": 2, "swiglu": 3, "geglu": 3}
"""Weight matrices in one feed-forward layer of each kind.  ``gelu``: an up projection
d_model→d_ff and a down projection d_ff→d_model (GPT-2, Falcon).  ``swiglu`` and ``geglu``:
a gate and an up projection d_model→d_ff and a down projection d_ff→d_model (Llama with SiLU,
Gemma with GELU; Shazeer 2020, arxiv.org/abs/2002.05202).  Fused layouts (Phi-3's
``gate_up_proj``) hold the same numbers."""

MLP_KINDS = tuple(MLP_MATRICES)

NORM_PARAMS_PER_WIDTH = {"layernorm": 2, "rmsnorm": 1, "nonparametric_layernorm": 0,
                         "layernorm_nobias": 1}
"""Parameters per unit of width of each normalisation kind.  ``layernorm``: a weight and a
bias (Ba et al. 2016; GPT-2, Falcon).  ``rmsnorm``: a weight only (Zhang and Sennrich 2019;
Llama, Gemma).  ``nonparametric_layernorm``: LayerNorm without weight or bias, no parameters
(OLMo, Groeneveld et al. 2024, arxiv.org/abs/2402.00838).  ``layernorm_nobias``: LayerNorm
with a weight and no bias (Cohere's Command R)."""

NORM_KINDS = tuple(NORM_PARAMS_PER_WIDTH)

QK_NORM_KINDS = ("head", "heads")
"""Norms on the queries and keys of each layer (of the block's ``norm`` kind).  ``head``: one
norm of d_head shared by every head, one for queries and one for keys (Qwen3, Gemma 3;
Dehghani et al. 2023, arxiv.org/abs/2302.05442).  ``heads``: one over the whole projection,
n_heads·d_head for queries and n_kv_heads·d_head for keys (OLMo 2, OLMoE, Cohere)."""

POSITION_KINDS = ("learned", "rotary", "sinusoidal", "alibi", "none")
"""``learned``: a table of n_ctx × d_model parameters (GPT-2).  ``rotary`` (Su et al. 2021),
``sinusoidal`` (Vaswani et al. 2017) and ``alibi`` (Press et al. 2021) have no parameters."""


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (MLA; DeepSeek-V2, arxiv.org/abs/2405.04434, section 2.1).

    Keys and values are rebuilt per head from one shared latent of ``kv_lora_rank`` numbers
    per token, plus one rotary key of ``d_head_rope`` numbers shared by all heads; that latent
    and rotary key are all a layer needs to cache.  Each query/key head is ``d_head`` wide
    (``d_head - d_head_rope`` without and ``d_head_rope`` with rotary positions); each value
    head is ``d_head_v`` wide.

    Fields:
        kv_lora_rank: width of the key/value latent (DeepSeek-V3: 512).
        d_head_rope: rotary part of a query/key head (64).
        d_head_v: width of a value head (128).
        q_lora_rank: width of the query latent; 0 projects queries straight from d_model
            (DeepSeek-V2-Lite) (1536).
    Raises:
        ValueError: a width that is not a whole number, non-positive ``kv_lora_rank`` or
            ``d_head_v``, or negative ``d_head_rope`` or ``q_lora_rank``.
    """

    kv_lora_rank: int
    d_head_rope: int
    d_head_v: int
    q_lora_rank: int = 0

    def __post_init__(self) -> None:
        _check_positive("kv_lora_rank", self.kv_lora_rank)
        _check_int("d_head_rope", self.d_head_rope, minimum=0)
        _check_positive("d_head_v", self.d_head_v)
        _check_int("q_lora_rank", self.q_lora_rank, minimum=0)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder-only transformer.

    Required: ``d_model, n_layers, n_heads, d_ff, d_vocab, n_ctx`` (positive integers).
    ``n_kv_heads`` defaults to ``n_heads`` (multi-head attention) and ``d_head`` to
    ``d_model // n_heads``, which must then divide exactly.

    Raises:
        ValueError: a size that is not a positive integer; ``n_heads`` not dividing ``d_model``
            when ``d_head`` is not given; ``n_kv_heads`` not dividing ``n_heads``; more experts
            per token than experts; an unknown ``mlp``, ``norm`` or ``positions`` kind; a
            switch that is not True/False; ``n_sliding_layers`` without a window or above
            ``n_layers``; shared experts, dense layers or ``d_ff_dense`` without experts;
            latent attention with fewer kv heads than heads; an unknown ``qk_norm``;
            ``d_ff_shared`` or a shared-expert gate without shared experts; a router bias
            without experts; ``dense_layer_ids`` outside the layers or disagreeing with
            ``n_dense_layers``.
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
    """Biases on the query, key and value projections (on the down-projections ``q_a`` and
    ``kv_a`` for latent attention, as DeepSeek's ``attention_bias`` does)."""
    out_bias: bool = True
    """A bias on the attention output projection."""
    mlp_bias: bool = True
    tied_embeddings: bool = True
    n_experts: int = 0
    """Feed-forward experts per layer; 0 means a dense feed-forward layer."""
    n_experts_per_tok: int = 0
    """Experts each token is routed to (top-k); 0 for a dense model."""
    sliding_window: int | None = None
    """Each token attends to at most this many positions (Mistral); None means all."""
    n_sliding_layers: int | None = None
    """How many of the ``n_layers`` use ``sliding_window``; the others attend to every
    position (Gemma 2: every other layer).  None means all of them.  See ``sliding_layers``."""
    norms_per_block: int = 2
    """Normalisation layers in each block, a final one after the last block aside: 2 before
    attention and feed-forward (GPT-2, Llama); 4 with Gemma 2's extra norms after each; 1 for
    Falcon-7B's parallel block, whose attention and MLP read the same normed input."""
    parallel_attn: bool = False
    """Attention and feed-forward read the same input and their outputs are added to the
    residual stream together (GPT-J, Falcon).  Changes neither parameters nor multiply-adds."""
    n_shared_experts: int = 0
    """Experts every token goes through besides its routed ones (DeepSeek-V3: 1).  They are
    built as one feed-forward layer of width ``n_shared_experts × d_ff``."""
    n_dense_layers: int = 0
    """The first layers of a mixture of experts that have a dense feed-forward layer instead
    (DeepSeek-V3: 3, ``first_k_dense_replace``)."""
    d_ff_dense: int | None = None
    """Width of those dense layers' feed-forward; None means ``d_ff``."""
    mla: LatentAttention | None = None
    """Multi-head latent attention (DeepSeek); None for ordinary attention."""
    qk_norm: str | None = None
    """Norms on queries and keys: None, ``"head"`` or ``"heads"`` (see ``QK_NORM_KINDS``)."""
    attention_sinks: bool = False
    """One learned logit per query head per layer that takes a share of the softmax
    (gpt-oss; Xiao et al. 2023, arxiv.org/abs/2309.17453): n_heads parameters a layer."""
    router_bias: bool = False
    """A bias of n_experts on each router (gpt-oss)."""
    head_bias: bool = False
    """A bias of d_vocab on the output head (Phi-2, Phi-3.5-MoE)."""
    d_ff_shared: int | None = None
    """Width of the one feed-forward layer the shared experts are built as; None means
    ``n_shared_experts × d_ff`` (DeepSeek, GLM-4.5); Qwen1.5-MoE sets its own."""
    shared_expert_gate: bool = False
    """A sigmoid gate d_model → 1 (no bias) scaling the shared expert's output (Qwen2-MoE)."""
    dense_layer_ids: tuple | None = None
    """Which layers (0-based) are the ``n_dense_layers`` dense ones, when they are not the
    first ones (Qwen-MoE's ``mlp_only_layers`` and ``decoder_sparse_step``).  None means the
    first ``n_dense_layers``; a tuple that is ``0 .. k-1`` is stored as None."""
    dtype: str | None = None
    """The dtype the card stores its weights in (``torch_dtype``), if it says."""
    model_type: str = "custom"
    name: str = field(default="", compare=False)

    def __init__(self, *args, **kwargs) -> None:
        # Hand-written (dataclass keeps a class's own __init__): the generated one of a frozen
        # dataclass sets its 37 fields one object.__setattr__ at a time, which costs more than
        # the whole parameter count (benchmarks/size_vs_meta.py).  Same signature and errors.
        if len(args) > len(_FIELD_NAMES):
            raise TypeError(f"ModelShape() takes at most {len(_FIELD_NAMES)} positional "
                            f"arguments ({len(args)} given)")
        values = dict(_FIELD_DEFAULTS)
        for name, value in zip(_FIELD_NAMES, args):
            if name in kwargs:
                raise TypeError(f"ModelShape() got multiple values for argument {name!r}")
            values[name] = value
        values.update(kwargs)
        if len(values) != len(_FIELD_NAMES):  # a key that is not a field
            unknown = next(n for n in kwargs if n not in _FIELD_DEFAULTS)
            raise TypeError(f"ModelShape() got an unexpected keyword argument {unknown!r}")
        if _MISSING in (values["d_model"], values["n_layers"], values["n_heads"],
                        values["d_ff"], values["d_vocab"], values["n_ctx"]):
            missing = [n for n in _REQUIRED if values[n] is _MISSING]
            raise TypeError("ModelShape() missing required arguments: " + ", ".join(missing))
        object.__setattr__(self, "__dict__", values)
        self.__post_init__()

    def __post_init__(self) -> None:
        d = self.__dict__
        for f in _REQUIRED:
            v = d[f]
            if type(v) is not int or v < 1:
                _check_positive(f, v)
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
        for f, kinds in _KIND_FIELDS:
            if d[f] not in kinds:
                raise ValueError(f"{f}={d[f]!r} is not one of {', '.join(kinds)}")
        for f in ("n_experts", "n_experts_per_tok"):
            if type(d[f]) is not int or d[f] < 0:
                _check_int(f, d[f], minimum=0)
        if self.n_experts and not self.n_experts_per_tok:
            raise ValueError(f"n_experts_per_tok={self.n_experts_per_tok} must be at least 1 "
                             f"when n_experts={self.n_experts}")
        if self.n_experts_per_tok > self.n_experts:
            raise ValueError(
                f"n_experts_per_tok={self.n_experts_per_tok} is more than n_experts={self.n_experts}"
            )
        if self.sliding_window is not None:
            _check_positive("sliding_window", self.sliding_window)
        if self.n_sliding_layers is not None:
            _check_int("n_sliding_layers", self.n_sliding_layers, minimum=0)
            if self.sliding_window is None:
                raise ValueError(f"n_sliding_layers={self.n_sliding_layers} needs a "
                                 "sliding_window")
            if self.n_sliding_layers > self.n_layers:
                raise ValueError(f"n_sliding_layers={self.n_sliding_layers} is more than "
                                 f"n_layers={self.n_layers}")
        for f in ("norms_per_block", "n_shared_experts", "n_dense_layers"):
            v = d[f]
            if type(v) is not int or v < 0:
                _check_int(f, v, minimum=0)
        for f in ("n_shared_experts", "n_dense_layers"):
            if d[f] and not d["n_experts"]:
                raise ValueError(f"{f}={getattr(self, f)} needs a mixture of experts "
                                 f"(n_experts={self.n_experts})")
        if self.n_dense_layers > self.n_layers:
            raise ValueError(f"n_dense_layers={self.n_dense_layers} is more than "
                             f"n_layers={self.n_layers}")
        if self.dense_layer_ids is not None:
            ids = self.dense_layer_ids
            if not isinstance(ids, (list, tuple)) or any(
                    isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.n_layers
                    for i in ids) or len(set(ids)) != len(ids):
                raise ValueError(f"dense_layer_ids={ids!r} must list distinct layers from 0 to "
                                 f"{self.n_layers - 1}")
            if not self.is_moe:
                raise ValueError(f"dense_layer_ids={ids!r} needs a mixture of experts "
                                 f"(n_experts={self.n_experts})")
            if self.n_dense_layers not in (0, len(ids)):
                raise ValueError(f"n_dense_layers={self.n_dense_layers} is not the "
                                 f"{len(ids)} layers of dense_layer_ids")
            ids = tuple(sorted(ids))
            object.__setattr__(self, "n_dense_layers", len(ids))
            object.__setattr__(self, "dense_layer_ids",
                               None if ids == tuple(range(len(ids))) else ids)
        if self.d_ff_dense is not None:
            _check_positive("d_ff_dense", self.d_ff_dense)
            if not self.n_dense_layers:
                raise ValueError(f"d_ff_dense={self.d_ff_dense} needs dense layers "
                                 f"(n_dense_layers={self.n_dense_layers})")
        if isinstance(self.mla, dict):  # from as_dict() or JSON
            object.__setattr__(self, "mla", LatentAttention(**self.mla))
        if self.mla is not None:
            if not isinstance(self.mla, LatentAttention):
                raise ValueError(f"mla={self.mla!r} must be a LatentAttention or None")
            if self.n_kv_heads != self.n_heads:
                raise ValueError(f"n_kv_heads={self.n_kv_heads} must equal n_heads={self.n_heads} "
                                 "with latent attention: each head rebuilds its own key and value")
            if self.mla.d_head_rope > self.d_head:
                raise ValueError(f"mla.d_head_rope={self.mla.d_head_rope} is more than "
                                 f"d_head={self.d_head}")
        if self.qk_norm is not None and self.qk_norm not in QK_NORM_KINDS:
            raise ValueError(f"qk_norm={self.qk_norm!r} is not one of None, "
                             + ", ".join(QK_NORM_KINDS))
        if self.qk_norm is not None and self.mla is not None:
            raise ValueError(f"qk_norm={self.qk_norm!r} with latent attention: its norms are "
                             "on the latents")
        if self.d_ff_shared is not None:
            _check_positive("d_ff_shared", self.d_ff_shared)
            if not self.n_shared_experts:
                raise ValueError(f"d_ff_shared={self.d_ff_shared} needs shared experts "
                                 f"(n_shared_experts={self.n_shared_experts})")
        if self.shared_expert_gate and not self.n_shared_experts:
            raise ValueError("shared_expert_gate=True needs shared experts "
                             f"(n_shared_experts={self.n_shared_experts})")
        if self.router_bias and not self.is_moe:
            raise ValueError(f"router_bias=True needs a mixture of experts (n_experts={self.n_experts})")
        for f in _SWITCHES:
            if type(d[f]) is not bool:
                raise ValueError(f"{f}={d[f]!r} must be True or False")

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts feed-forward layer."""
        return self.n_experts > 0

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head (1 for multi-head attention)."""
        return self.n_heads // self.n_kv_heads

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices in one feed-forward layer: 2 for ``gelu``, 3 for gated kinds."""
        return MLP_MATRICES[self.mlp]

    @property
    def sliding_layers(self) -> int:
        """Layers that attend through the sliding window: 0 without a window, else
        ``n_sliding_layers`` (all ``n_layers`` when that is None)."""
        if self.sliding_window is None:
            return 0
        return self.n_layers if self.n_sliding_layers is None else self.n_sliding_layers

    def is_moe_layer(self, layer: int) -> bool:
        """True when block ``layer`` (0-based) has a mixture of experts, False for a dense
        block (a dense model, or one of the ``n_dense_layers``)."""
        if not self.is_moe:
            return False
        if self.dense_layer_ids is not None:
            return layer not in self.dense_layer_ids
        return layer >= self.n_dense_layers

    @property
    def shared_width(self) -> int:
        """Width of the shared experts' feed-forward layer (0 without shared experts)."""
        if not self.n_shared_experts:
            return 0
        return self.d_ff_shared or self.n_shared_experts * self.d_ff

    @property
    def moe_layers(self) -> int:
        """Layers whose feed-forward is a mixture of experts (0 for a dense model)."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def kv_cache_width(self) -> int:
        """Numbers one layer caches per token: a key and a value per key/value head,
        2·n_kv_heads·d_head; for latent attention the latent and the shared rotary key,
        kv_lora_rank + d_head_rope (DeepSeek-V2 section 2.1.2): 512 + 64 = 576 for DeepSeek-V3,
        where its 128 heads' keys (192 wide) and values (128 wide) would take 40,960."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.d_head_rope
        return 2 * self.n_kv_heads * self.d_head

    def with_(self, **changes) -> "ModelShape":
        """A copy with some fields changed, validated again (``dataclasses.replace``).

        Values that were derived follow the change unless given: when ``d_model`` or
        ``n_heads`` changes, a ``d_head`` equal to d_model // n_heads is derived again (not for
        latent attention, whose d_head is its own), and when ``n_heads`` changes, an
        ``n_kv_heads`` equal to n_heads follows it."""
        if "d_head" not in changes and {"d_model", "n_heads"} & changes.keys() \
                and self.mla is None and self.d_head * self.n_heads == self.d_model:
            changes["d_head"] = None
        if "n_kv_heads" not in changes and "n_heads" in changes and self.n_kv_heads == self.n_heads:
            changes["n_kv_heads"] = None
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """The fields as a plain dict (JSON-ready; ``mla`` as a dict or None)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.mla is not None:
            d["mla"] = self.mla.as_dict()
        if self.dense_layer_ids is not None:
            d["dense_layer_ids"] = list(self.dense_layer_ids)
        return d


_MISSING = object()
_FIELD_NAMES = tuple(f.name for f in fields(ModelShape))
_REQUIRED = ("d_model", "n_layers", "n_heads", "d_ff", "d_vocab", "n_ctx")
_FIELD_DEFAULTS = {f.name: (_MISSING if f.name in _REQUIRED else f.default)
                   for f in fields(ModelShape)}
_KIND_FIELDS = (("mlp", MLP_KINDS), ("norm", NORM_KINDS), ("positions", POSITION_KINDS))
_SWITCHES = ("qkv_bias", "out_bias", "mlp_bias", "tied_embeddings", "parallel_attn",
             "attention_sinks", "router_bias", "head_bias", "shared_expert_gate")


def _check_int(name: str, value, minimum: int) -> None:
    if type(value) is int and value >= minimum:  # the usual case, fast
        return
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
