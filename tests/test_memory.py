"""Weight bytes, KV cache and requests that fit: the module's examples and edge cases."""
import pytest
import torch

import course_lib as cl


def seven_b(n_kv_heads=32):
    return cl.load_card("Llama-2-7b-hf").with_(n_kv_heads=n_kv_heads)


def test_kv_cache_four_gib_at_8192_tokens():
    # 2 × 32 layers × 32 kv heads × 128 × 8,192 tokens × 2 bytes = 4.0 GiB (module, lesson 5).
    s = seven_b()
    n = cl.kv_cache_bytes_per_sequence(s, 8192, "bf16")
    assert n == 2 * 32 * 32 * 128 * 8192 * 2 == 4 * cl.GiB


def test_requests_that_fit_16_and_68():
    # 80 GiB, 7B-class shape, 8,192 tokens, 16-bit: 16 requests with 32 kv heads, 68 with 8
    # (the 8-head variant also has smaller K/V projections, so its weights shrink too).
    assert cl.requests_that_fit(seven_b(32), 8192, 80 * cl.GiB, "bf16") == 16
    assert cl.requests_that_fit(seven_b(8), 8192, 80 * cl.GiB, "bf16") == 68
    assert cl.weight_bytes(seven_b(8), "bf16") < cl.weight_bytes(seven_b(32), "bf16")


def test_gqa_cache_is_a_quarter():
    assert cl.kv_cache_bytes_per_token(seven_b(8), "bf16") * 4 == \
        cl.kv_cache_bytes_per_token(seven_b(32), "bf16")


def test_kv_cache_matches_transformers_dynamic_cache():
    """The bytes a real transformers cache holds after a prefill equal the formula."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                      num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                      vocab_size=101, max_position_embeddings=128)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    n = 21
    with torch.no_grad():
        out = model(torch.randint(0, 101, (1, n)), use_cache=True)
    cache = out.past_key_values
    held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    s = cl.shape_from_config(cfg.to_dict())
    assert held == cl.kv_cache_bytes_per_sequence(s, n, "fp32")


def test_sliding_window_caps_the_cache():
    s = cl.load_card("Mistral-7B-v0.1")
    per_token = cl.kv_cache_bytes_per_token(s, "bf16")
    assert per_token == 2 * 32 * 8 * 128 * 2
    assert cl.kv_cache_bytes_per_sequence(s, 1000, "bf16") == 1000 * per_token
    assert cl.kv_cache_bytes_per_sequence(s, 32768, "bf16") == 4096 * per_token


def test_dtype_defaults_to_card_then_fp32():
    assert cl.weight_bytes(cl.load_card("Mistral-7B-v0.1")) == 2 * 7_241_732_096  # bfloat16 card
    assert cl.weight_bytes(cl.load_card("gpt2")) == 4 * 124_439_808  # no torch_dtype: fp32


@pytest.mark.parametrize("dtype,nbytes", [("fp32", 4), ("bf16", 2), ("fp16", 2), ("int8", 1),
                                          ("int4", 0.5), ("float16", 2), ("torch.bfloat16", 2)])
def test_weight_bytes_by_dtype(dtype, nbytes):
    s = cl.load_card("Llama-2-7b-hf")
    assert cl.weight_bytes(s, dtype) == 6_738_415_616 * nbytes


def test_weights_alone_too_big_fit_nothing():
    s = cl.load_card("Llama-2-70b-hf")
    assert cl.requests_that_fit(s, 4096, 80 * cl.GiB, "bf16") == 0
    assert cl.requests_that_fit(s, 4096, 2 * 80 * cl.GiB, "bf16") > 0


def test_bad_inputs_raise():
    s = seven_b()
    with pytest.raises(ValueError, match="unknown dtype"):
        cl.weight_bytes(s, "fp12")
    with pytest.raises(ValueError, match="memory_bytes"):
        cl.requests_that_fit(s, 8192, 0)
    with pytest.raises(ValueError, match="n_tokens"):
        cl.requests_that_fit(s, 0, 80 * cl.GiB)


@pytest.mark.parametrize("text,expected", [("80GiB", 80 * 2**30), ("80 GB", 80 * 10**9),
                                           ("141GB", 141 * 10**9), ("1.5TiB", int(1.5 * 2**40)),
                                           ("1024", 1024)])
def test_parse_size(text, expected):
    assert cl.parse_size(text) == expected


@pytest.mark.parametrize("text", ["80XB", "", "-3GB", "GiB", "0GB"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        cl.parse_size(text)


def test_cache_by_layer_kind_adds_up():
    """Gemma 2 9B: 21 sliding layers of 4,096 tokens and 21 full ones; the rows add up to the
    per-token and per-sequence figures, and a window shorter than the sequence caps its rows."""
    s = cl.load_card("gemma-2-9b")
    rows = {r.kind: r for r in cl.kv_cache_by_layer_kind(s, 8192, "bf16")}
    assert set(rows) == {"full_attention", "sliding_attention"}
    width = 2 * s.n_kv_heads * s.d_head
    assert (rows["full_attention"].n_layers, rows["sliding_attention"].n_layers) == (21, 21)
    assert rows["sliding_attention"].tokens_kept == 4096 and rows["full_attention"].tokens_kept == 8192
    assert rows["sliding_attention"].bytes_per_sequence == 21 * width * 4096 * 2
    assert sum(r.bytes_per_sequence for r in rows.values()) == \
        cl.kv_cache_bytes_per_sequence(s, 8192, "bf16")
    assert sum(r.bytes_per_token for r in rows.values()) == cl.kv_cache_bytes_per_token(s, "bf16")
    (only,) = cl.kv_cache_by_layer_kind(cl.load_card("Llama-2-7b-hf"), 100, "bf16")
    assert only.kind == "full_attention" and only.bytes_per_sequence == 100 * 2 * 32 * 4096 * 2
    (latent,) = cl.kv_cache_by_layer_kind(cl.load_card("DeepSeek-V3"), 10, "bf16")
    assert latent.kind == "latent_attention" and latent.numbers_per_token == 576
    with pytest.raises(ValueError, match="n_tokens=-1"):
        cl.kv_cache_by_layer_kind(s, -1)
    with pytest.raises(ValueError, match="unknown dtype"):
        cl.kv_cache_by_layer_kind(s, 8, "fp12")
