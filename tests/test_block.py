"""course_lib.block: parameters match the counter, zeroed outputs make an exact no-op."""
import itertools

import pytest
import torch

import course_lib as cl
from course_lib.block import FeedForward, TransformerBlock

DT = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def shapes():
    """Small shapes covering both norms, both MLPs, biases on and off, MHA, GQA and MQA."""
    for mlp, norm, bias, (h, kv), pos in itertools.product(
            ("gelu", "swiglu"), ("layernorm", "rmsnorm"), (True, False),
            ((4, 4), (4, 2), (4, 1)), ("learned", "rotary")):
        yield cl.ModelShape(d_model=16, n_layers=1, n_heads=h, n_kv_heads=kv, d_ff=40, d_vocab=10,
                            n_ctx=8, mlp=mlp, norm=norm, qkv_bias=bias, out_bias=not bias,
                            mlp_bias=bias, positions=pos)


@pytest.mark.parametrize("shape", list(shapes()), ids=str)
def test_block_params_match_counter(shape):
    block = TransformerBlock(shape)
    assert sum(p.numel() for p in block.parameters()) == cl.block_params(shape)["total"]
    parts = cl.block_params(shape)
    assert sum(p.numel() for p in block.attn.parameters()) == parts["attention"]
    assert sum(p.numel() for p in block.mlp.parameters()) == parts["feed_forward"]


@pytest.mark.parametrize("attention_only", [False, True])
def test_zeroed_block_returns_its_input_exactly(attention_only):
    g = torch.Generator().manual_seed(0)
    for shape in shapes():
        torch.manual_seed(1)
        block = TransformerBlock(shape, attention_only=attention_only).to(DT)
        x = torch.randn(2, 7, 16, generator=g, dtype=DT) * 3
        assert not torch.allclose(block(x), x)  # a trained-looking block changes x ...
        assert block.zero_output_projections() is block
        assert torch.equal(block(x), x)         # ... a zeroed one returns it bit for bit
        assert torch.equal(block.float()(x.float()), x.float())


def test_pre_norm_residual_structure():
    """x + attn(norm_1(x)), then + mlp(norm_2(.)): zeroing one part leaves the other's sum."""
    shape = cl.gpt2_shape(d_model=16, n_layers=1, n_heads=4, d_vocab=10, n_ctx=8)
    torch.manual_seed(2)
    block = TransformerBlock(shape).to(DT)
    x = torch.randn(1, 5, 16, dtype=DT)
    with torch.no_grad():
        block.mlp.down.weight.zero_()
        block.mlp.down.bias.zero_()
        torch.testing.assert_close(block(x), x + block.attn(block.norm_1(x)), atol=0, rtol=0)
        torch.manual_seed(2)
        block = TransformerBlock(shape).to(DT)
        block.attn.out_proj.weight.zero_()
        block.attn.out_proj.bias.zero_()
        torch.testing.assert_close(block(x), x + block.mlp(block.norm_2(x)), atol=0, rtol=0)


def test_feed_forward_formulas():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 8, dtype=DT)
    gelu = FeedForward(8, 20, "gelu").to(DT)
    h = gelu.up(x)
    tanh_gelu = 0.5 * h * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (h + 0.044715 * h ** 3)))  # GPT-2
    torch.testing.assert_close(gelu(x), gelu.down(tanh_gelu), atol=1e-12, rtol=0)
    swiglu = FeedForward(8, 20, "swiglu", bias=False).to(DT)
    gate = swiglu.gate(x)
    torch.testing.assert_close(swiglu(x), swiglu.down(gate * torch.sigmoid(gate) * swiglu.up(x)),
                               atol=1e-12, rtol=0)
    assert sum(p.numel() for p in swiglu.parameters()) == 3 * 8 * 20


def test_block_cache_step_by_step_equals_full():
    shape = cl.llama_shape(d_model=16, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=24, d_vocab=10, n_ctx=8)
    torch.manual_seed(4)
    block = TransformerBlock(shape).to(DT)
    x = torch.randn(2, 6, 16, dtype=DT)
    full, outs, kv = block.run(x), [], None
    for i in range(6):
        step = block.run(x[:, i:i + 1], past_kv=kv)
        outs.append(step.x)
        kv = step.kv
    torch.testing.assert_close(torch.cat(outs, 1), full.x, atol=1e-12, rtol=0)


def test_block_errors():
    moe = cl.ModelShape(d_model=16, n_layers=1, n_heads=4, d_ff=8, d_vocab=10, n_ctx=8,
                        n_experts=4, n_experts_per_tok=2)
    with pytest.raises(ValueError, match="n_experts=4"):
        TransformerBlock(moe)
    with pytest.raises(ValueError, match="mlp='relu'"):
        FeedForward(8, 16, "relu")
