"""Reading config.json files: transformers' defaults, and a clear error for every bad input.

Defaults are checked against the transformers config classes themselves (their values after
``AutoConfig.for_model``, or the layer widths of the model they build on the meta device),
not against numbers typed here.
"""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

import course_lib as cl
from course_lib.cards import SUPPORTED_MODEL_TYPES, CardError, config_from_shape
from course_lib.shapes import LatentAttention, ModelShape

transformers.logging.set_verbosity_error()

# The smallest config of each family: its required keys only.
MINIMAL = {
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=32),
    "llama": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=96, vocab_size=100, max_position_embeddings=32),
    "falcon": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=100),
}
# Enough heads for each family's default kv head count (Qwen2: 32, Gemma: 16, DeepSeek: 128).
for _family, _heads in (("mistral", 8), ("mixtral", 8), ("qwen2", 32), ("gemma", 16),
                        ("gemma2", 8), ("phi3", 8), ("olmo", 8), ("deepseek_v3", 128)):
    MINIMAL[_family] = dict(MINIMAL["llama"], num_attention_heads=_heads)
# The families of 2026 take a default for every key; these are small sizes for them, with as
# many heads as their default kv head count needs (Qwen3: 32, Qwen2-MoE: 16, the others 8).
NEW_FAMILIES = tuple(cl.cards.FAMILY_DEFAULTS)
for _family in NEW_FAMILIES:
    _heads = {"qwen3": 32, "qwen2_moe": 16}.get(_family, 8)
    MINIMAL[_family] = dict(MINIMAL["llama"], num_attention_heads=_heads)
MINIMAL["deepseek_v2"]["num_experts_per_tok"] = 2  # DeepseekV2Config has no default for it
MINIMAL = {family: dict(cfg, model_type=family, bos_token_id=None, eos_token_id=None,
                        pad_token_id=None) for family, cfg in MINIMAL.items()}
REQUIRED = {family: [k for k in cfg if k not in ("model_type", "bos_token_id", "eos_token_id",
                                                  "pad_token_id", "num_experts_per_tok")]
            for family, cfg in MINIMAL.items()}
OLD_FAMILIES = tuple(f for f in SUPPORTED_MODEL_TYPES if f not in NEW_FAMILIES)
SIZE_FIELDS = {"n_embd": "d_model", "hidden_size": "d_model", "n_layer": "n_layers",
               "num_hidden_layers": "n_layers", "n_head": "n_heads",
               "num_attention_heads": "n_heads", "intermediate_size": "d_ff",
               "vocab_size": "d_vocab", "n_positions": "n_ctx", "max_position_embeddings": "n_ctx"}



MOE_WIDTH = ("deepseek_v3", "deepseek_v2", "glm4_moe", "qwen3_moe", "qwen2_moe")
"""Families whose intermediate_size is the width of their dense layers (experts have their
own, moe_intermediate_size)."""


def field_of(family: str, key: str) -> str:
    """The shape field a required key feeds (DeepSeek's intermediate_size is its dense width)."""
    return "d_ff_dense" if family in MOE_WIDTH and key == "intermediate_size" else SIZE_FIELDS[key]


def hf_config(cfg: dict):
    return AutoConfig.for_model(**cfg)


def build_meta(cfg: dict):
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(hf_config(cfg))


def test_minimal_configs_cover_every_family():
    assert set(MINIMAL) == set(SUPPORTED_MODEL_TYPES) == set(cl.cards._FAMILIES)


# --- transformers' defaults -----------------------------------------------------------------

def test_gpt2_null_n_inner_is_four_d_model():
    cfg = cl.card_config("gpt2")
    assert cfg["n_inner"] is None
    s = cl.load_card("gpt2")
    c_fc = dict(build_meta(cfg).named_parameters())["transformer.h.0.mlp.c_fc.weight"]
    assert s.d_ff == 4 * s.d_model == c_fc.shape[1] == 3072  # Conv1D weights are (in, out)


@pytest.mark.parametrize("family", ["llama", "phi3", "olmo"])
def test_missing_kv_heads_means_as_many_as_query_heads(family):
    s = cl.shape_from_config(MINIMAL[family])
    assert s.n_kv_heads == s.n_heads == hf_config(MINIMAL[family]).num_key_value_heads


@pytest.mark.parametrize("family,kv", [("mistral", 8), ("mixtral", 8), ("qwen2", 32),
                                       ("gemma", 16), ("gemma2", 4), ("deepseek_v3", 128)])
def test_missing_kv_heads_takes_the_config_class_default(family, kv):
    cfg = dict(MINIMAL[family], num_attention_heads=kv, hidden_size=kv * 4)
    assert cl.shape_from_config(cfg).n_kv_heads == hf_config(cfg).num_key_value_heads == kv


def test_null_kv_heads_means_as_many_as_query_heads():
    cfg = dict(MINIMAL["llama"], num_key_value_heads=None)
    assert cl.shape_from_config(cfg).n_kv_heads == hf_config(cfg).num_key_value_heads == 4


def test_mistral_defaults():
    cfg = dict(MINIMAL["mistral"])
    s, hf = cl.shape_from_config(cfg), hf_config(cfg)
    assert (s.n_kv_heads, s.sliding_window) == (hf.num_key_value_heads, hf.sliding_window) \
        == (8, 4096)
    assert s.sliding_layers == s.n_layers and not s.tied_embeddings
    assert not (s.qkv_bias or s.out_bias or s.mlp_bias)
    no_window = dict(cfg, sliding_window=None)
    assert cl.shape_from_config(no_window).sliding_window is hf_config(no_window).sliding_window is None
    assert cl.load_card("Mistral-7B-v0.1").sliding_window == 4096


def test_mixtral_defaults():
    s, hf = cl.shape_from_config(MINIMAL["mixtral"]), hf_config(MINIMAL["mixtral"])
    assert (s.n_experts, s.n_experts_per_tok, s.sliding_window) == \
        (hf.num_local_experts, hf.num_experts_per_tok, hf.sliding_window) == (8, 2, None)


@pytest.mark.parametrize("family", ["llama", "mistral", "mixtral", "qwen2", "phi3", "olmo",
                                    "gemma", "gemma2"])
def test_explicit_head_dim_is_honoured(family):
    cfg = dict(MINIMAL[family], head_dim=24, num_key_value_heads=2)
    s = cl.shape_from_config(cfg)
    q = next(p for n, p in build_meta(cfg).named_parameters() if ".0.self_attn.q" in n)
    assert s.d_head == 24 != s.d_model // s.n_heads
    assert q.shape[0] == s.n_heads * 24 or q.shape[0] == (s.n_heads + 2 * 2) * 24  # phi3 fuses qkv


@pytest.mark.parametrize("family", ["gemma", "gemma2"])
def test_gemma_head_dim_defaults_to_256_and_head_is_tied(family):
    s, hf = cl.shape_from_config(MINIMAL[family]), hf_config(MINIMAL[family])
    assert s.d_head == hf.head_dim == 256 and s.tied_embeddings and hf.tie_word_embeddings
    assert s.mlp == "geglu" and s.norm == "rmsnorm"


def test_gemma2_windows_every_other_layer():
    cfg = dict(MINIMAL["gemma2"], num_hidden_layers=5)
    s, hf = cl.shape_from_config(cfg), hf_config(cfg)
    assert s.sliding_layers == hf.layer_types.count("sliding_attention") == 3
    assert s.sliding_window == hf.sliding_window == 4096 and s.norms_per_block == 4


def test_qwen2_window_only_when_used():
    cfg = dict(MINIMAL["qwen2"], num_hidden_layers=6, sliding_window=64)
    assert cl.shape_from_config(cfg).sliding_window is None  # use_sliding_window false
    on = dict(cfg, use_sliding_window=True, max_window_layers=4)
    s, hf = cl.shape_from_config(on), hf_config(on)
    assert (s.sliding_window, s.sliding_layers) == (64, hf.layer_types.count("sliding_attention")) \
        == (64, 2)
    assert s.qkv_bias and not s.out_bias


def test_falcon_defaults_and_layouts():
    cfg = MINIMAL["falcon"]
    s, hf = cl.shape_from_config(cfg), hf_config(cfg)
    assert s.n_kv_heads == 1 and hf.multi_query  # multi-query unless told otherwise
    assert (s.d_ff, s.n_ctx) == (hf.ffn_hidden_size, hf.max_position_embeddings) == (256, 2048)
    assert s.parallel_attn and s.norms_per_block == 1 and s.tied_embeddings
    assert not (s.qkv_bias or s.out_bias or s.mlp_bias) and s.norm == "layernorm"
    new = dict(cfg, new_decoder_architecture=True, num_kv_heads=2)
    assert (cl.shape_from_config(new).n_kv_heads, cl.shape_from_config(new).norms_per_block) == (2, 2)
    mha = dict(cfg, multi_query=False, num_kv_heads=2)  # the classic layout ignores num_kv_heads
    assert cl.shape_from_config(mha).n_kv_heads == 4
    assert cl.shape_from_config(dict(cfg, alibi=True)).positions == "alibi"


def test_falcon_7b_card_is_multi_query_despite_num_kv_heads():
    cfg = cl.card_config("falcon-7b-instruct")
    assert cfg["num_kv_heads"] == 71 and cfg["multi_query"]
    s = cl.load_card("falcon-7b-instruct")
    qkv = dict(build_meta(cfg).named_parameters())["transformer.h.0.self_attention.query_key_value.weight"]
    assert s.n_kv_heads == 1 and qkv.shape[0] == (s.n_heads + 2) * s.d_head


def test_deepseek_v3_defaults_are_the_config_class_defaults():
    cfg = dict(MINIMAL["deepseek_v3"], num_attention_heads=128, hidden_size=512)
    s, hf = cl.shape_from_config(cfg), hf_config(cfg)
    assert (s.n_experts, s.n_experts_per_tok, s.n_shared_experts, s.n_dense_layers, s.d_ff) == \
        (hf.n_routed_experts, hf.num_experts_per_tok, hf.n_shared_experts,
         min(hf.first_k_dense_replace, hf.num_hidden_layers), hf.moe_intermediate_size)
    assert s.mla == LatentAttention(kv_lora_rank=hf.kv_lora_rank, d_head_rope=hf.qk_rope_head_dim,
                                    d_head_v=hf.v_head_dim, q_lora_rank=hf.q_lora_rank)
    assert s.d_head == hf.qk_head_dim == 192
    assert cl.shape_from_config(dict(cfg, q_lora_rank=None)).mla.q_lora_rank == 0


def test_olmo_norms_have_no_parameters():
    s = cl.shape_from_config(MINIMAL["olmo"])
    assert s.norm == "nonparametric_layernorm" and cl.count_params(s).norms == 0
    assert not any("norm" in n for n, _ in build_meta(MINIMAL["olmo"]).named_parameters())


def test_integral_floats_and_dtype_are_read():
    s = cl.shape_from_config(dict(MINIMAL["llama"], hidden_size=64.0, torch_dtype="bfloat16"))
    assert s.d_model == 64 and isinstance(s.d_model, int) and s.dtype == "bfloat16"
    assert cl.shape_from_config(dict(MINIMAL["llama"], dtype="torch.float16")).dtype == "float16"


# --- errors: each a CardError (a ValueError) naming the field, key and value -----------------

def test_unsupported_model_type_lists_the_supported_ones():
    for bad in ("t5", None, 3):
        with pytest.raises(CardError) as e:
            cl.shape_from_config({"model_type": bad, "d_model": 512})
        assert f"unsupported model_type {bad!r}" in str(e.value)
        assert all(f in str(e.value) for f in SUPPORTED_MODEL_TYPES)
    assert issubclass(CardError, ValueError)


@pytest.mark.parametrize("family", NEW_FAMILIES)
def test_new_families_default_every_size_and_refuse_null(family):
    """A size left out takes the config class default, as transformers does; a null one is
    an error naming the key (transformers would fail to build it)."""
    for key in REQUIRED[family]:
        cfg = {k: v for k, v in MINIMAL[family].items() if k != key}
        default = cl.cards.FAMILY_DEFAULTS[family][key]
        assert getattr(hf_config(cfg), key) == default
        try:
            s = cl.shape_from_config(cfg)
        except CardError as e:  # the default does not fit the small sizes (e.g. 96 heads)
            assert "does not divide" in str(e) and "default" in str(e), e
        else:
            assert s == cl.shape_from_config(hf_config(cfg).to_dict()), key
            if key != "intermediate_size" or family not in MOE_WIDTH:
                assert default in (getattr(s, field_of(family, key)), s.d_ff_dense), key
        with pytest.raises(CardError, match=f"{field_of(family, key)}=None.*'{key}'"):
            cl.shape_from_config(dict(MINIMAL[family], **{key: None}))


@pytest.mark.parametrize("family", OLD_FAMILIES)
def test_missing_required_key(family):
    for key in REQUIRED[family]:
        cfg = {k: v for k, v in MINIMAL[family].items() if k != key}
        with pytest.raises(CardError, match=f"missing the required key '{key}'"):
            cl.shape_from_config(cfg)
        with pytest.raises(CardError, match=f"missing the required key '{key}'"):
            cl.shape_from_config(dict(MINIMAL[family], **{key: None}))


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
@pytest.mark.parametrize("value", ["wide", [64], True, 64.5, {"n": 64}])
def test_size_of_the_wrong_type(family, value):
    for key in REQUIRED[family]:
        field = field_of(family, key)
        with pytest.raises(CardError) as e:
            cl.shape_from_config(dict(MINIMAL[family], **{key: value}))
        assert f"{field}={value!r}" in str(e.value) and repr(key) in str(e.value)


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
@pytest.mark.parametrize("value", [0, -8])
def test_non_positive_size(family, value):
    for key in REQUIRED[family]:
        with pytest.raises(CardError) as e:
            cl.shape_from_config(dict(MINIMAL[family], **{key: value}))
        assert f"{field_of(family, key)}={value}" in str(e.value) and repr(key) in str(e.value)


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "falcon"])
def test_heads_not_dividing_d_model(family):
    heads = "n_head" if family == "gpt2" else "num_attention_heads"
    with pytest.raises(CardError, match=r"n_heads=5 does not divide d_model=64.*num_attention_heads|"
                                        r"n_heads=5 does not divide d_model=64.*n_head"):
        cl.shape_from_config(dict(MINIMAL[family], **{heads: 5}))
    if family != "gpt2" and family != "falcon":  # these two have no head_dim
        s = cl.shape_from_config(dict(MINIMAL[family], **{heads: 5}, head_dim=16,
                                      num_key_value_heads=5))
        assert s.d_head == 16


@pytest.mark.parametrize("family,key", [("llama", "num_key_value_heads"),
                                        ("qwen2", "num_key_value_heads"),
                                        ("falcon", "num_kv_heads")])
def test_kv_heads_not_dividing_heads(family, key):
    extra = {"new_decoder_architecture": True} if family == "falcon" else {}
    with pytest.raises(CardError) as e:
        cl.shape_from_config(dict(MINIMAL[family], **extra, **{key: 3}))
    assert "n_kv_heads=3 does not divide" in str(e.value) and repr(key) in str(e.value)


@pytest.mark.parametrize("family,experts,k", [("mixtral", "num_local_experts", "num_experts_per_tok"),
                                              ("deepseek_v3", "n_routed_experts", "num_experts_per_tok")])
def test_more_experts_per_token_than_experts(family, experts, k):
    with pytest.raises(CardError) as e:
        cl.shape_from_config(dict(MINIMAL[family], **{experts: 2, k: 3}))
    assert "n_experts_per_tok=3 is more than n_experts=2" in str(e.value) and repr(k) in str(e.value)


def test_switch_of_the_wrong_type():
    with pytest.raises(CardError, match="tied_embeddings='yes'.*'tie_word_embeddings'.*true or false"):
        cl.shape_from_config(dict(MINIMAL["llama"], tie_word_embeddings="yes"))
    with pytest.raises(CardError, match="qkv_bias=1 .*'bias'"):
        cl.shape_from_config(dict(MINIMAL["falcon"], bias=1))


def test_bad_latent_attention():
    with pytest.raises(CardError, match="mla.kv_lora_rank=0"):
        cl.shape_from_config(dict(MINIMAL["deepseek_v3"], kv_lora_rank=0))
    with pytest.raises(CardError, match=r"mla.d_head_rope=\[64\].*'qk_rope_head_dim'"):
        cl.shape_from_config(dict(MINIMAL["deepseek_v3"], qk_rope_head_dim=[64]))


def test_bad_layer_types():
    with pytest.raises(CardError, match="layer_types"):
        cl.shape_from_config(dict(MINIMAL["gemma2"], layer_types=["full_attention"]))


def test_gpt2_cross_attention_is_refused():
    with pytest.raises(CardError, match="add_cross_attention"):
        cl.shape_from_config(dict(MINIMAL["gpt2"], add_cross_attention=True))


def test_file_errors(tmp_path):
    with pytest.raises(CardError, match="no such file"):
        cl.shape_from_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CardError, match="not valid JSON.*line 1"):
        cl.shape_from_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(CardError, match="JSON object, got list"):
        cl.shape_from_config(bad)
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(MINIMAL["llama"]))
    assert cl.load_card(folder).name == "my-model" == cl.shape_from_config(folder / "config.json").name
    with pytest.raises(CardError, match="no shipped card.*shipped: .*gpt2"):
        cl.load_card("gpt5")
    with pytest.raises(CardError, match="no shipped card"):
        cl.card_config("gpt5")


# --- ModelShape's own checks ------------------------------------------------------------------

BASE = dict(d_model=64, n_layers=2, n_heads=4, d_ff=96, d_vocab=100, n_ctx=32)


@pytest.mark.parametrize("changes,needle", [
    (dict(mlp="relu"), "mlp='relu' is not one of gelu, swiglu, geglu"),
    (dict(norm="batchnorm"), "norm='batchnorm' is not one of layernorm, rmsnorm, nonparametric_layernorm"),
    (dict(positions="fourier"), "positions='fourier' is not one of"),
    (dict(n_heads=5), "n_heads=5 does not divide d_model=64"),
    (dict(n_kv_heads=3), "n_kv_heads=3 does not divide n_heads=4"),
    (dict(n_kv_heads=8), "n_kv_heads=8 does not divide n_heads=4"),
    (dict(n_experts=2, n_experts_per_tok=3), "n_experts_per_tok=3 is more than n_experts=2"),
    (dict(n_experts=2), "n_experts_per_tok=0 must be at least 1"),
    (dict(d_ff=0), "d_ff=0 must be at least 1"),
    (dict(d_vocab=2.5), "d_vocab=2.5 must be an integer"),
    (dict(n_sliding_layers=1), "n_sliding_layers=1 needs a sliding_window"),
    (dict(sliding_window=8, n_sliding_layers=3), "n_sliding_layers=3 is more than n_layers=2"),
    (dict(norms_per_block=-1), "norms_per_block=-1 must be at least 0"),
    (dict(n_shared_experts=1), "n_shared_experts=1 needs a mixture of experts"),
    (dict(n_dense_layers=1), "n_dense_layers=1 needs a mixture of experts"),
    (dict(n_experts=2, n_experts_per_tok=1, n_dense_layers=3), "n_dense_layers=3 is more than n_layers=2"),
    (dict(n_experts=2, n_experts_per_tok=1, d_ff_dense=128), "d_ff_dense=128 needs dense layers"),
    (dict(parallel_attn="yes"), "parallel_attn='yes' must be True or False"),
    (dict(mla="latent"), "mla='latent' must be a LatentAttention"),
    (dict(n_kv_heads=2, mla=dict(kv_lora_rank=8, d_head_rope=4, d_head_v=8)),
     "n_kv_heads=2 must equal n_heads=4 with latent attention"),
    (dict(mla=dict(kv_lora_rank=8, d_head_rope=32, d_head_v=8)), "mla.d_head_rope=32 is more than d_head=16"),
    (dict(qk_norm="layer"), "qk_norm='layer' is not one of None, head, heads"),
    (dict(qk_norm="head", mla=dict(kv_lora_rank=8, d_head_rope=4, d_head_v=8)),
     "qk_norm='head' with latent attention"),
    (dict(d_ff_shared=8), "d_ff_shared=8 needs shared experts"),
    (dict(n_experts=2, n_experts_per_tok=1, n_shared_experts=1, d_ff_shared=0),
     "d_ff_shared=0 must be at least 1"),
    (dict(shared_expert_gate=True), "shared_expert_gate=True needs shared experts"),
    (dict(router_bias=True), "router_bias=True needs a mixture of experts"),
    (dict(attention_sinks=1), "attention_sinks=1 must be True or False"),
    (dict(head_bias="no"), "head_bias='no' must be True or False"),
    (dict(dense_layer_ids=(0,)), "dense_layer_ids=(0,) needs a mixture of experts"),
    (dict(n_experts=2, n_experts_per_tok=1, dense_layer_ids=(0, 2)),
     "dense_layer_ids=(0, 2) must list distinct layers from 0 to 1"),
    (dict(n_experts=2, n_experts_per_tok=1, dense_layer_ids=(1, 1)), "must list distinct layers"),
    (dict(n_experts=2, n_experts_per_tok=1, dense_layer_ids=(1,), n_dense_layers=2),
     "n_dense_layers=2 is not the 1 layers of dense_layer_ids"),
    (dict(norm="groupnorm"), "norm='groupnorm' is not one of layernorm, rmsnorm, nonparametric_layernorm, layernorm_nobias"),
])
def test_model_shape_errors(changes, needle):
    with pytest.raises(ValueError) as e:
        ModelShape(**{**BASE, **changes})
    assert needle in str(e.value)


@pytest.mark.parametrize("changes,needle", [
    (dict(kv_lora_rank=0), "kv_lora_rank=0 must be at least 1"),
    (dict(d_head_v=-1), "d_head_v=-1 must be at least 1"),
    (dict(d_head_rope=-2), "d_head_rope=-2 must be at least 0"),
    (dict(q_lora_rank="big"), "q_lora_rank='big' must be an integer"),
])
def test_latent_attention_errors(changes, needle):
    with pytest.raises(ValueError, match=needle):
        LatentAttention(**{**dict(kv_lora_rank=8, d_head_rope=4, d_head_v=8), **changes})


@pytest.mark.parametrize("name", cl.card_names())
def test_cards_round_trip_through_json(name):
    s = cl.load_card(name)
    assert s.model_type in SUPPORTED_MODEL_TYPES and s.name == name
    again = ModelShape(**json.loads(json.dumps(s.as_dict())))
    assert again == s and again.mla == s.mla
    assert cl.shape_from_config(config_from_shape(s)).with_(dtype=s.dtype) == s


def test_derived_properties():
    s = ModelShape(**BASE, sliding_window=8, n_sliding_layers=1)
    assert (s.sliding_layers, s.with_(n_sliding_layers=None).sliding_layers,
            s.with_(sliding_window=None, n_sliding_layers=None).sliding_layers) == (1, 2, 0)
    assert s.kv_cache_width == 2 * 4 * 16 and s.mlp_matrices == 2
    moe = ModelShape(**BASE, n_experts=4, n_experts_per_tok=2, n_dense_layers=1)
    assert moe.moe_layers == 1 and ModelShape(**BASE).moe_layers == 0
    mla = ModelShape(**{**BASE, "d_head": 24},
                     mla=LatentAttention(kv_lora_rank=16, d_head_rope=8, d_head_v=12))
    assert mla.kv_cache_width == 16 + 8
    assert mla.with_(d_model=128).d_head == 24  # latent attention keeps its own head width


def test_config_from_shape_errors():
    with pytest.raises(CardError, match="unsupported model_type 'bert'"):
        config_from_shape(cl.load_card("gpt2"), "bert")
    with pytest.raises(CardError, match="llama config cannot express.*mlp='gelu'.*'swiglu'"):
        config_from_shape(cl.load_card("gpt2"), "llama")
    with pytest.raises(CardError, match="deepseek_v3 needs latent attention"):
        config_from_shape(cl.load_card("Llama-2-7b-hf"), "deepseek_v3")
    custom = ModelShape(**BASE)
    with pytest.raises(CardError, match="unsupported model_type 'custom'"):
        config_from_shape(custom)
    assert cl.shape_from_config(config_from_shape(custom, "gpt2")) == custom.with_(model_type="gpt2")


def test_model_shape_init_is_a_dataclass_init():
    """ModelShape's own __init__ (faster than the generated one) takes the same arguments."""
    s = ModelShape(64, 2, 4, 96, 100, 32, n_kv_heads=2)
    assert s == ModelShape(**{**BASE, "n_kv_heads": 2}) and s.d_head == 16
    with pytest.raises(TypeError, match="missing required arguments: n_ctx"):
        ModelShape(**{k: v for k, v in BASE.items() if k != "n_ctx"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'width'"):
        ModelShape(**BASE, width=3)
    with pytest.raises(TypeError, match="multiple values for argument 'd_model'"):
        ModelShape(64, **BASE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.d_model = 8
    moe = ModelShape(**BASE, n_experts=2, n_experts_per_tok=1, dense_layer_ids=[1])
    assert moe.dense_layer_ids == (1,) and moe.n_dense_layers == 1 and not moe.is_moe_layer(1)
    first = ModelShape(**BASE, n_experts=2, n_experts_per_tok=1, dense_layer_ids=[0])
    assert first.dense_layer_ids is None and first == ModelShape(**BASE, n_experts=2,
                                                                 n_experts_per_tok=1,
                                                                 n_dense_layers=1)
    assert ModelShape(**json.loads(json.dumps(moe.as_dict()))) == moe
    assert hash(moe) == hash(ModelShape(**moe.as_dict()))
