"""Plausible wrong answers to lesson 5, "Generation and the KV cache", and the test cells each
must cost.  In the model answer ``requests_fit`` calls ``kv_cache_size``, ``ridge_point``
calls ``flops_per_weight_byte``, test-yourself 1 uses ``kv_cache_size``, test-yourself 2 uses
``flops_per_weight_byte`` and ``ridge_point``, and the recap uses ``requests_fit`` and
``ridge_point``: a mistake there also costs the cells that build on it, unless the cases those
cells grade happen not to show it (both recap and test-yourself shapes have as many key/value
heads as query heads)."""
from . import Wrong

_GENERATE = '''
def generate_cached(model, prompt, n_new):
    tokens = prompt
    with torch.no_grad():
        out = model.run(prompt)
        first = out
        for i in range(n_new):
            new = out.logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, new], dim=1)
            if i < n_new - 1:
                out = {step}
    return tokens
'''


def _kv(numbers):
    return f'''
def kv_cache_size(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number):
    return {numbers} * bytes_per_number
'''.strip()


def _requests(free, per_request="kv_cache_size(n_layers, n_heads, n_kv_heads, d_head, n_tokens, "
                                  "bytes_per_number)"):
    return f'''
def requests_fit(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
                 bytes_per_number):
    free = {free}
    per_request = {per_request}
    return max(0, int(free // per_request))
'''.strip()


_TYS2 = '''
tys2_decode_flops_per_byte = {decode}
tys2_prefill_flops_per_byte = {prefill}
tys2_decode_bound = "{decode_bound}"
tys2_prefill_bound = "{prefill_bound}"
'''

WRONG = [
    # --- exercise 1: generate_cached -------------------------------------------------------------
    Wrong("q-generate-cached", _GENERATE.format(step="model.run(tokens)").strip(),
          ["t-generate-cached"],
          "runs the whole sequence again at every step: right tokens, but no cache"),
    Wrong("q-generate-cached", _GENERATE.format(step="model.run(new, first.kvs)").strip(),
          ["t-generate-cached"],
          "passes the prompt's cache at every step instead of the latest one (stale cache)"),

    # --- exercise 2: kv_cache_size (requests_fit, tys1 and the recap build on it) ----------------
    Wrong("q-kv-cache-size", _kv("n_layers * n_kv_heads * d_head * n_tokens"),
          ["t-kv-cache-size", "t-requests-fit", "t-tys1", "t-recap"],
          "keys counted but not values"),
    Wrong("q-kv-cache-size", _kv("2 * n_layers * n_heads * d_head * n_tokens"),
          ["t-kv-cache-size", "t-requests-fit"],
          "query heads used for the cache (tys1 and the recap have n_kv_heads = n_heads)"),

    # --- exercise 3: flops_per_weight_byte (ridge_point and tys2 build on it) --------------------
    Wrong("q-flops-per-weight-byte", '''
def flops_per_weight_byte(n_tokens, bytes_per_number):
    return n_tokens / bytes_per_number
'''.strip(), ["t-flops-per-weight-byte", "t-ridge-point", "t-tys2"],
          "multiply-adds reported as FLOPs"),
    Wrong("q-flops-per-weight-byte", '''
def flops_per_weight_byte(n_tokens, bytes_per_number):
    return 2 * n_tokens / (8 * bytes_per_number)
'''.strip(), ["t-flops-per-weight-byte", "t-ridge-point", "t-tys2"],
          "divided by bits instead of bytes"),

    # --- exercise 4: ridge_point (tys2 and the recap build on it) --------------------------------
    Wrong("q-ridge-point", '''
def ridge_point(peak_flops, bandwidth, bytes_per_number):
    ridge = bandwidth / peak_flops
    return ridge, ridge / flops_per_weight_byte(1, bytes_per_number)
'''.strip(), ["t-ridge-point", "t-tys2", "t-recap"],
          "ridge taken as bandwidth ÷ peak (bytes per FLOP)"),
    Wrong("q-ridge-point", '''
def ridge_point(peak_flops, bandwidth, bytes_per_number):
    ridge = peak_flops / bandwidth
    return ridge, ridge
'''.strip(), ["t-ridge-point"],
          "decode batch taken as the ridge itself: right at 2 bytes only (the run-time case "
          "catches it)"),

    # --- exercise 5: requests_fit (the recap builds on it) ---------------------------------------
    Wrong("q-requests-fit", _requests("memory_gb * 10**9"), ["t-requests-fit", "t-recap"],
          "weights left out of the memory budget"),
    Wrong("q-requests-fit", _requests("memory_gb * 2**30 - n_params * bytes_per_number"),
          ["t-requests-fit", "t-recap"], "the data sheet's GB read as GiB"),
    Wrong("q-requests-fit", _requests("memory_gb * 10**9 - n_params * bytes_per_number").replace(
        "max(0, int(free // per_request))", "int(free // per_request)"), ["t-requests-fit"],
          "no floor at 0: a negative count when the weights alone do not fit (the visible test's 13B on 24 GB)"),
    Wrong("q-requests-fit", _requests("memory_gb * 10**9 - n_params * 2"), ["t-requests-fit"],
          "the weights always at 2 bytes a number (the visible test's 8-bit case)"),

    # --- test yourself -----------------------------------------------------------------------
    Wrong("q-tys1", 'tys1_holds = "keys and values"\n'
                    'tys1_cache_gib = kv_cache_size(32, 32, 32, 128, 8192, 2) / 1e9',
          ["t-tys1"], "GB given for GiB (4.29)"),
    Wrong("q-tys1", 'tys1_holds = "keys"\n'
                    'tys1_cache_gib = kv_cache_size(32, 32, 32, 128, 8192, 2) / 2**30',
          ["t-tys1"], "the cache said to hold keys only"),
    Wrong("q-tys2", _TYS2.format(decode=0.5, prefill=256, decode_bound="memory",
                                 prefill_bound="compute").strip(),
          ["t-tys2"], "multiply-adds per byte given as FLOPs per byte"),
    Wrong("q-tys2", _TYS2.format(decode=1, prefill=512, decode_bound="compute",
                                 prefill_bound="memory").strip(),
          ["t-tys2"], "the two bounds swapped"),

    # --- recap ---------------------------------------------------------------------------------
    Wrong("q-recap", '''
card = cl.load_card("Llama-2-13b-hf")
cache = kv_cache_size(card.n_layers, card.n_heads, card.n_kv_heads, card.d_head, 4096, 2)
recap_requests = int(80 * 10**9 // cache)
recap_bound = "memory"
'''.strip(), ["t-recap"], "weights left out of the budget"),
    Wrong("q-recap", '''
card = cl.load_card("Llama-2-13b-hf")
recap_requests = requests_fit(80, cl.count_params(card).total, card.n_layers, card.n_heads,
                              card.n_kv_heads, card.d_head, 4096, 2)
recap_bound = "compute"
'''.strip(), ["t-recap"], "a full batch taken to be compute-bound"),
]

HIDDEN_ONLY: set[str] = set()
"""``why`` of the entries that pass the visible test and fail only the hidden one (none: every
entry fails the visible part of its own test cell, tests/test_planted_mistakes.py)."""
