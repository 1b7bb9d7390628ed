"""Plausible wrong answers to the capstone, "Size a real card", and the test cells each must
cost.  The walk-away, the serving scenario and the GQA and experts examples call ``size_card``, so
a mistake there also costs the cells that build on it (and only those whose cards it changes)."""
from . import Wrong

# The model answer's size_card; each mistake below is one edit of it (checked to apply).
_SIZE_CARD = '''
FAMILIES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "gemma")


def size_card(config, context, gpu_memory_bytes, dtype="bf16"):
    """Total and active parameters, KV-cache bytes per token, and requests of `context` tokens
    that fit beside the weights in `gpu_memory_bytes`, for a config.json dict of one of FAMILIES.
    Weights and cache are stored in `dtype`.  Raises ValueError for another model_type."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"model_type {family!r} is not one of {', '.join(FAMILIES)}")
    if family == "gpt2":
        d, L, H = config["n_embd"], config["n_layer"], config["n_head"]
        n_kv, d_head = H, d // H
        d_ff = config.get("n_inner") or 4 * d
        tied = config.get("tie_word_embeddings", True)
    else:
        d, L, H = config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = config.get("num_key_value_heads") or H
        d_head = config.get("head_dim") or d // H
        d_ff = config["intermediate_size"]
        tied = config.get("tie_word_embeddings", family == "gemma")
    V = config["vocab_size"]

    q, kv = H * d_head, n_kv * d_head          # width of the query and of the key (= value) outputs
    attention = d * q + 2 * d * kv + q * d     # Q, K, V and the output projection
    if family == "gpt2":
        attention += q + 2 * kv + d            # biases on Q, K, V and the output
        mlp = 2 * d * d_ff + d_ff + d          # up and down, with their biases
        norm = 2 * d                           # LayerNorm: a weight and a bias
        embeddings = V * d + config["n_positions"] * d   # tokens and learned positions
    else:
        if family == "qwen2":
            attention += q + 2 * kv            # biases on Q, K, V
        mlp = 3 * d * d_ff                     # gate, up and down
        norm = d                               # RMSNorm: a weight
        embeddings = V * d                     # rotary positions have no parameters
    n_experts = config["num_local_experts"] if family == "mixtral" else 1
    used = config["num_experts_per_tok"] if family == "mixtral" else 1
    router = d * n_experts if family == "mixtral" else 0
    block = attention + n_experts * mlp + router + 2 * norm
    total = embeddings + L * block + norm + (0 if tied else V * d)
    active = total - L * (n_experts - used) * mlp

    bytes_per_number = cl.dtype_bytes(dtype)
    per_token = 2 * L * n_kv * d_head * bytes_per_number
    window = config.get("sliding_window") if family in ("mistral", "mixtral") else None
    kept = min(context, window) if window else context
    free = gpu_memory_bytes - total * bytes_per_number
    requests = int(free // (per_token * kept)) if free > 0 else 0
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
size = size_card(mixtral, 8192, 80 * cl.GiB, "bf16")
{needed}
experts = {{"total_params": size["total_params"], "active_params": size["active_params"],
           "accelerators_needed": n, "flops_per_token": {flops}}}
'''.strip()

_NEEDED = '''n = 1
while size_card(mixtral, 8192, n * 80 * cl.GiB, "bf16")["requests_that_fit"] < 1:
    n += 1'''

_RECAP = '''recap = {{1: ("C", "T"), 2: ("E", "R"), 3: ("B", "U"), 4: ("F", "P"), 5: {five}, 6: {six}}}'''

WRONG = [
    # --- exercise 1: size_card (servable, walkaway, gqa and experts use it) --------------------
    Wrong("q-size-card", _size_card(
        ("block = attention + n_experts * mlp + router + 2 * norm",
         "block = attention + used * mlp + router + 2 * norm"),
        ("active = total - L * (n_experts - used) * mlp", "active = total")),
        ["t-size-card", "t-size-card-unseen", "t-servable", "t-experts"],
        "mixture of experts sized by its active parameters (only the experts a token uses)"),
    Wrong("q-size-card", _size_card(
        ('d_head = config.get("head_dim") or d // H', "d_head = d // H")),
        ["t-size-card", "t-size-card-unseen"],
        "head_dim taken as hidden_size / heads (passes every shipped card, fails the hidden ones)"),

    # --- exercise 2: servable ---------------------------------------------------------------
    Wrong("q-servable", _SERVABLE.format(
        requests='int((gpu_memory_bytes - size["total_params"] * cl.dtype_bytes(dtype)) // '
                 '(size["kv_cache_bytes_per_token"] * context))',
        condition="positions >= context and n >= 1"),
        ["t-servable"], "sliding window ignored: every request caches all its tokens"),
    Wrong("q-servable", _SERVABLE.format(requests='size["requests_that_fit"]', condition="n >= 1"),
          ["t-servable"], "the card's positions ignored: GPT-2 and Llama 2 'serve' 8,192 tokens"),

    # --- exercise 3: the walk-away question ----------------------------------------------------
    Wrong("q-walkaway", '''
chosen = "Mixtral-8x7B-v0.1"
walkaway = {"model": chosen, **size_card(cl.card_config(chosen), **capstone.SCENARIO)}
'''.strip(), ["t-walkaway"], "chose a model whose weights do not fit the accelerator"),
    Wrong("q-walkaway", '''
chosen = "Qwen2-7B-Instruct"
size = size_card(cl.card_config(chosen), **capstone.SCENARIO)
walkaway = {"model": chosen, **size, "kv_cache_bytes_per_token": size["kv_cache_bytes_per_token"] * 8192}
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
               "/ (80 * cl.GiB))",
        flops='2 * size["active_params"]'),
          ["t-experts"], "memory sized by active parameters: Mixtral 'fits' one accelerator"),

    # --- the module recap ----------------------------------------------------------------------
    Wrong("q-recap", _RECAP.format(five='("D", "Q")', six='("A", "S")'), ["t-recap"],
          "lessons 5 and 6 swapped (both are about the cache)"),
]
