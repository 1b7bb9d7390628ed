"""The families added in 2026: their defaults are transformers' own, their cards are sourced,
and their KV cache is the bytes a transformers cache holds after a forward pass.

Parameter counts of these families (cards and random shapes, part by part) are checked with
every other family's in tests/test_params.py; config errors in tests/test_cards.py.
"""
from __future__ import annotations

import dataclasses
import tomllib
from importlib import resources

import pytest
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

import course_lib as cl
from course_lib.cards import FAMILY_DEFAULTS, CardError, config_from_shape
from course_lib.memory import kv_cache_by_layer_kind
from course_lib.shapes import LatentAttention, ModelShape

transformers.logging.set_verbosity_error()
pytestmark = pytest.mark.filterwarnings("ignore:Initializing zero-element tensors:UserWarning")

NEW = tuple(FAMILY_DEFAULTS)


def build_meta(cfg: dict):
    config = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


# --- the defaults are data, and they are transformers' ---------------------------------------

def test_causal_lm_model_types_are_transformers():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    known = cl.cards.decoder_only_model_types()
    assert set(known) == set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    assert set(cl.SUPPORTED_MODEL_TYPES) <= set(known)


def test_every_new_family_has_defaults():
    assert NEW == cl.SUPPORTED_MODEL_TYPES[len(cl.cards.FAMILIES_2023):]


@pytest.mark.parametrize("family", NEW)
def test_defaults_file_holds_the_config_class_defaults(family):
    """Each entry of course_lib/family_defaults.json is the default of that field of the
    family's config class in the installed transformers, and none of the keys read is missing."""
    fields = {f.name: f for f in dataclasses.fields(CONFIG_MAPPING[family])}
    for key, value in FAMILY_DEFAULTS[family].items():
        assert key in fields, key
        f = fields[key]
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        assert default == value, (family, key, default, value)
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "vocab_size", "max_position_embeddings", "tie_word_embeddings"):
        assert key in FAMILY_DEFAULTS[family], key


# Families whose defaults alone make a model we count (GLM's 96 heads do not divide its 4,096
# width: transformers floors the head width; DeepSeek-V2 has no default top-k).
DEFAULT_ONLY = {"glm4_moe": dict(head_dim=128), "deepseek_v2": dict(num_experts_per_tok=6)}


@pytest.mark.parametrize("family", NEW)
def test_a_card_of_defaults_is_the_model_transformers_builds(family):
    """The card ``{"model_type": family}``: our reading, transformers' filled-in config read
    back, and the model on the meta device agree (the full-size default model)."""
    cfg = {"model_type": family, **DEFAULT_ONLY.get(family, {})}
    s = cl.shape_from_config(cfg)
    full = AutoConfig.for_model(**cfg)
    assert cl.shape_from_config(full.to_dict()) == s
    total = sum(p.numel() for p in build_meta(cfg).parameters())
    assert cl.count_params(s).total == total
    if "layer_types" in full.to_dict() and full.layer_types is not None:
        assert s.sliding_layers == full.layer_types.count("sliding_attention")


def test_families_without_a_usable_default_say_so():
    with pytest.raises(CardError, match="n_experts_per_tok=None.*no default"):
        cl.shape_from_config({"model_type": "deepseek_v2"})
    with pytest.raises(CardError, match="n_heads=96 does not divide d_model=4096.*default"):
        cl.shape_from_config({"model_type": "glm4_moe"})
    with pytest.raises(CardError, match="does not divide d_model=70.*requires"):
        cl.shape_from_config({"model_type": "gemma3_text", "hidden_size": 70, "head_dim": 16})


# --- per-layer patterns read from the card, as transformers reads them ---------------------

SMALL = dict(hidden_size=64, num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=2,
             intermediate_size=48, vocab_size=100, max_position_embeddings=64)
PATTERNS = [
    ("gemma3_text", dict(sliding_window=16)),  # five sliding to one global
    ("gemma3_text", dict(sliding_window=16, sliding_window_pattern=3)),
    ("gpt_oss", dict(num_local_experts=4, num_experts_per_tok=2)),  # alternating
    ("qwen3", dict(use_sliding_window=True, sliding_window=16, max_window_layers=5)),
    ("qwen2_moe", dict(num_experts=4, use_sliding_window=True, sliding_window=16,
                       max_window_layers=7)),  # every other layer below 7
    ("smollm3", dict(use_sliding_window=True, sliding_window=16)),  # the no-rope layers
    ("smollm3", dict(use_sliding_window=True, sliding_window=16, no_rope_layer_interval=3)),
    ("qwen3", dict(use_sliding_window=True, sliding_window=16,
                   layer_types=["full_attention", "sliding_attention"] * 6)),
]


@pytest.mark.parametrize("family,extra", PATTERNS)
def test_sliding_layers_follow_the_card(family, extra):
    cfg = dict(SMALL, model_type=family, **extra)
    s, hf = cl.shape_from_config(cfg), AutoConfig.for_model(**cfg)
    assert 0 < s.sliding_layers < s.n_layers
    assert s.sliding_layers == hf.layer_types.count("sliding_attention")
    assert s.sliding_window == hf.sliding_window


@pytest.mark.parametrize("family,extra,dense", [
    ("qwen3_moe", dict(num_experts=4, num_experts_per_tok=2, decoder_sparse_step=3),
     (0, 1, 3, 4, 6, 7, 9, 10)),
    ("qwen3_moe", dict(num_experts=4, num_experts_per_tok=2, mlp_only_layers=[0, 5]), (0, 5)),
    ("qwen2_moe", dict(num_experts=4, decoder_sparse_step=2, mlp_only_layers=[1]),
     (0, 1, 2, 4, 6, 8, 10)),
    ("deepseek_v2", dict(n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=2,
                         num_key_value_heads=8), (0, 1)),
    ("glm4_moe", dict(n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=3), (0, 1, 2)),
])
def test_dense_layers_follow_the_card(family, extra, dense):
    cfg = dict(SMALL, model_type=family, **extra)
    s = cl.shape_from_config(cfg)
    assert tuple(i for i in range(s.n_layers) if not s.is_moe_layer(i)) == dense
    model = build_meta(cfg)
    built = tuple(i for i, layer in enumerate(model.model.layers)
                  if not any(".experts." in n for n, _ in layer.named_parameters(prefix=".")))
    assert built == dense


def test_qwen_moe_without_experts_is_dense():
    cfg = dict(SMALL, model_type="qwen3_moe", num_experts=0)
    s = cl.shape_from_config(cfg)
    assert not s.is_moe and s.d_ff == 48
    assert cl.count_params(s).total == sum(p.numel() for p in build_meta(cfg).parameters())


# --- the cards: one real card per family, each with its source --------------------------------

SOURCES = tomllib.loads((resources.files("course_lib") / "cards" / "sources.toml").read_text())


def test_every_card_has_a_source_and_every_family_a_card():
    assert set(SOURCES["cards"]) == set(cl.card_names())
    for name, entry in SOURCES["cards"].items():
        owner, _, repo = entry["repo"].partition("/")
        assert owner and repo, name
        for key in entry.get("omitted", []):
            assert key not in cl.card_config(name), (name, key)
    shipped = {cl.card_config(n)["model_type"] for n in cl.card_names()}
    assert shipped == set(cl.SUPPORTED_MODEL_TYPES)


def test_the_cards_show_what_their_families_are_known_for():
    card = {n: cl.load_card(n) for n in cl.card_names()}
    assert card["Qwen3-8B"].qk_norm == "head" and card["Qwen3-8B"].d_head == 128
    q3 = card["Qwen3-30B-A3B"]
    assert (q3.n_experts, q3.n_experts_per_tok, q3.n_shared_experts) == (128, 8, 0)
    q15 = card["Qwen1.5-MoE-A2.7B"]
    assert q15.shared_expert_gate and q15.shared_width == 5632 and q15.qkv_bias
    g3 = card["gemma-3-1b-it"]
    assert (g3.sliding_window, g3.sliding_layers, g3.n_layers) == (512, 22, 26)
    oss = card["gpt-oss-20b"]
    assert oss.attention_sinks and oss.router_bias and oss.mlp_bias and oss.sliding_layers == 12
    lite = card["DeepSeek-V2-Lite"]
    assert lite.mla.q_lora_rank == 0 and lite.n_dense_layers == 1 and lite.n_shared_experts == 2
    air = card["GLM-4.5-Air"]
    assert air.qkv_bias and not air.out_bias and air.n_dense_layers == 1
    assert card["OLMo-2-1124-7B"].qk_norm == "heads"
    assert card["phi-2"].head_bias and card["phi-2"].parallel_attn
    assert card["pythia-1b"].parallel_attn and not card["pythia-1b"].tied_embeddings
    assert card["starcoder2-3b"].sliding_layers == 30 and card["starcoder2-3b"].mlp == "gelu"
    assert card["c4ai-command-r-v01"].norm == "layernorm_nobias"
    assert card["Phi-3.5-MoE-instruct"].head_bias


# --- the KV cache against a transformers cache filled by a forward pass --------------------

WINDOW, N_TOKENS = 4, 9
TINY = dict(d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, d_head=8, d_ff=16, d_vocab=64,
            n_ctx=32, mlp="swiglu", norm="rmsnorm", positions="rotary", qkv_bias=False,
            out_bias=False, mlp_bias=False, tied_embeddings=False)


def tiny_shape(family: str) -> ModelShape:
    """A tiny shape of each family, with a window of 4 on some layers where it has one."""
    experts = dict(n_experts=4, n_experts_per_tok=2)
    two = dict(sliding_window=WINDOW, n_sliding_layers=2)
    every = dict(sliding_window=WINDOW)
    plain = dict(TINY, d_model=32, d_head=None)
    shapes = {
        "qwen3": dict(TINY, qk_norm="head", **two),
        "qwen3_moe": dict(TINY, qk_norm="head", **experts, **every),
        "qwen2_moe": dict(plain, qkv_bias=True, **experts, n_shared_experts=1, d_ff_shared=24,
                          shared_expert_gate=True, **two),
        "gemma3_text": dict(TINY, mlp="geglu", norms_per_block=4, qk_norm="head", **two),
        "gpt_oss": dict(TINY, qkv_bias=True, out_bias=True, mlp_bias=True, **experts,
                        router_bias=True, attention_sinks=True, **two),
        "deepseek_v2": dict(TINY, n_kv_heads=4, d_head=12, **experts, n_shared_experts=1,
                            n_dense_layers=1, d_ff_dense=24,
                            mla=LatentAttention(kv_lora_rank=10, d_head_rope=4, d_head_v=6)),
        "glm4_moe": dict(TINY, qkv_bias=True, **experts, n_shared_experts=1, n_dense_layers=1,
                         d_ff_dense=24),
        "olmo2": dict(plain, qk_norm="heads"),
        "smollm3": dict(plain, **two),
        "granite": dict(plain),
        "phi": dict(plain, mlp="gelu", norm="layernorm", qkv_bias=True, out_bias=True,
                    mlp_bias=True, head_bias=True, norms_per_block=1, parallel_attn=True),
        "gpt_neox": dict(plain, n_kv_heads=None, mlp="gelu", norm="layernorm", qkv_bias=True,
                         out_bias=True, mlp_bias=True, parallel_attn=True),
        "starcoder2": dict(plain, mlp="gelu", norm="layernorm", qkv_bias=True, out_bias=True,
                           mlp_bias=True, **every),
        "cohere": dict(plain, norm="layernorm_nobias", norms_per_block=1, parallel_attn=True),
        "olmoe": dict(plain, qk_norm="heads", **experts),
        "phimoe": dict(plain, norm="layernorm", **experts, **every),
    }
    return ModelShape(**shapes[family], model_type=family)


def forward_cache(s: ModelShape, n_tokens: int):
    config = AutoConfig.for_model(**config_from_shape(s))
    config._experts_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        out = model(torch.randint(0, s.d_vocab, (1, n_tokens)), use_cache=True)
    return model, out.past_key_values


@pytest.mark.parametrize("family", NEW)
def test_kv_cache_matches_a_transformers_cache(family):
    """Per layer kind, the bytes transformers holds after a prefill of 9 tokens (fp32).

    A full layer holds all 9 tokens.  A sliding layer of window 4 holds 3: transformers keeps
    window − 1 between steps and adds the new token's key and value when it attends (4 in
    all), which is the ``min(n, window)`` the course counts, one token more than it stores.
    A latent layer (DeepSeek-V2) holds the latent as its "keys" and the rotary key as its
    "values"."""
    s = tiny_shape(family)
    _, cache = forward_cache(s, N_TOKENS)
    rows = {r.kind: r for r in kv_cache_by_layer_kind(s, N_TOKENS, "fp32")}
    held: dict[str, int] = {}
    full_kind = "latent_attention" if s.mla is not None else "full_attention"
    for layer in cache.layers:
        kind = "sliding_attention" if type(layer).__name__ == "DynamicSlidingWindowLayer" \
            else full_kind
        k, v = layer.keys, layer.values
        assert k.shape[2] == v.shape[2] == (min(N_TOKENS, WINDOW - 1) if kind ==
                                            "sliding_attention" else N_TOKENS)
        assert k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3] == s.kv_cache_width
        held[kind] = held.get(kind, 0) + sum(t.numel() * t.element_size() for t in (k, v))
    assert set(held) == set(rows)
    assert {kind: r.n_layers for kind, r in rows.items()} == \
        {kind: sum(1 for layer in cache.layers if (type(layer).__name__ ==
                                                   "DynamicSlidingWindowLayer") ==
                   (kind == "sliding_attention")) for kind in rows}
    full = rows.get(full_kind)
    if full:
        assert full.bytes_per_sequence == held[full_kind]
    sliding = rows.get("sliding_attention")
    if sliding:  # ours holds the window, transformers window - 1 between steps
        assert sliding.tokens_kept == WINDOW
        assert sliding.bytes_per_sequence == held["sliding_attention"] \
            + sliding.n_layers * s.kv_cache_width * 4
    assert sum(r.bytes_per_sequence for r in rows.values()) == \
        cl.kv_cache_bytes_per_sequence(s, N_TOKENS, "fp32")
    assert sum(r.bytes_per_token for r in rows.values()) == \
        cl.kv_cache_bytes_per_token(s, "fp32")


def test_latent_cache_is_the_latent_and_the_rotary_key():
    """DeepSeek-V2: what a layer caches is the output of ``kv_a_proj_with_mqa``, the latent
    and the rotary key (kv_lora_rank + d_head_rope numbers a token), not a key of d_head and a
    value of d_head_v for each head."""
    s = tiny_shape("deepseek_v2")
    latents = []
    config = AutoConfig.for_model(**config_from_shape(s))
    config._experts_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    for layer in model.model.layers:
        layer.self_attn.kv_a_proj_with_mqa.register_forward_hook(
            lambda mod, args, out: latents.append(out))
    with torch.no_grad():
        model(torch.randint(0, s.d_vocab, (1, N_TOKENS)), use_cache=True)
    (row,) = kv_cache_by_layer_kind(s, N_TOKENS, "fp32")
    assert row.kind == "latent_attention" and row.n_layers == s.n_layers == len(latents)
    assert row.bytes_per_sequence == sum(t.numel() * t.element_size() for t in latents)
    per_head = s.n_layers * N_TOKENS * s.n_heads * (s.d_head + s.mla.d_head_v) * 4
    assert row.bytes_per_sequence * 5 < per_head  # 14 numbers a token against 72


def test_tiny_shapes_cover_every_new_family():
    for family in NEW:
        s = tiny_shape(family)
        assert config_from_shape(s)["model_type"] == family


@pytest.mark.parametrize("name,per_token", [
    # bf16 bytes one token adds to the cache, across layers (all kinds)
    ("gpt-oss-20b", 24 * 2 * 8 * 64 * 2),
    ("DeepSeek-V2-Lite", 27 * (512 + 64) * 2),
    ("gemma-3-1b-it", 26 * 2 * 1 * 256 * 2),
    ("Qwen3-30B-A3B", 48 * 2 * 4 * 128 * 2),
])
def test_cache_per_token_of_cards(name, per_token):
    s = cl.load_card(name)
    assert cl.kv_cache_bytes_per_token(s, "bf16") == per_token
    rows = kv_cache_by_layer_kind(s, 32768, "bf16")
    assert sum(r.bytes_per_token for r in rows) == per_token
    if s.sliding_layers:  # the window caps what sliding layers keep
        (slide,) = [r for r in rows if r.kind == "sliding_attention"]
        assert slide.tokens_kept == s.sliding_window < 32768
