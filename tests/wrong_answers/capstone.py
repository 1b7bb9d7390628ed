"""Plausible wrong answers to the capstone, "Size a real card", and the test cells each must
cost.  The walk-away, the serving scenario and the GQA and experts examples call ``size_card``, so
a mistake there also costs the cells that build on it (and only those whose cards it changes)."""
from . import Wrong

# The model answer's size_card; each mistake below is one edit of it (checked to apply).
_SIZE_CARD = '''
FAMILIES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma",
            "qwen3", "qwen3_moe", "gemma3_text", "deepseek_v2", "deepseek_v3")


def size_card(config, context, gpu_memory_bytes, dtype="bf16"):
    """Total and active parameters, KV-cache bytes per token, and requests of `context` tokens
    that fit beside the weights in `gpu_memory_bytes`, for a config.json dict of one of FAMILIES.
    Weights and cache are stored in `dtype`.  Raises ValueError for another model_type."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"model_type {family!r} is not one of {', '.join(FAMILIES)}")
    latent = family in ("deepseek_v2", "deepseek_v3")
    if family == "gpt2":
        d, L, H = config["n_embd"], config["n_layer"], config["n_head"]
        n_kv, d_head = H, d // H
        d_ff = config.get("n_inner") or 4 * d
        tied = config.get("tie_word_embeddings", True)
    else:
        d, L, H = config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]
        absent_kv = {"mistral": 8, "mixtral": 8, "qwen2": 32, "gemma": 16}   # the config classes' defaults
        n_kv = config.get("num_key_value_heads", absent_kv.get(family)) or H
        absent_head_dim = {"gemma": 256, "gemma3_text": 256, "qwen3": 128}
        d_head = config.get("head_dim", absent_head_dim.get(family)) or d // H
        d_ff = config["intermediate_size"]
        tied = config.get("tie_word_embeddings", family in ("gemma", "gemma3_text"))
    V = config["vocab_size"]
    norm = 2 * d if family == "gpt2" else d    # LayerNorm: a weight and a bias; RMSNorm: a weight

    if latent:                                 # latent attention (DeepSeek)
        nope, rope = config["qk_nope_head_dim"], config["qk_rope_head_dim"]
        d_v, rank, q_rank = config["v_head_dim"], config["kv_lora_rank"], config["q_lora_rank"]
        q_out = H * (nope + rope)
        queries = d * q_rank + q_rank + q_rank * q_out if q_rank else d * q_out
        attention = (queries + d * (rank + rope) + rank       # kv down-projection and its norm
                     + rank * H * (nope + d_v) + H * d_v * d)  # keys and values rebuilt; output
        cached = rank + rope                   # numbers one layer caches per token
    else:
        q, kv = H * d_head, n_kv * d_head      # width of the query and of the key (= value) outputs
        attention = d * q + 2 * d * kv + q * d  # Q, K, V and the output projection
        if family == "gpt2":
            attention += q + 2 * kv + d        # biases on Q, K, V and the output
        if family == "qwen2":
            attention += q + 2 * kv            # biases on Q, K, V
        if family in ("qwen3", "qwen3_moe", "gemma3_text"):
            attention += 2 * d_head            # RMSNorms of d_head on the queries and the keys
        cached = 2 * kv                        # a key and a value per key/value head

    def mlp(width):                            # one feed-forward layer (one expert) this wide
        if family == "gpt2":
            return 2 * d * width + width + d   # up and down, with their biases
        return 3 * d * width                   # gate, up and down

    experts = {"mixtral": ("num_local_experts", None), "qwen3_moe": ("num_experts", "moe_intermediate_size"),
               "deepseek_v2": ("n_routed_experts", "moe_intermediate_size"),
               "deepseek_v3": ("n_routed_experts", "moe_intermediate_size")}
    if family in experts:
        n_key, width_key = experts[family]
        E, used = config[n_key], config["num_experts_per_tok"]
        d_expert = config[width_key] if width_key else d_ff
        shared = config["n_shared_experts"] * d_expert if latent else 0
        n_dense = config["first_k_dense_replace"] if latent else 0
        moe_layer = E * mlp(d_expert) + (mlp(shared) if shared else 0) + d * E   # router: d × E
        feed_forward = n_dense * mlp(d_ff) + (L - n_dense) * moe_layer
        unused = (L - n_dense) * (E - used) * mlp(d_expert)
    else:
        feed_forward, unused = L * mlp(d_ff), 0
    norms_per_block = 4 if family == "gemma3_text" else 2
    embeddings = V * d + (config["n_positions"] * d if family == "gpt2" else 0)
    total = (embeddings + L * (attention + norms_per_block * norm) + feed_forward + norm
             + (0 if tied else V * d))
    active = total - unused

    bytes_per_number = cl.dtype_bytes(dtype)
    per_token = L * cached * bytes_per_number
    window, sliding = None, 0                  # the window, and how many layers keep only it
    if family in ("mistral", "mixtral"):
        window = config.get("sliding_window", 4096 if family == "mistral" else None)
        sliding = L
    elif family == "gemma3_text":
        window = config.get("sliding_window", 4096)
        pattern = config.get("sliding_window_pattern", 6)
        types = config.get("layer_types") or [
            "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(L)]
        sliding = types.count("sliding_attention")
    kept = min(context, window) if window else context
    per_request = cached * bytes_per_number * ((L - sliding) * context + sliding * kept)
    free = gpu_memory_bytes - total * bytes_per_number
    requests = int(free // per_request) if free > 0 else 0
    return {"total_params": total, "active_params": active,
            "kv_cache_bytes_per_token": per_token, "requests_that_fit": requests}
'''.strip()


def _size_card(*edits):
    src = _SIZE_CARD
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


_SERVABLE = '''
def servable(cards, context, gpu_memory_bytes, dtype="bf16"):
    out = {{}}
    for name, config in cards.items():
        positions = config["n_positions" if config["model_type"] == "gpt2" else "max_position_embeddings"]
        size = size_card(config, context, gpu_memory_bytes, dtype)
        n = {requests}
        if {condition}:
            out[name] = n
    return out
'''.strip()

_GQA = '''
card = cl.card_config("Llama-2-70b-hf")
L, H, d = card["num_hidden_layers"], card["num_attention_heads"], card["hidden_size"]
with_gqa = size_card(card, **capstone.GQA_SCENARIO)
without = size_card({{**card, "num_key_value_heads": H}}, **capstone.GQA_SCENARIO)
gqa = {{"cache_per_token_gqa": {cache_gqa},
       "cache_per_token_mha": without["kv_cache_bytes_per_token"],
       "requests_gqa": with_gqa["requests_that_fit"],
       "requests_mha": {requests_mha}}}
'''.strip()

_EXPERTS = '''
mixtral = cl.card_config("Mixtral-8x7B-v0.1")
size = size_card(mixtral, 8192, capstone.ACCELERATOR_BYTES, "bf16")
{needed}
experts = {{"total_params": size["total_params"], "active_params": size["active_params"],
           "accelerators_needed": n, "flops_per_token": {flops}}}
'''.strip()

_NEEDED = '''n = 1
while size_card(mixtral, 8192, n * capstone.ACCELERATOR_BYTES, "bf16")["requests_that_fit"] < 1:
    n += 1'''

_RECAP = '''recap = {{1: ("C", "T"), 2: ("E", "R"), 3: ("B", "U"), 4: ("F", "P"), 5: {five}, 6: {six}}}'''

LLAMA_MHA = "Llama read as one key/value head per query head (true of Llama 2 7B, not of Llama 3 or 2 70B)"
HIDDEN_ONLY: set[str] = set()
"""Mistakes the visible test of their own cell passes (tests/test_planted_mistakes.py): none,
since the visible test of size_card tries Llama 3 8B (8 key/value heads of 32)."""

WRONG = [
    # --- exercise 1: size_card (servable, walkaway, gqa and experts use it) --------------------
    Wrong("q-size-card", _size_card(
        ("moe_layer = E * mlp(d_expert)", "moe_layer = used * mlp(d_expert)"),
        ("active = total - unused", "active = total")),
        ["t-size-card", "t-size-card-unseen", "t-servable", "t-walkaway", "t-experts"],
        "mixture of experts sized by its active parameters (only the experts a token uses)"),
    Wrong("q-size-card", _size_card(
        ('d_head = config.get("head_dim", absent_head_dim.get(family)) or d // H', "d_head = d // H")),
        ["t-size-card", "t-size-card-unseen", "t-servable"],
        "head_dim taken as hidden_size / heads (Gemma 3's 256-wide heads, Qwen3-0.6B's 128)"),
    Wrong("q-size-card", _size_card(
        ('shared = config["n_shared_experts"] * d_expert if latent else 0', "shared = 0")),
        ["t-size-card", "t-size-card-unseen", "t-servable", "t-walkaway"],
        "shared experts forgotten (DeepSeek's two per layer)"),
    Wrong("q-size-card", _size_card(("return 2 * d * width + width + d   # up and down, with their biases",
                                     "return 2 * d * width                   # up and down")),
          ["t-size-card", "t-size-card-unseen"], "GPT-2's feed-forward biases left out"),
    Wrong("q-size-card", _size_card(
        ('sliding = types.count("sliding_attention")', "sliding = 0")),
        ["t-size-card", "t-servable"],
        "sliding layers cached in full (Gemma 3's window ignored; Mistral's kept)"),
    # Right on Llama 2 7B (a key/value head per query head), wrong on Llama 3 8B and Llama 2 70B,
    # which the visible test tries: the later checks blame size_card, and its test says why.
    Wrong("q-size-card", _size_card((
        'n_kv = config.get("num_key_value_heads", absent_kv.get(family)) or H',
        'n_kv = H if family == "llama" else config.get("num_key_value_heads", absent_kv.get(family)) or H')),
        ["t-size-card", "t-size-card-unseen", "t-servable", "t-gqa"], LLAMA_MHA),

    # null read as absent: the family's default (Mistral's 8) where null means one key/value head
    # per query head; the visible test tries Mistral 7B with num_key_value_heads null (#16)
    Wrong("q-size-card", _size_card((
        'n_kv = config.get("num_key_value_heads", absent_kv.get(family)) or H',
        'n_kv = config.get("num_key_value_heads") or absent_kv.get(family) or H')),
        ["t-size-card"], "num_key_value_heads null read as absent (the family's default)"),

    # --- exercise 2: servable ---------------------------------------------------------------
    Wrong("q-servable", _SERVABLE.format(
        requests='int((gpu_memory_bytes - size["total_params"] * cl.dtype_bytes(dtype)) // '
                 '(size["kv_cache_bytes_per_token"] * context))',
        condition="positions >= context and n >= 1"),
        ["t-servable"], "sliding window ignored: every request caches all its tokens"),
    Wrong("q-servable", _SERVABLE.format(requests='size["requests_that_fit"]', condition="n >= 1"),
          ["t-servable"], "the card's positions ignored: Llama 3 8B 'serves' 32,768 tokens"),

    # --- exercise 3: the walk-away question ----------------------------------------------------
    Wrong("q-walkaway", '''
chosen = "DeepSeek-V3"
walkaway = {"model": chosen, **size_card(cl.card_config(chosen), **capstone.SCENARIO)}
'''.strip(), ["t-walkaway"], "chose a model whose weights do not fit the accelerator"),
    Wrong("q-walkaway", '''
chosen = "DeepSeek-V2-Lite"
size = size_card(cl.card_config(chosen), **capstone.SCENARIO)
walkaway = {"model": chosen, **size, "kv_cache_bytes_per_token": size["kv_cache_bytes_per_token"] * 32768}
'''.strip(), ["t-walkaway"], "cache of a whole request given as the cache per token"),

    # --- real-world examples ----------------------------------------------------------------
    Wrong("q-paper", '''
d, d_ff = 512, 2048
paper_block_weights = 4 * d * d + 2 * d * d_ff
llama = cl.card_config("Llama-2-7b-hf")
D, D_ff = llama["hidden_size"], llama["intermediate_size"]
llama2_7b_block_weights = 4 * D * D + 2 * D * D_ff
'''.strip(), ["t-paper"], "SwiGLU counted as two matrices"),
    Wrong("q-copy", '''
def copy_losses(losses, period):
    return losses[:, :period - 1].mean().item(), losses[:, period - 1:].mean().item()
'''.strip(), ["t-copy"], "off by one: losses[:, i] predicts token i + 1"),
    Wrong("q-tiled", '''
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return n_tokens * n_tokens * n_heads * bytes_per_number * 8


flash_tib = score_matrix_bytes(131_072, 32, 2) / cl.units.TiB
'''.strip(), ["t-tiled"], "bits for bytes"),
    Wrong("q-gqa", _GQA.format(cache_gqa="2 * L * H * (d // H) * 2",
                               requests_mha='without["requests_that_fit"]'),
          ["t-gqa"], "grouped-query attention ignored in the cache (query heads cached)"),
    Wrong("q-gqa", _GQA.format(
        cache_gqa='with_gqa["kv_cache_bytes_per_token"]',
        requests_mha='int((capstone.GQA_SCENARIO["gpu_memory_bytes"] - 2 * with_gqa["total_params"]) '
                     '// (without["kv_cache_bytes_per_token"] * 4096))'),
          ["t-gqa"], "64-head variant given the grouped-query model's (smaller) weights"),
    Wrong("q-experts", _EXPERTS.format(needed=_NEEDED, flops='size["active_params"]'),
          ["t-experts"], "multiply-adds reported as FLOPs"),
    Wrong("q-experts", _EXPERTS.format(
        needed="n = math.ceil((2 * size['active_params'] + size['kv_cache_bytes_per_token'] * 8192) "
               "/ capstone.ACCELERATOR_BYTES)",
        flops='2 * size["active_params"]'),
          ["t-experts"], "memory sized by active parameters: Mixtral 'fits' one accelerator"),

    # --- the module recap ----------------------------------------------------------------------
    Wrong("q-recap", _RECAP.format(five='("D", "Q")', six='("A", "S")'), ["t-recap"],
          "lessons 5 and 6 swapped (both are about the cache)"),

    # --- mistakes added for issue #16 (every one fails a visible test) -------------------------
    Wrong("q-size-card", _size_card(("+ (0 if tied else V * d))", "+ V * d)")),
          ['t-size-card', 't-size-card-unseen', 't-servable'],
          "tied head counted twice (an output head added whatever tie_word_embeddings says)"),
    Wrong("q-size-card", _size_card(("q, kv = H * d_head, n_kv * d_head", "q, kv = d, n_kv * d_head")),
          ['t-size-card', 't-size-card-unseen', 't-servable'],
          "query and output projections sized hidden_size wide (Qwen3-30B-A3B's heads are 32 × 128 = 4,096)"),
    Wrong("q-size-card", _size_card(("return 3 * d * width                   # gate, up and down",
                                "return 3 * d * width + 2 * width + d  # gate, up and down, with biases")),
          ['t-size-card', 't-size-card-unseen', 't-walkaway', 't-experts'],
          "a bias on every feed-forward matrix of the gated families"),
    Wrong("q-size-card", _size_card(('embeddings = V * d + (config["n_positions"] * d if family == "gpt2" else 0)',
                                "embeddings = V * d")),
          ['t-size-card', 't-size-card-unseen'],
          "GPT-2's learned position table left out"),
    Wrong("q-size-card", _size_card(("return 3 * d * width                   # gate, up and down",
                                "return 2 * d * width                   # up and down")),
          ['t-size-card', 't-size-card-unseen', 't-servable', 't-walkaway', 't-gqa', 't-experts'],
          "SwiGLU and GeGLU counted as two matrices"),
    Wrong("q-size-card", _size_card(("total = (embeddings + L * (attention + norms_per_block * norm) + feed_forward + norm",
                                "total = (embeddings + L * attention + feed_forward")),
          ['t-size-card', 't-size-card-unseen', 't-servable', 't-walkaway', 't-experts'],
          "norms forgotten (the blocks' and the final one)"),
    Wrong("q-size-card", _size_card(("+ d * E   # router: d × E", "   # the router forgotten")),
          ['t-size-card', 't-size-card-unseen', 't-walkaway', 't-experts'],
          "routers left out of a mixture of experts"),
    Wrong("q-size-card", _size_card(("free = gpu_memory_bytes - total * bytes_per_number",
                                "free = gpu_memory_bytes // cl.GB * cl.GiB - total * bytes_per_number")),
          ['t-size-card', 't-size-card-unseen', 't-servable', 't-walkaway', 't-gqa'],
          "gpu_memory_bytes read as GiB (141 GB taken for 141 GiB)"),
    Wrong("q-size-card", _size_card(("cached = 2 * kv                        # a key and a value per key/value head",
                                "cached = 2 * q                         # a key and a value per query head")),
          ['t-size-card', 't-size-card-unseen', 't-servable', 't-gqa'],
          "KV cache sized with the query heads (grouped-query attention ignored in the cache)"),
    Wrong("q-size-card", _size_card(("per_token = L * cached * bytes_per_number", "per_token = L * cached * bytes_per_number * context")),
          ['t-size-card', 't-size-card-unseen', 't-walkaway', 't-gqa'],
          "cache per token given per request (times the context)"),
    Wrong("q-size-card", _size_card(("requests = int(free // per_request) if free > 0 else 0",
                                "requests = math.ceil(free / per_request) if free > 0 else 0")),
          ['t-size-card', 't-size-card-unseen', 't-servable', 't-walkaway', 't-gqa'],
          "requests rounded up (part of a request counted as one)"),
    Wrong("q-size-card", _size_card(("bytes_per_number = cl.dtype_bytes(dtype)", "bytes_per_number = 2")),
          ['t-size-card', 't-size-card-unseen', 't-servable'],
          "16-bit bytes whatever the dtype"),
    Wrong("q-size-card", _size_card(("kept = min(context, window) if window else context", "kept = window if window else context")),
          ['t-size-card'],
          "a sliding layer keeps a whole window even for requests shorter than it"),
    Wrong("q-size-card", _size_card(('window = config.get("sliding_window", 4096 if family == "mistral" else None)',
                                'window = config.get("sliding_window")')),
          ['t-size-card'],
          "an absent Mistral sliding_window read as no window (its default is 4,096)"),
    Wrong("q-size-card", _size_card(('"full_attention" if (i + 1) % pattern == 0 else',
                                     '"full_attention" if i % pattern == 0 else')),
          ['t-size-card', 't-servable'],
          "Gemma 3's global layers taken as i % pattern == 0 (the first of each group, one too many)"),
    Wrong("q-size-card", _size_card(('n_kv = config.get("num_key_value_heads", absent_kv.get(family)) or H',
                                     'n_kv = config.get("num_key_value_heads", absent_kv.get(family, H))')),
          ['t-size-card'],
          "num_key_value_heads null read with config.get(key, default): None, a TypeError"),
    Wrong("q-size-card", _size_card(('types = config.get("layer_types") or [', 'types = [')),
          ['t-size-card'],
          "Gemma 3's layer_types ignored (sliding_window_pattern read even where the card lists its layers)"),
    Wrong("q-servable", _SERVABLE.format(requests='size["requests_that_fit"]', condition="positions > context and n >= 1"),
          ['t-servable'],
          "positions must exceed the context (Gemma 3 1B's 32,768 positions cover 32,768 tokens)"),
    Wrong("q-walkaway", """
chosen = max(plan, key=plan.get)
walkaway = {"model": chosen, **size_card(candidates[chosen], **capstone.SCENARIO)}
""".strip(),
          ['t-walkaway'],
          "the most requests without the 7-billion-parameter floor"),
    Wrong("q-gqa", """
gqa_card = cl.card_config("Llama-2-70b-hf")
mha_card = {**gqa_card, "num_key_value_heads": gqa_card["num_attention_heads"]}
two = dict(context=4096, gpu_memory_bytes=2 * 80 * cl.GiB, dtype="bf16")
with_gqa, without = size_card(gqa_card, **two), size_card(mha_card, **two)
gqa = {"cache_per_token_gqa": with_gqa["kv_cache_bytes_per_token"],
       "cache_per_token_mha": without["kv_cache_bytes_per_token"],
       "requests_gqa": with_gqa["requests_that_fit"], "requests_mha": without["requests_that_fit"]}
""".strip(),
          ['t-gqa'],
          "two 80 GB accelerators taken for 160 GiB"),
    Wrong("q-gqa", _GQA.format(cache_gqa='with_gqa["kv_cache_bytes_per_token"]',
                               requests_mha='with_gqa["requests_that_fit"]').replace(
        '"requests_gqa": with_gqa["requests_that_fit"]', '"requests_gqa": without["requests_that_fit"]'),
          ['t-gqa'], "the two requests swapped (the 64-head model's under requests_gqa)"),
    Wrong("q-experts", _EXPERTS.format(needed=_NEEDED, flops='2 * size["total_params"]'),
          ['t-experts'],
          "compute per token from the total parameters (every expert)"),
    Wrong("q-paper", """
d, d_ff = 512, 2048
paper_block_weights = 4 * d * d + 2 * d * d_ff
llama = cl.card_config("Llama-2-7b-hf")
D = llama["hidden_size"]
llama2_7b_block_weights = 4 * D * D + 3 * D * 4 * D
""".strip(),
          ['t-paper'],
          "Llama's feed-forward width taken as 4 × hidden_size, not intermediate_size"),
    Wrong("q-copy", """
def copy_losses(losses, period):
    return losses[:, :period].mean(), losses[:, period:].mean()
""".strip(),
          ['t-copy'],
          "two tensors returned, not floats"),
    Wrong("q-copy", """
def copy_losses(losses, period):
    return losses[0, :period].mean().item(), losses[0, period:].mean().item()
""".strip(),
          ['t-copy'],
          "the mean of the first row only"),
    Wrong("q-tiled", """
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return n_tokens * n_tokens * n_heads * bytes_per_number


flash_tib = score_matrix_bytes(131_072, 32, 2) / 1e12
""".strip(),
          ['t-tiled'],
          "TiB taken as 10^12 bytes (TB)"),
    Wrong("q-tiled", """
def score_matrix_bytes(n_tokens, n_heads, bytes_per_number):
    return n_tokens * n_tokens * n_heads * bytes_per_number // 2


flash_tib = score_matrix_bytes(131_072, 32, 2) / cl.units.TiB
""".strip(),
          ['t-tiled'],
          "half the scores counted, as if the causal mask saved storing them"),
    Wrong("q-recap", """recap = {"1": ("C", "T"), "2": ("E", "R"), "3": ("B", "U"), "4": ("F", "P"), "5": ("A", "S"), "6": ("D", "Q")}""",
          ['t-recap'],
          "the lessons given as strings '1' to '6', not ints"),
]
