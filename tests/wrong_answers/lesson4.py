"""Plausible wrong answers to lesson 4, "Position and context", and the test cells each must
cost.  Later answers in the model answer build on earlier ones: ``rotary_score`` calls
``rotary``, ``my_tiled_attention`` calls ``softmax_update``, and ``longest_input`` calls
``block_macs`` and ``score_matrix_bytes``, so a mistake there also costs the cells built on it.
At most four entries per answer cell (each extra one costs an autograde run).

Every entry fails the visible part of its own test cell (tests/test_planted_mistakes.py), except
those in :data:`HIDDEN_ONLY`, which only the hidden tests catch."""
from . import Wrong

_ROTARY = '''
def rotary(x, positions, base=10000.0):
    d_head = x.shape[-1]
    half = d_head // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / d_head)
    angles = positions.to(torch.float64)[:, None] * theta[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
{body}
'''

_UPDATE = '''
def softmax_update(m, l, acc, scores_tile, v_tile):
    m_new = torch.maximum(m, scores_tile.amax(dim=-1))
    rescale = torch.exp({rescale})
    p = torch.exp(scores_tile - m_new[..., None])
    return m_new, l * rescale + p.sum(dim=-1), {acc} + p @ v_tile
'''

_TILED = '''
def my_tiled_attention(q, k, v, causal=False, block=32):
    n, d_head = q.shape[-2], q.shape[-1]
    out = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    for q0 in range(0, n, block):
        q1 = min(q0 + block, n)
        m = torch.full(q.shape[:-2] + (q1 - q0,), -math.inf)
        l = torch.zeros(q.shape[:-2] + (q1 - q0,))
        acc = torch.zeros(q.shape[:-2] + (q1 - q0, v.shape[-1]))
        for k0 in range(0, n, block):
            k1 = min(k0 + block, n)
            scores = {scores}
            if causal:
                later = torch.arange(k0, k1)[None, :] {compare} torch.arange(q0, q1)[:, None]
                scores = scores.masked_fill(later, -math.inf)
            m, l, acc = softmax_update(m, l, acc, scores, v[..., k0:k1, :])
        out[..., q0:q1, :] = acc / l[..., None]
    return out
'''

_SCALED = "q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-2, -1) / math.sqrt(d_head)"

_LONGEST = '''
def longest_input(d_model, n_layers, n_heads, n_tokens):
    macs = block_macs(n_tokens, d_model)
    per_block = macs["attention_scores"] + macs["weights"]
    return {{"block_flops": {flops},
            "attention_share": macs["attention_scores"] / per_block,
            "score_bytes_per_layer": score_matrix_bytes(n_tokens, {heads}, 2)}}
'''


def _fmt(template: str, **parts) -> str:
    return template.format(**parts).strip()


WRONG = [
    # --- exercise 1: the permutation test -------------------------------------------------------
    Wrong("q-commutes", '''
def commutes_with_permutation(block, x, perm):
    with torch.no_grad():
        return torch.allclose(block(x[:, perm]), block(x)[:, torch.argsort(perm)], atol=1e-5)
'''.strip(), ["t-commutes"], "output put back with the inverse permutation"),
    Wrong("q-commutes", '''
def commutes_with_permutation(block, x, perm):
    with torch.no_grad():
        return torch.equal(block(x[:, perm]), block(x)[:, perm])
'''.strip(), ["t-commutes"], "exact equality: rounding makes the order-blind block fail"),
    Wrong("q-commutes", '''
def commutes_with_permutation(block, x, perm):
    with torch.no_grad():
        return ((block(x[:, perm]) - block(x)[:, perm]).abs() < 1e-5).all()
'''.strip(), ["t-commutes"], "a bool tensor returned where the text asks for True or False"),
    Wrong("q-commutes", '''
def commutes_with_permutation(block, x, perm):
    with torch.no_grad():
        return torch.allclose(block(x[:, perm]), block(x), atol=1e-5)
'''.strip(), ["t-commutes"], "the block's outputs compared without permuting them"),

    # --- exercise 2: rotary (rotary_score builds on it) -------------------------------------------
    Wrong("q-rotary", _fmt(_ROTARY, body='''    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos + b * sin, b * cos - a * sin], dim=-1)'''),
          ["t-rotary", "t-rotary-score"], "rotation with the wrong sign"),
    Wrong("q-rotary", '''
def rotary(x, positions, base=10000.0):
    d_head = x.shape[-1]
    half = d_head // 2
    theta = base ** (-2 * torch.arange(half) / d_head)
    angles = positions[:, None] * theta[None, :]
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
'''.strip(), ["t-rotary"], "angles computed in float32 (off at large positions)"),
    Wrong("q-rotary", _fmt(_ROTARY, body='''    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)''').replace(
        "theta = base **", "theta = 10000.0 **"), ["t-rotary"], "the base argument ignored"),
    Wrong("q-rotary", _fmt(_ROTARY, body='''    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, b * cos + a * sin
    return out'''), ["t-rotary", "t-rotary-score"],
          "neighbouring features paired (RoFormer's layout) instead of the two halves"),

    # --- exercise 3: rotary_score -----------------------------------------------------------------
    Wrong("q-rotary-score", '''
def rotary_score(q, k, m, n):
    q_m = rotary(q[None, :], torch.tensor([m]))[0]
    k_n = rotary(k[None, :], torch.tensor([n]))[0]
    return (q_m @ k_n).item()
'''.strip(), ["t-rotary-score"], "forgot the 1/sqrt(d_head) scale"),
    Wrong("q-rotary-score", '''
def rotary_score(q, k, m, n):
    q_m = rotary(q[None, :], torch.tensor([m]))[0]
    return (q_m @ k).item() / math.sqrt(q.shape[-1])
'''.strip(), ["t-rotary-score"], "only the query rotated"),
    Wrong("q-rotary-score", '''
def rotary_score(q, k, m, n):
    q_m = rotary(q[None, :], torch.tensor([m]))[0]
    k_n = rotary(k[None, :], torch.tensor([n]))[0]
    return q_m @ k_n / math.sqrt(q.shape[-1])
'''.strip(), ["t-rotary-score"], "a one-element tensor returned where the text asks for a float"),
    Wrong("q-rotary-score", '''
def rotary_score(q, k, m, n):
    q_m = rotary(q[None, :], torch.tensor([m]))[0]
    k_n = rotary(k[None, :], torch.tensor([n]))[0]
    return (q_m @ k_n).item() / math.sqrt(8)
'''.strip(), ["t-rotary-score"], "the scale hard-coded at d_head = 8"),

    # --- exercise 4: block_macs (longest_input builds on it) --------------------------------------
    Wrong("q-block-macs", '''
def block_macs(n_tokens, d_model):
    n, d = n_tokens, d_model
    return {"attention_scores": 4 * n * n * d, "weights": 24 * n * d * d}
'''.strip(), ["t-block-macs", "t-longest-input"], "FLOPs given for multiply-adds"),
    Wrong("q-block-macs", '''
def block_macs(n_tokens, d_model):
    n, d = n_tokens, d_model
    return {"attention_scores": n * n * d, "weights": 12 * n * d * d}
'''.strip(), ["t-block-macs", "t-longest-input"], "q·kᵀ counted, the weighted sum of V forgotten"),
    Wrong("q-block-macs", '''
def block_macs(n_tokens, d_model):
    n, d = n_tokens, d_model
    return {"attention_scores": 2 * n * n * d, "weights": 3 * n * d * d + 8 * n * d * d}
'''.strip(), ["t-block-macs", "t-longest-input"], "the output projection forgotten (q, k, v only)"),
    Wrong("q-block-macs", '''
def block_macs(n_tokens, d_model):
    m = cl.forward_macs(cl.gpt2_shape(d_model=d_model, n_layers=1, n_heads=1, d_vocab=1, n_ctx=1),
                        n_tokens, causal=False)
    return {"attention_scores": m.attention_scores, "weights": m.weights}
'''.strip(), ["t-block-macs", "t-longest-input"],
          "course_lib's forward_macs called (longest_input, built on it, blames block_macs)"),

    # --- exercise 5: crossover ----------------------------------------------------------------------
    Wrong("q-crossover", "def crossover_length(d_model):\n    return 12 * d_model",
          ["t-crossover"], "crossover from FLOPs on one side and multiply-adds on the other"),
    Wrong("q-crossover", "def crossover_length(d_model):\n    return 4608",
          ["t-crossover"], "GPT-2 small's answer hard-coded: the run-time width catches it"),
    Wrong("q-crossover", "def crossover_length(d_model):\n    return d_model / 6",
          ["t-crossover"], "2·n²·d = 12·n·d² solved upside down"),
    Wrong("q-crossover", "def crossover_length(d_model):\n    return 12 * d_model - 1",
          ["t-crossover"], "solved with the causal count n(n+1)·d"),

    # --- exercise 6: score matrix bytes (longest_input builds on it) ------------------------------
    Wrong("q-score-bytes", '''
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return n_tokens * n_tokens * n_heads * 16

score_tib = score_matrix_bytes(131_072, 32, 2) / 2**40
'''.strip(), ["t-score-bytes", "t-longest-input"], "bits for bytes (16 per number)"),
    Wrong("q-score-bytes", '''
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return n_tokens * n_tokens * n_heads

score_tib = 131_072 * 131_072 * 32 * 2 / 1e12
'''.strip(), ["t-score-bytes", "t-longest-input"], "bytes per number left out, and TB (10^12 bytes) for TiB"),
    Wrong("q-score-bytes", '''
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return 2 * n_tokens * n_tokens * n_heads * bytes_per_number

score_tib = score_matrix_bytes(131_072, 32, 2) / 2**40
'''.strip(), ["t-score-bytes", "t-longest-input"], "scores and softmax weights both counted"),
    Wrong("q-score-bytes", '''
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return n_tokens * n_tokens * n_heads * 2

score_tib = score_matrix_bytes(131_072, 32, 2) / 2**40
'''.strip(), ["t-score-bytes"], "2 bytes hard-coded, bytes_per_number ignored"),

    # --- exercise 7: the running softmax (my_tiled_attention builds on it) ------------------------
    Wrong("q-softmax-update", _fmt(_UPDATE, rescale="m - m_new", acc="acc"),
          ["t-softmax-update", "t-tiled"], "old acc not rescaled to the new maximum"),
    Wrong("q-softmax-update", _fmt(_UPDATE, rescale="m_new - m", acc="acc * rescale[..., None]"),
          ["t-softmax-update", "t-tiled"], "rescale factor inverted: exp(m_new - m)"),
    Wrong("q-softmax-update", '''
def softmax_update(m, l, acc, scores_tile, v_tile):
    m_new = torch.maximum(m, scores_tile.amax(dim=-1))
    p = torch.exp(scores_tile)
    return m_new, l + p.sum(dim=-1), acc + p @ v_tile
'''.strip(), ["t-softmax-update"], "exp of the raw scores, no running maximum subtracted"),
    Wrong("q-softmax-update", '''
def softmax_update(m, l, acc, scores_tile, v_tile):
    m_new = torch.maximum(m, scores_tile.amax(dim=-1))
    rescale = torch.exp(m) / torch.exp(m_new)
    p = torch.exp(scores_tile) / torch.exp(m_new)[..., None]
    return m_new, l * rescale + p.sum(dim=-1), acc * rescale[..., None] + p @ v_tile
'''.strip(), ["t-softmax-update"], "exp(s) / exp(m_new): right maths, overflows at large scores"),

    # --- exercise 8: tiled attention --------------------------------------------------------------
    Wrong("q-tiled", _fmt(_TILED, scores=_SCALED, compare=">").replace(
        "    for q0 in range(0, n, block):", "    for q0 in range(0, n // block * block, block):").replace(
        "        for k0 in range(0, n, block):", "        for k0 in range(0, n // block * block, block):"),
          ["t-tiled"], "the last tile, shorter than block, left out (of the queries and the keys)"),
    Wrong("q-tiled", _fmt(_TILED, scores=_SCALED, compare=">="), ["t-tiled"],
          "causal mask off by one: each query's own key hidden"),
    Wrong("q-tiled", _fmt(_TILED, scores=_SCALED, compare=">").replace(
        "    for q0 in range(0, n, block):",
        "    hidden = torch.arange(n)[None, :] > torch.arange(n)[:, None]\n"
        "    for q0 in range(0, n, block):").replace(
        "later = torch.arange(k0, k1)[None, :] > torch.arange(q0, q1)[:, None]",
        "later = hidden[q0:q1, k0:k1]"), ["t-tiled"],
          "a full n × n bool mask made once: memory that grows with n²"),
    Wrong("q-tiled", _fmt(_TILED, scores=_SCALED, compare=">").replace(
        "        for k0 in range(0, n, block):", "        for k0 in range(0, q1 if causal else n, block):").replace(
        "            if causal:\n                later = torch.arange(k0, k1)[None, :] > torch.arange(q0, q1)[:, None]\n"
        "                scores = scores.masked_fill(later, -math.inf)\n", ""),
          ["t-tiled"], "causal: the key tiles after the query tile skipped, but no mask inside the tiles"),

    # --- exercise 9: FlashAttention's figure ------------------------------------------------------
    Wrong("q-flash", "flash_tile_kib = 128 * 128 * 16 / 2**10\n"
                     "flash_shrink = (131_072 * 131_072) / (128 * 128)",
          ["t-flash"], "bits for bytes in the tile"),
    Wrong("q-flash", "flash_tile_kib = 128 * 128 * 2 / 2**10\nflash_shrink = 131_072 / 128",
          ["t-flash"], "ratio of the sides, not of the areas"),
    Wrong("q-flash", "flash_tile_kib = 128 * 128 * 2 / 1000\nflash_shrink = (131_072 * 131_072) / (128 * 128)",
          ["t-flash"], "KB (1,000 bytes) for KiB"),
    Wrong("q-flash", "flash_tile_kib = 128 * 128 * 4 / 2**10\nflash_shrink = 131_072 / 128",
          ["t-flash"], "a float32 tile, 4 bytes a score, and the ratio of the sides: both named"),

    # --- test yourself ----------------------------------------------------------------------------
    Wrong("q-tys-crossover", "tys_crossover = 12 * 4096", ["t-tys-crossover"],
          "FLOPs on one side, multiply-adds on the other"),
    Wrong("q-tys-crossover", "tys_crossover = 4096", ["t-tys-crossover"],
          "crossover taken as d_model itself"),
    Wrong("q-tys-crossover", "tys_crossover = 2 * 4096", ["t-tys-crossover"],
          "attention's projections counted as attention"),
    Wrong("q-tys-crossover", "tys_crossover = 4096 / 6", ["t-tys-crossover"], "the crossover solved upside down"),
    Wrong("q-tys-vendor", 'tys_vendor = {"a", "b", "c", "d", "h"}', ["t-tys-vendor"],
          "also asks for accuracy with the fact at the end only"),
    Wrong("q-tys-vendor", 'tys_vendor = {"a", "b", "c"}', ["t-tys-vendor"],
          "forgets to ask about tiled attention in the serving stack"),
    Wrong("q-tys-vendor", 'tys_vendor = ["a", "b", "c", "d"]', ["t-tys-vendor"],
          "the right letters in a list where the text asks for a set"),
    Wrong("q-tys-vendor", 'tys_vendor = {"a", "c", "d", "h"}', ["t-tys-vendor"],
          "the fact at the end only instead of start, middle and end"),

    # --- recap ------------------------------------------------------------------------------------
    Wrong("q-longest-input", _fmt(_LONGEST, flops="n_layers * per_block", heads="n_heads"),
          ["t-longest-input"], "multiply-adds reported as FLOPs"),
    Wrong("q-longest-input", _fmt(_LONGEST, flops="2 * n_layers * per_block", heads="1"),
          ["t-longest-input"], "one head's score matrix only"),
    Wrong("q-longest-input", _fmt(_LONGEST, flops="2 * n_layers * per_block", heads="n_heads").replace(
        'macs["attention_scores"] / per_block', 'macs["attention_scores"] / macs["weights"]'),
          ["t-longest-input"], "attention ÷ the rest, a ratio, for the share"),
    Wrong("q-longest-input", _fmt(_LONGEST, flops="2 * n_layers * per_block", heads="n_heads").replace(
        "score_matrix_bytes(n_tokens, n_heads, 2)", "score_matrix_bytes(n_tokens, n_heads, 4)"),
          ["t-longest-input"], "32-bit scores, 4 bytes each"),
]

HIDDEN_ONLY: set[str] = set()
"""``why`` of the entries that pass the visible test and fail only the hidden one."""
