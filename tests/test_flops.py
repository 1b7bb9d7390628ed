"""FLOP formulas against torch's own counter (FlopCounterMode) on real transformers models."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, MixtralConfig

import course_lib as cl


def _measured_flops(cfg, n_tokens: int) -> int:
    # Eager attention: FlopCounterMode counts its two batched matmuls (Q·Kᵀ and weights·V).
    # (Measured on torch 2.13 CPU: the fused SDPA kernel is not counted at all.)
    cfg._attn_implementation = "eager"
    # Likewise the experts: the default grouped-matmul kernel is invisible to the counter, the
    # eager loop over experts is counted.
    cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    tokens = torch.randint(0, cfg.vocab_size, (1, n_tokens))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(tokens)
    return counter.get_total_flops()


CONFIGS = [
    GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=101,
               bos_token_id=0, eos_token_id=0),
    GPT2Config(n_embd=48, n_layer=3, n_head=3, n_inner=80, n_positions=64, vocab_size=97,
               bos_token_id=0, eos_token_id=0),
    LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=101, max_position_embeddings=128),
    LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=1, head_dim=24, vocab_size=101, max_position_embeddings=128),
    MixtralConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                  vocab_size=101, max_position_embeddings=128),
]


@pytest.mark.parametrize("cfg", CONFIGS[:4], ids=lambda c: c.model_type)
@pytest.mark.parametrize("n_tokens", [1, 17, 32])
def test_forward_flops_match_flop_counter(cfg, n_tokens):
    shape = cl.shape_from_config(cfg.to_dict())
    # Eager attention computes the full n×n score matrix and then masks it.
    assert _measured_flops(cfg, n_tokens) == cl.forward_macs(shape, n_tokens, causal=False).flops


def test_moe_forward_flops_count_only_routed_experts():
    cfg = CONFIGS[4]
    shape = cl.shape_from_config(cfg.to_dict())
    n = 16
    expected = cl.forward_macs(shape, n, causal=False).flops
    measured = _measured_flops(cfg, n)
    # transformers' Mixtral runs each expert on exactly the tokens routed to it, so the
    # measured count equals n_experts_per_tok experts per token, plus the router.
    assert measured == expected


def test_flops_are_twice_multiply_adds():
    s = cl.load_card("gpt2")
    m = cl.forward_macs_per_token(s, 1024)
    assert cl.forward_flops_per_token(s, 1024) == 2 * m.total == m.flops


def test_gpt2_block_split_is_2n2d_and_12nd2():
    d, n = 4096, 1000
    s = cl.gpt2_shape(d_model=d, n_layers=1, n_heads=32)
    m = cl.forward_macs(s, n, causal=False)
    assert m.attention_scores == 2 * n * n * d
    assert m.weights == 12 * n * d * d


def test_crossover_at_six_d():
    d = 4096
    s = cl.gpt2_shape(d_model=d, n_layers=1, n_heads=32)
    n = 6 * d
    assert n == 24_576
    m = cl.forward_macs(s, n, causal=False)
    assert m.attention_scores == m.weights
    below = cl.forward_macs(s, n - 1, causal=False)
    assert below.attention_scores < below.weights


def test_causal_counts_half_the_pairs_plus_diagonal():
    s = cl.gpt2_shape(d_model=64, n_layers=2, n_heads=4)
    n = 10
    full = cl.forward_macs(s, n, causal=False).attention_scores
    causal = cl.forward_macs(s, n, causal=True).attention_scores
    assert causal * 2 * n == full * (n + 1)


def test_sliding_window_caps_attended_positions():
    s = cl.load_card("Mistral-7B-v0.1")
    assert s.sliding_window == 4096
    assert cl.forward_macs_per_token(s, 32768).attention_scores == \
        cl.forward_macs_per_token(s, 4096).attention_scores
    n = 5000
    pairs = sum(min(i, 4096) for i in range(1, n + 1))
    assert cl.forward_macs(s, n).attention_scores == 2 * 32 * 32 * 128 * pairs


def test_arithmetic_intensity_decode_and_prefill():
    s = cl.load_card("Llama-2-7b-hf")
    decode = cl.arithmetic_intensity(s, 1, "bf16")
    prefill = cl.arithmetic_intensity(s, 512, "bf16")
    assert 0.9 < decode <= 1.0           # "about 1 FLOP per byte"
    assert prefill == pytest.approx(512 * decode)
    assert 450 < prefill <= 512          # "about 512"


def test_training_is_six_times_active_params():
    for name in ("gpt2", "Mixtral-8x7B-v0.1"):
        s = cl.load_card(name)
        assert cl.training_flops_per_token(s) == 6 * cl.count_params(s).active


@pytest.mark.parametrize("bad", [0, -5])
def test_bad_lengths_raise(bad):
    s = cl.load_card("gpt2")
    with pytest.raises(ValueError, match="must be positive"):
        cl.forward_macs(s, bad)
    with pytest.raises(ValueError, match="must be positive"):
        cl.forward_macs_per_token(s, bad)
