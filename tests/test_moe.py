"""course_lib.moe: parameters and active parameters match course_lib.params; the output matches
transformers' Mixtral block and, with one expert, its dense MLPs; routing is deterministic."""
import itertools
import re

import pytest
import torch
from transformers import GemmaConfig, GPT2Config, LlamaConfig, MixtralConfig
from transformers.models.gemma.modeling_gemma import GemmaMLP
from transformers.models.gpt2.modeling_gpt2 import GPT2MLP
from transformers.models.llama.modeling_llama import LlamaMLP
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

import course_lib as cl
from course_lib.moe import MoEFeedForward, Routing, active_params_per_token, params_touched
from course_lib.params import mlp_params, router_params_per_layer

DT = torch.float64
D_MODEL, D_FF = 16, 24


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def moe_shape(mlp="swiglu", bias=False, n_experts=8, k=2, d_model=D_MODEL, d_ff=D_FF):
    """A one-layer shape with a mixture-of-experts feed-forward layer."""
    return cl.ModelShape(d_model=d_model, n_layers=1, n_heads=4, d_ff=d_ff, d_vocab=50,
                         n_ctx=16, mlp=mlp, mlp_bias=bias, n_experts=n_experts,
                         n_experts_per_tok=k)


def layer_for(shape, seed=0):
    torch.manual_seed(seed)
    return MoEFeedForward.from_shape(shape).to(DT)


def numel(module):
    return sum(p.numel() for p in module.parameters())


SHAPES = [moe_shape(mlp, bias, e, k) for mlp, bias, (e, k) in itertools.product(
    ("gelu", "swiglu", "geglu"), (True, False), ((8, 2), (4, 1), (5, 3), (1, 1), (3, 3)))]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.mlp}-bias{s.mlp_bias}-"
                                                        f"{s.n_experts}e-top{s.n_experts_per_tok}")
def test_params_and_active_params_match_course_lib(shape):
    layer = layer_for(shape)
    c = cl.count_params(shape)  # one layer, so feed_forward and router are this layer's
    assert numel(layer) == c.feed_forward + c.router
    assert numel(layer) == router_params_per_layer(shape) + shape.n_experts * mlp_params(shape)
    assert numel(layer.router) == router_params_per_layer(shape) == D_MODEL * shape.n_experts
    assert layer.router.bias is None

    x = torch.randn(3, 5, D_MODEL, dtype=DT)
    routing = layer.run(x).routing
    active = active_params_per_token(layer, routing)
    assert active.shape == (3, 5) and active.dtype == torch.int64
    not_ff = c.total - c.feed_forward - c.router  # embeddings, attention, norms, head
    assert active.eq(c.active - not_ff).all()
    assert active.eq(router_params_per_layer(shape)
                     + shape.n_experts_per_tok * mlp_params(shape)).all()


def mixtral_pair(n_experts, k, seed=0):
    """Our layer and transformers' MixtralSparseMoeBlock (float64) with the same weights."""
    cfg = MixtralConfig(hidden_size=D_MODEL, intermediate_size=D_FF, num_local_experts=n_experts,
                        num_experts_per_tok=k, router_jitter_noise=0.0)
    cfg._experts_implementation = "eager"  # the reference loop in modeling_mixtral.py itself
    ours = layer_for(moe_shape("swiglu", False, n_experts, k), seed)
    theirs = MixtralSparseMoeBlock(cfg).to(DT).eval()
    with torch.no_grad():
        theirs.gate.weight.copy_(ours.router.weight)
        for e, expert in enumerate(ours.experts):
            # gate_up_proj[e]: (2·d_ff, d_model), the gate rows first (it is chunked in two)
            theirs.experts.gate_up_proj[e].copy_(torch.cat([expert.gate.weight,
                                                            expert.up.weight]))
            theirs.experts.down_proj[e].copy_(expert.down.weight)  # (d_model, d_ff)
    assert numel(theirs) == numel(ours)
    return ours, theirs


@pytest.mark.parametrize("n_experts,k", [(8, 2), (4, 1), (5, 3), (3, 3)])
def test_matches_transformers_mixtral_block(n_experts, k):
    ours, theirs = mixtral_pair(n_experts, k)
    x = torch.randn(3, 7, D_MODEL, dtype=DT, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = ours.run(x)
        want = theirs(x)
        # transformers: softmax over all experts (in float32), top k, divide by their sum
        _, their_weights, their_experts = theirs.gate(x)
    assert got.out.shape == x.shape
    torch.testing.assert_close(got.out, want, atol=1e-6, rtol=0)
    assert torch.equal(got.routing.experts.reshape(-1, k), their_experts)
    # their weights went through float32, so they agree to float32's precision
    torch.testing.assert_close(got.routing.weights.reshape(-1, k), their_weights.to(DT),
                               atol=1e-6, rtol=0)
    assert want.abs().max() > 1e-2  # the comparison is not between two near-zero outputs


def test_softmax_is_over_the_top_k_logits():
    layer = layer_for(moe_shape(n_experts=6, k=3))
    x = torch.randn(4, 5, D_MODEL, dtype=DT)
    r = layer.run(x).routing
    chosen = r.logits.gather(-1, r.experts)                     # (batch, pos, k)
    assert torch.equal(r.experts, r.logits.topk(3, dim=-1).indices)
    torch.testing.assert_close(r.weights, chosen.softmax(-1), atol=0, rtol=0)
    others = r.logits.scatter(-1, r.experts, float("-inf"))     # unchosen logits only
    assert (chosen.min(-1).values >= others.max(-1).values).all()
    assert (r.weights > 0).all() and (r.weights[..., :-1] >= r.weights[..., 1:]).all()
    torch.testing.assert_close(r.weights.sum(-1), torch.ones(4, 5, dtype=DT))
    # not the softmax over all experts (Switch-style), which would sum to less than 1
    assert (r.logits.softmax(-1).gather(-1, r.experts).sum(-1) < 1 - 1e-3).all()


def dense_reference(mlp, bias):
    """transformers' dense MLP of each kind: GPT-2's (Conv1D, GELU tanh), Llama's (SwiGLU),
    Gemma's (GeGLU, no biases)."""
    if mlp == "gelu":
        return GPT2MLP(D_FF, GPT2Config(n_embd=D_MODEL, activation_function="gelu_new",
                                        resid_pdrop=0.0))
    if mlp == "swiglu":
        return LlamaMLP(LlamaConfig(hidden_size=D_MODEL, intermediate_size=D_FF, mlp_bias=bias,
                                    num_attention_heads=4))
    return GemmaMLP(GemmaConfig(hidden_size=D_MODEL, intermediate_size=D_FF,
                                hidden_activation="gelu_pytorch_tanh"))


@pytest.mark.parametrize("mlp,bias", [("gelu", True), ("gelu", False), ("swiglu", False),
                                      ("swiglu", True), ("geglu", False)])
def test_one_expert_equals_a_dense_mlp(mlp, bias):
    layer = layer_for(moe_shape(mlp, bias, n_experts=1, k=1))
    (e,) = layer.experts
    dense = dense_reference(mlp, bias).to(DT).eval()
    with torch.no_grad():
        if mlp == "gelu":  # Conv1D stores (in, out): the transpose of nn.Linear
            dense.c_fc.weight.copy_(e.up.weight.T)
            dense.c_proj.weight.copy_(e.down.weight.T)
            for theirs, ours in ((dense.c_fc, e.up), (dense.c_proj, e.down)):
                theirs.bias.copy_(ours.bias if bias else torch.zeros_like(theirs.bias))
        else:
            dense.load_state_dict({"gate_proj.weight": e.gate.weight, "up_proj.weight": e.up.weight,
                                   "down_proj.weight": e.down.weight}
                                  | ({"gate_proj.bias": e.gate.bias, "up_proj.bias": e.up.bias,
                                      "down_proj.bias": e.down.bias} if bias else {}))
        x = torch.randn(2, 6, D_MODEL, dtype=DT)
        out = layer.run(x)
        torch.testing.assert_close(out.out, dense(x), atol=1e-12, rtol=0)
    assert out.routing.experts.eq(0).all() and out.routing.weights.eq(1).all()


def test_routing_is_deterministic_and_per_token():
    shape = moe_shape(n_experts=8, k=2)
    a, b = layer_for(shape, seed=3), layer_for(shape, seed=3)
    x = torch.randn(4, 9, D_MODEL, dtype=DT)
    with torch.no_grad():
        first, again, twin = a.run(x), a.run(x.clone()), b.run(x)
        for other in (again, twin):
            assert torch.equal(first.routing.experts, other.routing.experts)
            assert torch.equal(first.routing.weights, other.routing.weights)
            assert torch.equal(first.out, other.out)
        # no capacity limit: a token goes to the same experts alone as in a batch
        alone = a.run(x[2:3, 4:5])
    assert torch.equal(alone.routing.experts[0, 0], first.routing.experts[2, 4])
    torch.testing.assert_close(alone.out[0, 0], first.out[2, 4], atol=1e-12, rtol=0)
    assert first.routing.experts.unique().numel() > 2  # tokens do go to different experts


def test_mixtral_8x7b_total_and_active_from_its_card():
    """46.7B total, 12.9B active (Jiang et al. 2024: "47B", "13B"; the Hugging Face card)."""
    card = cl.load_card("Mixtral-8x7B-v0.1")
    assert (card.n_experts, card.n_experts_per_tok, card.mlp, card.mlp_bias) == (8, 2, "swiglu",
                                                                                 False)
    with torch.device("meta"):
        layer = MoEFeedForward.from_shape(card)  # 1.4 billion parameters, no memory
    assert layer.router.weight.is_meta
    c = cl.count_params(card)
    L = card.n_layers
    assert numel(layer) * L == c.feed_forward + c.router
    not_moe = c.total - c.feed_forward - c.router  # embeddings, attention, norms, head
    total = not_moe + L * numel(layer)
    # every way of sending a token to 2 of the 8 experts touches as many parameters
    pairs = torch.tensor(list(itertools.combinations(range(8), 2)))  # (28, 2)
    routing = Routing(pairs[None], torch.full((1, 28, 2), 0.5), torch.zeros(1, 28, 8))
    active_layer = active_params_per_token(layer, routing)
    assert active_layer.eq(active_layer[0, 0]).all()
    active = not_moe + L * int(active_layer[0, 0])
    assert (total, active) == (c.total, c.active) == (46_702_792_704, 12_879_925_248)
    assert (round(total / 1e9, 1), round(active / 1e9, 1)) == (46.7, 12.9)
    assert params_touched(layer, routing) == numel(layer)  # the 28 pairs use every expert


def test_params_touched_grows_with_the_batch():
    shape = moe_shape(n_experts=8, k=2)
    layer = layer_for(shape)
    with torch.no_grad():
        one = layer.run(torch.randn(1, 1, D_MODEL, dtype=DT)).routing
        many = layer.run(torch.randn(1, 64, D_MODEL, dtype=DT)).routing
    assert params_touched(layer, one) == int(active_params_per_token(layer, one)[0, 0])
    used = many.experts.unique().numel()
    assert used == 8  # 64 random tokens reach every expert
    assert params_touched(layer, many) == numel(layer) == cl.count_params(shape).feed_forward \
        + cl.count_params(shape).router


@pytest.mark.parametrize("kwargs,name", [
    (dict(top_k=3, n_experts=2), "top_k=3"),
    (dict(top_k=0), "top_k=0"),
    (dict(n_experts=0, top_k=1), "n_experts=0"),
    (dict(d_model=0), "d_model=0"),
    (dict(d_ff=2.5), "d_ff=2.5"),
    (dict(top_k=True), "top_k=True"),
    (dict(mlp="relu"), "mlp='relu'"),
    (dict(bias=1), "bias=1"),
])
def test_bad_sizes_raise_value_error_naming_them(kwargs, name):
    args = dict(d_model=8, d_ff=12, n_experts=4, top_k=2) | kwargs
    with pytest.raises(ValueError, match=re.escape(name)):
        MoEFeedForward(**args)


def test_bad_shapes_inputs_and_routings_raise_value_error():
    dense = cl.ModelShape(d_model=8, n_layers=1, n_heads=2, d_ff=12, d_vocab=10, n_ctx=4)
    with pytest.raises(ValueError, match="n_experts=0"):
        MoEFeedForward.from_shape(dense)
    with pytest.raises(ValueError, match="n_shared_experts=1"):
        MoEFeedForward.from_shape(moe_shape().with_(n_shared_experts=1))
    layer = layer_for(moe_shape(n_experts=4, k=2))
    for x in (torch.randn(2, 3, D_MODEL + 1, dtype=DT), torch.randn(3, D_MODEL, dtype=DT)):
        with pytest.raises(ValueError, match="d_model=16"):
            layer.run(x)
    w, z = torch.ones(1, 1, 2), torch.zeros(1, 1, 4)
    for experts in (torch.tensor([[[0, 4]]]), torch.tensor([[[-1, 0]]])):
        with pytest.raises(ValueError, match="outside 0 .. 3"):
            active_params_per_token(layer, Routing(experts, w, z))
    for experts in (torch.tensor([[[0, 1, 2]]]), torch.tensor([[[0.0, 1.0]]])):
        with pytest.raises(ValueError, match="top_k=2"):
            params_touched(layer, Routing(experts, w, z))
