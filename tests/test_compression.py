"""course_lib.compression: pruning feed-forward neurons (against zeroing the same neurons in the
full model), and lesson 3's shipped chain model against its training record."""
import copy

import pytest
import torch

import course_lib as cl
from course_lib.compression import (CHAIN_SHAPE, WEIGHTS_DIR, chain_task, load_chain_model,
                                    neuron_scores, prune_feed_forward, share_kv_heads)
from course_lib.tiny_gpt import TinyGPT


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def chain():
    return load_chain_model()


def random_model(n_layers=2, d_ff=24, seed=0):
    shape = cl.gpt2_shape(d_model=16, n_layers=n_layers, n_heads=4, d_vocab=20, n_ctx=8, d_ff=d_ff)
    model = TinyGPT(shape, seed=seed).double()
    with torch.no_grad():  # biases and norms away from their initial 0 and 1
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()),
                                     dtype=p.dtype))
    return model


def test_scores_by_hand():
    mlp = random_model().blocks[0].mlp
    s = neuron_scores(mlp)
    assert s.shape == (24,)
    for i in range(24):
        up = sum(w * w for w in mlp.up.weight[i].tolist()) ** 0.5
        down = sum(w * w for w in mlp.down.weight[:, i].tolist()) ** 0.5
        assert s[i].item() == pytest.approx(up * down, rel=1e-12)


@pytest.mark.parametrize("k", [1, 7, 23])
def test_pruning_equals_zeroing_the_dropped_neurons(k):
    model = random_model()
    before = copy.deepcopy(model.state_dict())
    pruned = prune_feed_forward(model, k)
    masked = copy.deepcopy(model)
    with torch.no_grad():
        for block in masked.blocks:
            drop = neuron_scores(block.mlp).argsort()[:24 - k]  # the smallest scores
            block.mlp.up.weight[drop] = 0
            block.mlp.up.bias[drop] = 0
            block.mlp.down.weight[:, drop] = 0
    tokens = torch.randint(0, 20, (3, 8), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(pruned(tokens), masked(tokens), atol=1e-12, rtol=0)
    assert all(torch.equal(before[n], p) for n, p in model.state_dict().items())  # untouched
    for block in pruned.blocks:
        assert block.mlp.up.out_features == k and block.mlp.down.in_features == k
    d = model.shape.d_model
    assert cl.n_params(model) - cl.n_params(pruned) == 2 * (24 - k) * (2 * d + 1)
    assert cl.n_params(pruned) == cl.count_params(model.shape.with_(d_ff=k)).total
    assert pruned.shape == model.shape.with_(d_ff=k) and model.shape.d_ff == 24


def test_keeping_every_neuron_changes_nothing():
    model = random_model()
    tokens = torch.randint(0, 20, (3, 8), generator=torch.Generator().manual_seed(2))
    assert torch.equal(prune_feed_forward(model, 24)(tokens), model(tokens))


def test_errors():
    model = random_model()
    for k in (0, 25, 2.0, True):
        with pytest.raises(ValueError, match="k="):
            prune_feed_forward(model, k)
    swiglu = cl.FeedForward(8, 16, "swiglu", bias=False)
    with pytest.raises(ValueError, match="swiglu"):
        neuron_scores(swiglu)


def test_shipped_weights_match_their_record(chain):
    model, info = chain
    assert (WEIGHTS_DIR / "chain_1l.pt").exists() and model.shape == CHAIN_SHAPE
    assert cl.n_params(model) == cl.count_params(CHAIN_SHAPE).total == 11_168
    task = chain_task()
    for n, recorded in info["pruned_accuracy"].items():
        measured = [round(task.accuracy(prune_feed_forward(model, k), int(n)), 4)
                    for k in info["pruned_widths"]]
        assert measured == recorded


def test_the_facts_live_in_the_feed_forward_layer(chain):
    """What lesson 3 says of its model: every fact right; without the feed-forward layer almost
    none; without attention all of them; and 8-step items fall faster than 1-step items."""
    model, info = chain
    task = chain_task()
    assert task.accuracy(model, 1) == task.accuracy(model, 8) == 1.0
    no_ff, no_attn = copy.deepcopy(model), copy.deepcopy(model)
    no_ff.blocks[0].zero_output_projections()
    with torch.no_grad():
        no_ff.blocks[0].attn.out_proj.load_state_dict(model.blocks[0].attn.out_proj.state_dict())
        no_attn.blocks[0].attn.out_proj.weight.zero_()
        no_attn.blocks[0].attn.out_proj.bias.zero_()
    assert task.accuracy(no_ff, 1) < 0.05 and task.accuracy(no_attn, 8) == 1.0
    one, eight = info["pruned_accuracy"]["1"], info["pruned_accuracy"]["8"]
    assert all(e <= o for o, e in zip(one, eight))
    assert any(o >= 0.9 and e <= 0.6 for o, e in zip(one, eight))  # a short test passes, a long fails


def test_shared_kv_heads_are_the_group_means():
    """Against a model that keeps every head but gives each group the same (mean) K and V."""
    shape = cl.gpt2_shape(d_model=24, n_layers=2, n_heads=6, d_vocab=20, n_ctx=8)
    model = TinyGPT(shape, seed=3).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(7),
                                     dtype=p.dtype))
    tokens = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(4))
    for n_kv in (6, 3, 2, 1):
        shared = share_kv_heads(model, n_kv)
        reference = copy.deepcopy(model)
        g = 6 // n_kv
        with torch.no_grad():
            for block in reference.blocks:
                for proj in (block.attn.k_proj, block.attn.v_proj):
                    for t in (proj.weight, proj.bias):
                        for j in range(n_kv):  # heads j·g .. j·g+g-1 share their mean
                            rows = slice(j * g * 4, (j + 1) * g * 4)  # d_head = 4
                            mean = t[rows].reshape(g, 4, *t.shape[1:]).mean(0)
                            t[rows] = mean.repeat(g, *([1] * (t.dim() - 1)))
        torch.testing.assert_close(shared(tokens), reference(tokens), atol=1e-12, rtol=0)
        lost = (6 - n_kv) * 4 * 2 * (24 + 1) * 2  # K and V, weights and biases, 2 layers
        assert cl.n_params(model) - cl.n_params(shared) == lost
        assert cl.n_params(shared) == cl.count_params(shape.with_(n_kv_heads=n_kv)).total
    with pytest.raises(ValueError, match="n_kv_heads=4"):
        share_kv_heads(model, 4)
