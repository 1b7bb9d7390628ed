"""Plausible wrong answers to lesson 2, "Attention", and the test cells each must cost.

The mistakes are the ones the lesson warns about: the scale forgotten or taken as d_k, the
softmax over the wrong axis, a causal mask off by one (the diagonal hidden) or inverted, a
previous-token or induction score read at the wrong offset, an off-by-one split of the losses,
and figures from elsewhere given instead of one's own measurement.  Test-yourself 2 reads
the figures measured with ``mean_largest_weight``, so a mistake there costs ``t-tys2`` too."""
from . import Wrong

_ATTENTION = '''
def attention(q, k, v, mask=None):
    scores = {scores}
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim={dim})
    return weights @ v, weights
'''


def _attention(scores="q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])", dim="-1"):
    return _ATTENTION.format(scores=scores, dim=dim).strip()


_WEIGHT = '''
def mean_largest_weight(d_k, n_keys, scaled, n_trials=10_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_trials, d_k, generator=g)
    k = torch.randn(n_trials, n_keys, d_k, generator=g)
    scores = (k @ q[:, :, None]).squeeze(-1)
    {scale}
    return scores.softmax(-1).max(-1).values.mean().item()
'''

_INDUCTION = '''
def induction_score(pattern, period):
    pos = pattern.shape[-1]
    per_query = []
    for i in range(period, pos):
        keys = {keys}
        per_query.append(pattern[..., i, keys].sum(-1))
    return torch.stack(per_query, -1).mean(-1)
'''

_MISSING = '''
def missing_or_ignored(tokens, pattern, i, threshold=0.5):
    j = torch.arange(1, {last})
    holds = {holds}
    if not holds.any():
        return "missing"
    return "ignored" if pattern[i, j[holds]].sum() < threshold else "used"
'''

_ICL = '''
def in_context_score(model, tokens, period):
    losses = cl.next_token_losses(model, tokens)
    first_copy = losses[:, :{split}]
    later_copies = losses[:, {split}:]
    return ({result}).item()
'''

WRONG = [
    # --- exercise 1: attention ----------------------------------------------------------------
    Wrong("q-attention", _attention(scores="q @ k.transpose(-2, -1)"), ["t-attention"],
          "scores not divided by sqrt(d_k)"),
    Wrong("q-attention", _attention(dim="-2"), ["t-attention"],
          "softmax over the queries (dim -2) instead of the keys"),

    # --- exercise 2: the largest weight (test-yourself 2 reads its figures; the forgotten scale
    # is exercise 1's entry) ---------------------------------------------------------------------
    Wrong("q-largest-weight", _WEIGHT.format(scale="scores = scores / d_k if scaled else scores").strip(),
          ["t-largest-weight", "t-tys2"], "scores divided by d_k instead of sqrt(d_k)"),

    # --- exercise 3: the causal mask ---------------------------------------------------------------
    Wrong("q-causal-mask", "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril(-1)",
          ["t-causal-mask"], "off by one: the diagonal masked, a token cannot see itself"),
    Wrong("q-causal-mask", "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).triu(1)",
          ["t-causal-mask"], "inverted: True marks the hidden keys"),
    Wrong("q-causal-mask", "def causal_mask(n):\n    return torch.ones(5, 5, dtype=torch.bool).tril()",
          ["t-causal-mask"], "the example's size hard-coded: passes n = 5, fails the visible size "
          "made at run time"),

    # --- exercises 4 and 5: head scores --------------------------------------------------------------
    Wrong("q-previous-token", '''
def previous_token_score(pattern):
    return pattern.diagonal(0, -2, -1).mean(-1)
'''.strip(), ["t-previous-token"], "reads the diagonal (the token itself), not offset -1"),
    Wrong("q-previous-token", '''
def previous_token_score(pattern):
    pos = pattern.shape[-1]
    return pattern.diagonal(-1, -2, -1).sum(-1) / pos
'''.strip(), ["t-previous-token"], "divides by pos, counting query 0 that has no previous token"),
    Wrong("q-induction", _INDUCTION.format(keys="torch.arange(i - period, -1, -period)").strip(),
          ["t-induction"], "wrong offset: reads the earlier copy itself (i - period), not the token after it"),
    Wrong("q-induction", _INDUCTION.format(keys="[i - period + 1]").strip(), ["t-induction"],
          "only the latest copy counted"),

    # --- exercise 6: heads above a threshold ------------------------------------------------------
    Wrong("q-heads-above", '''
def heads_above(scores, threshold):
    n_layers, n_heads = scores.shape
    return [(layer, head) for layer in range(n_layers) for head in range(n_heads)
            if scores[layer, head] > threshold]
'''.strip(), ["t-heads-above"], "not sorted by score (table order)"),
    Wrong("q-heads-above", '''
def heads_above(scores, threshold):
    flat = scores.flatten()
    order = flat.argsort(descending=True).tolist()
    return [divmod(i, scores.shape[0]) for i in order if flat[i] > threshold]
'''.strip(), ["t-heads-above"], "flat index split by n_layers instead of n_heads"),

    # --- exercise 7: the 2017 paper -----------------------------------------------------------------
    Wrong("q-paper", '''
paper_d_k = 512
paper_score_std = math.sqrt(512)
'''.strip(), ["t-paper"], "d_k taken as d_model (one head of full width)"),
    Wrong("q-paper", '''
paper_d_k = 512 // 8
g = torch.Generator().manual_seed(0)
paper_score_std = (torch.randn(10_000, 64, generator=g) * torch.randn(10_000, 64, generator=g)).sum(-1).var().item()
'''.strip(), ["t-paper"], "variance given for the standard deviation"),

    # --- exercise 8: the in-context score -------------------------------------------------------------
    Wrong("q-icl", _ICL.format(split="period", result="later_copies.mean() - first_copy.mean()").strip(),
          ["t-icl"], "off by one: losses indexed as if [:, i] predicted token i"),
    Wrong("q-icl", _ICL.format(split="period - 1", result="first_copy.mean() - later_copies.mean()").strip(),
          ["t-icl"], "sign flipped: first copy minus later copies"),

    # --- exercise 9 and the recap verdict ---------------------------------------------------------------
    Wrong("q-missing-or-ignored", _MISSING.format(
        last="i + 1", holds="(tokens[j] == tokens[i]) & (j < i)").strip(),
          ["t-missing-or-ignored"], "looks for the earlier copy itself, not the token after it"),
    Wrong("q-missing-or-ignored", _MISSING.format(
        last="len(tokens)", holds="(tokens[j - 1] == tokens[i]) & (tokens[j] == tokens[i + 1])").strip(),
          ["t-missing-or-ignored"], "counts keys after the query, which the mask hides"),
    Wrong("q-recap-verdict", 'recap_verdict = "missing"', ["t-recap-verdict"],
          "long-input failures on the repeats called missing"),

    # --- test yourself ------------------------------------------------------------------------------------
    Wrong("q-tys1", 'tys1 = {"query": "b", "key": "c", "value": "a"}', ["t-tys1"],
          "key and value swapped"),
    # q-largest-weight's entry also costs t-tys2, so this one goes first (its pack) and the
    # figures from elsewhere second, in a pack of their own for t-tys2.
    Wrong("q-tys2", 'tys2_reason = "a"\ntys2_unscaled = unscaled\ntys2_scaled = scaled', ["t-tys2"],
          "the scale taken as what makes the weights sum to 1"),
    Wrong("q-tys2", 'tys2_reason = "b"\ntys2_unscaled = 0.92\ntys2_scaled = 0.34', ["t-tys2"],
          "figures not measured here (0.92, 0.34) instead of one's own measurement"),
    Wrong("q-tys3", 'tys3_mask_does = "c"\ntys3_without = "b"', ["t-tys3"],
          "the mask taken to hide the token itself (the off-by-one mask)"),
    Wrong("q-tys3", 'tys3_mask_does = "a"\ntys3_without = "a"', ["t-tys3"],
          "training without the mask taken to stay bad"),
]
