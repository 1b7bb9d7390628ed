"""course_lib: counters and toy models for "Transformers by counting".

    import course_lib as cl
    s = cl.load_card("gpt2")
    cl.count_params(s).total          # its parameters, by part and in total

Modules, one idea each: ``shapes`` (the ModelShape dataclass), ``cards`` (Hugging Face
config.json → shape, shipped cards), ``params`` (parameters by part), ``memory`` (weight and
KV-cache bytes, requests that fit), ``flops`` (multiply-adds, FLOPs, arithmetic intensity),
``units`` (dtypes, GiB vs GB), ``checks`` (notebook checks with feedback), ``plots``;
toy models in torch, loaded on first use: ``attention``, ``block``, ``tiny_gpt``, ``positions``,
``tiled_attention``, ``moe``, ``tasks``, ``training``, ``profiling``, ``compression``.
Nothing runs on import.
"""
from .cards import (SUPPORTED_MODEL_TYPES, CardError, card_config, card_names, config_from_shape,
                    load_card, shape_from_config)
from .flops import (ForwardMacs, arithmetic_intensity, forward_flops_per_token, forward_macs,
                    forward_macs_per_token, training_flops_per_token, weight_macs_per_token)
from .memory import (LayerKindCache, cached_tokens, kv_cache_by_layer_kind,
                     kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, requests_that_fit,
                     weight_bytes)
from .params import ParamCounts, block_params, count_params
from .shapes import LatentAttention, ModelShape, gpt2_shape, llama_shape
from .units import GB, GiB, dtype_bytes, gb, gib, parse_size

__all__ = [
    "SUPPORTED_MODEL_TYPES", "CardError", "card_config", "card_names", "config_from_shape",
    "load_card", "shape_from_config", "LatentAttention",
    "ForwardMacs", "arithmetic_intensity", "forward_flops_per_token", "forward_macs",
    "forward_macs_per_token", "training_flops_per_token", "weight_macs_per_token",
    "LayerKindCache", "kv_cache_by_layer_kind", "cached_tokens", "kv_cache_bytes_per_sequence", "kv_cache_bytes_per_token",
    "requests_that_fit", "weight_bytes", "ParamCounts", "block_params", "count_params",
    "ModelShape", "gpt2_shape", "llama_shape", "GB", "GiB", "dtype_bytes", "gb", "gib",
    "parse_size",
]

# --- Toy models (attention, block, tiny_gpt, tasks, training) --------------------------------
# They need torch, so they load on first use (`cl.TinyGPT`, `cl.attention`): `import course_lib`
# stays fast and runs nothing.  Other torch modules can add their names to _LAZY.
_LAZY = {
    "scaled_dot_product_attention": "attention", "MultiHeadAttention": "attention",
    "TransformerBlock": "block", "FeedForward": "block",
    "TinyGPT": "tiny_gpt", "n_params": "tiny_gpt", "kv_cache_bytes": "tiny_gpt",
    "repeated_tokens": "tasks", "ChainTask": "tasks", "previous_token_score": "tasks",
    "induction_score": "tasks", "head_scores": "tasks",
    "train": "training", "next_token_losses": "training", "load_induction_model": "training",
    "sinusoidal_positions": "positions", "rotary_cos_sin": "positions", "apply_rotary": "positions",
    "tiled_attention": "tiled_attention", "online_softmax_update": "tiled_attention",
    "measure_peak_extra_memory": "profiling",
    "MoEFeedForward": "moe", "active_params_per_token": "moe",
}
_TORCH_MODULES = {"attention", "block", "tiny_gpt", "tasks", "training", "positions",
                  "tiled_attention", "profiling", "moe", "compression"}


def __getattr__(name):
    import importlib
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _TORCH_MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ += list(_LAZY)
