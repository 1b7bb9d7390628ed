"""Toy tasks, the training loop, lesson 2's induction-head model and the no-mask failure."""
import copy
import math

import pytest
import torch

import course_lib as cl
from course_lib.tasks import (ChainTask, head_scores, induction_score, previous_token_score,
                              repeated_tokens)
from course_lib.tiny_gpt import TinyGPT
from course_lib.training import (INDUCTION_SHAPE, WEIGHTS_DIR, load_induction_model,
                                 next_token_losses, train)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def induction():
    return load_induction_model()


# ---- tasks ---------------------------------------------------------------------------------

def test_repeated_tokens():
    t = repeated_tokens(50, 30, 7, (3, 9), torch.Generator().manual_seed(0))
    assert t.shape == (50, 30) and t.dtype == torch.int64 and 0 <= t.min() and t.max() < 7
    for row in t:  # each row repeats with some period in 3..9
        assert any(torch.equal(row[p:], row[:-p]) for p in range(3, 10))
    fixed = repeated_tokens(4, 12, 100, 5, torch.Generator().manual_seed(0))
    assert torch.equal(fixed[:, 5:], fixed[:, :-5])
    again = repeated_tokens(4, 12, 100, 5, torch.Generator().manual_seed(0))
    assert torch.equal(fixed, again)
    with pytest.raises(ValueError, match="period"):
        repeated_tokens(4, 12, 100, (5, 3))


def test_chain_task():
    task = ChainTask(20, seed=1)
    assert sorted(task.f.tolist()) == list(range(20))  # a permutation: every fact distinct
    seqs = task.sequences(8, 6, torch.Generator().manual_seed(0))
    assert torch.equal(seqs[:, 1:], task.f[seqs[:, :-1]])  # each token is f of the one before
    prompts, answers = task.items(3)
    assert prompts.shape == (20, 1) and answers.shape == (20, 3)
    assert torch.equal(answers[:, 2], task.f[task.f[task.f[prompts[:, 0]]]])
    skewed = ChainTask(20, seed=1, skew=2.0)
    assert math.isclose(skewed.start_probs.sum().item(), 1.0, rel_tol=1e-6)
    assert skewed.start_probs.max() > 10 * skewed.start_probs.min()
    with pytest.raises(ValueError, match="skew"):
        ChainTask(20, skew=-1)


def test_scores_on_made_up_patterns():
    pos, p = 12, 4
    prev = torch.zeros(pos, pos)
    prev[0, 0] = 1
    prev[torch.arange(1, pos), torch.arange(pos - 1)] = 1  # every query looks one back
    assert previous_token_score(prev) == 1
    ind = torch.eye(pos)
    for i in range(p, pos):  # look at the token after the last copy of the current token
        ind[i] = 0
        ind[i, i - p + 1] = 1
    assert induction_score(ind, p) == 1 and previous_token_score(ind) == 0
    assert induction_score(prev, p) == 0
    uniform = torch.ones(pos, pos).tril()
    uniform /= uniform.sum(-1, keepdim=True)
    assert math.isclose(previous_token_score(uniform).item(),
                        sum(1 / (i + 1) for i in range(1, pos)) / (pos - 1), rel_tol=1e-6)
    both = torch.stack([prev, ind])  # (heads, pos, pos) -> one score per head
    assert induction_score(both, p).tolist() == [0, 1]
    with pytest.raises(ValueError, match="period=12"):
        induction_score(ind, 12)


# ---- the training loop ---------------------------------------------------------------------

def test_train_is_seeded_and_learns_a_chain():
    task = ChainTask(16, seed=0)
    shape = cl.gpt2_shape(d_model=16, n_layers=1, n_heads=2, d_vocab=16, n_ctx=8, d_ff=32)
    runs = []
    for _ in range(2):
        model = TinyGPT(shape, seed=0)
        runs.append(train(model, lambda g: task.sequences(16, 8, g), 150, lr=1e-2, progress=False))
    assert runs[0].losses == runs[1].losses  # same seed, same run
    assert runs[0].losses[0] > 2.0 and runs[0].losses[-1] < 0.1  # from ~log 16 to near 0
    prompts, answers = task.items(4)
    assert torch.equal(model.generate(prompts, 4)[:, 1:], answers)  # four facts in a row
    assert task.accuracy(model, 4) == 1.0
    with torch.no_grad():  # erase token 3 (tied head: in and out): chains through it fail
        model.embed.weight[3] = 0
    one, four = task.accuracy(model, 1), task.accuracy(model, 4)
    assert four < one < 1.0


def test_train_errors():
    with pytest.raises(ValueError, match="steps=0"):
        train(TinyGPT(INDUCTION_SHAPE), lambda g: None, 0)


# ---- lesson 2: induction heads -------------------------------------------------------------

def test_shipped_weights_match_their_record(induction):
    model, info = induction
    assert info["recipe"]["seed"] == 0 and (WEIGHTS_DIR / "induction_2l.pt").exists()
    scores = head_scores(model, period=10)
    for name, recorded in info["scores_period_10"].items():
        torch.testing.assert_close(scores[name], torch.tensor(recorded), atol=2e-3, rtol=0)


@pytest.mark.parametrize("period", [10, 5, 16])
def test_trained_model_has_previous_token_and_induction_heads(induction, period):
    """Find the heads by score, not by index; period 5 is shorter than any training period."""
    model, _ = induction
    s = head_scores(model, period=period)
    prev, ind = s["previous_token"], s["induction"]  # (n_layers, n_heads) each
    layer_p, head_p = divmod(prev.argmax().item(), prev.shape[1])
    layer_i, head_i = divmod(ind.argmax().item(), ind.shape[1])
    assert layer_p == 0 and layer_i == 1  # the induction head reads what layer 0 wrote
    assert prev[layer_p, head_p] > 0.9 and ind[layer_i, head_i] > 0.7
    others = prev.flatten().sort(descending=True).values
    assert others[1] < 0.3  # one clear previous-token head
    assert ind[0].max() < 0.15  # no layer-0 head can do induction (nothing to compose with)
    assert ind[layer_p, head_p] < 0.05 and prev[layer_i, head_i] < 0.1  # different jobs


def test_induction_heads_do_the_work(induction):
    model, _ = induction
    t = repeated_tokens(200, 32, 64, 10, torch.Generator().manual_seed(321))
    with torch.no_grad():
        loss = next_token_losses(model, t)       # (200, 31)
        first, repeats = loss[:, :9].mean(), loss[:, 9:].mean()
        assert first > 0.9 * math.log(64)        # the first copy is random: ~log 64 nats
        assert repeats < 0.7                     # the repeats are predicted
        ind = head_scores(model, period=10)["induction"][1]  # layer 1
        ablated = copy.deepcopy(model)
        d_head = INDUCTION_SHAPE.d_head
        for h in torch.nonzero(ind > 0.3).flatten().tolist():  # remove the induction heads
            ablated.blocks[1].attn.out_proj.weight[:, h * d_head:(h + 1) * d_head] = 0
        assert next_token_losses(ablated, t)[:, 9:].mean() > 4 * repeats


# ---- lesson 2: training without the causal mask ------------------------------------------

def test_without_the_mask_training_looks_perfect_and_generation_fails(induction):
    shape = INDUCTION_SHAPE
    peeking = TinyGPT(shape, causal=False, attention_only=True)
    peeking.init_weights(torch.Generator().manual_seed(0), std=0.2)
    result = train(peeking, lambda g: repeated_tokens(32, shape.n_ctx, shape.d_vocab, (8, 16), g),
                   300, lr=1e-2, progress=False)
    assert result.losses[-1] < 0.02  # near-perfect: each position reads the next token
    causal, _ = induction
    t = repeated_tokens(200, 32, 64, 10, torch.Generator().manual_seed(123))
    prompt, truth = t[:, :20], t[:, 20:]  # two copies, then 12 tokens that repeat them
    with torch.no_grad():
        assert next_token_losses(peeking, t).mean() < 0.05
        # the same weights, made to predict without seeing the answer: worse than guessing
        assert next_token_losses(peeking.set_causal(True), t).mean() > math.log(64)
        peeking.set_causal(False)
        assert next_token_losses(causal, t).mean() > 1.0  # the honest model cannot predict copy 1
        peeking_acc = (peeking.generate(prompt, 12, use_cache=False)[:, 20:] == truth).float().mean()
        causal_acc = (causal.generate(prompt, 12)[:, 20:] == truth).float().mean()
    assert causal_acc > 0.6 and peeking_acc < 0.15  # chance is 1/64
