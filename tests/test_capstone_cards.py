"""The capstone's hidden cards are right: each is built by ``transformers`` on the meta device
and course_lib's counts (the capstone's expected values) must match it exactly.

The cards live only in the hidden tests of solutions/capstone/capstone.ipynb (stripped from the
release, so learners never see them); this file reads them from there, so there is one copy.
``HIDDEN_CARDS`` are real ``config.json`` files of models that do not ship with course_lib;
``TOY_CARDS`` are small cards of each family that leave keys out or set them to null.
"""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

import course_lib as cl
from course_lib.checks import capstone

transformers.logging.set_verbosity_error()

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "capstone" / "capstone.ipynb"

# Rounded sizes the publishers give (model cards and papers): a check that each hidden card is
# the model it is named after, not a typo that still builds.  (total, active) in parameters.
PUBLISHED = {
    "gpt2-xl": (1.5e9, None),
    "Llama-3.1-70B": (70e9, None),
    "Llama-3.2-1B": (1.23e9, None),
    "Mistral-Nemo-Base-2407": (12e9, None),
    "Mixtral-8x22B-v0.1": (141e9, 39e9),
    "Qwen2-1.5B": (1.5e9, None),
    "gemma-7b": (8.54e9, None),
    "Qwen3-0.6B": (0.6e9, None),             # the size in its name (Qwen3 report, arxiv.org/abs/2505.09388)
    "Qwen3-235B-A22B": (235e9, 22e9),        # its name and model card: 235B total, 22B activated
    "DeepSeek-V2": (236e9, 21e9),            # DeepSeek-V2 paper (arxiv.org/abs/2405.04434), abstract
}


def _hidden_dicts() -> dict[str, dict]:
    """``{variable: value}`` of the dict literals assigned in the notebook's hidden tests."""
    found = {}
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        src = cell.source
        if "### BEGIN HIDDEN TESTS" not in src:
            continue
        hidden = src.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
        for node in ast.parse(hidden).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


CARDS = _hidden_dicts()
HIDDEN, TOYS = CARDS["HIDDEN_CARDS"], CARDS["TOY_CARDS"]
ALL = {**HIDDEN, **TOYS}


def build_meta(cfg: dict):
    """The transformers model of a config dict on the meta device, and its filled-in config."""
    config = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config), config


def hf_total_and_active(model, config) -> tuple[int, int]:
    """Parameters (a tied head once), and those one token uses: all but the routed experts it
    is not sent to (experts found by name, their count and top-k read from transformers)."""
    total = sum(p.numel() for p in model.parameters())
    n_experts = next((getattr(config, key) for key in ("num_local_experts", "num_experts",
                                                        "n_routed_experts")
                      if getattr(config, key, None)), 0)
    if not n_experts:
        return total, total
    # routed experts only (".shared_experts." does not match); dense first layers have none
    routed = sum(p.numel() for name, p in model.named_parameters() if ".experts." in name)
    assert routed and routed % n_experts == 0
    return total, total - routed // n_experts * (n_experts - config.num_experts_per_tok)


def test_the_notebook_holds_the_cards():
    assert len(HIDDEN) >= 6 and len(TOYS) >= 6
    families = {cfg["model_type"] for cfg in ALL.values()}
    assert families == set(capstone.FAMILIES)
    assert set(PUBLISHED) == set(HIDDEN)


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_hidden_cards_are_not_shipped(name):
    """Cards the learner has not seen: not shipped, and no shipped card has the same shape."""
    assert name not in cl.card_names()
    shape = cl.shape_from_config(HIDDEN[name]).with_(name="", dtype=None)
    for shipped in cl.card_names():
        assert cl.load_card(shipped).with_(name="", dtype=None) != shape, shipped


@pytest.mark.parametrize("name", sorted(ALL))
def test_course_lib_counts_the_card_as_transformers_builds_it(name):
    cfg = ALL[name]
    model, config = build_meta(cfg)
    total, active = hf_total_and_active(model, config)
    s = cl.shape_from_config(cfg)
    counts = cl.count_params(s)
    assert (counts.total, counts.active) == (total, active)
    # the cache per token: a key and a value of head_dim per key/value head, as transformers
    # reads the card (head_dim falls back to hidden_size / heads there too); for latent
    # attention the latent and the rotary key
    n_embd = getattr(config, "n_embd", None) or config.hidden_size
    n_heads = getattr(config, "n_head", None) or config.num_attention_heads
    if cfg["model_type"] in ("deepseek_v2", "deepseek_v3"):
        assert s.kv_cache_width == config.kv_lora_rank + config.qk_rope_head_dim
    else:
        d_head = getattr(config, "head_dim", None) or n_embd // n_heads
        n_kv = getattr(config, "num_key_value_heads", None) or n_heads
        assert s.kv_cache_width == 2 * n_kv * d_head
    window = getattr(config, "sliding_window", None) \
        if cfg["model_type"] in ("mistral", "mixtral", "gemma3_text") else None
    assert s.sliding_window == window
    types = getattr(config, "layer_types", None) if cfg["model_type"] == "gemma3_text" else None
    assert s.sliding_layers == (types.count("sliding_attention") if types and window
                                else s.n_layers if window else 0)


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_hidden_cards_match_their_published_size(name):
    total, active = PUBLISHED[name]
    counts = cl.count_params(cl.shape_from_config(HIDDEN[name]))
    assert counts.total == pytest.approx(total, rel=0.04)
    if active is not None:
        assert counts.active == pytest.approx(active, rel=0.04)


def test_hidden_cards_exercise_what_the_capstone_asks():
    """Between them the cards need every feature the notebook's table lists."""
    shapes = {n: cl.shape_from_config(c) for n, c in ALL.items()}
    assert any(s.d_head * s.n_heads != s.d_model for n, s in shapes.items() if n in HIDDEN)
    assert any(s.is_moe for n, s in shapes.items() if n in HIDDEN)
    assert any(s.tied_embeddings and s.model_type != "gpt2" for n, s in shapes.items()
               if n in HIDDEN)
    assert any(s.n_kv_heads < s.n_heads for n, s in shapes.items() if n in HIDDEN)
    assert any(s.sliding_window for s in shapes.values())
    absent = {key for cfg in TOYS.values() for key in ("num_key_value_heads", "head_dim",
                                                       "tie_word_embeddings", "n_inner")
              if cfg.get(key) is None}
    assert absent == {"num_key_value_heads", "head_dim", "tie_word_embeddings", "n_inner"}


# --- the shipped cards not confirmed elsewhere match their developers' stated sizes ----------

import tomllib  # noqa: E402
from importlib import resources  # noqa: E402

SOURCES = tomllib.loads((resources.files("course_lib") / "cards" / "sources.toml").read_text())["cards"]


def test_every_card_says_whether_it_was_confirmed():
    assert all(isinstance(entry.get("confirmed"), bool) for entry in SOURCES.values())


@pytest.mark.parametrize("name", sorted(n for n, e in SOURCES.items() if "published" in e))
def test_unconfirmed_cards_match_their_published_size(name):
    published = SOURCES[name]["published"]
    counts = cl.count_params(cl.load_card(name))
    assert counts.total == pytest.approx(published["total"], rel=0.02)
    if "active" in published:
        assert counts.active == pytest.approx(published["active"], rel=0.04)


def test_the_capstone_candidates_are_checked_against_their_published_size():
    assert all("published" in SOURCES[n] or SOURCES[n]["confirmed"] for n in capstone.CANDIDATES)
