"""Model cards: Hugging Face ``config.json`` files turned into a :class:`ModelShape`.

``shape_from_config`` maps one family's keys to the course's names, with the defaults the
``transformers`` config classes use when a key is absent (for example GPT-2's ``n_inner: null``
means 4·d_model, Llama's missing ``num_key_value_heads`` means as many as query heads).
The public cards of shared/REFERENCE.md ship in ``course_lib/cards/`` and load by name.

Errors: every problem with a card (not JSON, a required key missing, a value of the wrong
kind or size, an unsupported ``model_type``) raises :class:`CardError`, a ``ValueError``
whose message names the key and the value.
"""
from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from .shapes import ModelShape

SUPPORTED_MODEL_TYPES = ("gpt2", "llama", "mistral", "mixtral")


class CardError(ValueError):
    """A model card that cannot be read as a shape; the message names the problem."""


def _require(cfg: dict, *keys: str):
    """The first of ``keys`` present (aliases), or CardError naming them."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    raise CardError(f"config is missing the required key {keys[0]!r}")


def _get(cfg: dict, key: str, default):
    value = cfg.get(key)
    return default if value is None else value


def _dtype(cfg: dict) -> str | None:
    value = cfg.get("torch_dtype", cfg.get("dtype"))
    return str(value).replace("torch.", "") if value is not None else None


def _from_gpt2(cfg: dict) -> dict:
    d_model = _require(cfg, "n_embd", "hidden_size")
    return dict(
        d_model=d_model,
        n_layers=_require(cfg, "n_layer", "num_hidden_layers"),
        n_heads=_require(cfg, "n_head", "num_attention_heads"),
        d_ff=_get(cfg, "n_inner", 4 * d_model if isinstance(d_model, int) else d_model),
        d_vocab=_require(cfg, "vocab_size"),
        n_ctx=_require(cfg, "n_positions", "n_ctx", "max_position_embeddings"),
        tied_embeddings=_get(cfg, "tie_word_embeddings", True),
    )


def _from_llama(cfg: dict, default_kv_heads=None, windowed=False, default_window=None) -> dict:
    n_heads = _require(cfg, "num_attention_heads")
    bias = _get(cfg, "attention_bias", False)
    return dict(
        d_model=_require(cfg, "hidden_size"),
        n_layers=_require(cfg, "num_hidden_layers"),
        n_heads=n_heads,
        n_kv_heads=_get(cfg, "num_key_value_heads", default_kv_heads or n_heads),
        d_head=cfg.get("head_dim"),
        d_ff=_require(cfg, "intermediate_size"),
        d_vocab=_require(cfg, "vocab_size"),
        n_ctx=_require(cfg, "max_position_embeddings"),
        mlp="swiglu", norm="rmsnorm", positions="rotary",
        qkv_bias=bias, out_bias=bias, mlp_bias=_get(cfg, "mlp_bias", False),
        tied_embeddings=_get(cfg, "tie_word_embeddings", False),
        # Llama ignores a sliding_window key; Mistral and Mixtral honour it.
        sliding_window=cfg.get("sliding_window", default_window) if windowed else None,
    )


def _from_mistral(cfg: dict) -> dict:
    # MistralConfig defaults: 8 kv heads, a 4,096-token window, no biases.
    d = _from_llama(cfg, default_kv_heads=8, windowed=True, default_window=4096)
    d.update(qkv_bias=False, out_bias=False, mlp_bias=False)
    return d


def _from_mixtral(cfg: dict) -> dict:
    d = _from_llama(cfg, default_kv_heads=8, windowed=True)
    d.update(qkv_bias=False, out_bias=False, mlp_bias=False,
             n_experts=_get(cfg, "num_local_experts", 8),
             n_experts_per_tok=_get(cfg, "num_experts_per_tok", 2))
    return d


_FAMILIES = {"gpt2": _from_gpt2, "llama": _from_llama, "mistral": _from_mistral,
             "mixtral": _from_mixtral}


def shape_from_config(config: dict | str | os.PathLike, name: str = "") -> ModelShape:
    """Build a :class:`ModelShape` from a Hugging Face ``config.json``.

    Args:
        config: the parsed dict, or a path to the JSON file.
        name: a label for tables (defaults to the file's folder name or ``model_type``).
    Raises:
        CardError: unreadable file or JSON, unsupported ``model_type``, a required key missing,
            or a value that fails the shape's validation (the message names it).
    """
    if not isinstance(config, dict):
        path = Path(config)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise CardError(f"no such file: {path}") from None
        except OSError as e:
            raise CardError(f"cannot read {path}: {e.strerror or e}") from None
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise CardError(f"{path} is not valid JSON: {e.msg} at line {e.lineno} "
                            f"column {e.colno}") from None
        name = name or (path.parent.name if path.name == "config.json" else path.stem)
    if not isinstance(config, dict):
        raise CardError(f"config must be a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type not in _FAMILIES:
        raise CardError(f"unsupported model_type {model_type!r}; supported: "
                        + ", ".join(SUPPORTED_MODEL_TYPES))
    fields = _FAMILIES[model_type](config)
    for key, value in fields.items():
        if isinstance(value, float) and value.is_integer():
            fields[key] = int(value)
    try:
        return ModelShape(**fields, dtype=_dtype(config), model_type=model_type,
                          name=name or model_type)
    except ValueError as e:
        raise CardError(f"bad {model_type} config: {e}") from None
    except TypeError as e:  # e.g. a list where a number belongs
        raise CardError(f"bad {model_type} config: {e}") from None


def card_names() -> list[str]:
    """Names of the cards shipped with the course (shared/REFERENCE.md)."""
    folder = resources.files("course_lib") / "cards"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def card_config(name: str) -> dict:
    """The raw ``config.json`` dict of a shipped card."""
    if name not in card_names():
        raise CardError(f"no shipped card named {name!r}; shipped: {', '.join(card_names())}")
    return json.loads((resources.files("course_lib") / "cards" / f"{name}.json").read_text())


def load_card(name_or_path: str | os.PathLike) -> ModelShape:
    """A shipped card by name (``"gpt2"``, ``"Llama-2-70b-hf"``, ...) or a ``config.json`` path."""
    if str(name_or_path) in card_names():
        return shape_from_config(card_config(str(name_or_path)), name=str(name_or_path))
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists() and path.suffix != ".json" and os.sep not in str(name_or_path):
        raise CardError(f"no shipped card or file named {str(name_or_path)!r}; "
                        f"shipped: {', '.join(card_names())}")
    return shape_from_config(path)
