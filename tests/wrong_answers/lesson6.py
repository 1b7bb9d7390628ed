"""Plausible wrong answers to lesson 6, "Variants and the model card", and the test cells each
must cost.  Later answers in the model answer build on earlier ones: ``requests_that_fit`` and
``four_sizes`` on ``card_params`` and ``kv_bytes_per_token``; ``llama2_70b_saved_gib`` on
``kv_bytes_per_token``; ``mixtral_weights_gib`` on ``card_params``; ``tys1`` on
``kv_bytes_per_token`` and ``requests_that_fit``.  The variants of 2025-26 (``kv_bytes_per_sequence``,
``moe_layer_params``) stand alone.  At most four entries per answer cell (each more costs an
autograde run): the first two of each cell came first, the others are #16's (hard-coded
constants, types, torch's own pairing)."""
from . import Wrong

_CARD = '''
def card_params(s):
    d, L = s.d_model, s.n_layers
    q, kv = s.n_heads * s.d_head, s.n_kv_heads * s.d_head
    attention = d * q + 2 * d * kv + q * d
    if s.qkv_bias:
        attention += q + 2 * kv
    if s.out_bias:
        attention += d
    expert = s.mlp_matrices * d * s.d_ff
    if s.mlp_bias:
        expert += (s.mlp_matrices - 1) * s.d_ff + d
    norm = {{"layernorm": 2, "rmsnorm": 1, "nonparametric_layernorm": 0}}[s.norm] * d
    router = d * s.n_experts
    held = max(s.n_experts, 1)
    used = max(s.n_experts_per_tok, 1)
    outside = s.d_vocab * d + norm
    if s.positions == "learned":
        outside += s.n_ctx * d
    {head}
    total = outside + L * ({total_block})
    active = outside + L * ({active_block})
    return total, active
'''
_BLOCK = "attention + router + s.norms_per_block * norm + {n} * expert"
_PER_EXPERT = "router + s.norms_per_block * norm + {n} * (attention + expert)"


def _card(head="if not s.tied_embeddings:\n        outside += s.d_vocab * d",
          total_block=_BLOCK.format(n="held"), active_block=_BLOCK.format(n="used")):
    return _CARD.format(head=head, total_block=total_block, active_block=active_block).strip()


_REQUESTS = '''
def requests_that_fit(s, n_tokens, memory_bytes, bytes_per_number):
    weights = card_params(s)[0] * bytes_per_number
    per_request = kv_bytes_per_token(s, bytes_per_number) * n_tokens
    return {result}
'''

_FOUR = '''
def four_sizes(s, bytes_per_number):
    total, active = card_params(s)
    return {{"total_params": total,
            "active_params": active,
            "kv_cache_bytes_per_token": {kv},
            "weight_bytes": {weights}}}
'''


def _four(kv="kv_bytes_per_token(s, bytes_per_number)", weights="total * bytes_per_number"):
    return _FOUR.format(kv=kv, weights=weights).strip()


_MOE_LAYER = '''
def moe_layer_params(s):
    def feed_forward(width):
        n = s.mlp_matrices * s.d_model * width
        if s.mlp_bias:
            n += (s.mlp_matrices - 1) * width + s.d_model
        return n
    router = s.d_model * s.n_experts
    if s.router_bias:
        router += s.n_experts
    if s.shared_expert_gate:
        router += s.d_model
    shared = {shared}
    held = s.n_experts * feed_forward(s.d_ff) + shared + router
    used = {used} * feed_forward(s.d_ff) + shared + router
    return held, used
'''


def _moe_layer(shared="feed_forward(s.shared_width) if s.n_shared_experts else 0",
               used="s.n_experts_per_tok"):
    return _MOE_LAYER.format(shared=shared, used=used).strip()


_KV_SEQ = '''
def kv_bytes_per_sequence(s, n_tokens, bytes_per_number):
    if s.mla is not None:
        per_token = s.mla.kv_lora_rank + s.mla.d_head_rope
    else:
        per_token = 2 * s.n_kv_heads * s.d_head
    kept = n_tokens if s.sliding_window is None else {kept}
    sliding = s.sliding_layers
    return per_token * ((s.n_layers - sliding) * n_tokens + sliding * kept) * {times}
'''


def _kv_seq(kept="min(n_tokens, s.sliding_window)", times="bytes_per_number"):
    return _KV_SEQ.format(kept=kept, times=times).strip()


WRONG = [
    # --- exercise 1: grouped-query attention -------------------------------------------------
    Wrong("q-gqa", '''
def grouped_query_attention(q, k, v):
    group = q.shape[1] // k.shape[1]
    k = k.repeat(1, group, 1, 1)
    v = v.repeat(1, group, 1, 1)
    return cl.scaled_dot_product_attention(q, k, v, causal=True)
'''.strip(), ["t-gqa"], "repeat instead of repeat_interleave: query heads paired with the wrong kv heads"),
    Wrong("q-gqa", '''
def grouped_query_attention(q, k, v):
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    return cl.scaled_dot_product_attention(q, k, v)
'''.strip(), ["t-gqa"], "causal mask forgotten"),

    Wrong("q-gqa", """
def grouped_query_attention(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
""".strip(), ["t-gqa"], "torch's enable_gqa pairs the heads: the exercise's work done for it"),
    Wrong("q-gqa", """
def grouped_query_attention(q, k, v):
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    return cl.scaled_dot_product_attention(q, k, v, causal=True)
""".strip(), ["t-gqa"], "a group of 4 hard-coded (right for 8 query heads on 2 kv heads only)"),

    # --- exercise 2: cache per token -----------------------------------------------------------
    Wrong("q-kv-bytes", '''
def kv_bytes_per_token(s, bytes_per_number):
    return 2 * s.n_layers * s.n_heads * s.d_head * bytes_per_number
'''.strip(), ["t-kv-bytes", "t-requests", "t-four-sizes", "t-llama2-70b", "t-tys1"],
          "cache sized with the query heads (grouped-query attention ignored)"),
    Wrong("q-kv-bytes", '''
def kv_bytes_per_token(s, bytes_per_number):
    d_head = s.d_model // s.n_heads
    return 2 * s.n_layers * s.n_kv_heads * d_head * bytes_per_number
'''.strip(), ["t-kv-bytes", "t-four-sizes"],
          "d_head taken as d_model / n_heads (passes Llama 3 8B, fails Gemma 2 9B's 256-wide heads)"),

    Wrong("q-kv-bytes", """
def kv_bytes_per_token(s, bytes_per_number):
    return 2 * s.n_layers * s.n_kv_heads * s.d_head * 2
""".strip(), ["t-kv-bytes", "t-requests", "t-four-sizes"], "2 bytes per number hard-coded"),

    # --- exercise 3: the toy mixture of experts ------------------------------------------------
    Wrong("q-moe-sizes", '''
def moe_sizes(layer, x):
    total = sum(p.numel() for p in layer.parameters())
    expert = torch.tensor([sum(p.numel() for p in e.parameters()) for e in layer.experts])
    with torch.no_grad():
        chosen = layer.run(x).routing.experts
    return total, expert[chosen].sum(dim=-1)
'''.strip(), ["t-moe-sizes"], "router left out of the active parameters"),
    Wrong("q-moe-sizes", '''
def moe_sizes(layer, x):
    router = sum(p.numel() for p in layer.router.parameters())
    expert = torch.tensor([sum(p.numel() for p in e.parameters()) for e in layer.experts])
    with torch.no_grad():
        chosen = layer.run(x).routing.experts
    active = router + expert[chosen].sum(dim=-1)
    return int(active[0, 0]), active
'''.strip(), ["t-moe-sizes"], "layer sized by its active parameters"),

    Wrong("q-moe-sizes", """
def moe_sizes(layer, x):
    total = sum(p.numel() for p in layer.parameters())
    router = sum(p.numel() for p in layer.router.parameters())
    expert = torch.tensor([sum(p.numel() for p in e.parameters()) for e in layer.experts])
    chosen = layer.run(x).routing.experts
    return total, (router + expert[chosen].sum(dim=-1)).float()
""".strip(), ["t-moe-sizes"], "active parameters as a float tensor"),
    Wrong("q-moe-sizes", """
def moe_sizes(layer, x):
    total = sum(p.numel() for p in layer.parameters())
    router = sum(p.numel() for p in layer.router.parameters())
    expert = sum(p.numel() for p in layer.experts[0].parameters())
    return total, torch.full(x.shape[:-1], router + 2 * expert)
""".strip(), ["t-moe-sizes"], "2 experts a token hard-coded (Mixtral's top_k)"),

    # --- exercise 4: total and active of a card ------------------------------------------------
    Wrong("q-card-params", _card(total_block=_PER_EXPERT.format(n="held"),
                                 active_block=_PER_EXPERT.format(n="used")),
          ["t-card-params", "t-requests", "t-four-sizes", "t-mixtral"],
          "attention counted once per expert"),
    Wrong("q-card-params", _card(head="outside += s.d_vocab * d"),
          ["t-card-params", "t-requests", "t-four-sizes"],
          "tied head counted twice (passes Mixtral, whose head is untied; fails tied cards)"),

    Wrong("q-card-params", _card(active_block=_BLOCK.format(n="(2 if s.n_experts else 1)")),
          ["t-card-params"], "2 experts a token hard-coded (Mixtral's n_experts_per_tok)"),
    Wrong("q-card-params", _card().replace("expert = s.mlp_matrices * d * s.d_ff", "expert = 3 * d * s.d_ff"),
          ["t-card-params", "t-requests", "t-four-sizes"], "3 feed-forward matrices hard-coded (gelu has 2)"),

    # --- exercise 5: requests that fit ---------------------------------------------------------
    Wrong("q-requests", _REQUESTS.format(result="memory_bytes // per_request").strip(),
          ["t-requests", "t-tys1"], "weights forgotten: the whole memory given to the cache"),
    Wrong("q-requests", _REQUESTS.format(result="(memory_bytes - weights) // per_request").strip(),
          ["t-requests"],
          "negative when the weights alone do not fit (passes the visible 7B cases)"),

    Wrong("q-requests", _REQUESTS.format(result="max(0, (memory_bytes - weights) // kv_bytes_per_token(s, bytes_per_number))").strip(),
          ["t-requests", "t-tys1"], "the cache of one token taken for a request's"),
    Wrong("q-requests", _REQUESTS.format(result="max(0, (memory_bytes - card_params(s)[0] * 2) // (kv_bytes_per_token(s, 2) * n_tokens))").strip(),
          ["t-requests"], "2 bytes per number hard-coded"),

    # --- exercise 6: four sizes (the recap) ----------------------------------------------------
    Wrong("q-four-sizes", _four(weights="active * bytes_per_number"), ["t-four-sizes"],
          "weights sized by the active parameters"),
    Wrong("q-four-sizes", _four(kv="s.n_layers * s.n_kv_heads * s.d_head * bytes_per_number"),
          ["t-four-sizes"], "K counted but not V"),

    Wrong("q-four-sizes", _four(weights="total * 2"), ["t-four-sizes"], "2 bytes a parameter hard-coded"),
    Wrong("q-four-sizes", _four(weights="(total + (s.d_vocab * s.d_model if s.tied_embeddings else 0)) * bytes_per_number"),
          ["t-four-sizes"], "a tied head stored twice in the weight bytes"),

    # --- exercise 7: the cache of one sequence, layer by layer ---------------------------------
    Wrong("q-kv-seq", '''
def kv_bytes_per_sequence(s, n_tokens, bytes_per_number):
    if s.mla is not None:
        per_token = s.mla.kv_lora_rank + s.mla.d_head_rope
    else:
        per_token = 2 * s.n_kv_heads * s.d_head
    return per_token * s.n_layers * n_tokens * bytes_per_number
'''.strip(), ["t-kv-seq"], "sliding layers cached in full (the window ignored)"),
    Wrong("q-kv-seq", '''
def kv_bytes_per_sequence(s, n_tokens, bytes_per_number):
    per_token = 2 * s.n_kv_heads * s.d_head
    kept = n_tokens if s.sliding_window is None else min(n_tokens, s.sliding_window)
    sliding = s.sliding_layers
    return per_token * ((s.n_layers - sliding) * n_tokens + sliding * kept) * bytes_per_number
'''.strip(), ["t-kv-seq"], "latent attention cached as a key and a value per head"),

    Wrong("q-kv-seq", _kv_seq(times="2"), ["t-kv-seq"], "2 bytes per number hard-coded"),
    Wrong("q-kv-seq", _kv_seq(kept="s.sliding_window"), ["t-kv-seq"],
          "a sliding layer given its whole window on a shorter sequence (no min)"),

    # --- exercise 8: fine-grained and shared experts -------------------------------------------
    Wrong("q-moe-layer", _moe_layer(shared="0"), ["t-moe-layer"], "shared experts forgotten"),
    Wrong("q-moe-layer", _moe_layer(used="s.n_experts"), ["t-moe-layer"],
          "all experts counted active"),

    Wrong("q-moe-layer", _moe_layer().replace("used = s.n_experts_per_tok * feed_forward(s.d_ff) + shared + router",
                                              "used = s.n_experts_per_tok * feed_forward(s.d_ff) + router"),
          ["t-moe-layer"], "shared experts held but not counted as used"),
    Wrong("q-moe-layer", _moe_layer().replace("    if s.router_bias:\n        router += s.n_experts\n", ""),
          ["t-moe-layer"], "the router's bias forgotten (gpt-oss)"),

    # --- real-world examples ---------------------------------------------------------------------
    Wrong("q-llama2-70b", '''
llama70 = cl.load_card("Llama-2-70b-hf")
per_token_saved = (kv_bytes_per_token(llama70.with_(n_kv_heads=64), 2)
                   - kv_bytes_per_token(llama70, 2))
llama2_70b_saved_gib = per_token_saved * llama70.n_ctx / 1e9
'''.strip(), ["t-llama2-70b"], "GB (10^9) for GiB (2^30)"),
    Wrong("q-llama2-70b", '''
llama70 = cl.load_card("Llama-2-70b-hf")
llama2_70b_saved_gib = kv_bytes_per_token(llama70.with_(n_kv_heads=64), 2) * llama70.n_ctx / 2**30
'''.strip(), ["t-llama2-70b"], "the 64-head cache given, not what 8 heads save"),
    Wrong("q-mixtral",
          'mixtral_weights_gib = card_params(cl.load_card("Mixtral-8x7B-v0.1"))[1] * 2 / 2**30',
          ["t-mixtral"], "MoE weights sized by the active parameters"),
    Wrong("q-mixtral",
          'mixtral_weights_gib = card_params(cl.load_card("Mixtral-8x7B-v0.1"))[0] * 2 / 1e9',
          ["t-mixtral"], "GB (10^9) for GiB (2^30)"),

    # --- test yourself ---------------------------------------------------------------------------
    Wrong("q-tys1", "tys1_cache_fraction = 0.25\ntys1_requests_32 = 15\ntys1_requests_8 = 61",
          ["t-tys1"], "8-head weights taken as large as the 32-head ones"),
    Wrong("q-tys1", "tys1_cache_fraction = 4\ntys1_requests_32 = 15\ntys1_requests_8 = 63",
          ["t-tys1"], "ratio 32-head ÷ 8-head cache given as the fraction"),
    Wrong("q-tys1", "tys1_cache_fraction = 0.25\ntys1_requests_32 = 16\ntys1_requests_8 = 68",
          ["t-tys1"], "the module text's figures: 80 GB read as 80 GiB"),
    Wrong("q-tys2", 'tys2_total_sets = "compute"\ntys2_active_sets = "memory"', ["t-tys2"],
          "the two sizes swapped"),
    Wrong("q-tys2", 'tys2_total_sets = "memory"\ntys2_active_sets = "memory"', ["t-tys2"],
          "active parameters taken to set memory too"),
]
