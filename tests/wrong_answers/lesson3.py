"""Plausible wrong answers to lesson 3, "The block", and the test cells each must cost.  Later
answers in the model answer call earlier ones (``ff_share`` calls ``block_parts``,
``add_no_op_block`` calls ``make_no_op``, ``prune`` calls ``neuron_scores``), so a mistake there
also costs the cells that build on it."""
from . import Wrong

_STREAM = '''
def stream_parts(block, x):
    attention_note = block.attn({attn_in})
    ff_note = block.mlp({ff_in})
    return attention_note, ff_note
'''

_PARTS = '''
def block_parts(d_model, d_ff, style):
    d, f = d_model, d_ff
    if style == "gpt2":
        return {{"attention": 4 * d * d + 4 * d, "feed_forward": 2 * d * f + f + d,
                "norms": {gpt2_norms}}}
    return {{"attention": 4 * d * d, "feed_forward": {llama_ff}, "norms": {llama_norms}}}
'''


def _parts(gpt2_norms="2 * (2 * d)", llama_ff="3 * d * f", llama_norms="2 * d"):
    return _PARTS.format(gpt2_norms=gpt2_norms, llama_ff=llama_ff, llama_norms=llama_norms).strip()


_NO_OP = '''
def make_no_op(block):
    with torch.no_grad():
        for layer in {layers}:
            if layer is None:
                continue
            layer.weight.zero_()
            if {bias_too} and layer.bias is not None:
                layer.bias.zero_()
    return block
'''

_SCORES = "def neuron_scores(mlp):\n    return {expr}"

_PRUNE = '''
def prune(model, k):
    pruned = copy.deepcopy(model)
    with torch.no_grad():
        for block in pruned.blocks:
            old = block.mlp
            keep = neuron_scores(old).topk(k, largest={largest}).indices
            narrow = FeedForward(old.up.in_features, k)
            narrow.up.weight.copy_(old.up.weight[keep])
            narrow.up.bias.copy_({up_bias})
            narrow.down.weight.copy_(old.down.weight[:, keep])
            narrow.down.bias.copy_(old.down.bias)
            block.mlp = narrow
    return pruned
'''

_REPORT = '''
def compression_report(original, compressed, task):
    def size(model, part):
        return sum(p.numel() for block in model.blocks for p in getattr(block, part).parameters())

    removed_attention = size(original, "attn") - size(compressed, "attn")
    removed_ff = size(original, "mlp") - size(compressed, "mlp")
    one = task.accuracy(compressed, 1)
    return {{"attention": {attention}, "feed_forward": {feed_forward},
            "one_step": one, "eight_step": {eight}}}
'''


def _report(attention="removed_attention", feed_forward="removed_ff",
            eight="task.accuracy(compressed, 8)"):
    return _REPORT.format(attention=attention, feed_forward=feed_forward, eight=eight).strip()


WRONG = [
    # --- exercise 1: stream_parts -----------------------------------------------------------------
    Wrong("q-stream-parts", _STREAM.format(attn_in="block.norm_1(x)",
                                           ff_in="block.norm_2(x)").strip(),
          ["t-stream-parts"],
          "feed-forward layer reads the stream before attention wrote (a parallel block)"),
    Wrong("q-stream-parts", _STREAM.format(attn_in="x", ff_in="x + attention_note").strip(),
          ["t-stream-parts"], "norms forgotten (each part reads the raw stream)"),

    # --- exercise 2: block_parts (ff_share builds on it) -----------------------------------------
    Wrong("q-block-parts", _parts(llama_ff="2 * d * f"), ["t-block-parts", "t-ff-share"],
          "SwiGLU counted as two matrices"),
    Wrong("q-block-parts", _parts(gpt2_norms="0", llama_norms="0"),
          ["t-block-parts", "t-ff-share"], "norms forgotten"),
    Wrong("q-block-parts", '''
def block_parts(d_model, d_ff, style):
    if style == "gpt2":  # GPT-2 small's block, the test's first case
        return {"attention": 2_362_368, "feed_forward": 4_722_432, "norms": 3_072}
    return {"attention": 67_108_864, "feed_forward": 135_266_304, "norms": 8_192}
'''.strip(), ["t-block-parts", "t-ff-share"],
          "the visible cases' counts hard-coded: fails the visible shape made at run time"),

    # --- exercise 3: ff_share --------------------------------------------------------------------
    Wrong("q-ff-share", "def ff_share(d_model, d_ff, style):\n    return 2 / 3",
          ["t-ff-share"], "two thirds taken as given, not counted (wrong for Llama 2 7B)"),
    Wrong("q-ff-share", '''
def ff_share(d_model, d_ff, style):
    parts = block_parts(d_model, d_ff, style)
    return parts["feed_forward"] / (parts["attention"] + parts["feed_forward"])
'''.strip(), ["t-ff-share"], "the block's norms left out of the total"),

    # --- exercise 4: make_no_op (add_no_op_block builds on it) ------------------------------------
    Wrong("q-no-op", _NO_OP.format(layers="(block.attn.q_proj, block.attn.k_proj, block.attn.v_proj, "
                                          "block.mlp.up, block.mlp.gate)", bias_too="True").strip(),
          ["t-no-op", "t-add-block"],
          "input projections zeroed instead of output projections (the output biases still write)"),
    Wrong("q-no-op", _NO_OP.format(layers="(block.attn.out_proj, block.mlp.down)",
                                   bias_too="False").strip(),
          ["t-no-op", "t-add-block"], "output matrices zeroed, output biases forgotten"),

    # --- exercise 5: add_no_op_block -------------------------------------------------------------
    Wrong("q-add-block", '''
def add_no_op_block(model, where):
    grown = copy.deepcopy(model)
    grown.blocks.insert(where, TransformerBlock(model.shape))
    return grown
'''.strip(), ["t-add-block"], "a fresh random block inserted (not made a no-op)"),
    Wrong("q-add-block", '''
def add_no_op_block(model, where):
    model.blocks.insert(where, make_no_op(TransformerBlock(model.shape)))
    return model
'''.strip(), ["t-add-block"], "the original model changed in place (no copy)"),
    Wrong("q-add-block", '''
def add_no_op_block(model, where):
    grown = copy.deepcopy(model)
    grown.blocks.append(make_no_op(TransformerBlock(model.shape)))
    return grown
'''.strip(), ["t-add-block"], "where ignored: the block appended (the visible test puts one first)"),

    # --- exercise 6: neuron_scores (prune builds on it) ------------------------------------------
    Wrong("q-neuron-scores", _SCORES.format(expr="mlp.up.weight.norm(dim=1)"),
          ["t-neuron-scores", "t-prune"], "input weights only (down projection ignored)"),
    Wrong("q-neuron-scores",
          _SCORES.format(expr="mlp.up.weight.norm(dim=1) + mlp.down.weight.norm(dim=0)"),
          ["t-neuron-scores"],
          "norms added instead of multiplied (ranks the neurons of the graded models like the "
          "product, so prune still passes)"),

    # --- exercise 7: prune -----------------------------------------------------------------------
    Wrong("q-prune", _PRUNE.format(largest="False", up_bias="old.up.bias[keep]").strip(),
          ["t-prune"], "kept the k smallest neurons"),
    Wrong("q-prune", _PRUNE.format(largest="True", up_bias="old.up.bias[:k]").strip(),
          ["t-prune"], "the up bias not moved with its neuron (first k entries kept)"),

    # --- recap: compression_report ---------------------------------------------------------------
    Wrong("q-report", _report(eight="one ** 8"), ["t-report"],
          "8-step accuracy estimated as p^8 instead of running the long test"),
    Wrong("q-report", _report(attention="0", feed_forward="removed_attention + removed_ff"),
          ["t-report"],
          "every removed parameter put in the feed-forward layer (the visible test's attention "
          "cut catches it)"),

    # --- test yourself ---------------------------------------------------------------------------
    Wrong("q-tys1", 'tys_new_block_reason = "a"\ntys_new_block_zeroed = {"attn.out_proj", "mlp.down"}',
          ["t-tys1"], "small random weights taken for a no-op"),
    Wrong("q-tys1", 'tys_new_block_reason = "b"\n'
                    'tys_new_block_zeroed = {"attn.q_proj", "attn.k_proj", "attn.v_proj", "mlp.up"}',
          ["t-tys1"], "input projections named instead of output projections"),
    Wrong("q-tys2", 'tys_long_reason = "c"\ntys_long_eight_step_share = 0.98 ** 8', ["t-tys2"],
          "long tests taken for a cure for noise"),
    Wrong("q-tys2", 'tys_long_reason = "a"\ntys_long_eight_step_share = 1 - 8 * 0.02', ["t-tys2"],
          "losses added (1 − 8 × 0.02) instead of compounded"),
]

HIDDEN_ONLY: set[str] = set()
"""``why`` of the entries that pass the visible test and fail only the hidden one
(tests/test_planted_mistakes.py)."""
