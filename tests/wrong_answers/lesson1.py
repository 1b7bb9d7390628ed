"""Plausible wrong answers to lesson 1, "The shape of a transformer", and the test cells each
must cost.  Later exercises in the model answer call ``gpt2_params``, ``embedding_share`` and
``block_parts``, so a mistake there also costs the cells that build on it."""
from . import Wrong

_GPT2 = '''
def gpt2_params(d_model, n_layers, d_vocab, n_ctx):
    """Parameters of a GPT-2-style model (an int)."""
    d = d_model
    embeddings = {embeddings}
    attention = {attention}
    feed_forward = {feed_forward}
    norms = {norms}
    final_norm = {final_norm}
    return embeddings + n_layers * (attention + feed_forward + norms) + final_norm{extra}
'''


def _gpt2(embeddings="d_vocab * d + n_ctx * d", attention="4 * d * d + 4 * d",
          feed_forward="2 * (4 * d) * d + 4 * d + d", norms="2 * (2 * d)", final_norm="2 * d",
          extra=""):
    return _GPT2.format(embeddings=embeddings, attention=attention, feed_forward=feed_forward,
                        norms=norms, final_norm=final_norm, extra=extra).strip()


# gpt2_params feeds embedding_share, ff_shares, doubling, spec_sheet_costs and tys1.
_ALL_AFTER_GPT2 = ["t-gpt2-params", "t-embedding-share", "t-ff-shares", "t-doubling",
                   "t-spec-sheet-costs", "t-tys1"]

_BLOCK = '''
def block_parts(d_model):
    """One GPT-2 block's parameters: {{"attention": ..., "feed_forward": ..., "norms": ...}}."""
    d = d_model
    return {{"attention": {attention},
            "feed_forward": {feed_forward},
            "norms": {norms}}}
'''


def _block(attention="4 * d * d + 4 * d", feed_forward="8 * d * d + 5 * d", norms="4 * d"):
    return _BLOCK.format(attention=attention, feed_forward=feed_forward, norms=norms).strip()


_COSTS = '''
def spec_sheet_costs(n_layers, d_model, n_heads, d_vocab, n_ctx):
    params = gpt2_params(d_model, n_layers, d_vocab, n_ctx)
    kv_numbers = {kv}
    macs = n_layers * (12 * d_model**2 + 2 * n_ctx * d_model) + d_model * d_vocab
    return {{"params": params,
            "weight_bytes": {weight_bytes},
            "kv_cache_bytes": 2 * kv_numbers,
            "flops_per_token": {flops}}}
'''


def _costs(kv="2 * n_layers * n_ctx * d_model", weight_bytes="2 * params", flops="2 * macs"):
    return _COSTS.format(kv=kv, weight_bytes=weight_bytes, flops=flops).strip()


WRONG = [
    # --- exercise 1: gpt2_params ---------------------------------------------------------------
    Wrong("q-gpt2-params", _gpt2(extra=" + d_vocab * d"), _ALL_AFTER_GPT2,
          "tied output head counted a second time"),
    Wrong("q-gpt2-params", _gpt2(embeddings="d_vocab * d"), _ALL_AFTER_GPT2,
          "learned positions forgotten"),
    Wrong("q-gpt2-params", _gpt2(final_norm="0"),
          ["t-gpt2-params", "t-embedding-share", "t-ff-shares", "t-doubling",
           "t-spec-sheet-costs"],
          "final LayerNorm forgotten (too small to move tys1's rounded answers)"),
    Wrong("q-gpt2-params", _gpt2(attention="4 * d * d", feed_forward="8 * d * d",
                                 norms="0", final_norm="0"),
          ["t-gpt2-params", "t-embedding-share", "t-ff-shares", "t-doubling",
           "t-spec-sheet-costs"],
          "biases and norms forgotten: 12·d² per block (tys1's rounded answers still pass)"),
    Wrong("q-gpt2-params", _gpt2(feed_forward="2 * d * d + d + d"), _ALL_AFTER_GPT2,
          "feed-forward width taken as d_model instead of 4·d_model"),
    Wrong("q-gpt2-params", '''
def gpt2_params(d_model, n_layers, d_vocab, n_ctx):
    return 124_439_808
'''.strip(),
          ["t-gpt2-params", "t-embedding-share", "t-ff-shares", "t-doubling",
           "t-spec-sheet-costs"],
          "GPT-2 small hard-coded: passes the visible test, fails the hidden shapes"),
    Wrong("q-gpt2-params", '''
def gpt2_params(d_model, n_layers, d_vocab, n_ctx):
    shape = cl.gpt2_shape(d_model=d_model, n_layers=n_layers, n_heads=1,
                          d_vocab=d_vocab, n_ctx=n_ctx)
    return cl.count_params(shape).total
'''.strip(),
          ["t-gpt2-params", "t-embedding-share", "t-ff-shares", "t-doubling",
           "t-spec-sheet-costs"],
          "calls course_lib's counter instead of counting (own_work rejects it)"),

    # --- exercise 2: embedding_share -------------------------------------------------------------
    Wrong("q-embedding-share", '''
def embedding_share(d_model, n_layers, d_vocab, n_ctx):
    embeddings = d_vocab * d_model
    return embeddings, embeddings / gpt2_params(d_model, n_layers, d_vocab, n_ctx)
'''.strip(), ["t-embedding-share", "t-tys1"], "position table left out of the embeddings"),
    Wrong("q-embedding-share", '''
def embedding_share(d_model, n_layers, d_vocab, n_ctx):
    embeddings = (d_vocab + n_ctx) * d_model
    return embeddings, 100 * embeddings / gpt2_params(d_model, n_layers, d_vocab, n_ctx)
'''.strip(), ["t-embedding-share", "t-tys1"], "share given in percent, not as a fraction"),
    Wrong("q-embedding-share", '''
def embedding_share(d_model, n_layers, d_vocab, n_ctx):
    embeddings = (d_vocab + n_ctx) * d_model
    rest = gpt2_params(d_model, n_layers, d_vocab, n_ctx) - embeddings
    return embeddings, embeddings / rest
'''.strip(), ["t-embedding-share", "t-tys1"], "divided by the rest of the model, not the total"),

    # --- exercise 3: block_parts (ff_shares and doubling build on it) ----------------------------
    Wrong("q-block-parts", _block(attention="4 * d * d", feed_forward="8 * d * d"),
          ["t-block-parts", "t-ff-shares", "t-doubling"], "biases forgotten"),
    Wrong("q-block-parts", _block(norms="2 * d"),
          ["t-block-parts", "t-ff-shares", "t-doubling"],
          "LayerNorms counted with a weight only (or only one per block)"),
    Wrong("q-block-parts", _block(feed_forward="2 * d * d + 2 * d"),
          ["t-block-parts", "t-ff-shares", "t-doubling"],
          "feed-forward width taken as d_model"),

    # --- exercise 4: ff_shares -------------------------------------------------------------------
    Wrong("q-ff-shares", '''
def ff_shares(d_model, n_layers, d_vocab, n_ctx):
    parts = block_parts(d_model)
    of_model = n_layers * parts["feed_forward"] / gpt2_params(d_model, n_layers, d_vocab, n_ctx)
    return 2 / 3, of_model
'''.strip(), ["t-ff-shares"], "two thirds of the matrices, biases and norms ignored"),
    Wrong("q-ff-shares", '''
def ff_shares(d_model, n_layers, d_vocab, n_ctx):
    parts = block_parts(d_model)
    of_block = parts["feed_forward"] / sum(parts.values())
    return of_block, of_block
'''.strip(), ["t-ff-shares"], "share of a block given as the share of the whole model"),

    # --- exercise 5: doubling --------------------------------------------------------------------
    Wrong("q-doubling", '''
def doubling(d_model, n_layers, d_vocab, n_ctx):
    return 4, 2, 4, 2
'''.strip(), ["t-doubling"], "round factors of the d² terms, embeddings ignored"),
    Wrong("q-doubling", '''
def doubling(d_model, n_layers, d_vocab, n_ctx):
    def blocks(d, L):
        return L * sum(block_parts(d).values())
    d, L = d_model, n_layers
    wide, deep = blocks(2 * d, L) / blocks(d, L), blocks(d, 2 * L) / blocks(d, L)
    return wide, deep, wide, deep
'''.strip(), ["t-doubling"], "whole model assumed to grow like its blocks"),

    # --- exercise 6: spec_sheet_costs ------------------------------------------------------------
    Wrong("q-spec-sheet-costs", _costs(flops="macs"), ["t-spec-sheet-costs"],
          "multiply-adds reported as FLOPs"),
    Wrong("q-spec-sheet-costs", _costs(kv="n_layers * n_ctx * d_model"), ["t-spec-sheet-costs"],
          "KV cache with keys only (factor 2 for values missing)"),
    Wrong("q-spec-sheet-costs", _costs(kv="2 * n_layers * n_ctx * d_model * n_heads"),
          ["t-spec-sheet-costs"], "KV cache multiplied by n_heads on top of d_model"),
    Wrong("q-spec-sheet-costs", _costs(weight_bytes="params"), ["t-spec-sheet-costs"],
          "weight memory given in parameters, not bytes"),
    Wrong("q-spec-sheet-costs", _costs(flops="2 * params"), ["t-spec-sheet-costs"],
          "2 × parameters rule of thumb instead of the formula"),

    # --- test yourself -----------------------------------------------------------------------------
    Wrong("q-tys1", "tys1_params_millions = 163\ntys1_embedding_percent = 24.2", ["t-tys1"],
          "tied head counted twice (in the count and the share)"),
    Wrong("q-tys1", "tys1_params_millions = 124.4\ntys1_embedding_percent = 31.0", ["t-tys1"],
          "positions left out of the embeddings"),
    Wrong("q-tys2", 'tys2_bigger = "attention"\ntys2_ff_share = 2 / 3', ["t-tys2"],
          "attention taken as the bigger part"),
    Wrong("q-tys2", 'tys2_bigger = "feed-forward"\ntys2_ff_share = 2', ["t-tys2"],
          "ratio feed-forward ÷ attention given as the share"),
    Wrong("q-tys3", "tys3_width_factor = 2\ntys3_layers_factor = 2", ["t-tys3"],
          "width taken to grow block parameters linearly"),
    Wrong("q-tys3", "tys3_width_factor = 4\ntys3_layers_factor = 1", ["t-tys3"],
          "one block's size given for the stack of blocks"),
]
