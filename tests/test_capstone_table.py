"""The capstone's table of what an absent or null key means agrees with the pinned
``transformers`` (``AutoConfig.for_model``, no download) and with course_lib's cards."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

import course_lib as cl

REPO = Path(__file__).resolve().parents[1]
BASE = dict(hidden_size=256, num_attention_heads=4, num_hidden_layers=2, intermediate_size=512,
            vocab_size=1000, max_position_embeddings=128)
"""A small card whose head count (4) is no family's default, so a default cannot pass for it."""


def _table() -> str:
    nb = nbformat.read(REPO / "solutions/capstone/capstone.ipynb", as_version=4)
    return next(c.source for c in nb.cells if "### The keys that matter" in c.source)


def _row(quantity: str) -> str:
    return next(line for line in _table().splitlines() if line.startswith(f"| `{quantity}` |")
                or line.startswith(f"| {quantity} |"))


def _absent(model_type: str, key: str):
    from transformers import AutoConfig
    config = {k: v for k, v in BASE.items() if k != key}
    return getattr(AutoConfig.for_model(model_type, **config), key, None)


def test_absent_key_value_heads():
    row = _row("n_kv_heads")
    assert "as many as `num_attention_heads` for Llama" in row
    assert _absent("llama", "num_key_value_heads") == BASE["num_attention_heads"]
    m = re.search(r"Mistral and Mixtral (\d+), Qwen2 (\d+), Gemma (\d+)", row)
    assert m, row
    said = dict(zip(("mistral", "mixtral", "qwen2", "gemma"),
                    (int(m.group(1)), int(m.group(1)), int(m.group(2)), int(m.group(3)))))
    for model_type, n in said.items():
        assert _absent(model_type, "num_key_value_heads") == n, model_type


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_null_key_value_heads_means_as_many_as_query_heads(model_type):
    from transformers import AutoConfig
    assert "null: as many as `num_attention_heads`" in _row("n_kv_heads")
    c = AutoConfig.for_model(model_type, **BASE, num_key_value_heads=None)
    assert c.num_key_value_heads == BASE["num_attention_heads"]


def test_absent_head_dim_and_window():
    assert "absent Gemma `head_dim`: 256" in _row("d_head")
    assert _absent("gemma", "head_dim") == 256
    for model_type in ("llama", "mistral"):
        assert _absent(model_type, "head_dim") in (None, BASE["hidden_size"] // BASE["num_attention_heads"])
    assert "absent: 4096 tokens for Mistral, no window for Mixtral" in _row("window")
    assert _absent("mistral", "sliding_window") == 4096
    assert _absent("mixtral", "sliding_window") is None


def test_absent_tied_head():
    assert "`true` for GPT-2 and Gemma, `false` for the others" in _row("tied head")
    for model_type, tied in [("llama", False), ("mistral", False), ("mixtral", False),
                             ("qwen2", False), ("gemma", True)]:
        assert _absent(model_type, "tie_word_embeddings") is tied, model_type


@pytest.mark.parametrize("model_type, key", [("mistral", "num_key_value_heads"),
                                             ("qwen2", "num_key_value_heads"),
                                             ("gemma", "num_key_value_heads"),
                                             ("gemma", "head_dim"),
                                             ("mistral", "sliding_window")])
def test_course_lib_reads_an_absent_key_as_transformers_does(model_type, key):
    # 64 query heads: every family's default key/value head count divides it (course_lib checks)
    base = {**BASE, "num_attention_heads": 64, "hidden_size": 64 * 64}
    config = {"model_type": model_type, **{k: v for k, v in base.items() if k != key}}
    shape = cl.shape_from_config(config)
    from transformers import AutoConfig
    want = getattr(AutoConfig.for_model(model_type, **{k: v for k, v in base.items() if k != key}), key)
    got = {"num_key_value_heads": shape.n_kv_heads, "head_dim": shape.d_head,
           "sliding_window": shape.sliding_window}[key]
    assert got == want


# --- the families of 2025-26 ------------------------------------------------------------------

def _table_2026() -> str:
    nb = nbformat.read(REPO / "solutions/capstone/capstone.ipynb", as_version=4)
    return next(c.source for c in nb.cells if "### The five families of 2025-26" in c.source)


def _row_2026(quantity: str) -> str:
    return next(line for line in _table_2026().splitlines()
                if line.startswith((f"| `{quantity}` |", f"| {quantity} |")))


BASE_2026 = dict(BASE, num_key_value_heads=2)


def _absent_2026(model_type: str, key: str):
    from transformers import AutoConfig
    config = {k: v for k, v in BASE_2026.items() if k != key}
    return getattr(AutoConfig.for_model(model_type, **config), key, None)


def test_absent_head_dim_2026():
    row = _row_2026("d_head")
    assert "absent: 128 for Qwen3, 256 for Gemma 3, `hidden_size / num_attention_heads` for Qwen3-MoE" in row
    assert _absent_2026("qwen3", "head_dim") == 128
    assert _absent_2026("gemma3_text", "head_dim") == 256
    assert _absent_2026("qwen3_moe", "head_dim") in (None, BASE["hidden_size"] // BASE["num_attention_heads"])
    shape = cl.shape_from_config({"model_type": "qwen3_moe", **BASE_2026, "num_experts": 4,
                                  "num_experts_per_tok": 1, "moe_intermediate_size": 8})
    assert shape.d_head == BASE["hidden_size"] // BASE["num_attention_heads"]


def test_absent_tied_head_2026():
    assert "absent: `true` for Gemma 3, `false` for Qwen3, Qwen3-MoE and DeepSeek" in _row_2026("tied head")
    for model_type, tied in [("gemma3_text", True), ("qwen3", False), ("qwen3_moe", False),
                             ("deepseek_v2", False)]:
        assert _absent_2026(model_type, "tie_word_embeddings") is tied, model_type


def test_absent_window_and_pattern_2026():
    from transformers import AutoConfig
    assert "absent: 4096" in _row_2026("window")
    assert _absent_2026("gemma3_text", "sliding_window") == 4096
    assert "(`sliding_window_pattern` absent: 6)" in _row_2026("which layers slide")
    config = AutoConfig.for_model("gemma3_text", **dict(BASE_2026, num_hidden_layers=12))
    globals_ = [i for i, t in enumerate(config.layer_types) if t == "full_attention"]
    assert globals_ == [i for i in range(12) if (i + 1) % 6 == 0] == [5, 11]
    shape = cl.shape_from_config({"model_type": "gemma3_text", **dict(BASE_2026, num_hidden_layers=12)})
    assert (shape.sliding_window, shape.sliding_layers) == (4096, 10)
