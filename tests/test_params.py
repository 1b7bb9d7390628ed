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
    ("output_head", r"^(lm_head|embed_out)\."),
    ("position_embedding", r"\.wpe\."),
    ("token_embedding", r"\.(wte|embed_tokens|word_embeddings|embed_in)\."),
    # MLA's latent norms, q/k norms and attention sinks included
    ("attention", r"\.(attn|self_attn|self_attention|attention)\."),
    # Mixtral, DeepSeek, Qwen-MoE (Llama's is gate_proj); gpt-oss and PhiMoE's router; the
    # Qwen2-MoE shared expert's gate
    ("router", r"\.mlp\.(gate|router)\.(weight|bias)$|\.mlp\.shared_expert_gate\."),
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
    n_experts = next((getattr(model.config, key) for key in
                      ("num_local_experts", "num_experts", "n_routed_experts")
                      if getattr(model.config, key, None)), None)
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


def assert_experts_match(s: ModelShape, model) -> None:
    """Within the feed-forward part of each layer: the routed experts (``.mlp.experts.``) and
    the shared experts (``.mlp.shared_expert(s).``) separately, against course_lib."""
    from course_lib.params import mlp_params
    routed: dict[int, int] = {}
    shared: dict[int, int] = {}
    for name, p in model.named_parameters():
        m = LAYER.search(name)
        if m and ".mlp.experts." in name:
            routed[int(m.group(1))] = routed.get(int(m.group(1)), 0) + p.numel()
        if m and re.search(r"\.mlp\.shared_experts?\.", name):
            shared[int(m.group(1))] = shared.get(int(m.group(1)), 0) + p.numel()
    for i in range(s.n_layers):
        moe = s.is_moe_layer(i)
        assert routed.get(i, 0) == (s.n_experts * mlp_params(s) if moe else 0), f"layer {i}"
        assert shared.get(i, 0) == (mlp_params(s, s.shared_width) if moe and s.n_shared_experts
                                    else 0), f"layer {i}"


def assert_matches(s: ModelShape, model) -> None:
    assert_experts_match(s, model)
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

# Totals of the same architectures built by transformers on the meta device (the models' own
# config.json, course_lib/cards/sources.toml); tests/test_families.py rebuilds them part by part.
REFERENCE_TOTALS = {
    "gpt2": 124_439_808, "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080,
    "Llama-2-7b-hf": 6_738_415_616, "Llama-2-13b-hf": 13_015_864_320,
    "Llama-2-70b-hf": 68_976_648_192, "Meta-Llama-3-8B": 8_030_261_248,
    "Mistral-7B-v0.1": 7_241_732_096, "Mixtral-8x7B-v0.1": 46_702_792_704,
}
MIXTRAL_ACTIVE = 12_879_925_248  # 2 of 8 experts a layer; "12.9B active" (Jiang et al., 2024)


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


# The cards of the families added in 2026: (total, active) measured on the meta device with
# transformers 5.24 (test_shipped_card_matches_transformers re-checks them, part by part), and
# the rounded figures each publisher gives on its model card or in its paper, (total, active),
# active as the publisher counts it: ``"active"`` with embedding and head, as the course
# does; ``"active-no-embedding"`` without the input embedding (gpt-oss, arxiv.org/abs/2508.10925).
CARDS_2026 = {
    "Qwen3-8B": ((8_190_735_360, 8_190_735_360), (8.2e9, None)),
    "Qwen3-30B-A3B": ((30_532_122_624, 3_353_032_704), (30.5e9, 3.3e9)),
    "Qwen1.5-MoE-A2.7B": ((14_315_784_192, 2_689_173_504), (14.3e9, 2.7e9)),
    "gemma-3-1b-it": ((999_885_952, 999_885_952), (1e9, None)),
    "gpt-oss-20b": ((20_914_757_184, 4_187_440_704), (20.91e9, 3.61e9)),
    "DeepSeek-V2-Lite": ((15_706_484_224, 2_661_150_208), (15.7e9, None)),
    "GLM-4.5-Air": ((106_852_245_504, 13_424_123_904), (106e9, None)),  # no MTP layer built
    "OLMo-2-1124-7B": ((7_298_617_344, 7_298_617_344), (7.3e9, None)),
    "SmolLM3-3B": ((3_075_098_624, 3_075_098_624), (3.08e9, None)),
    "granite-3.0-8b-base": ((8_170_848_256, 8_170_848_256), (8.1e9, None)),
    "phi-2": ((2_779_683_840, 2_779_683_840), (2.7e9, None)),
    "pythia-1b": ((1_011_781_632, 1_011_781_632), (1.0e9, None)),
    "starcoder2-3b": ((3_030_371_328, 3_030_371_328), (3e9, None)),
    "c4ai-command-r-v01": ((34_980_831_232, 34_980_831_232), (35e9, None)),
    "OLMoE-1B-7B-0924": ((6_919_161_856, 1_282_017_280), (6.9e9, 1.3e9)),
    "Phi-3.5-MoE-instruct": ((41_873_153_344, 6_640_999_744), (41.9e9, 6.6e9)),
}


@pytest.mark.parametrize("name", sorted(CARDS_2026))
def test_2026_card_sizes(name):
    (total, active), (published_total, published_active) = CARDS_2026[name]
    p = count_params(cl.load_card(name))
    assert (p.total, p.active) == (total, active)
    assert p.total == pytest.approx(published_total, rel=0.04)
    if published_active is not None:
        ours = p.active - p.token_embedding if name == "gpt-oss-20b" else p.active
        assert ours == pytest.approx(published_active, rel=0.04)


def test_every_card_has_a_total():
    assert set(cl.card_names()) == set(REFERENCE_TOTALS) | set(NEW_CARD_TOTALS) | set(CARDS_2026)


def test_deepseek_v3_active():
    """DeepSeek-V3 paper (arxiv.org/abs/2412.19437): 671B total, 37B activated per token."""
    p = count_params(cl.load_card("DeepSeek-V3"))
    assert p.active == 37_552_282_624
    assert p.total - p.active == 58 * (256 - 8) * 3 * 7168 * 2048  # 58 MoE layers


def test_gpt2_embedding_share():
    p = count_params(cl.load_card("gpt2"))
    assert p.embedding == 39_383_808  # 50257·768 + 1024·768 (token and position tables)
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
    s = random_2026_shape(family, rng, rotary, divisible, bias)
    return s.with_(d_ff_dense=None) if s.d_ff_dense == s.d_ff else s  # the canonical form


def _experts(rng: random.Random, n_max: int = 6) -> dict:
    n = rng.randint(1, n_max)
    return dict(n_experts=n, n_experts_per_tok=rng.randint(1, n))


def _dense_ids(rng: random.Random, L: int) -> dict:
    """Dense layers anywhere (Qwen-MoE's mlp_only_layers), with their own width."""
    ids = tuple(i for i in range(L) if rng.random() < 0.3)
    return dict(dense_layer_ids=ids, d_ff_dense=rng.randint(4, 80)) if ids else {}


def _all_or_none(rng: random.Random) -> dict:
    return dict(sliding_window=rng.randint(4, 64)) if rng.random() < 0.5 else {}


def random_2026_shape(family: str, rng: random.Random, rotary: dict, divisible: int,
                      bias: bool) -> ModelShape:
    """Random small shapes of the families added in 2026 (each switch the family has)."""
    L = rotary["n_layers"]
    plain = dict(rotary, d_model=divisible, d_head=None)  # families without head_dim
    biased = dict(qkv_bias=bias, out_bias=bias)
    norm_qk = rng.choice([None, "head"])
    if family == "qwen3":
        return ModelShape(**dict(rotary, **biased), qk_norm="head", **_window(rng, L),
                          model_type=family)
    if family == "qwen3_moe":
        return ModelShape(**dict(rotary, **biased), qk_norm="head", **_experts(rng),
                          **_dense_ids(rng, L), **_all_or_none(rng), model_type=family)
    if family == "qwen2_moe":
        return ModelShape(**dict(plain, qkv_bias=True), **_experts(rng), n_shared_experts=1,
                          d_ff_shared=rng.randint(4, 80), shared_expert_gate=True,
                          **_dense_ids(rng, L), **_window(rng, L), model_type=family)
    if family == "gemma3_text":  # its config class wants n_heads | d_model even with head_dim
        return ModelShape(**dict(rotary, d_model=divisible, mlp="geglu", **biased), norms_per_block=4,
                          qk_norm="head", **_window(rng, L), model_type=family)
    if family == "gpt_oss":
        return ModelShape(**dict(rotary, mlp_bias=True, **biased), **_experts(rng),
                          router_bias=True, attention_sinks=True, **_window(rng, L),
                          model_type=family)
    if family == "deepseek_v2":
        n_dense = rng.randint(0, L)
        rope = rng.choice([2, 4, 8])
        # an even latent: DeepSeek-V2's complex rotary needs an even stride to run (not to count)
        mla = LatentAttention(kv_lora_rank=2 * rng.randint(1, 12), d_head_rope=rope,
                              d_head_v=rng.randint(1, 12),
                              q_lora_rank=rng.choice([0, rng.randint(2, 24)]))
        return ModelShape(**dict(rotary, d_model=divisible, d_head=rope + rng.choice([2, 4, 6]),
                                 **biased, n_kv_heads=rotary["n_heads"]), mla=mla,
                          **_experts(rng),
                          n_shared_experts=rng.randint(0, 2), n_dense_layers=n_dense,
                          d_ff_dense=rng.randint(4, 80) if n_dense else None, model_type=family)
    if family == "glm4_moe":  # at least 2 experts: its router takes a top-2 in each group
        n_dense = rng.randint(0, L)
        n = rng.randint(2, 10)
        return ModelShape(**dict(rotary, qkv_bias=bias), qk_norm=norm_qk, n_experts=n,
                          n_experts_per_tok=rng.randint(1, n),
                          n_shared_experts=rng.randint(0, 2), n_dense_layers=n_dense,
                          d_ff_dense=rng.randint(4, 80) if n_dense else None, model_type=family)
    if family == "olmo2":
        return ModelShape(**dict(plain, **biased), qk_norm="heads", model_type=family)
    if family == "smollm3":
        return ModelShape(**dict(plain, **biased, mlp_bias=rng.random() < 0.5),
                          **_window(rng, L), model_type=family)
    if family == "granite":
        return ModelShape(**dict(plain, **biased, mlp_bias=rng.random() < 0.5), model_type=family)
    if family == "phi":
        return ModelShape(**dict(plain, mlp="gelu", norm="layernorm", qkv_bias=True,
                                 out_bias=True, mlp_bias=True), head_bias=True,
                          norms_per_block=1, parallel_attn=True,
                          qk_norm=norm_qk, model_type=family)
    if family == "gpt_neox":
        return ModelShape(**dict(plain, n_kv_heads=None, mlp="gelu", norm="layernorm",
                                 **biased, mlp_bias=True), parallel_attn=rng.random() < 0.5,
                          model_type=family)
    if family == "starcoder2":
        return ModelShape(**dict(plain, mlp="gelu", norm="layernorm", **biased, mlp_bias=bias),
                          **_all_or_none(rng), model_type=family)
    if family == "cohere":
        return ModelShape(**dict(plain, norm="layernorm_nobias", **biased), norms_per_block=1,
                          parallel_attn=True, qk_norm=rng.choice([None, "heads"]),
                          model_type=family)
    if family == "olmoe":
        return ModelShape(**dict(plain, **biased), qk_norm="heads", **_experts(rng),
                          model_type=family)
    if family == "phimoe":  # top-2: PhiMoE's sparsemixer router runs only with 2
        return ModelShape(**dict(plain, norm="layernorm", **biased), n_experts=rng.randint(2, 6),
                          n_experts_per_tok=2,
                          head_bias=rng.random() < 0.5, **_all_or_none(rng), model_type=family)
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
    # the families of 2026
    for f in ("qwen3_moe", "qwen2_moe"):
        assert seen(f, lambda s: s.dense_layer_ids is not None and s.d_ff_dense is not None)
        assert seen(f, lambda s: s.moe_layers == s.n_layers)
    assert seen("qwen2_moe", lambda s: s.d_ff_shared != s.d_ff and s.shared_expert_gate)
    for f in ("qwen3", "qwen2_moe", "gemma3_text", "gpt_oss", "smollm3"):
        assert seen(f, lambda s: 0 < s.sliding_layers < s.n_layers), f
    for f in ("qwen3_moe", "starcoder2", "phimoe"):
        assert seen(f, lambda s: s.sliding_layers == s.n_layers > 0), f
    assert seen("gpt_oss", lambda s: s.n_experts_per_tok < s.n_experts)
    for f in ("deepseek_v2", "glm4_moe"):
        assert seen(f, lambda s: 0 < s.n_dense_layers < s.n_layers), f
        assert seen(f, lambda s: s.n_shared_experts > 0), f
    assert seen("deepseek_v2", lambda s: s.mla.q_lora_rank == 0)
    assert seen("deepseek_v2", lambda s: s.mla.q_lora_rank > 0)
    for f, kind in (("glm4_moe", "head"), ("phi", "head"), ("cohere", "heads")):
        assert seen(f, lambda s: s.qk_norm == kind) and seen(f, lambda s: s.qk_norm is None), f
    for f in ("qwen3", "gpt_oss", "olmo2", "granite", "starcoder2", "cohere", "phimoe", "olmoe"):
        assert seen(f, lambda s: s.qkv_bias) and seen(f, lambda s: not s.qkv_bias), f
    assert seen("gpt_neox", lambda s: s.parallel_attn) and seen("gpt_neox", lambda s: not s.parallel_attn)
    assert seen("phimoe", lambda s: s.head_bias) and seen("phimoe", lambda s: not s.head_bias)
    assert seen("qwen3", lambda s: s.d_head * s.n_heads != s.d_model)


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
# The families of 2026: every key their config class has a default for, sizes aside (a card
# with none of its sizes is tested in tests/test_families.py).
SIZE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "max_position_embeddings")
OPTIONAL_KEYS.update({family: [k for k in defaults if k not in SIZE_KEYS]
                      for family, defaults in cl.cards.FAMILY_DEFAULTS.items()})
# Keys a config class lets be null, read as "the usual" (heads, d_model / n_heads, no window).
NULLABLE = {"num_key_value_heads": ("llama", "qwen2", "phi3", "olmo", "deepseek_v3"),
            "num_kv_heads": ("falcon",), "ffn_hidden_size": ("falcon",),
            "head_dim": ("llama", "mistral", "mixtral"),
            "sliding_window": ("mistral", "mixtral", "phi3", "gemma2"),
            "n_inner": ("gpt2",), "q_lora_rank": ("deepseek_v3", "deepseek_v2")}
for _family, _defaults in cl.cards.FAMILY_DEFAULTS.items():
    if "num_key_value_heads" in _defaults:
        NULLABLE["num_key_value_heads"] += (_family,)
    if "sliding_window" in _defaults:
        NULLABLE["sliding_window"] += (_family,)
# Defaults too big for a quick meta build, replaced by small values that keep them absent.
SMALL_DEFAULTS = {"deepseek_v3": dict(n_routed_experts=4, num_experts_per_tok=2)}


OLD_FAMILIES = cl.cards.FAMILIES_2023  # their keys required
REFUSALS = ("does not divide", "must equal n_heads", "is more than n_experts", "has no default")


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_defaults_match_transformers(family):
    built = refused = 0
    seeds = 16 if family in OLD_FAMILIES else 24  # more: defaults of 2026 refuse more often
    for seed in range(seeds):
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
            # d_model // n_heads, a default kv head count that does not divide the heads, a
            # default top-k above the experts there are, or no top-k at all (DeepSeek-V2's
            # default is null): models that build but cannot run.
            assert any(m in str(e) for m in REFUSALS), e
            try:  # transformers' filled-in config spells the floored head_dim out
                assert_matches(cl.shape_from_config(full), model)
            except CardError as e_full:
                assert any(m in str(e_full) for m in REFUSALS + ("n_kv_heads",)), e_full
            refused += 1
            continue
        assert cl.shape_from_config(full).with_(dtype=None) == s.with_(dtype=None), (seed, cfg)
        assert_matches(s, model)
        built += 1
    assert built >= 8, f"only {built} of {seeds} random {family} configs checked ({refused} refused)"
