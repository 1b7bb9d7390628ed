"""course_lib.attention against torch's own attention (float64, seeded random shapes)."""
import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention, scaled_dot_product_attention

DT = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def random_shapes(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        batch, heads, n_q, d_head, d_v = (int(torch.randint(1, hi, (1,), generator=g))
                                          for hi in (4, 5, 12, 17, 9))
        yield g, batch, heads, n_q, d_head, d_v


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_matches_torch(causal):
    for g, b, h, n, d, dv in random_shapes(40, seed=int(causal)):
        n_k = n if causal else n + int(torch.randint(0, 5, (1,), generator=g))
        q = torch.randn(b, h, n, d, generator=g, dtype=DT)
        k = torch.randn(b, h, n_k, d, generator=g, dtype=DT)
        v = torch.randn(b, h, n_k, dv, generator=g, dtype=DT)
        ours, w = scaled_dot_product_attention(q, k, v, causal=causal, return_weights=True)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert ours.shape == ref.shape == (b, h, n, dv)
        torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)
        torch.testing.assert_close(w.sum(-1), torch.ones(b, h, n, dtype=DT), atol=1e-12, rtol=0)
        if causal:  # nothing above the diagonal
            assert torch.all(w.triu(1) == 0)


def test_sdpa_with_bool_mask_matches_torch():
    for g, b, h, n, d, dv in random_shapes(40, seed=2):
        n_k = n + int(torch.randint(0, 5, (1,), generator=g))
        q = torch.randn(b, h, n, d, generator=g, dtype=DT)
        k = torch.randn(b, h, n_k, d, generator=g, dtype=DT)
        v = torch.randn(b, h, n_k, dv, generator=g, dtype=DT)
        mask = torch.rand(b, 1, n, n_k, generator=g) < 0.6  # broadcast over heads
        mask[..., 0] = True  # every query may see at least one key
        ours, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)
        assert torch.all(w[~mask.expand_as(w)] == 0)
        # causal and a mask together: torch takes one mask, so give it their "and"
        if n == n_k:
            ours = scaled_dot_product_attention(q, k, v, causal=True, mask=mask)
            both = mask & torch.ones(n, n, dtype=torch.bool).tril()
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=both)
            torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)


def test_sdpa_scale_is_one_over_sqrt_d_head():
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 5, 64, generator=g, dtype=DT), torch.randn(2, 7, 64, generator=g, dtype=DT)
    v = torch.eye(7, dtype=DT).expand(2, 7, 7)  # values = one-hot, so out = weights
    out = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)


def test_causal_with_fewer_queries_is_the_last_rows():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 3, 9, 8, generator=g, dtype=DT)
    k, v = torch.randn(2, 3, 9, 8, generator=g, dtype=DT), torch.randn(2, 3, 9, 5, generator=g, dtype=DT)
    full = scaled_dot_product_attention(q, k, v, causal=True)
    last = scaled_dot_product_attention(q[:, :, -4:], k, v, causal=True)
    torch.testing.assert_close(last, full[:, :, -4:], atol=1e-12, rtol=0)


def test_sdpa_errors():
    x = torch.zeros(1, 4, 8)
    with pytest.raises(ValueError, match="d_head"):
        scaled_dot_product_attention(x, torch.zeros(1, 4, 6), x)
    with pytest.raises(ValueError, match="positions"):
        scaled_dot_product_attention(x, x, torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match="bool"):
        scaled_dot_product_attention(x, x, x, mask=torch.ones(4, 4))
    with pytest.raises(ValueError, match="n_q <= n_k"):
        scaled_dot_product_attention(x, x[:, :2], x[:, :2], causal=True)


def copy_to_torch_mha(ours: MultiHeadAttention, d_model: int) -> torch.nn.MultiheadAttention:
    ref = torch.nn.MultiheadAttention(d_model, ours.n_heads, bias=True, batch_first=True, dtype=DT)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


@pytest.mark.parametrize("causal", [False, True])
def test_mha_matches_torch_multihead_attention(causal):
    g = torch.Generator().manual_seed(5)
    for d_model, n_heads in ((8, 1), (12, 3), (16, 4), (32, 8)):
        torch.manual_seed(d_model)
        ours = MultiHeadAttention(d_model, n_heads, causal=causal).to(DT)
        ref = copy_to_torch_mha(ours, d_model)
        x = torch.randn(3, 7, d_model, generator=g, dtype=DT)
        # torch's bool attn_mask for nn.MultiheadAttention means True = NOT allowed
        not_allowed = torch.ones(7, 7, dtype=torch.bool).triu(1) if causal else None
        ref_out, ref_w = ref(x, x, x, attn_mask=not_allowed, average_attn_weights=False)
        out = ours.run(x, return_pattern=True)
        torch.testing.assert_close(out.out, ref_out, atol=1e-12, rtol=0)
        torch.testing.assert_close(out.pattern, ref_w, atol=1e-12, rtol=0)


def expand_kv_heads(gqa: MultiHeadAttention, d_model: int) -> MultiHeadAttention:
    """The multi-head layer that GQA is: each kv head's weights copied to its group's heads."""
    mha = MultiHeadAttention(d_model, gqa.n_heads, gqa.n_heads, gqa.d_head,
                             qkv_bias=gqa.q_proj.bias is not None, causal=gqa.causal,
                             rotary=gqa.rotary).to(DT)
    group, d = gqa.n_heads // gqa.n_kv_heads, gqa.d_head
    with torch.no_grad():
        mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(gqa, name), getattr(mha, name)
            # weight (n_kv_heads·d_head, d_model) -> (n_kv_heads, d_head, d_model), repeat each head
            w = src.weight.view(gqa.n_kv_heads, d, d_model).repeat_interleave(group, dim=0)
            dst.weight.copy_(w.reshape(gqa.n_heads * d, d_model))
            if src.bias is not None:
                dst.bias.copy_(src.bias.view(gqa.n_kv_heads, d).repeat_interleave(group, 0).reshape(-1))
    return mha


@pytest.mark.parametrize("n_heads,n_kv_heads", [(4, 4), (4, 2), (4, 1), (6, 3), (8, 2), (8, 1)])
@pytest.mark.parametrize("rot", [False, True])
def test_grouped_query_is_multi_head_with_shared_kv(n_heads, n_kv_heads, rot):
    torch.manual_seed(n_heads * 10 + n_kv_heads)
    d_model = 24
    gqa = MultiHeadAttention(d_model, n_heads, n_kv_heads, d_head=6, rotary=rot).to(DT)
    mha = expand_kv_heads(gqa, d_model)
    assert gqa.k_proj.weight.shape == (n_kv_heads * 6, d_model)  # K/V shrink with n_kv_heads
    assert gqa.q_proj.weight.shape == (n_heads * 6, d_model)     # Q does not
    x = torch.randn(2, 9, d_model, dtype=DT)
    a, b = gqa.run(x, return_pattern=True), mha.run(x, return_pattern=True)
    if n_kv_heads == n_heads:
        assert torch.equal(a.out, b.out) and torch.equal(a.pattern, b.pattern)  # same weights
    torch.testing.assert_close(a.out, b.out, atol=1e-12, rtol=0)
    torch.testing.assert_close(a.pattern, b.pattern, atol=1e-12, rtol=0)
    assert a.kv[0].shape == (2, n_kv_heads, 9, 6)  # the cache holds n_kv_heads heads


def test_multi_query_heads_share_one_key():
    torch.manual_seed(0)
    mqa = MultiHeadAttention(16, 4, n_kv_heads=1, rotary=True).to(DT)
    x = torch.randn(1, 5, 16, dtype=DT)
    out = mqa.run(x, return_pattern=True)
    assert out.kv[0].shape == out.kv[1].shape == (1, 1, 5, 4)
    assert not torch.allclose(out.pattern[0, 0], out.pattern[0, 1])  # different queries
    n_params = sum(p.numel() for p in mqa.parameters())
    assert n_params == 16 * 16 + 2 * 16 * 4 + 16 * 16 + (16 + 2 * 4) + 16


@pytest.mark.parametrize("n_kv_heads,rot,window", [(4, False, None), (2, True, None), (1, True, 3),
                                                   (2, False, 4)])
def test_cached_step_by_step_equals_full(n_kv_heads, rot, window):
    torch.manual_seed(1)
    attn = MultiHeadAttention(16, 4, n_kv_heads, rotary=rot, sliding_window=window).to(DT)
    x = torch.randn(2, 10, 16, dtype=DT)
    full = attn.run(x)
    out, kv = [], None
    for chunk in (x[:, :3], *x[:, 3:].split(1, dim=1)):  # a prompt of 3, then one at a time
        step = attn.run(chunk, past_kv=kv)
        out.append(step.out)
        kv = step.kv
    torch.testing.assert_close(torch.cat(out, 1), full.out, atol=1e-12, rtol=0)
    torch.testing.assert_close(kv[0], full.kv[0], atol=1e-12, rtol=0)
    assert kv[0].shape == (2, n_kv_heads, 10, 4)


def test_sliding_window_pattern():
    torch.manual_seed(2)
    attn = MultiHeadAttention(8, 2, sliding_window=3).to(DT)
    w = attn.run(torch.randn(1, 7, 8, dtype=DT), return_pattern=True).pattern[0, 0]
    i, j = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    allowed = (j <= i) & (i - j < 3)
    assert torch.all(w[~allowed] == 0) and torch.all(w[allowed] > 0)


def test_mha_bad_sizes_raise_value_error():
    with pytest.raises(ValueError, match="n_kv_heads=3"):
        MultiHeadAttention(24, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="d_model=10"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="d_head=3"):
        MultiHeadAttention(12, 4, rotary=True)
    with pytest.raises(ValueError, match="n_heads=0"):
        MultiHeadAttention(12, 0)
    with pytest.raises(ValueError, match="sliding_window=0"):
        MultiHeadAttention(12, 4, sliding_window=0)
    no_bias = MultiHeadAttention(12, 4, qkv_bias=False, out_bias=False)
    assert sum(p.numel() for p in no_bias.parameters()) == 4 * 12 * 12
