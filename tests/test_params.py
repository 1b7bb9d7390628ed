"""course_lib.params against Hugging Face ``transformers`` models built on the meta device.

The oracle: ``AutoModelForCausalLM.from_config`` under ``torch.device("meta")`` (no memory,
no weights), summing ``p.numel()`` over ``model.parameters()`` (a tied head once).  Parts are
read from the parameters' names; ``active`` removes, in every mixture-of-experts layer, the
routed experts a token does not use (experts are found by name, their count and top-k read
from the transformers config, not from our shape).

Three kinds of case: every shipped card; random small shapes of each family sent through
``config_from_shape`` (shape -> config -> model); random configs with optional keys left out
or null, loaded by ``shape_from_config`` and by transformers itself (config -> shape and
config -> transformers' filled-in config -> shape must agree, and match the model).
"""
from __future__ import annotations

import random
import re

import pytest
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

import course_lib as cl
from course_lib.cards import SUPPORTED_MODEL_TYPES, CardError, config_from_shape
from course_lib.params import block_params, count_params
from course_lib.shapes import LatentAttention, ModelShape

transformers.logging.set_verbosity_error()
# DeepSeek without shared experts: transformers builds a zero-width MLP, and torch says so.
pytestmark = pytest.mark.filterwarnings("ignore:Initializing zero-element tensors:UserWarning")

PARTS = ("token_embedding", "position_embedding", "attention", "feed_forward", "router",
         "norms", "output_head")

# First match wins; a parameter no pattern names fails the test (nothing is dropped).
NAME_PATTERNS = [
    ("output_head", r"^lm_head\."),
    ("position_embedding", r"\.wpe\."),
    ("token_embedding", r"\.(wte|embed_tokens|word_embeddings)\."),
    ("attention", r"\.(attn|self_attn|self_attention)\."),  # MLA's latent norms included
    ("router", r"\.mlp\.gate\.weight$"),  # Mixtral, DeepSeek (Llama's is gate_proj)
    ("feed_forward", r"\.mlp\."),
    ("norms", r"(norm|\.ln_\w+|\.ln_f)\.(weight|bias)$"),
]
LAYER = re.compile(r"\.(?:layers|h)\.(\d+)\.")


def build_meta(cfg: dict) -> torch.nn.Module:
    """The transformers model of a config dict, on the meta device (no memory used)."""
    config = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def part_of(name: str) -> str:
    for part, pattern in NAME_PATTERNS:
        if re.search(pattern, name):
            return part
    raise AssertionError(f"parameter {name!r} matches no part")


def hf_counts(model) -> tuple[int, dict, dict, int]:
    """(total, parts, {layer: parts}, active) read from the model's named parameters."""
    total = sum(p.numel() for p in model.parameters())
    parts = dict.fromkeys(PARTS, 0)
    layers: dict[int, dict] = {}
    for name, p in model.named_parameters():
        part = part_of(name)
        parts[part] += p.numel()
        m = LAYER.search(name)
        if m:
            layer = layers.setdefault(int(m.group(1)), dict.fromkeys(PARTS, 0))
            layer[part] += p.numel()
    n_experts = getattr(model.config, "num_local_experts", None)  # DeepSeek maps its name
    if not n_experts:
        return total, parts, layers, total
    k = model.config.num_experts_per_tok
    routed = 0
    for name, p in model.named_parameters():
        if ".mlp.experts." in name:
            if not re.search(r"\.experts\.\d+\.", name):  # fused: (n_experts, ...)
                assert p.shape[0] == n_experts, (name, tuple(p.shape))
            routed += p.numel()
    assert routed % n_experts == 0
    return total, parts, layers, total - routed // n_experts * (n_experts - k)


def assert_matches(s: ModelShape, model) -> None:
    total, parts, layers, active = hf_counts(model)
    ours = count_params(s)
    assert ours.total == total, (s, ours.as_dict(), parts)
    assert {p: getattr(ours, p) for p in PARTS} == parts
    assert ours.active == active
    assert sorted(layers) == list(range(s.n_layers))
    for i, layer in layers.items():
        block = block_params(s, i)
        assert {k: block[k] for k in ("attention", "feed_forward", "router", "norms")} == \
            {"attention": layer["attention"], "feed_forward": layer["feed_forward"],
             "router": layer["router"], "norms": layer["norms"]}, f"layer {i}"
        assert block["total"] == sum(layer.values())


# --- shipped cards ----------------------------------------------------------------------------

# shared/REFERENCE.md, "Public cards" (checked there on the meta device).
REFERENCE_TOTALS = {
    "gpt2": 124_439_808, "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080,
    "Llama-2-7b-hf": 6_738_415_616, "Llama-2-13b-hf": 13_015_864_320,
    "Llama-2-70b-hf": 68_976_648_192, "Meta-Llama-3-8B": 8_030_261_248,
    "Mistral-7B-v0.1": 7_241_732_096, "Mixtral-8x7B-v0.1": 46_702_792_704,
}
MIXTRAL_ACTIVE = 12_879_925_248  # REFERENCE.md


@pytest.mark.parametrize("name", cl.card_names())
def test_shipped_card_matches_transformers(name):
    s = cl.load_card(name)
    assert_matches(s, build_meta(cl.card_config(name)))


@pytest.mark.parametrize("name", sorted(REFERENCE_TOTALS))
def test_reference_totals(name):
    assert name in cl.card_names()
    assert count_params(cl.load_card(name)).total == REFERENCE_TOTALS[name]


def test_mixtral_active():
    p = count_params(cl.load_card("Mixtral-8x7B-v0.1"))
    assert p.active == MIXTRAL_ACTIVE
    assert p.total - p.active == 32 * 6 * 3 * 4096 * 14336  # six unused SwiGLU experts a layer


# Cards added for the other families: totals measured on the meta device with transformers
# 5.24 (test_shipped_card_matches_transformers re-checks them), and the rounded figure each
# model's publisher gives.
NEW_CARD_TOTALS = {
    "Qwen2-7B-Instruct": (7_615_616_512, 7.6e9),  # "7B", 7.6B on the model card
    "gemma-2b": (2_506_172_416, 2.5e9),
    "gemma-2-9b": (9_241_705_984, 9.2e9),
    "Phi-3-mini-4k-instruct": (3_821_079_552, 3.8e9),
    "OLMo-1B-hf": (1_176_764_416, 1.18e9),  # "1B"; 1.18B on the model card
    "falcon-7b-instruct": (6_921_720_704, 6.9e9),
    "DeepSeek-V3": (671_026_404_352, 671e9),  # 671B; the 685B on its page adds 14B of MTP
}


@pytest.mark.parametrize("name", sorted(NEW_CARD_TOTALS))
def test_new_card_totals(name):
    exact, published = NEW_CARD_TOTALS[name]
    total = count_params(cl.load_card(name)).total
    assert total == exact
    assert abs(total - published) / published < 0.01


def test_every_card_has_a_total():
    assert set(cl.card_names()) == set(REFERENCE_TOTALS) | set(NEW_CARD_TOTALS)


def test_deepseek_v3_active():
    """DeepSeek-V3 paper (arxiv.org/abs/2412.19437): 671B total, 37B activated per token."""
    p = count_params(cl.load_card("DeepSeek-V3"))
    assert p.active == 37_552_282_624
    assert p.total - p.active == 58 * (256 - 8) * 3 * 7168 * 2048  # 58 MoE layers


def test_gpt2_embedding_share():
    p = count_params(cl.load_card("gpt2"))
    assert p.embedding == 39_383_808  # REFERENCE.md: 50257·768 + 1024·768
    assert round(100 * p.embedding / p.total, 1) == 31.6


# --- random shapes, shape -> config -> transformers -------------------------------------------

def _heads(rng: random.Random) -> tuple[int, int]:
    n_kv = rng.choice([1, 1, 2, 3, 4])
    return n_kv * rng.choice([1, 2, 3]), n_kv


def _window(rng: random.Random, n_layers: int) -> dict:
    if rng.random() < 0.3:
        return {}
    n = rng.randint(1, n_layers)
    return dict(sliding_window=rng.randint(4, 64), n_sliding_layers=None if n == n_layers else n)


def random_shape(family: str, rng: random.Random) -> ModelShape:
    """A small random shape that ``family`` can express (seconds to build on meta)."""
    n_heads, n_kv = _heads(rng)
    d_head = rng.choice([2, 4, 6, 8, 12, 16])
    divisible = n_heads * rng.choice([2, 4, 8])  # d_model for families that need n_heads | d_model
    L = rng.randint(1, 4)
    base = dict(n_layers=L, d_ff=rng.randint(4, 80), d_vocab=rng.randint(5, 150),
                n_ctx=rng.randint(4, 96), tied_embeddings=rng.random() < 0.5)
    rotary = dict(base, n_heads=n_heads, n_kv_heads=n_kv, d_head=d_head, mlp="swiglu",
                  norm="rmsnorm", positions="rotary", qkv_bias=False, out_bias=False,
                  mlp_bias=False, d_model=rng.randint(4, 64))
    bias = rng.random() < 0.5
    if family == "gpt2":
        return cl.gpt2_shape(d_model=divisible, n_layers=L, n_heads=n_heads,
                             d_vocab=base["d_vocab"], n_ctx=base["n_ctx"],
                             d_ff=rng.choice([None, base["d_ff"]])).with_(
            tied_embeddings=base["tied_embeddings"])
    if family == "llama":
        return ModelShape(**dict(rotary, d_model=divisible, qkv_bias=bias, out_bias=bias,
                                 mlp_bias=rng.random() < 0.5), model_type=family)
    if family in ("mistral", "phi3"):
        return ModelShape(**rotary, **{k: v for k, v in _window(rng, L).items()
                                       if k == "sliding_window"}, model_type=family)
    if family == "mixtral":
        n_experts = rng.randint(1, 6)
        return ModelShape(**rotary, **{k: v for k, v in _window(rng, L).items()
                                       if k == "sliding_window"},
                          n_experts=n_experts, n_experts_per_tok=rng.randint(1, n_experts),
                          model_type=family)
    if family == "qwen2":
        return ModelShape(**dict(rotary, qkv_bias=True), **_window(rng, L), model_type=family)
    if family == "gemma":
        return ModelShape(**dict(rotary, mlp="geglu", qkv_bias=bias, out_bias=bias),
                          model_type=family)
    if family == "gemma2":
        return ModelShape(**dict(rotary, d_model=divisible, mlp="geglu", qkv_bias=bias,
                                 out_bias=bias), norms_per_block=4, **_window(rng, L),
                          model_type=family)
    if family == "olmo":
        return ModelShape(**dict(rotary, norm="nonparametric_layernorm", qkv_bias=bias,
                                 out_bias=bias), model_type=family)
    if family == "falcon":
        n_kv = rng.choice([1, n_heads, n_kv])
        parallel = rng.random() < 0.7 or n_kv not in (1, n_heads)
        return ModelShape(d_model=divisible, n_heads=n_heads, n_kv_heads=n_kv, **base,
                          mlp="gelu", norm="layernorm",
                          positions=rng.choice(["rotary", "alibi"]), qkv_bias=bias,
                          out_bias=bias, mlp_bias=bias, parallel_attn=parallel,
                          norms_per_block=rng.choice([1, 2]) if parallel else 2,
                          model_type=family)
    if family == "deepseek_v3":
        n_experts = rng.randint(1, 6)
        n_dense = rng.randint(0, L)
        rope = rng.choice([2, 4, 8])
        mla = LatentAttention(kv_lora_rank=rng.randint(2, 24), d_head_rope=rope,
                              d_head_v=rng.randint(1, 12),
                              q_lora_rank=rng.choice([0, rng.randint(2, 24)]))
        return ModelShape(**dict(rotary, d_head=rope + rng.choice([2, 4, 6]), qkv_bias=bias,
                                 out_bias=bias, n_kv_heads=n_heads), mla=mla, n_experts=n_experts,
                          n_experts_per_tok=rng.randint(1, n_experts),
                          n_shared_experts=rng.randint(0, 2), n_dense_layers=n_dense,
                          d_ff_dense=rng.randint(4, 80) if n_dense else None, model_type=family)
    raise AssertionError(family)


SEEDS = range(12)


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_random_shapes_match_transformers(family):
    for seed in SEEDS:
        s = random_shape(family, random.Random(f"{family}-{seed}"))
        cfg = config_from_shape(s)
        back = cl.shape_from_config(cfg)
        assert back == s.with_(model_type=family), (seed, cfg)  # round trip, shape -> config -> shape
        assert config_from_shape(back) == cfg  # and config -> shape -> config
        assert_matches(s, build_meta(cfg))


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_configs_from_shapes_run(family):
    """Counts only need the model built; a forward pass shows the config is a working one
    (a null head_dim, for one, builds DeepSeek-V3 but breaks its rotary embedding)."""
    for seed in SEEDS[:3]:
        s = random_shape(family, random.Random(f"{family}-{seed}"))
        config = AutoConfig.for_model(**config_from_shape(s))
        config._experts_implementation = "eager"  # the grouped kernel wants aligned sizes
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).eval()
        with torch.no_grad():
            logits = model(torch.randint(0, s.d_vocab, (1, 4))).logits
        assert logits.shape == (1, 4, s.d_vocab) and torch.isfinite(logits).all()


def test_random_shapes_cover_the_switches():
    """The seeds above reach the variants each family has (not one lucky case)."""
    shapes = [random_shape(f, random.Random(f"{f}-{seed}"))
              for f in SUPPORTED_MODEL_TYPES for seed in SEEDS]
    seen = lambda f, pred: any(pred(s) for s in shapes if s.model_type == f)  # noqa: E731
    assert seen("gpt2", lambda s: not s.tied_embeddings) and seen("gpt2", lambda s: s.d_ff != 4 * s.d_model)
    assert seen("llama", lambda s: s.qkv_bias) and seen("llama", lambda s: s.mlp_bias)
    assert seen("llama", lambda s: s.d_head * s.n_heads != s.d_model)
    assert seen("mixtral", lambda s: s.n_experts_per_tok < s.n_experts)
    assert seen("qwen2", lambda s: 0 < s.sliding_layers < s.n_layers)
    assert seen("gemma2", lambda s: s.sliding_layers == (s.n_layers + 1) // 2 and s.n_layers > 1)
    assert seen("falcon", lambda s: s.n_kv_heads == 1 < s.n_heads)
    assert seen("falcon", lambda s: 1 < s.n_kv_heads < s.n_heads)
    assert seen("falcon", lambda s: not s.parallel_attn) and seen("falcon", lambda s: s.norms_per_block == 1)
    assert seen("falcon", lambda s: s.positions == "alibi")
    assert seen("deepseek_v3", lambda s: s.mla.q_lora_rank == 0)
    assert seen("deepseek_v3", lambda s: 0 < s.n_dense_layers < s.n_layers)
    assert seen("deepseek_v3", lambda s: s.n_shared_experts == 0)


# --- random configs with keys left out: our defaults are transformers' defaults --------------

OPTIONAL_KEYS = {
    "gpt2": ["n_inner", "tie_word_embeddings"],
    "llama": ["num_key_value_heads", "head_dim", "attention_bias", "mlp_bias",
              "tie_word_embeddings"],
    "mistral": ["num_key_value_heads", "head_dim", "sliding_window", "tie_word_embeddings"],
    "mixtral": ["num_key_value_heads", "head_dim", "sliding_window", "num_local_experts",
                "num_experts_per_tok", "tie_word_embeddings"],
    "qwen2": ["num_key_value_heads", "head_dim", "use_sliding_window", "sliding_window",
              "max_window_layers", "tie_word_embeddings"],
    "gemma": ["num_key_value_heads", "head_dim", "attention_bias", "tie_word_embeddings"],
    "gemma2": ["num_key_value_heads", "head_dim", "attention_bias", "sliding_window",
               "layer_types", "tie_word_embeddings"],
    "phi3": ["num_key_value_heads", "head_dim", "sliding_window", "tie_word_embeddings"],
    "olmo": ["num_key_value_heads", "head_dim", "attention_bias", "tie_word_embeddings"],
    "falcon": ["ffn_hidden_size", "max_position_embeddings", "bias", "alibi", "parallel_attn",
               "multi_query", "new_decoder_architecture", "num_kv_heads",
               "num_ln_in_parallel_attn", "tie_word_embeddings"],
    "deepseek_v3": ["num_key_value_heads", "moe_intermediate_size", "n_shared_experts",
                    "first_k_dense_replace", "q_lora_rank", "kv_lora_rank",
                    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "attention_bias",
                    "tie_word_embeddings"],
}
# Keys a config class lets be null, read as "the usual" (heads, d_model / n_heads, no window).
NULLABLE = {"num_key_value_heads": ("llama", "qwen2", "phi3", "olmo", "deepseek_v3"),
            "num_kv_heads": ("falcon",), "ffn_hidden_size": ("falcon",),
            "head_dim": ("llama", "mistral", "mixtral"),
            "sliding_window": ("mistral", "mixtral", "phi3", "gemma2"),
            "n_inner": ("gpt2",), "q_lora_rank": ("deepseek_v3",)}
# Defaults too big for a quick meta build, replaced by small values that keep them absent.
SMALL_DEFAULTS = {"deepseek_v3": dict(n_routed_experts=4, num_experts_per_tok=2)}


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_defaults_match_transformers(family):
    built = refused = 0
    for seed in range(16):
        rng = random.Random(f"defaults-{family}-{seed}")
        s = random_shape(family, rng)
        if s.mla is None and family != "gemma":  # so that a dropped head_dim changes nothing
            s = s.with_(d_model=s.n_heads * s.d_head)
        cfg = config_from_shape(s)
        cfg.update(SMALL_DEFAULTS.get(family, {}))
        for key in OPTIONAL_KEYS[family]:
            r = rng.random()
            if r < 0.35:
                cfg.pop(key, None)
            elif r < 0.5 and family in NULLABLE.get(key, ()):
                cfg[key] = None
        if family == "falcon" and "new_decoder_architecture" not in cfg:
            cfg.pop("num_ln_in_parallel_attn", None)  # only meaningful in the new layout
        try:  # transformers fills in its defaults
            full = AutoConfig.for_model(**cfg).to_dict()
            model = build_meta(cfg)
        except Exception:  # e.g. an odd floored head_dim for RoPE: transformers refuses it
            continue
        try:
            s = cl.shape_from_config(cfg)
        except CardError as e:
            # What we refuse and transformers builds anyway: a head width floored from
            # d_model // n_heads, or a default kv head count that does not divide the heads.
            assert "does not divide" in str(e) or "must equal n_heads" in str(e), e
            try:  # transformers' filled-in config spells the floored head_dim out
                assert_matches(cl.shape_from_config(full), model)
            except CardError as e_full:
                assert "n_kv_heads" in str(e_full) or "does not divide" in str(e_full), e_full
            refused += 1
            continue
        assert cl.shape_from_config(full).with_(dtype=None) == s.with_(dtype=None), (seed, cfg)
        assert_matches(s, model)
        built += 1
    assert built >= 8, f"only {built} of 16 random {family} configs checked ({refused} refused)"
