"""Model cards: Hugging Face ``config.json`` files turned into a :class:`ModelShape`, and back.

``shape_from_config`` maps one family's keys to the course's names, with the defaults the
``transformers`` 5 config classes use when a key is absent (GPT-2's ``n_inner: null`` means
4·d_model; Llama's missing ``num_key_value_heads`` means as many as query heads, Mistral's
means 8; Gemma's missing ``head_dim`` means 256).  The families of ``FAMILIES_2023`` require
their sizes; the later ones take every absent key from their config class's defaults, kept
as data in ``course_lib/family_defaults.json`` (checked against transformers 5.24 in
tests/test_families.py), and read per-layer patterns (``layer_types``,
``sliding_window_pattern``, ``mlp_only_layers``, ``decoder_sparse_step``,
``first_k_dense_replace``) the way their config classes and models do.  ``config_from_shape`` goes the other way,
so any shape of a family can be built in ``transformers`` and checked (tests/test_params.py).
The public cards ship in ``course_lib/cards/`` (each model's ``config.json``, where it came from
in ``cards/sources.toml``) and load by name.

Errors: every problem with a card (not JSON, a required key missing, a value of the wrong
kind or size, an unsupported ``model_type``) raises :class:`CardError`, a ``ValueError``
whose message names the field, the config key and the value.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import fields as dataclass_fields
from importlib import resources
from pathlib import Path

from .shapes import LatentAttention, ModelShape

FAMILIES_2023 = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma", "gemma2", "phi3",
                 "olmo", "falcon", "deepseek_v3")
"""The first families the counters read (lessons 1-6 as written in 2025): every key a size
is required.  The families after them take transformers' default for every key."""

SUPPORTED_MODEL_TYPES = FAMILIES_2023 + (
                         "qwen3", "qwen3_moe", "qwen2_moe", "gemma3_text", "gpt_oss",
                         "deepseek_v2", "glm4_moe", "olmo2", "smollm3", "granite", "phi",
                         "gpt_neox", "starcoder2", "cohere", "olmoe", "phimoe")

FAMILY_DEFAULTS: dict = {k: v for k, v in json.loads(
    (resources.files("course_lib") / "family_defaults.json").read_text()).items()
    if not k.startswith("_")}
"""The config class defaults of the families added in 2026 (course_lib/family_defaults.json,
checked against transformers in tests/test_families.py): ``FAMILY_DEFAULTS[model_type][key]``
is what transformers makes of a config that leaves ``key`` out."""


class CardError(ValueError):
    """A model card that cannot be read as a shape; the message names the problem."""


_ABSENT = object()


class _Reader:
    """Reads one config's keys into shape fields, remembering which key fed which field."""

    def __init__(self, cfg: dict, model_type: str):
        self.cfg, self.model_type, self.keys = cfg, model_type, {}

    def source(self, field: str) -> str | None:
        """Which key fed ``field``, for an error message (None if no key did)."""
        if field not in self.keys:
            return None
        key, defaulted = self.keys[field]
        return f"key {key!r} absent or null: {self.model_type}'s default" if defaulted \
            else f"key {key!r}"

    def _whole(self, field: str, key: str, value):
        if type(value) is int:  # the usual case, fast
            return value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise CardError(f"bad {self.model_type} config: {field}={value!r} (key {key!r}) "
                            "must be a whole number")
        return value

    def required(self, field: str, *keys: str) -> int:
        """A whole number from the first of ``keys`` present (aliases), else CardError."""
        for key in keys:
            if self.cfg.get(key) is not None:
                self.keys[field] = (key, False)
                return self._whole(field, key, self.cfg[key])
        raise CardError(f"{self.model_type} config is missing the required key {keys[0]!r} "
                        f"({field})")

    def raw(self, key: str, absent=None, null=_ABSENT):
        """``cfg[key]``; ``absent`` when the key is missing; ``null`` (default: ``absent``)
        when it is null."""
        if key not in self.cfg:
            return absent
        value = self.cfg[key]
        if value is None:
            return absent if null is _ABSENT else null
        return value

    def number(self, field: str, key: str, absent=None, null=_ABSENT):
        """An optional whole number (or None) read like ``raw``."""
        value = self.raw(key, absent, null)
        if value is None:
            return None
        self.keys.setdefault(field, (key, self.cfg.get(key) is None))
        return self._whole(field, key, value)

    def flag(self, field: str, key: str, absent: bool) -> bool:
        value = self.cfg.get(key)
        if type(value) is bool:  # the usual case, fast
            self.keys.setdefault(field, (key, False))
            return value
        value = self.raw(key, absent)
        if not isinstance(value, bool):
            raise CardError(f"bad {self.model_type} config: {field}={value!r} (key {key!r}) "
                            "must be true or false")
        self.keys.setdefault(field, (key, False))
        return value

    def layer_types(self, n_layers: int, default: list[str]) -> int:
        """Layers marked ``sliding_attention`` in ``layer_types`` (or in ``default``)."""
        if n_layers < 1:
            return 0  # the shape names the bad num_hidden_layers
        types = self.raw("layer_types", default)
        if not isinstance(types, list) or len(types) != n_layers:
            raise CardError(f"bad {self.model_type} config: layer_types={types!r} must list "
                            f"one type per layer (num_hidden_layers={n_layers})")
        return sum(t == "sliding_attention" for t in types)


def _dtype(cfg: dict) -> str | None:
    value = cfg.get("torch_dtype", cfg.get("dtype"))
    return str(value).replace("torch.", "") if value is not None else None


def _window(window, n_sliding: int, n_layers: int) -> dict:
    """sliding_window / n_sliding_layers, normalised: no window when no layer uses one,
    n_sliding_layers None when all do."""
    if window is None or n_sliding == 0:
        return dict(sliding_window=None, n_sliding_layers=None)
    return dict(sliding_window=window, n_sliding_layers=None if n_sliding == n_layers else n_sliding)


# --- one function per family: config dict -> ModelShape keyword arguments ------------------

def _from_gpt2(r: _Reader) -> dict:
    if r.raw("add_cross_attention", False):
        raise CardError("bad gpt2 config: add_cross_attention=True adds cross-attention to an "
                        "encoder; only decoder-only models are supported")
    d_model = r.required("d_model", "n_embd", "hidden_size")
    return dict(
        d_model=d_model,
        n_layers=r.required("n_layers", "n_layer", "num_hidden_layers"),
        n_heads=r.required("n_heads", "n_head", "num_attention_heads"),
        d_ff=r.number("d_ff", "n_inner", 4 * d_model),
        d_vocab=r.required("d_vocab", "vocab_size"),
        n_ctx=r.required("n_ctx", "n_positions", "max_position_embeddings"),
        tied_embeddings=r.flag("tied_embeddings", "tie_word_embeddings", True),
    )


def _rotary_base(r: _Reader, kv_absent="heads", head_dim_absent=None,
                 d_ff_field: str = "d_ff") -> dict:
    """The keys Llama and its descendants share (rotary positions, RMSNorm, gated MLP, no
    biases by default).  ``kv_absent``: num_key_value_heads when the key is missing ("heads"
    or a number; null always means as many as query heads).  ``head_dim_absent``: head_dim
    when missing (None: d_model // n_heads; null means the same).  ``d_ff_field``: the field
    intermediate_size feeds, named in errors (DeepSeek's is the dense layers' width)."""
    n_heads = r.required("n_heads", "num_attention_heads")
    n_kv = r.number("n_kv_heads", "num_key_value_heads",
                    absent=n_heads if kv_absent == "heads" else kv_absent, null=n_heads)
    return dict(
        d_model=r.required("d_model", "hidden_size"),
        n_layers=r.required("n_layers", "num_hidden_layers"),
        n_heads=n_heads,
        n_kv_heads=n_kv,
        d_head=r.number("d_head", "head_dim", head_dim_absent, null=None),
        d_ff=r.required(d_ff_field, "intermediate_size"),
        d_vocab=r.required("d_vocab", "vocab_size"),
        n_ctx=r.required("n_ctx", "max_position_embeddings"),
        mlp="swiglu", norm="rmsnorm", positions="rotary",
        qkv_bias=False, out_bias=False, mlp_bias=False,
        tied_embeddings=r.flag("tied_embeddings", "tie_word_embeddings", False),
    )


def _from_llama(r: _Reader) -> dict:
    d = _rotary_base(r)
    bias = r.flag("qkv_bias", "attention_bias", False)
    d.update(qkv_bias=bias, out_bias=bias, mlp_bias=r.flag("mlp_bias", "mlp_bias", False))
    return d  # Llama ignores a sliding_window key


def _from_mistral(r: _Reader) -> dict:
    # MistralConfig: 8 kv heads and a 4,096-token window when the keys are missing.
    d = _rotary_base(r, kv_absent=8)
    window = r.number("sliding_window", "sliding_window", 4096, null=None)
    d.update(_window(window, d["n_layers"], d["n_layers"]))
    return d


def _from_mixtral(r: _Reader) -> dict:
    d = _rotary_base(r, kv_absent=8)
    window = r.number("sliding_window", "sliding_window", None)
    d.update(_window(window, d["n_layers"], d["n_layers"]))
    d.update(n_experts=r.number("n_experts", "num_local_experts", 8),
             n_experts_per_tok=r.number("n_experts_per_tok", "num_experts_per_tok", 2))
    return d


def _from_qwen2(r: _Reader) -> dict:
    # Qwen2: biases on q, k, v (not o); 32 kv heads when the key is missing; a window only
    # with use_sliding_window, on layers from max_window_layers on (or as layer_types says).
    d = _rotary_base(r, kv_absent=32)
    d.update(qkv_bias=True)
    L = d["n_layers"]
    window = None
    if r.flag("use_sliding_window", "use_sliding_window", False):
        window = r.number("sliding_window", "sliding_window", 4096, null=None)
    first = r.number("max_window_layers", "max_window_layers", 28)
    n_sliding = r.layer_types(L, ["sliding_attention" if window is not None and i >= first
                                  else "full_attention" for i in range(L)])
    d.update(_window(window, n_sliding, L))
    return d


def _from_gemma(r: _Reader, kv_absent: int = 16) -> dict:
    # Gemma: GeGLU, head_dim 256 and a tied head unless the config says otherwise.
    d = _rotary_base(r, kv_absent=kv_absent, head_dim_absent=256)
    bias = r.flag("qkv_bias", "attention_bias", False)
    d.update(mlp="geglu", qkv_bias=bias, out_bias=bias,
             tied_embeddings=r.flag("tied_embeddings", "tie_word_embeddings", True))
    return d


def _from_gemma2(r: _Reader) -> dict:
    # Gemma 2: norms before and after attention and feed-forward (4 per block); a 4,096-token
    # window on every other layer, the first one included.
    d = _from_gemma(r, kv_absent=4)
    L = d["n_layers"]
    window = r.number("sliding_window", "sliding_window", 4096, null=None)
    n_sliding = r.layer_types(L, ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                  for i in range(L)])
    d.update(norms_per_block=4, **_window(window, n_sliding, L))
    return d


def _from_phi3(r: _Reader) -> dict:
    # Phi-3: fused qkv_proj and gate_up_proj, the same numbers as Llama's separate matrices.
    d = _rotary_base(r)
    window = r.number("sliding_window", "sliding_window", None)
    d.update(_window(window, d["n_layers"], d["n_layers"]))
    return d


def _from_olmo(r: _Reader) -> dict:
    # OLMo: LayerNorm without weight or bias.
    d = _rotary_base(r)
    bias = r.flag("qkv_bias", "attention_bias", False)
    d.update(norm="nonparametric_layernorm", qkv_bias=bias, out_bias=bias)
    return d


def _from_falcon(r: _Reader) -> dict:
    # Falcon: fused query_key_value; GELU MLP of ffn_hidden_size (4·d_model); LayerNorm with
    # bias; one `bias` switch for every linear layer.  The classic layout has multi-query
    # (1 kv head) or multi-head attention; new_decoder_architecture has num_kv_heads and a
    # parallel block with two norms (num_ln_in_parallel_attn).
    d_model = r.required("d_model", "hidden_size", "n_embed")
    n_heads = r.required("n_heads", "num_attention_heads", "n_head")
    new_arch = r.flag("new_decoder_architecture", "new_decoder_architecture", False)
    parallel = r.flag("parallel_attn", "parallel_attn", True)
    if new_arch:
        n_kv = r.number("n_kv_heads", "num_kv_heads", n_heads)
    elif r.flag("n_kv_heads", "multi_query", True):
        n_kv = 1
    else:
        n_kv = n_heads
    n_ln = r.number("norms_per_block", "num_ln_in_parallel_attn", 2 if new_arch else None)
    norms = 2 if not parallel or n_ln == 2 else 1
    bias = r.flag("qkv_bias", "bias", False)
    return dict(
        d_model=d_model,
        n_layers=r.required("n_layers", "num_hidden_layers", "n_layer"),
        n_heads=n_heads, n_kv_heads=n_kv,
        d_ff=r.number("d_ff", "ffn_hidden_size", 4 * d_model),
        d_vocab=r.required("d_vocab", "vocab_size"),
        n_ctx=r.number("n_ctx", "max_position_embeddings", 2048),
        mlp="gelu", norm="layernorm",
        positions="alibi" if r.flag("positions", "alibi", False) else "rotary",
        qkv_bias=bias, out_bias=bias, mlp_bias=bias,
        tied_embeddings=r.flag("tied_embeddings", "tie_word_embeddings", True),
        norms_per_block=norms, parallel_attn=parallel or new_arch,
    )


def _from_deepseek_v3(r: _Reader) -> dict:
    # DeepSeek-V3: multi-head latent attention; the first first_k_dense_replace layers dense
    # (intermediate_size), the others n_routed_experts experts of moe_intermediate_size plus
    # n_shared_experts shared ones.  Missing keys take DeepseekV3Config's defaults, which are
    # DeepSeek-V3's own values.
    d = _rotary_base(r, kv_absent=128, d_ff_field="d_ff_dense")
    nope = r.number("d_head", "qk_nope_head_dim", 128)
    rope = r.number("mla.d_head_rope", "qk_rope_head_dim", 64)
    mla = dict(kv_lora_rank=r.number("mla.kv_lora_rank", "kv_lora_rank", 512),
               d_head_rope=rope,
               d_head_v=r.number("mla.d_head_v", "v_head_dim", 128),
               q_lora_rank=r.number("mla.q_lora_rank", "q_lora_rank", 1536, null=0))
    try:
        mla = LatentAttention(**mla)
    except ValueError as e:
        raise CardError(f"bad deepseek_v3 config: mla.{e}") from None
    n_experts = r.number("n_experts", "n_routed_experts", 256)
    n_dense = r.number("n_dense_layers", "first_k_dense_replace", 3)
    n_dense = min(n_dense, d["n_layers"]) if isinstance(n_dense, int) else n_dense
    d_ff_dense = d["d_ff"]
    d_ff = r.number("d_ff", "moe_intermediate_size", 2048)
    bias = r.flag("qkv_bias", "attention_bias", False)
    d.update(d_head=nope + rope, d_ff=d_ff, mla=mla, qkv_bias=bias, out_bias=bias,
             n_experts=n_experts,
             n_experts_per_tok=r.number("n_experts_per_tok", "num_experts_per_tok", 8),
             n_shared_experts=r.number("n_shared_experts", "n_shared_experts", 1),
             n_dense_layers=n_dense,
             d_ff_dense=d_ff_dense if n_dense and d_ff_dense != d_ff else None)
    return d


# --- the families of 2025-26: every key may be left out (the config class default) ---------

class _Defaulted(_Reader):
    """A reader whose absent keys take the family's config class default (FAMILY_DEFAULTS)."""

    def __init__(self, cfg: dict, model_type: str):
        super().__init__(cfg, model_type)
        self.defaults = FAMILY_DEFAULTS[model_type]

    def size(self, field: str, *keys: str, minimum: int = 1) -> int:
        """A whole number of at least ``minimum`` from the first of ``keys`` present; the
        family's default when all are absent."""
        cfg = self.cfg
        if len(keys) == 1 and type(cfg.get(keys[0])) is int and cfg[keys[0]] >= minimum:
            self.keys[field] = (keys[0], False)  # the usual case, fast
            return cfg[keys[0]]
        for key in keys:
            if key in self.cfg:
                if self.cfg[key] is None:
                    raise CardError(f"bad {self.model_type} config: {field}=None (key {key!r}) "
                                    "must be a whole number")
                self.keys[field] = (key, False)
                value = self._whole(field, key, self.cfg[key])
                break
        else:
            key = keys[0]
            self.keys[field] = (key, True)
            value = self._whole(field, key, self.defaults[key])
        if value < minimum:
            raise CardError(f"bad {self.model_type} config: {field}={value} must be at least "
                            f"{minimum} (key {key!r})")
        return value

    def switch(self, field: str, key: str) -> bool:
        return self.flag(field, key, self.defaults[key])

    def setting(self, key: str):
        """A non-size setting (a list or None), the default when absent."""
        return self.cfg.get(key) if key in self.cfg else self.defaults.get(key)

    def types(self, n_layers: int, default: list[str]) -> list[str]:
        types = self.raw("layer_types", default)
        if n_layers >= 1 and (not isinstance(types, list) or len(types) != n_layers
                              or any(t not in ("full_attention", "sliding_attention")
                                     for t in types)):
            raise CardError(f"bad {self.model_type} config: layer_types={types!r} must list "
                            f"full_attention or sliding_attention for each of the "
                            f"num_hidden_layers={n_layers} layers")
        return types


_HEADS_DIVIDE_D_MODEL = ("gemma3_text", "deepseek_v2", "gpt_neox")
"""Families whose config class refuses a hidden_size that num_attention_heads does not
divide, even with an explicit head_dim (their ``validate_architecture``)."""


def _modern(r: _Defaulted, mlp: str = "swiglu", norm: str = "rmsnorm",
            bias_key: str | None = "attention_bias", out_bias: bool | None = None,
            head_dim: bool = True, d_ff_field: str = "d_ff") -> dict:
    """What the 2025-26 families share: sizes with the config class defaults, key/value heads
    defaulting (or null) to query heads, head_dim when the family has one (else, or null,
    d_model / n_heads), no biases unless ``bias_key`` says (on q, k, v and, unless ``out_bias``
    is given, o)."""
    n_heads = r.size("n_heads", "num_attention_heads")
    d_model = r.size("d_model", "hidden_size")
    if "num_key_value_heads" in r.defaults:
        n_kv = r.number("n_kv_heads", "num_key_value_heads", r.defaults["num_key_value_heads"]
                        or n_heads, null=n_heads)
    else:
        n_kv = n_heads
    d_head = r.number("d_head", "head_dim", r.defaults.get("head_dim"), null=None) \
        if head_dim else None
    bias = r.switch("qkv_bias", bias_key) if bias_key else False
    if r.model_type in _HEADS_DIVIDE_D_MODEL and d_model % n_heads:
        raise CardError(f"bad {r.model_type} config: n_heads={n_heads} does not divide "
                        f"d_model={d_model} (key 'num_attention_heads'), which {r.model_type} "
                        "requires even with a head_dim")
    return dict(
        d_model=d_model, n_layers=r.size("n_layers", "num_hidden_layers"),
        n_heads=n_heads, n_kv_heads=n_kv, d_head=d_head,
        d_ff=r.size(d_ff_field, "intermediate_size"), d_vocab=r.size("d_vocab", "vocab_size"),
        n_ctx=r.size("n_ctx", "max_position_embeddings"),
        mlp=mlp, norm=norm, positions="rotary",
        qkv_bias=bias, out_bias=bias if out_bias is None else out_bias, mlp_bias=False,
        tied_embeddings=r.switch("tied_embeddings", "tie_word_embeddings"))


def _experts(r: _Defaulted, d: dict, n_key: str, k_key: str = "num_experts_per_tok",
             alias: str | None = None) -> dict:
    """Routed experts: n_experts (key ``n_key`` or its ``alias``), top-k; experts of width
    moe_intermediate_size where the family has it (the dense layers keep intermediate_size)."""
    keys = (n_key, alias) if alias else (n_key,)
    n = r.size("n_experts", *keys, minimum=0)
    if k_key in r.cfg and r.cfg[k_key] is None or k_key not in r.cfg and r.defaults[k_key] is None:
        raise CardError(f"bad {r.model_type} config: n_experts_per_tok=None (key {k_key!r}): "
                        f"{r.model_type} has no default for it")
    d.update(n_experts=n, n_experts_per_tok=r.size("n_experts_per_tok", k_key))
    if "moe_intermediate_size" in r.defaults:  # _modern read intermediate_size as d_ff_dense
        d["d_ff_dense"] = d["d_ff"]
        d["d_ff"] = r.size("d_ff", "moe_intermediate_size")
    return d


def _sparse_layers(r: _Defaulted, d: dict) -> dict:
    """Qwen-MoE's choice of MoE or dense per layer: dense where ``mlp_only_layers`` lists the
    layer or (layer + 1) is not a multiple of ``decoder_sparse_step``; no experts at all when
    num_experts is 0."""
    L = d["n_layers"]
    step = r.size("decoder_sparse_step", "decoder_sparse_step")
    only = r.setting("mlp_only_layers") or []
    if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in only):
        raise CardError(f"bad {r.model_type} config: mlp_only_layers={only!r} must list layers")
    if d["n_experts"] == 0:  # no experts: every layer a dense MLP of intermediate_size
        d.update(d_ff=d.pop("d_ff_dense"), n_experts=0, n_experts_per_tok=0)
        return d
    dense = [i for i in range(L) if i in only or (i + 1) % step]
    d.update(dense_layer_ids=tuple(dense))
    if not dense or d["d_ff_dense"] == d["d_ff"]:
        d["d_ff_dense"] = None
    return d


def _first_dense(r: _Defaulted, d: dict) -> dict:
    """DeepSeek's and GLM's first_k_dense_replace dense first layers (intermediate_size)."""
    n_dense = min(r.size("n_dense_layers", "first_k_dense_replace", minimum=0), d["n_layers"])
    d.update(n_dense_layers=max(n_dense, 0))
    if not n_dense or d["d_ff_dense"] == d["d_ff"]:
        d["d_ff_dense"] = None
    return d


def _qwen_window(r: _Defaulted, d: dict, alternate: bool) -> dict:
    """Qwen's windows: only with use_sliding_window; on layer_types' sliding layers, by default
    those from max_window_layers on (Qwen3) or every other one below it (Qwen2-MoE)."""
    L = d["n_layers"]
    window = None
    if r.switch("use_sliding_window", "use_sliding_window"):
        window = r.number("sliding_window", "sliding_window", r.defaults["sliding_window"],
                          null=None)
        window = window or None  # Qwen2-MoE's 0 means none
    first = r.size("max_window_layers", "max_window_layers", minimum=0)
    default = ["sliding_attention" if window is not None and
               ((i + 1) % 2 and i < first if alternate else i >= first)
               else "full_attention" for i in range(L)]
    types = r.types(L, default)
    d.update(_window(window, types.count("sliding_attention"), L))
    return d


def _all_layers_window(r: _Defaulted, d: dict) -> dict:
    window = r.number("sliding_window", "sliding_window", r.defaults["sliding_window"], null=None)
    d.update(_window(window, d["n_layers"], d["n_layers"]))
    return d


def _pattern_window(r: _Defaulted, d: dict, default_types) -> dict:
    L = d["n_layers"]
    window = r.number("sliding_window", "sliding_window", r.defaults["sliding_window"], null=None)
    types = r.types(L, default_types(L))
    d.update(_window(window, types.count("sliding_attention"), L))
    return d


def _from_qwen3(r: _Defaulted) -> dict:
    # Qwen3: Llama with RMSNorms of d_head on queries and keys, an explicit head_dim (128).
    d = _modern(r)
    d.update(qk_norm="head")
    return _qwen_window(r, d, alternate=False)


def _from_qwen3_moe(r: _Defaulted) -> dict:
    # Qwen3-MoE: Qwen3's attention, 128 fine-grained experts, top-8, no shared expert; a window
    # on every layer when use_sliding_window.
    d = _experts(r, _modern(r, d_ff_field="d_ff_dense"), "num_experts", alias="num_local_experts")
    d.update(qk_norm="head")
    d = _sparse_layers(r, d)
    if not r.switch("use_sliding_window", "use_sliding_window"):
        return d
    return _all_layers_window(r, d)


def _from_qwen2_moe(r: _Defaulted) -> dict:
    # Qwen1.5/2-MoE: biases on q, k, v; 60 experts, top-4, and one shared expert of
    # shared_expert_intermediate_size behind a sigmoid gate.
    d = _experts(r, _modern(r, bias_key=None, head_dim=False, d_ff_field="d_ff_dense"),
                 "num_experts")
    d.update(qkv_bias=True, n_shared_experts=1, shared_expert_gate=True,
             d_ff_shared=r.size("d_ff_shared", "shared_expert_intermediate_size"))
    d = _sparse_layers(r, d)
    if not d["n_experts"]:
        d.update(n_shared_experts=0, shared_expert_gate=False, d_ff_shared=None)
    return _qwen_window(r, d, alternate=True)


def _from_gemma3_text(r: _Defaulted) -> dict:
    # Gemma 3: Gemma 2's four norms a block and GeGLU, q/k norms of d_head, five sliding layers
    # to each global one (sliding_window_pattern 6).
    d = _modern(r, mlp="geglu")
    d.update(norms_per_block=4, qk_norm="head")
    pattern = r.number("sliding_window_pattern", "sliding_window_pattern", 6)
    if pattern < 1:
        raise CardError(f"bad gemma3_text config: sliding_window_pattern={pattern} must be at least 1")
    d = _pattern_window(r, d, lambda L: ["sliding_attention" if (i + 1) % pattern
                                         else "full_attention" for i in range(L)])
    if d["sliding_window"] is not None and r.flag("use_bidirectional_attention",
                                                  "use_bidirectional_attention", False):
        d["sliding_window"] = d["sliding_window"] // 2 + 1  # as Gemma3TextConfig sets it
    return d


def _from_gpt_oss(r: _Defaulted) -> dict:
    # gpt-oss: biases everywhere (q, k, v, o, experts, router), a sink logit per head, sliding
    # and full layers alternating (128-token window).
    d = _experts(r, _modern(r), "num_local_experts", alias="num_experts")
    d.update(mlp_bias=True, router_bias=True, attention_sinks=True)
    return _pattern_window(r, d, lambda L: ["sliding_attention" if (i + 1) % 2
                                            else "full_attention" for i in range(L)])


def _latent(r: _Defaulted, d: dict) -> dict:
    nope = r.size("d_head", "qk_nope_head_dim")
    rope = r.size("mla.d_head_rope", "qk_rope_head_dim")
    try:
        mla = LatentAttention(kv_lora_rank=r.size("mla.kv_lora_rank", "kv_lora_rank"),
                              d_head_rope=rope, d_head_v=r.size("mla.d_head_v", "v_head_dim"),
                              q_lora_rank=r.number("mla.q_lora_rank", "q_lora_rank",
                                                   r.defaults["q_lora_rank"], null=0))
    except ValueError as e:
        raise CardError(f"bad {r.model_type} config: mla.{e}") from None
    d.update(d_head=nope + rope, mla=mla)
    return d


def _from_deepseek_v2(r: _Defaulted) -> dict:
    # DeepSeek-V2: V3's latent attention (V2-Lite without a query latent), experts and shared
    # experts; dense first layers only if first_k_dense_replace says (default 0).
    if r.flag("mlp_bias", "mlp_bias", False):
        raise CardError("bad deepseek_v2 config: mlp_bias=true puts biases on the dense and "
                        "shared MLPs but not the routed experts; not supported")
    d = _experts(r, _modern(r, head_dim=False, d_ff_field="d_ff_dense"), "n_routed_experts",
                 alias="num_experts")
    d = _latent(r, d)
    d.update(n_shared_experts=r.size("n_shared_experts", "n_shared_experts", minimum=0))
    return _first_dense(r, d)


def _from_glm4_moe(r: _Defaulted) -> dict:
    # GLM-4.5: biases on q, k, v (not o); half of each head rotary (no parameters); 128
    # experts, top-8, one shared expert; the first layer dense; q/k norms if use_qk_norm.
    d = _modern(r, out_bias=False, d_ff_field="d_ff_dense")
    d = _experts(r, d, "n_routed_experts", alias="num_local_experts")
    d.update(n_shared_experts=r.size("n_shared_experts", "n_shared_experts", minimum=0),
             qk_norm="head" if r.switch("qk_norm", "use_qk_norm") else None)
    return _first_dense(r, d)


def _from_olmo2(r: _Defaulted) -> dict:
    # OLMo 2: RMSNorms after attention and after the MLP (none before), and over the whole
    # query and key projections.
    d = _modern(r, head_dim=False)
    d.update(qk_norm="heads")
    return d


def _from_smollm3(r: _Defaulted) -> dict:
    # SmolLM3: Llama with every fourth layer without rotary positions (no parameters either
    # way); a window, if use_sliding_window, on those no-rope layers (SmolLM3Config).
    d = _modern(r, head_dim=False)
    d.update(mlp_bias=r.switch("mlp_bias", "mlp_bias"))
    L = d["n_layers"]
    window = None
    if r.switch("use_sliding_window", "use_sliding_window"):
        window = r.number("sliding_window", "sliding_window", None, null=None)
    interval = r.size("no_rope_layer_interval", "no_rope_layer_interval")
    no_rope = r.setting("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(L)]
    if not isinstance(no_rope, list) or len(no_rope) != L:
        raise CardError(f"bad smollm3 config: no_rope_layers={no_rope!r} must hold one 0 or 1 "
                        f"for each of the num_hidden_layers={L} layers")
    types = r.types(L, ["sliding_attention" if window is not None and not has_rope
                        else "full_attention" for has_rope in no_rope])
    d.update(_window(window, types.count("sliding_attention"), L))
    return d


def _from_granite(r: _Defaulted) -> dict:
    # Granite 3: Llama with scalar multipliers on embeddings, attention, residuals and logits
    # (numbers in the config, not parameters).
    d = _modern(r, head_dim=False)
    d.update(mlp_bias=r.switch("mlp_bias", "mlp_bias"))
    return d


def _from_phi(r: _Defaulted) -> dict:
    # Phi-2: a parallel block under one LayerNorm; biases on q, k, v, dense, fc1, fc2 and the
    # head; GELU MLP; rotary on part of each head; LayerNorms of d_head on q and k if
    # qk_layernorm.
    d = _modern(r, mlp="gelu", norm="layernorm", bias_key=None, head_dim=False)
    d.update(qkv_bias=True, out_bias=True, mlp_bias=True, head_bias=True, norms_per_block=1,
             parallel_attn=True,
             qk_norm="head" if r.switch("qk_norm", "qk_layernorm") else None)
    return d


def _from_gpt_neox(r: _Defaulted) -> dict:
    # GPT-NeoX (Pythia): fused query_key_value, LayerNorms with biases before attention and
    # MLP, GELU MLP with biases, rotary on rotary_pct of each head, parallel residual.
    d = _modern(r, mlp="gelu", norm="layernorm", head_dim=False)
    d.update(mlp_bias=True, parallel_attn=r.switch("parallel_attn", "use_parallel_residual"))
    return d


def _from_starcoder2(r: _Defaulted) -> dict:
    # StarCoder2: LayerNorms with biases, GELU MLP, use_bias on every linear layer, 2 kv heads
    # and a tied head by default, a window on every layer if sliding_window is set.
    d = _modern(r, mlp="gelu", norm="layernorm", bias_key="use_bias", head_dim=False)
    d.update(mlp_bias=d["qkv_bias"])
    return _all_layers_window(r, d)


def _from_cohere(r: _Defaulted) -> dict:
    # Command R: a parallel block under one LayerNorm without bias; SwiGLU; tied head; q/k
    # LayerNorms over (heads, head_dim) if use_qk_norm.
    d = _modern(r, norm="layernorm_nobias", head_dim=False)
    d.update(norms_per_block=1, parallel_attn=True,
             qk_norm="heads" if r.switch("qk_norm", "use_qk_norm") else None)
    return d


def _from_olmoe(r: _Defaulted) -> dict:
    # OLMoE: Llama's block with 64 experts (top-8) of intermediate_size and RMSNorms over the
    # whole query and key projections.
    d = _experts(r, _modern(r, head_dim=False), "num_experts", alias="num_local_experts")
    d.update(qk_norm="heads")
    return d


def _from_phimoe(r: _Defaulted) -> dict:
    # Phi-3.5-MoE: LayerNorms with biases, 16 experts (top-2), attention_bias on q, k, v, o,
    # lm_head_bias on the head, a window on every layer if sliding_window is set.
    d = _experts(r, _modern(r, norm="layernorm", head_dim=False), "num_local_experts")
    d.update(head_bias=r.switch("head_bias", "lm_head_bias"))
    return _all_layers_window(r, d)


_FAMILIES = {"gpt2": _from_gpt2, "llama": _from_llama, "mistral": _from_mistral,
             "mixtral": _from_mixtral, "qwen2": _from_qwen2, "gemma": _from_gemma,
             "gemma2": _from_gemma2, "phi3": _from_phi3, "olmo": _from_olmo,
             "falcon": _from_falcon, "deepseek_v3": _from_deepseek_v3,
             "qwen3": _from_qwen3, "qwen3_moe": _from_qwen3_moe, "qwen2_moe": _from_qwen2_moe,
             "gemma3_text": _from_gemma3_text, "gpt_oss": _from_gpt_oss,
             "deepseek_v2": _from_deepseek_v2, "glm4_moe": _from_glm4_moe, "olmo2": _from_olmo2,
             "smollm3": _from_smollm3, "granite": _from_granite, "phi": _from_phi,
             "gpt_neox": _from_gpt_neox, "starcoder2": _from_starcoder2, "cohere": _from_cohere,
             "olmoe": _from_olmoe, "phimoe": _from_phimoe}
assert tuple(_FAMILIES) == SUPPORTED_MODEL_TYPES
assert tuple(FAMILY_DEFAULTS) == SUPPORTED_MODEL_TYPES[len(FAMILIES_2023):]


def _read_json(path: Path) -> dict:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CardError(f"no such file: {path}") from None
    except OSError as e:
        raise CardError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CardError(f"{path} is not valid JSON: {e.msg} at line {e.lineno} "
                        f"column {e.colno}") from None


def decoder_only_model_types() -> tuple[str, ...]:
    """The model_types transformers 5.24 builds as causal (decoder-only) language models, the
    keys of its ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (course_lib/causal_lm_model_types.json,
    checked against transformers in tests/test_families.py)."""
    data = json.loads((resources.files("course_lib") / "causal_lm_model_types.json").read_text())
    return tuple(data["model_types"])


def unsupported_message(model_type) -> str:
    """The error for a model_type the course's counters do not support: whether transformers
    knows it as a decoder-only family, and the supported ones."""
    why = ""
    if isinstance(model_type, str) and model_type in decoder_only_model_types():
        why = (": a decoder-only family transformers knows, which the course's counters do not "
               "support (size --verify still gives its total from transformers)")
    return (f"unsupported model_type {model_type!r}{why}; supported: "
            + ", ".join(SUPPORTED_MODEL_TYPES))


def shape_from_config(config: dict | str | os.PathLike, name: str = "") -> ModelShape:
    """Build a :class:`ModelShape` from a Hugging Face ``config.json``.

    Args:
        config: the parsed dict, or a path to the JSON file.
        name: a label for tables (defaults to the file's folder name or ``model_type``).
    Returns:
        The shape; keys the family's config class defaults are filled in as
        ``transformers`` 5 does (see each family's comments in this module).
    Raises:
        CardError: unreadable file or JSON, unsupported ``model_type`` (the message lists the
            supported ones), a required key missing, or a value of the wrong kind or one that
            fails the shape's validation (the message names the field, key and value).
    """
    if not isinstance(config, dict):
        path = Path(config)
        config = _read_json(path)
        name = name or (path.parent.name if path.name == "config.json" else path.stem)
    if not isinstance(config, dict):
        raise CardError(f"config must be a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type not in _FAMILIES:
        raise CardError(unsupported_message(model_type))
    reader = (_Defaulted if model_type in FAMILY_DEFAULTS else _Reader)(config, model_type)
    kwargs = _FAMILIES[model_type](reader)
    try:
        return ModelShape(**kwargs, dtype=_dtype(config), model_type=model_type,
                          name=name or model_type)
    except (ValueError, TypeError) as e:
        message = str(e)
        field = re.match(r"(\w+)=", message)
        source = reader.source(field.group(1)) if field else None
        where = f" ({source})" if source else ""
        raise CardError(f"bad {model_type} config: {message}{where}") from None


# --- ModelShape -> config dict ---------------------------------------------------------------

def _rotary_config(s: ModelShape) -> dict:
    return dict(hidden_size=s.d_model, num_hidden_layers=s.n_layers,
                num_attention_heads=s.n_heads, num_key_value_heads=s.n_kv_heads,
                head_dim=s.d_head, intermediate_size=s.d_ff, vocab_size=s.d_vocab,
                max_position_embeddings=s.n_ctx, tie_word_embeddings=s.tied_embeddings)


def _to_gpt2(s: ModelShape) -> dict:
    return dict(n_embd=s.d_model, n_layer=s.n_layers, n_head=s.n_heads, n_inner=s.d_ff,
                vocab_size=s.d_vocab, n_positions=s.n_ctx, tie_word_embeddings=s.tied_embeddings)


def _to_llama(s: ModelShape) -> dict:
    return dict(_rotary_config(s), attention_bias=s.qkv_bias, mlp_bias=s.mlp_bias)


def _to_mistral(s: ModelShape) -> dict:
    return dict(_rotary_config(s), sliding_window=s.sliding_window)


def _to_mixtral(s: ModelShape) -> dict:
    return dict(_to_mistral(s), num_local_experts=s.n_experts,
                num_experts_per_tok=s.n_experts_per_tok)


def _to_qwen2(s: ModelShape) -> dict:
    d = _rotary_config(s)
    if s.sliding_window is not None:  # the last sliding_layers layers slide
        d.update(use_sliding_window=True, sliding_window=s.sliding_window,
                 max_window_layers=s.n_layers - s.sliding_layers)
    return d


def _to_gemma(s: ModelShape) -> dict:
    return dict(_rotary_config(s), attention_bias=s.qkv_bias)


def _to_gemma2(s: ModelShape) -> dict:
    d = dict(_to_gemma(s), sliding_window=s.sliding_window)
    if s.sliding_window is not None and s.sliding_layers != math.ceil(s.n_layers / 2):
        n = s.sliding_layers  # not Gemma 2's alternation: the first n layers slide
        d["layer_types"] = ["sliding_attention"] * n + ["full_attention"] * (s.n_layers - n)
    return d


def _to_phi3(s: ModelShape) -> dict:
    return dict(_rotary_config(s), sliding_window=s.sliding_window)


def _to_olmo(s: ModelShape) -> dict:
    return dict(_rotary_config(s), attention_bias=s.qkv_bias)


def _to_falcon(s: ModelShape) -> dict:
    classic = s.n_kv_heads in (1, s.n_heads) and not (s.parallel_attn and s.norms_per_block == 2)
    d = dict(hidden_size=s.d_model, num_hidden_layers=s.n_layers, num_attention_heads=s.n_heads,
             ffn_hidden_size=s.d_ff, vocab_size=s.d_vocab, max_position_embeddings=s.n_ctx,
             bias=s.qkv_bias, alibi=s.positions == "alibi", parallel_attn=s.parallel_attn,
             new_decoder_architecture=not classic, tie_word_embeddings=s.tied_embeddings)
    if classic:
        d.update(multi_query=s.n_kv_heads == 1)
    else:
        d.update(num_kv_heads=s.n_kv_heads, num_ln_in_parallel_attn=s.norms_per_block)
    return d


def _to_deepseek_v3(s: ModelShape) -> dict:
    if s.mla is None or not s.is_moe:
        raise CardError("deepseek_v3 needs latent attention (mla) and experts (n_experts)")
    m = s.mla
    d = _rotary_config(s)
    del d["head_dim"]  # DeepseekV3Config derives it (the rotary width); null would break RoPE
    return dict(d, intermediate_size=s.d_ff_dense or s.d_ff, moe_intermediate_size=s.d_ff,
                n_routed_experts=s.n_experts, num_experts_per_tok=s.n_experts_per_tok,
                n_shared_experts=s.n_shared_experts, first_k_dense_replace=s.n_dense_layers,
                n_group=1, topk_group=1,  # expert groups change routing, not counts
                kv_lora_rank=m.kv_lora_rank, q_lora_rank=m.q_lora_rank or None,
                qk_rope_head_dim=m.d_head_rope, qk_nope_head_dim=s.d_head - m.d_head_rope,
                v_head_dim=m.d_head_v, attention_bias=s.qkv_bias)


def _layer_types(s: ModelShape) -> list[str] | None:
    """layer_types for a shape whose first sliding_layers layers slide (None: no window)."""
    if s.sliding_window is None:
        return None
    n = s.sliding_layers
    return ["sliding_attention"] * n + ["full_attention"] * (s.n_layers - n)


def _to_modern(s: ModelShape, head_dim: bool = True, bias_key: str | None = "attention_bias"):
    d = _rotary_config(s)
    if not head_dim:
        del d["head_dim"]
    if bias_key:
        d[bias_key] = s.qkv_bias
    return d


def _moe_layers_config(s: ModelShape) -> dict:
    """Qwen-MoE's per-layer choice: mlp_only_layers lists the dense layers."""
    dense = [i for i in range(s.n_layers) if not s.is_moe_layer(i)]
    return dict(mlp_only_layers=dense, decoder_sparse_step=1)


def _to_qwen3(s: ModelShape) -> dict:
    d = _to_modern(s)
    types = _layer_types(s)
    d.update(use_sliding_window=types is not None, sliding_window=s.sliding_window,
             layer_types=types)
    return d


def _to_qwen3_moe(s: ModelShape) -> dict:
    d = _to_modern(s)
    d.update(num_experts=s.n_experts, num_experts_per_tok=s.n_experts_per_tok,
             moe_intermediate_size=s.d_ff, intermediate_size=s.d_ff_dense or s.d_ff,
             use_sliding_window=s.sliding_window is not None, sliding_window=s.sliding_window,
             **_moe_layers_config(s))
    return d


def _to_qwen2_moe(s: ModelShape) -> dict:
    d = _to_modern(s, head_dim=False, bias_key=None)
    types = _layer_types(s)
    d.update(num_experts=s.n_experts, num_experts_per_tok=s.n_experts_per_tok,
             moe_intermediate_size=s.d_ff, intermediate_size=s.d_ff_dense or s.d_ff,
             shared_expert_intermediate_size=s.shared_width,
             use_sliding_window=types is not None, sliding_window=s.sliding_window,
             layer_types=types, **_moe_layers_config(s))
    return d


def _to_gemma3_text(s: ModelShape) -> dict:
    return dict(_to_modern(s), sliding_window=s.sliding_window,
                layer_types=_layer_types(s) or ["full_attention"] * s.n_layers)


def _to_gpt_oss(s: ModelShape) -> dict:
    return dict(_to_modern(s), num_local_experts=s.n_experts,
                num_experts_per_tok=s.n_experts_per_tok, sliding_window=s.sliding_window,
                layer_types=_layer_types(s) or ["full_attention"] * s.n_layers)


def _to_deepseek_v2(s: ModelShape) -> dict:
    if s.mla is None or not s.is_moe:
        raise CardError("deepseek_v2 needs latent attention (mla) and experts (n_experts)")
    d = _to_deepseek_v3(s)
    return d


def _to_glm4_moe(s: ModelShape) -> dict:
    return dict(_to_modern(s), intermediate_size=s.d_ff_dense or s.d_ff,
                moe_intermediate_size=s.d_ff, n_routed_experts=s.n_experts,
                num_experts_per_tok=s.n_experts_per_tok, n_shared_experts=s.n_shared_experts,
                first_k_dense_replace=s.n_dense_layers, use_qk_norm=s.qk_norm is not None,
                n_group=1, topk_group=1)


def _to_olmo2(s: ModelShape) -> dict:
    return _to_modern(s, head_dim=False)


def _to_smollm3(s: ModelShape) -> dict:
    d = dict(_to_modern(s, head_dim=False), mlp_bias=s.mlp_bias)
    if s.sliding_window is not None:
        d.update(use_sliding_window=True, sliding_window=s.sliding_window,
                 layer_types=_layer_types(s))
    return d


def _to_granite(s: ModelShape) -> dict:
    return dict(_to_modern(s, head_dim=False), mlp_bias=s.mlp_bias)


def _to_phi(s: ModelShape) -> dict:
    return dict(_to_modern(s, head_dim=False, bias_key=None), qk_layernorm=s.qk_norm is not None)


def _to_gpt_neox(s: ModelShape) -> dict:
    d = _to_modern(s, head_dim=False)
    del d["num_key_value_heads"]
    return dict(d, use_parallel_residual=s.parallel_attn)


def _to_starcoder2(s: ModelShape) -> dict:
    return dict(_to_modern(s, head_dim=False, bias_key="use_bias"), sliding_window=s.sliding_window)


def _to_cohere(s: ModelShape) -> dict:
    return dict(_to_modern(s, head_dim=False), use_qk_norm=s.qk_norm is not None)


def _to_olmoe(s: ModelShape) -> dict:
    return dict(_to_modern(s, head_dim=False), num_experts=s.n_experts,
                num_experts_per_tok=s.n_experts_per_tok)


def _to_phimoe(s: ModelShape) -> dict:
    return dict(_to_modern(s, head_dim=False), num_local_experts=s.n_experts,
                num_experts_per_tok=s.n_experts_per_tok, lm_head_bias=s.head_bias,
                sliding_window=s.sliding_window)


_TO_CONFIG = {"gpt2": _to_gpt2, "llama": _to_llama, "mistral": _to_mistral,
              "mixtral": _to_mixtral, "qwen2": _to_qwen2, "gemma": _to_gemma,
              "gemma2": _to_gemma2, "phi3": _to_phi3, "olmo": _to_olmo, "falcon": _to_falcon,
              "deepseek_v3": _to_deepseek_v3}
_TO_CONFIG.update({f: globals()[f"_to_{f}"] for f in SUPPORTED_MODEL_TYPES if f not in _TO_CONFIG})


def config_from_shape(s: ModelShape, model_type: str | None = None) -> dict:
    """A Hugging Face config dict of family ``model_type`` (default ``s.model_type``) that
    ``transformers`` builds with exactly the shape ``s``:
    ``AutoConfig.for_model(**config_from_shape(s))``.

    Token ids are set to None (a small vocabulary would not hold the family's defaults), and
    DeepSeek's expert groups to 1.  The result loads back to ``s``:
    ``shape_from_config(config_from_shape(s)) == s`` (name and model_type aside).

    Raises:
        CardError: an unsupported family, or a shape the family cannot express (the message
            lists the fields that would come back different, e.g. a GELU MLP asked of Llama).
    """
    model_type = model_type or s.model_type
    if model_type not in _TO_CONFIG:
        raise CardError(f"unsupported model_type {model_type!r}; supported: "
                        + ", ".join(SUPPORTED_MODEL_TYPES))
    cfg = {"model_type": model_type, **_TO_CONFIG[model_type](s),
           "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
    if s.dtype is not None:
        cfg["torch_dtype"] = s.dtype
    back = shape_from_config(cfg)
    wrong = [f"{f.name}={getattr(s, f.name)!r} (would be {getattr(back, f.name)!r})"
             for f in dataclass_fields(ModelShape)
             if f.name not in ("name", "model_type") and getattr(s, f.name) != getattr(back, f.name)]
    if wrong:
        raise CardError(f"a {model_type} config cannot express this shape: " + "; ".join(wrong))
    return cfg


def card_names() -> list[str]:
    """Names of the cards shipped with the course (``course_lib/cards/``)."""
    folder = resources.files("course_lib") / "cards"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def card_config(name: str) -> dict:
    """The raw ``config.json`` dict of a shipped card."""
    if name not in card_names():
        raise CardError(f"no shipped card named {name!r}; shipped: {', '.join(card_names())}")
    return json.loads((resources.files("course_lib") / "cards" / f"{name}.json").read_text())


def load_config(name_or_path: str | os.PathLike) -> tuple[dict, str]:
    """(the raw config dict, its name) of a shipped card or a ``config.json`` path (or the
    folder holding one).  Raises CardError for a missing or unreadable file, or not an object."""
    if str(name_or_path) in card_names():
        return card_config(str(name_or_path)), str(name_or_path)
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists() and path.suffix != ".json" and os.sep not in str(name_or_path):
        raise CardError(f"no shipped card or file named {str(name_or_path)!r}; "
                        f"shipped: {', '.join(card_names())}")
    config = _read_json(path)
    if not isinstance(config, dict):
        raise CardError(f"config must be a JSON object, got {type(config).__name__}")
    return config, path.parent.name if path.name == "config.json" else path.stem


def load_card(name_or_path: str | os.PathLike) -> ModelShape:
    """A shipped card by name (``"gpt2"``, ``"Llama-2-70b-hf"``, ...) or a ``config.json`` path."""
    config, name = load_config(name_or_path)
    return shape_from_config(config, name=name)
