"""course_lib.positions against transformers (XLM's sinusoidal table, Llama's rotary embedding),
against the papers' formulas written out, and the properties lesson 4 teaches: a fixed offset
is a fixed rotation of the sinusoidal table; a rotary score depends only on m - n; rotation
keeps norms.  Float64 unless a test is about float32."""
import math

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings

from course_lib.positions import apply_rotary, rotary_cos_sin, sinusoidal_positions

DT = torch.float64
EPS32 = torch.finfo(torch.float32).eps  # 2^-23


# ------------------------------------------------------------------ sinusoidal (Vaswani 3.5)

@pytest.mark.parametrize("n_ctx, d_model", [(1, 2), (7, 5), (50, 16), (128, 64), (33, 31)])
def test_sinusoidal_matches_transformers_xlm(n_ctx, d_model):
    # XLM computes in numpy float64 and stores float32: one float32 rounding, <= 2^-25 for |v| <= 1.
    ref = create_sinusoidal_embeddings(n_ctx, d_model, torch.empty(n_ctx, d_model))
    ours = sinusoidal_positions(n_ctx, d_model, dtype=DT)
    assert ours.shape == (n_ctx, d_model) and ours.dtype == DT
    torch.testing.assert_close(ours, ref.to(DT), atol=2.0**-25, rtol=0)


def test_sinusoidal_formula_written_out():
    n_ctx, d_model, base = 40, 12, 10000.0
    pe = sinusoidal_positions(n_ctx, d_model, base=base, dtype=DT)
    for pos in range(n_ctx):
        for i in range(d_model // 2):
            angle = pos / base ** (2 * i / d_model)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    # Position 0 is (0, 1, 0, 1, ...); the first pair has wavelength 2π (period of 2π positions).
    assert pe[0].tolist() == [0.0, 1.0] * (d_model // 2)
    assert pe[:, 0].tolist() == pytest.approx([math.sin(p) for p in range(n_ctx)], abs=1e-12)


def test_sinusoidal_other_base_and_dtype():
    pe = sinusoidal_positions(10, 8, base=100.0, dtype=DT)
    assert pe[3, 2].item() == pytest.approx(math.sin(3 / 100 ** (2 / 8)), abs=1e-12)
    pe32 = sinusoidal_positions(10, 8)
    assert pe32.dtype == torch.float32
    torch.testing.assert_close(pe32, sinusoidal_positions(10, 8, dtype=DT).float(), atol=0, rtol=0)


@pytest.mark.parametrize("k", [1, 3, 17, 100])
def test_sinusoidal_offset_is_a_fixed_rotation(k):
    """The paper's reason: PE[pos + k] is a linear function of PE[pos] that depends on k only."""
    n_ctx, d_model = 300, 32
    pe = sinusoidal_positions(n_ctx, d_model, dtype=DT)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=DT) / d_model)  # (d_model/2,)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    m_k = torch.zeros(d_model, d_model, dtype=DT)
    # (sin(a + b), cos(a + b)) = [[cos b, sin b], [-sin b, cos b]] (sin a, cos a)
    m_k[0::2, 0::2], m_k[0::2, 1::2] = torch.diag(c), torch.diag(s)
    m_k[1::2, 0::2], m_k[1::2, 1::2] = torch.diag(-s), torch.diag(c)
    shifted = pe[:-k] @ m_k.T  # (n_ctx - k, d_model)
    torch.testing.assert_close(shifted, pe[k:], atol=1e-10, rtol=0)
    assert (pe[k:] - pe[:-k]).abs().max() > 0.1  # the shift does move the rows
    # Hence the dot product of two rows depends only on their distance.
    gram = pe @ pe.T  # (n_ctx, n_ctx)
    torch.testing.assert_close(torch.diagonal(gram, k), torch.full((n_ctx - k,), gram[k, 0].item(),
                                                                   dtype=DT), atol=1e-9, rtol=0)


def test_sinusoidal_rows_are_distinct():
    pe = sinusoidal_positions(1024, 64, dtype=DT)
    dist = torch.cdist(pe, pe) + torch.eye(1024, dtype=DT) * 1e9
    assert dist.min() > 0.1  # no two positions share an encoding
    assert pe.abs().max() <= 1.0


# ------------------------------------------------------------------ rotary (Su et al. 2021)

def llama_rotary(d_head, base=10000.0):
    """LlamaRotaryEmbedding from a small config; no weights, nothing downloaded."""
    n_heads = 4
    cfg = LlamaConfig(hidden_size=d_head * n_heads, num_attention_heads=n_heads, head_dim=d_head,
                      rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(cfg)


PARAMS = [(2, 10000.0), (16, 10000.0), (64, 10000.0), (128, 10000.0), (128, 500000.0)]


@pytest.mark.parametrize("d_head, base", PARAMS)
def test_frequencies_match_llama(d_head, base):
    """At position 1 the angle of pair i is θ_i itself: compare with Llama's inv_freq."""
    cos, sin = rotary_cos_sin([1], d_head, base=base, dtype=DT)     # (1, d_head)
    theta = torch.atan2(sin, cos)[0, : d_head // 2]                 # angles <= 1 rad < π
    torch.testing.assert_close(theta, llama_rotary(d_head, base).inv_freq.to(DT),
                               rtol=EPS32, atol=0)                  # theirs is float32


@pytest.mark.parametrize("d_head, base", PARAMS)
def test_cos_sin_match_llama_to_float32_rounding(d_head, base):
    # transformers computes the angles m·θ in float32 whatever x's dtype (forward calls
    # .float()), so theirs are off by under one float32 epsilon per unit of position
    # (measured: at most 0.67·eps32·m for these shapes, up to position 8191).
    position_ids = torch.stack([torch.arange(0, 8192, 7), torch.arange(5, 8197, 7)])  # (2, pos)
    ref_cos, ref_sin = llama_rotary(d_head, base)(torch.zeros(1, dtype=DT), position_ids)
    cos, sin = rotary_cos_sin(position_ids, d_head, base=base, dtype=DT)
    assert cos.shape == sin.shape == ref_cos.shape == (2, position_ids.shape[1], d_head)
    bound = EPS32 * position_ids.clamp(min=1).to(DT)[..., None]  # (2, pos, 1)
    assert torch.all((cos - ref_cos).abs() <= bound)
    assert torch.all((sin - ref_sin).abs() <= bound)


def test_apply_rotary_matches_llama_apply_rotary_pos_emb():
    g = torch.Generator().manual_seed(0)
    batch, n_heads, n_pos, d_head = 2, 3, 8, 16
    q = torch.randn(batch, n_heads, n_pos, d_head, generator=g, dtype=DT)
    k = torch.randn(batch, n_heads, n_pos, d_head, generator=g, dtype=DT)
    position_ids = torch.stack([torch.arange(n_pos), torch.arange(3, 3 + n_pos)])  # (batch, pos)
    cos, sin = rotary_cos_sin(position_ids, d_head, dtype=DT)  # (batch, pos, d_head)
    ours_q = apply_rotary(q, cos[:, None], sin[:, None])       # heads on dim 1
    ours_k = apply_rotary(k, cos[:, None], sin[:, None])
    # Given the same cos and sin, the rotation agrees to float64 rounding.
    same_q, same_k = apply_rotary_pos_emb(q, k, cos, sin)      # unsqueeze_dim=1 by default
    torch.testing.assert_close(ours_q, same_q, atol=1e-13, rtol=0)
    torch.testing.assert_close(ours_k, same_k, atol=1e-13, rtol=0)
    # End to end with transformers' own cos and sin: 1e-6 (their float32 angles limit this to
    # small positions; see test_cos_sin_match_llama_to_float32_rounding for long ones).
    ref_q, ref_k = apply_rotary_pos_emb(q, k, *llama_rotary(d_head)(q, position_ids))
    torch.testing.assert_close(ours_q, ref_q, atol=1e-6, rtol=0)
    torch.testing.assert_close(ours_k, ref_k, atol=1e-6, rtol=0)


def test_apply_rotary_is_the_papers_block_rotation_after_reordering():
    """RoFormer eq. (14)-(15): block-diagonal 2x2 rotations of neighbouring features (2i, 2i+1)
    by m·θ_i.  The Llama layout pairs (i, i + d/2) instead: the same matrix after reordering."""
    d_head, base = 12, 10000.0
    half = d_head // 2
    theta = base ** (-2 * torch.arange(half, dtype=DT) / d_head)
    # perm[j] = Llama feature sitting at the paper's feature j: 2i -> i, 2i+1 -> i + half.
    perm = torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).reshape(-1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, d_head, generator=g, dtype=DT)  # (pos, d_head), Llama layout
    positions = torch.arange(20) * 37
    cos, sin = rotary_cos_sin(positions, d_head, base=base, dtype=DT)
    ours = apply_rotary(x, cos, sin)
    for m in range(20):
        a = positions[m].item() * theta  # (half,)
        r = torch.zeros(d_head, d_head, dtype=DT)
        r[0::2, 0::2], r[0::2, 1::2] = torch.diag(a.cos()), torch.diag(-a.sin())
        r[1::2, 0::2], r[1::2, 1::2] = torch.diag(a.sin()), torch.diag(a.cos())
        paper = r @ x[m, perm]  # rotated, in the paper's order
        torch.testing.assert_close(ours[m, perm], paper, atol=1e-12, rtol=0)


def test_rotary_score_depends_only_on_offset():
    """<rotate(q, m), rotate(k, n)> == <rotate(q, m - n), k> for random q, k and many m, n."""
    g = torch.Generator().manual_seed(2)
    n_pairs, d_head = 2000, 64
    q = torch.randn(n_pairs, d_head, generator=g, dtype=DT)
    k = torch.randn(n_pairs, d_head, generator=g, dtype=DT)
    m = torch.randint(0, 5000, (n_pairs,), generator=g)
    n = torch.randint(0, 5000, (n_pairs,), generator=g)

    def rotate(x, pos):  # one position per row: x (n_pairs, d_head), pos (n_pairs,)
        return apply_rotary(x, *rotary_cos_sin(pos, d_head, dtype=DT))

    score = (rotate(q, m) * rotate(k, n)).sum(-1)  # (n_pairs,)
    by_offset = (rotate(q, m - n) * k).sum(-1)     # negative offsets included
    torch.testing.assert_close(score, by_offset, atol=1e-9, rtol=0)
    # Same offset, other absolute positions: same score.
    torch.testing.assert_close((rotate(q, m + 1234) * rotate(k, n + 1234)).sum(-1), score,
                               atol=1e-9, rtol=0)
    # And the offset does matter: the unrotated score differs for most pairs.
    unrotated = (q * k).sum(-1)
    assert ((score - unrotated).abs() > 1e-3).float().mean() > 0.9


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_rotation_preserves_norms(dtype, tol):
    g = torch.Generator().manual_seed(3)
    d_head = 32
    x = torch.randn(2, 4, 50, d_head, generator=g, dtype=dtype)  # (batch, heads, pos, d_head)
    cos, sin = rotary_cos_sin(torch.arange(1000, 1050), d_head, dtype=dtype)
    y = apply_rotary(x, cos, sin)
    assert y.shape == x.shape and y.dtype == dtype
    half = d_head // 2
    pair_norm = lambda t: t[..., :half] ** 2 + t[..., half:] ** 2  # noqa: E731  (..., d_head/2)
    torch.testing.assert_close(pair_norm(y), pair_norm(x), atol=tol, rtol=tol)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), atol=tol, rtol=tol)
    assert (y - x).abs().max() > 0.1  # it did rotate


def test_position_zero_is_identity_and_fractional_positions_interpolate():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 8, generator=g, dtype=DT)
    cos, sin = rotary_cos_sin([0, 0, 0], 8, dtype=DT)
    torch.testing.assert_close(apply_rotary(x, cos, sin), x, atol=0, rtol=0)
    # Rotating by 0.5 twice is rotating by 1 (position interpolation relies on this).
    c_half, s_half = rotary_cos_sin([0.5] * 3, 8, dtype=DT)
    c_one, s_one = rotary_cos_sin(range(1, 2), 8, dtype=DT)
    twice = apply_rotary(apply_rotary(x, c_half, s_half), c_half, s_half)
    torch.testing.assert_close(twice, apply_rotary(x, c_one, s_one), atol=1e-12, rtol=0)


def test_dtypes_and_shapes():
    cos, sin = rotary_cos_sin(torch.arange(10), 16)
    assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (10, 16)
    x = torch.randn(2, 10, 16)  # float32
    c64, s64 = rotary_cos_sin(torch.arange(10), 16, dtype=DT)
    y = apply_rotary(x, c64, s64)
    assert y.dtype == torch.float32  # cos/sin follow x
    torch.testing.assert_close(y, apply_rotary(x.double(), c64, s64).float(), atol=1e-6, rtol=0)
    assert rotary_cos_sin(torch.tensor(7), 4)[0].shape == (4,)  # one position


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("call, match", [
    (lambda: sinusoidal_positions(0, 8), "n_ctx"),
    (lambda: sinusoidal_positions(-3, 8), "n_ctx"),
    (lambda: sinusoidal_positions(4.5, 8), "n_ctx"),
    (lambda: sinusoidal_positions(True, 8), "n_ctx"),
    (lambda: sinusoidal_positions(8, 0), "d_model"),
    (lambda: sinusoidal_positions(8, "16"), "d_model"),
    (lambda: sinusoidal_positions(8, 16, base=1.0), "base"),
    (lambda: sinusoidal_positions(8, 16, base=float("inf")), "base"),
    (lambda: sinusoidal_positions(8, 16, dtype=torch.int64), "dtype"),
    (lambda: rotary_cos_sin(torch.arange(4), 7), "d_head must be even"),
    (lambda: rotary_cos_sin(torch.arange(4), 0), "d_head"),
    (lambda: rotary_cos_sin(torch.arange(4), -2), "d_head"),
    (lambda: rotary_cos_sin(torch.arange(4), 8, base=0.5), "base"),
    (lambda: rotary_cos_sin(torch.ones(4, dtype=torch.bool), 8), "positions"),
    (lambda: rotary_cos_sin(4, 8), "positions"),
    (lambda: rotary_cos_sin("0123", 8), "positions"),
    (lambda: rotary_cos_sin([0, [1, 2]], 8), "positions"),
    (lambda: rotary_cos_sin(torch.arange(4), 8, dtype=torch.int32), "dtype"),
    (lambda: apply_rotary(torch.randn(4, 7), torch.ones(4, 7), torch.ones(4, 7)), "d_head"),
    (lambda: apply_rotary(torch.arange(8).reshape(1, 8), *rotary_cos_sin([0], 8)), "floating"),
    (lambda: apply_rotary(torch.randn(4, 8), *rotary_cos_sin(range(4), 16)), "d_head = 8"),
    (lambda: apply_rotary(torch.randn(4, 8), torch.ones(4, 8), torch.ones(3, 8)), "same shape"),
    (lambda: apply_rotary(torch.randn(4, 8), *rotary_cos_sin(range(5), 8)), "broadcast"),
    (lambda: apply_rotary(torch.randn(2, 3, 4, 8), *rotary_cos_sin(torch.zeros(2, 4), 8)),
     "broadcast"),
])
def test_bad_input_raises_value_error_naming_it(call, match):
    with pytest.raises(ValueError, match=match):
        call()
