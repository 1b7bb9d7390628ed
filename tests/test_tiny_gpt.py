"""course_lib.tiny_gpt: exact parameter counts, the logits of transformers' GPT-2 and Llama with
the same weights, and cached generation equal to uncached."""
import pytest
import torch

import course_lib as cl
from course_lib.tiny_gpt import TinyGPT, kv_cache_bytes, n_params

DT = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def random_shape(g):
    """A small random shape, GPT-2 style or Llama style, with the switches flipped at random."""
    def r(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))
    n_kv = r(1, 4)
    n_heads = n_kv * r(1, 3)
    d_head = 2 * r(1, 6)
    d_model = n_heads * d_head if r(0, 1) else r(4, 40)  # sometimes d_head != d_model / n_heads
    flip = lambda: bool(r(0, 1))  # noqa: E731
    common = dict(d_model=d_model, n_layers=r(1, 4), n_heads=n_heads, d_head=d_head,
                  d_ff=r(1, 64), d_vocab=r(2, 100), n_ctx=r(1, 64), tied_embeddings=flip())
    if r(0, 1):  # GPT-2 style
        return cl.ModelShape(**common, mlp="gelu", norm="layernorm", qkv_bias=flip(), out_bias=flip(),
                             mlp_bias=flip(), positions=("learned", "sinusoidal", "none")[r(0, 2)])
    return cl.ModelShape(**common, n_kv_heads=n_kv, mlp="swiglu", norm="rmsnorm", qkv_bias=flip(),
                         out_bias=False, mlp_bias=flip(), positions=("rotary", "none")[r(0, 1)])


def test_params_equal_counter_on_random_shapes():
    g = torch.Generator().manual_seed(0)
    styles = set()
    for _ in range(100):
        s = random_shape(g)
        styles.add((s.mlp, s.positions, s.tied_embeddings, s.n_kv_heads < s.n_heads))
        assert n_params(TinyGPT(s)) == cl.count_params(s).total, s
    assert len(styles) >= 12  # the loop did cover the switches


@pytest.mark.parametrize("name", ["gpt2", "Llama-2-7b-hf", "Meta-Llama-3-8B"])
def test_params_of_real_cards(name):
    s = cl.load_card(name)
    with torch.device("meta"):  # no memory, no initialisation: just the parameters' shapes
        model = TinyGPT(s)
    assert n_params(model) == cl.count_params(s).total


def test_attention_only_drops_feed_forward_and_second_norm():
    s = cl.gpt2_shape(d_model=16, n_layers=2, n_heads=2, d_vocab=11, n_ctx=8)
    parts = cl.block_params(s)
    dropped = s.n_layers * (parts["feed_forward"] + parts["norms"] // 2)
    assert n_params(TinyGPT(s, attention_only=True)) == cl.count_params(s).total - dropped


def gpt2_from_ours(ours: TinyGPT):
    from transformers import GPT2Config, GPT2LMHeadModel
    s = ours.shape
    cfg = GPT2Config(vocab_size=s.d_vocab, n_positions=s.n_ctx, n_embd=s.d_model, n_layer=s.n_layers,
                     n_head=s.n_heads, n_inner=s.d_ff, activation_function="gelu_new",
                     layer_norm_epsilon=1e-5, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    hf = GPT2LMHeadModel(cfg).to(DT).eval()
    sd = {"transformer.wte.weight": ours.embed.weight, "transformer.wpe.weight": ours.pos_embed.weight,
          "transformer.ln_f.weight": ours.norm_f.weight, "transformer.ln_f.bias": ours.norm_f.bias,
          "lm_head.weight": ours.head.weight}
    for i, b in enumerate(ours.blocks):
        a, p = b.attn, f"transformer.h.{i}."
        # GPT-2's Conv1D stores weights as (in, out): the transpose of nn.Linear's (out, in)
        sd.update({p + "ln_1.weight": b.norm_1.weight, p + "ln_1.bias": b.norm_1.bias,
                   p + "ln_2.weight": b.norm_2.weight, p + "ln_2.bias": b.norm_2.bias,
                   p + "attn.c_attn.weight": torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).T,
                   p + "attn.c_attn.bias": torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]),
                   p + "attn.c_proj.weight": a.out_proj.weight.T, p + "attn.c_proj.bias": a.out_proj.bias,
                   p + "mlp.c_fc.weight": b.mlp.up.weight.T, p + "mlp.c_fc.bias": b.mlp.up.bias,
                   p + "mlp.c_proj.weight": b.mlp.down.weight.T, p + "mlp.c_proj.bias": b.mlp.down.bias})
    hf.load_state_dict(sd, strict=False)
    assert n_params(hf) == n_params(ours)
    return hf


def llama_from_ours(ours: TinyGPT):
    from transformers import LlamaConfig, LlamaForCausalLM
    s = ours.shape
    cfg = LlamaConfig(vocab_size=s.d_vocab, hidden_size=s.d_model, intermediate_size=s.d_ff,
                      num_hidden_layers=s.n_layers, num_attention_heads=s.n_heads,
                      num_key_value_heads=s.n_kv_heads, head_dim=s.d_head,
                      max_position_embeddings=s.n_ctx, rms_norm_eps=1e-5, tie_word_embeddings=False)
    hf = LlamaForCausalLM(cfg).to(DT).eval()
    sd = {"model.embed_tokens.weight": ours.embed.weight, "model.norm.weight": ours.norm_f.weight,
          "lm_head.weight": ours.head.weight}
    for i, b in enumerate(ours.blocks):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": b.norm_1.weight,
                   p + "post_attention_layernorm.weight": b.norm_2.weight,
                   p + "self_attn.q_proj.weight": b.attn.q_proj.weight,
                   p + "self_attn.k_proj.weight": b.attn.k_proj.weight,
                   p + "self_attn.v_proj.weight": b.attn.v_proj.weight,
                   p + "self_attn.o_proj.weight": b.attn.out_proj.weight,
                   p + "mlp.gate_proj.weight": b.mlp.gate.weight, p + "mlp.up_proj.weight": b.mlp.up.weight,
                   p + "mlp.down_proj.weight": b.mlp.down.weight})
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    assert n_params(hf) == n_params(ours)
    return hf


def test_logits_match_transformers_gpt2():
    s = cl.gpt2_shape(d_model=24, n_layers=2, n_heads=3, d_vocab=37, n_ctx=16)
    ours = TinyGPT(s, seed=0).to(DT).init_weights(torch.Generator().manual_seed(0), std=0.3)
    hf = gpt2_from_ours(ours)
    tokens = torch.randint(0, 37, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens), hf(tokens).logits, atol=1e-10, rtol=0)


def test_logits_match_transformers_llama_with_gqa():
    s = cl.llama_shape(d_model=24, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=40, d_vocab=37, n_ctx=16)
    s = s.with_(d_head=8)  # not d_model / n_heads, as some cards do
    ours = TinyGPT(s).to(DT).init_weights(torch.Generator().manual_seed(0), std=0.3)
    hf = llama_from_ours(ours)
    tokens = torch.randint(0, 37, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(tokens).logits
        # transformers computes rotary angles and RMSNorm in float32, so agreement is ~1e-7
        torch.testing.assert_close(ours(tokens), ref, atol=1e-5, rtol=0)
        assert ref.abs().max() > 0.1  # the logits are not all ~0


GEN_SHAPES = [
    cl.gpt2_shape(d_model=16, n_layers=2, n_heads=4, d_vocab=23, n_ctx=24),
    cl.llama_shape(d_model=16, n_layers=3, n_heads=4, n_kv_heads=2, d_ff=24, d_vocab=23, n_ctx=24),
    cl.llama_shape(d_model=16, n_layers=2, n_heads=4, n_kv_heads=1, d_ff=24, d_vocab=23, n_ctx=24),
    cl.gpt2_shape(d_model=16, n_layers=2, n_heads=2, d_vocab=23, n_ctx=24).with_(positions="sinusoidal"),
    cl.gpt2_shape(d_model=16, n_layers=2, n_heads=2, d_vocab=23, n_ctx=24).with_(positions="none"),
    cl.llama_shape(d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, d_vocab=23,
                   n_ctx=24).with_(sliding_window=5),
]


@pytest.mark.parametrize("shape", GEN_SHAPES, ids=lambda s: f"{s.model_type}-{s.positions}-kv{s.n_kv_heads}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cached_generation_equals_uncached(shape, dtype):
    model = TinyGPT(shape).to(dtype).init_weights(torch.Generator().manual_seed(2), std=0.5)
    prompt = torch.randint(0, 23, (3, 5), generator=torch.Generator().manual_seed(3))
    greedy = model.generate(prompt, 15, use_cache=True)
    assert greedy.shape == (3, 20) and torch.equal(greedy[:, :5], prompt)
    assert torch.equal(greedy, model.generate(prompt, 15, use_cache=False))
    sampled = [model.generate(prompt, 15, temperature=1.0, use_cache=c,
                              generator=torch.Generator().manual_seed(4)) for c in (True, False)]
    assert torch.equal(sampled[0], sampled[1])
    assert not torch.equal(sampled[0], greedy)  # sampling did sample
    # and the cached logits are the full pass's logits
    full = model.run(greedy)
    step = model.run(greedy[:, :-1])
    step = model.run(greedy[:, -1:], step.kvs)
    torch.testing.assert_close(step.logits[:, -1], full.logits[:, -1],
                               atol=1e-5 if dtype == torch.float32 else 1e-12, rtol=0)


def test_one_dimensional_prompt_and_seeded_sampling():
    model = TinyGPT(GEN_SHAPES[0], seed=0)
    out = model.generate(torch.tensor([1, 2, 3]), 4, temperature=0.8,
                         generator=torch.Generator().manual_seed(5))
    assert out.shape == (7,)
    again = model.generate(torch.tensor([1, 2, 3]), 4, temperature=0.8,
                           generator=torch.Generator().manual_seed(5))
    assert torch.equal(out, again)
    assert torch.equal(model.generate(torch.tensor([1, 2, 3]), 0), torch.tensor([1, 2, 3]))


def test_causal_mask_hides_the_future():
    s = GEN_SHAPES[0]
    t = torch.randint(0, 23, (2, 10), generator=torch.Generator().manual_seed(6))
    t2 = t.clone()
    t2[:, 6:] = (t2[:, 6:] + 1) % 23  # change the last four tokens
    for causal in (True, False):
        model = TinyGPT(s, causal=causal).to(DT).init_weights(torch.Generator().manual_seed(7), std=0.3)
        a, b = model(t), model(t2)
        same_prefix = torch.allclose(a[:, :6], b[:, :6], atol=1e-12, rtol=0)
        assert same_prefix == causal  # without the mask, earlier positions read later tokens


def test_patterns_and_cache_size():
    s = GEN_SHAPES[1]
    model = TinyGPT(s, seed=0)
    out = model.run(torch.zeros(2, 7, dtype=torch.long), return_patterns=True)
    assert out.patterns.shape == (3, 2, 4, 7, 7)  # (n_layers, batch, n_heads, pos, pos)
    torch.testing.assert_close(out.patterns.sum(-1), torch.ones(3, 2, 4, 7))
    assert torch.all(out.patterns.triu(1) == 0)
    # the cache really holds 2 · n_layers · n_kv_heads · d_head · tokens numbers per sequence
    assert kv_cache_bytes(out.kvs) == 2 * cl.kv_cache_bytes_per_sequence(s, 7, "fp32")
    assert torch.equal(model.attention_patterns(torch.zeros(2, 7, dtype=torch.long)), out.patterns)


def test_errors():
    s = GEN_SHAPES[0]
    model = TinyGPT(s, seed=0)
    with pytest.raises(ValueError, match="d_vocab=23"):
        model(torch.tensor([[1, 23]]))
    with pytest.raises(ValueError, match="n_ctx=24"):
        model(torch.zeros(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match="n_ctx=24"):
        model.generate(torch.zeros(1, 20, dtype=torch.long), 6)  # the 25th token is fed back in
    with pytest.raises(ValueError, match="integer tensor"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="use_cache"):
        TinyGPT(s, causal=False).generate(torch.zeros(1, 3, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(torch.zeros(1, 3, dtype=torch.long), 2, temperature=-1)
    with pytest.raises(ValueError, match="n_new"):
        model.generate(torch.zeros(1, 3, dtype=torch.long), -1)
    # rotary and no positions have no table, so they run past n_ctx
    TinyGPT(GEN_SHAPES[1], seed=0)(torch.zeros(1, 30, dtype=torch.long))
