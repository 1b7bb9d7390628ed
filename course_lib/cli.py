"""``python -m course_lib size CARD``: the four sizes behind a model's name, from its card.

    python -m course_lib size Llama-2-7b-hf --context 8192 --dtype bf16 --gpu-memory 80GB
    python -m course_lib size path/to/config.json --json
    python -m course_lib size gpt-oss-20b --verify

``--verify`` also builds the card in transformers on the meta device and prints, part by part,
whether course_lib's counts agree (exit status 1 if any part differs); for a family the course
does not count it still prints transformers' total (exit status 2, as for any refused card).

CARD is a shipped card's name (``python -m course_lib cards`` lists them) or a path to a
Hugging Face ``config.json`` (or the folder holding one).  Any problem with the input prints
one line on stderr naming it and exits with status 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from .cards import (SUPPORTED_MODEL_TYPES, CardError, card_names, decoder_only_model_types,
                    load_config, shape_from_config)
from .flops import forward_macs_per_token
from .memory import (kv_cache_by_layer_kind, kv_cache_bytes_per_sequence,
                     kv_cache_bytes_per_token, requests_that_fit, weight_bytes)
from .params import count_params
from .shapes import ModelShape
from .units import GB, GiB, H100_SXM_BYTES, dtype_bytes, parse_size


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _memory(text: str) -> int:
    """An accelerator's memory with its unit (80GB, 80GiB); a bare number is refused, not read
    as bytes (80 bytes fit no model)."""
    if text.strip().replace(".", "", 1).isdigit():
        raise argparse.ArgumentTypeError(
            f"give a unit: {text.strip()}GB ({text.strip()} x 10^9 bytes) or {text.strip()}GiB "
            f"({text.strip()} x 2^30 bytes), not {text.strip()!r}")
    return _size(text)


def _dtype(text: str) -> str:
    try:
        dtype_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m course_lib", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    size = sub.add_parser("size", help="parameters, weight bytes, KV cache and requests that fit")
    size.add_argument("card", help="a shipped card's name or a path to a config.json")
    size.add_argument("--context", type=_positive_int, default=None,
                      help="tokens per sequence (default: the card's n_ctx)")
    size.add_argument("--batch", type=_positive_int, default=1,
                      help="sequences served together (default 1)")
    size.add_argument("--dtype", type=_dtype, default=None,
                      help="fp32, bf16, fp16, int8 or int4 for weights and cache "
                           "(default: the card's torch_dtype, else fp32)")
    size.add_argument("--gpu-memory", type=_memory, default=H100_SXM_BYTES,
                      help="accelerator memory, e.g. 80GB or 141GB (default 80GB, an H100 "
                           "SXM's data sheet: 80 x 10^9 bytes)")
    size.add_argument("--json", action="store_true", help="print one JSON object")
    size.add_argument("--verify", action="store_true",
                      help="also build the card in transformers on the meta device and compare "
                           "the parameters part by part")
    cards = sub.add_parser("cards", help="list the shipped cards with their sizes")
    cards.add_argument("--names", action="store_true", help="names only, one per line")
    return p


def size_report(s: ModelShape, context: int | None = None, batch: int = 1,
                dtype: str | None = None, gpu_memory: int = H100_SXM_BYTES) -> dict:
    """The sizing of one card as a JSON-ready dict (units in the key names: params, bytes,
    flops).  ``context`` defaults to the card's n_ctx; ``dtype`` to the card's dtype, else fp32."""
    context = context or s.n_ctx
    dtype = dtype or s.dtype or "fp32"
    p = count_params(s)
    per_seq = kv_cache_bytes_per_sequence(s, context, dtype)
    macs = forward_macs_per_token(s, context)
    w = weight_bytes(s, dtype)
    return {
        "name": s.name, "model_type": s.model_type, "shape": s.as_dict(),
        "dtype": dtype, "bytes_per_number": dtype_bytes(dtype),
        "context": context, "batch": batch, "gpu_memory_bytes": gpu_memory,
        "total_params": p.total, "active_params": p.active, "embedding_params": p.embedding,
        "params_by_part": {k: v for k, v in p.as_dict().items() if k not in ("total", "active")},
        "weight_bytes": w,
        "kv_cache_bytes_per_token": kv_cache_bytes_per_token(s, dtype),
        "kv_cache_bytes_per_sequence": per_seq,
        "kv_cache_bytes_batch": batch * per_seq,
        "kv_cache_by_layer_kind": [dataclasses.asdict(r) for r in
                                   kv_cache_by_layer_kind(s, context, dtype)],
        "batch_fits": w + batch * per_seq <= gpu_memory,
        "requests_that_fit": requests_that_fit(s, context, gpu_memory, dtype),
        "forward_macs_per_token": macs.total,
        "forward_flops_per_token": macs.flops,
        "attention_score_flops_per_token": 2 * macs.attention_scores,
        "training_flops_per_token": 6 * p.active,
    }


def _fmt_bytes(n: float) -> str:
    """Exact bytes, then the size in binary and decimal units of a fitting scale."""
    for (bin_name, bin_size), (dec_name, dec_size) in ((("GiB", GiB), ("GB", GB)),
                                                       (("MiB", 2**20), ("MB", 10**6))):
        if n >= bin_size / 10:
            return f"{n:,.0f} B  ({n / bin_size:,.2f} {bin_name}, {n / dec_size:,.2f} {dec_name})"
    return f"{n:,.0f} B  ({n / 2**10:,.2f} KiB, {n / 10**3:,.2f} KB)"


def format_table(r: dict) -> str:
    """A readable table of ``size_report``'s output."""
    rows = [
        ("card", f"{r['name']} ({r['model_type']})"),
        ("total parameters", f"{r['total_params']:,}"),
        ("active parameters / token", f"{r['active_params']:,}"),
        ("embedding parameters", f"{r['embedding_params']:,}"),
        (f"weights at {r['dtype']}", _fmt_bytes(r["weight_bytes"])),
        ("KV cache / token", _fmt_bytes(r["kv_cache_bytes_per_token"])),
        *[(f"  {k['n_layers']} {k['kind'].replace('_', ' ')} layers",
           f"{k['numbers_per_token']:,} numbers/token/layer, {k['tokens_kept']:,} tokens kept, "
           + _fmt_bytes(k["bytes_per_sequence"]).split("  ")[0] + " a sequence")
          for k in r["kv_cache_by_layer_kind"]],
        (f"KV cache / sequence of {r['context']:,}", _fmt_bytes(r["kv_cache_bytes_per_sequence"])),
        (f"KV cache for batch of {r['batch']}",
         _fmt_bytes(r["kv_cache_bytes_batch"]) + ("" if r["batch_fits"] else "  DOES NOT FIT")),
        (f"requests that fit in {r['gpu_memory_bytes'] / GiB:,.1f} GiB", f"{r['requests_that_fit']:,}"),
        ("forward FLOPs / token", f"{r['forward_flops_per_token']:,} (= 2 x multiply-adds, "
                                  f"attention over all {r['context']:,} positions included)"),
        ("training FLOPs / token", f"{r['training_flops_per_token']:,} (~ 6 x active params: "
                                   "the weights only, attention left out)"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def cards_table() -> str:
    """One line per shipped card: its model_type, total and active parameters, and KV cache
    bytes per token at the card's dtype (fp32 if it names none)."""
    rows = [("card", "model_type", "total params", "active params", "KV cache / token")]
    for name in card_names():
        s = shape_from_config(*load_config(name)[:1], name=name)
        p = count_params(s)
        dtype = s.dtype or "fp32"
        rows.append((name, s.model_type, f"{p.total:,}", f"{p.active:,}",
                     f"{kv_cache_bytes_per_token(s, dtype):,} B ({dtype}{'' if s.dtype else '*'})"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    return "\n".join(lines + ["* the card names no dtype: fp32 assumed (4 bytes per number)"])


def _verify(config: dict, shape: ModelShape | None):
    from .verify import verify_config  # imports torch and transformers
    return verify_config(config, shape)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "cards":
            print("\n".join(card_names()) if args.names else cards_table())
            return 0
        config, name = load_config(args.card)
        try:
            shape = shape_from_config(config, name=name)
        except CardError as e:
            model_type = config.get("model_type")
            if not (args.verify and model_type not in SUPPORTED_MODEL_TYPES
                    and model_type in decoder_only_model_types()):
                raise
            from .verify import format_verification
            v = _verify(config, None)  # an unsupported family: transformers' total alone
            print(json.dumps({"model_type": v.model_type, "supported": False,
                              "transformers_total_params": v.total.transformers})
                  if args.json else format_verification(v))
            print(f"error: {e}", file=sys.stderr)
            return 2
        report = size_report(shape, args.context, args.batch, args.dtype, args.gpu_memory)
        verification = _verify(config, shape) if args.verify else None
    except (UsageError, CardError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        if verification is not None:
            report["verify"] = {"agrees": verification.agrees, "parts": [
                dict(part=c.part, course_lib=c.ours, transformers=c.transformers,
                     difference=c.difference) for c in (*verification.parts, verification.total)]}
        print(json.dumps(report, indent=2))
    else:
        print(format_table(report))
        if verification is not None:
            from .verify import format_verification
            print("\n" + format_verification(verification))
    return 0 if verification is None or verification.agrees else 1
