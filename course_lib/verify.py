"""``size --verify``: a card's parameters by part, from course_lib and from ``transformers``.

Builds the card with ``AutoModelForCausalLM.from_config`` under ``torch.device("meta")`` (no
weights, no memory) and sorts its named parameters into the parts of
:class:`course_lib.params.ParamCounts` by name.  Needs torch and transformers (imported
here, not by ``import course_lib``).  Errors: :class:`VerifyError` with a one-line message
(transformers missing, or a config it cannot build).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .params import ParamCounts, count_params
from .shapes import ModelShape

PARTS = ("token_embedding", "position_embedding", "attention", "feed_forward", "router",
         "norms", "output_head")

# First match wins.  A parameter no pattern names goes to "other" (shown, never dropped).
_NAME_PATTERNS = [
    ("output_head", r"^(lm_head|embed_out)\."),
    ("position_embedding", r"\.(wpe|embed_positions)\."),
    ("token_embedding", r"\.(wte|embed_tokens|word_embeddings|embed_in)\."),
    ("attention", r"\.(attn|self_attn|self_attention|attention)\."),
    ("router", r"\.mlp\.(gate|router)\.(weight|bias)$|\.mlp\.shared_expert_gate\."),
    ("feed_forward", r"\.(mlp|feed_forward|block_sparse_moe)\."),
    ("norms", r"(norm|\.ln_\w+|\.ln_f)\.(weight|bias)$"),
]


class VerifyError(RuntimeError):
    """The card could not be built in transformers; the message says why, on one line."""


@dataclass(frozen=True)
class PartCheck:
    """One part of a card: course_lib's count, transformers' count (parameters), and whether
    they agree.  ``ours`` is None for a family course_lib does not count."""

    part: str
    ours: int | None
    transformers: int

    @property
    def agrees(self) -> bool:
        return self.ours == self.transformers

    @property
    def difference(self) -> int | None:
        """course_lib minus transformers (None when course_lib does not count the family)."""
        return None if self.ours is None else self.ours - self.transformers


@dataclass(frozen=True)
class Verification:
    """Every part and the total of one card, as course_lib and transformers count them."""

    model_type: str
    parts: tuple[PartCheck, ...]
    total: PartCheck

    @property
    def agrees(self) -> bool:
        return self.total.agrees and all(p.agrees for p in self.parts)


def meta_parts(config: dict) -> tuple[dict, int]:
    """({part: parameters}, total) of ``config`` built by transformers on the meta device.

    Raises:
        VerifyError: torch or transformers not importable, or a config transformers refuses.
    """
    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as e:
        raise VerifyError(f"--verify needs torch and transformers ({e.name} is not installed; "
                          "pip install -r requirements.txt)") from None
    transformers.logging.set_verbosity_error()
    try:
        hf = AutoConfig.for_model(**config)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf)
    except Exception as e:  # transformers raises many kinds; report the first line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise VerifyError(f"transformers cannot build this config: {first}") from None
    parts = dict.fromkeys(PARTS, 0)
    for name, p in model.named_parameters():
        part = next((part for part, pattern in _NAME_PATTERNS if re.search(pattern, name)),
                    "other")
        parts[part] = parts.get(part, 0) + p.numel()
    return parts, sum(p.numel() for p in model.parameters())


def verify_config(config: dict, shape: ModelShape | None) -> Verification:
    """Compare course_lib's counts of ``shape`` (None: a family it does not count) with the
    model transformers builds from ``config``, part by part.  Raises VerifyError."""
    parts, total = meta_parts(config)
    ours: ParamCounts | None = count_params(shape) if shape is not None else None
    rows = tuple(PartCheck(part, None if ours is None else getattr(ours, part, 0), n)
                 for part, n in parts.items())
    return Verification(model_type=str(config.get("model_type")), parts=rows,
                        total=PartCheck("total", None if ours is None else ours.total, total))


def format_verification(v: Verification) -> str:
    """A table: part, course_lib, transformers, and "agrees" or the difference."""
    def verdict(c: PartCheck) -> str:
        if c.ours is None:
            return "not counted by course_lib"
        return "agrees" if c.agrees else f"DIFFERS by {c.difference:+,}"

    rows = [("part", "course_lib", "transformers (meta)", "")]
    rows += [(c.part, "-" if c.ours is None else f"{c.ours:,}", f"{c.transformers:,}", verdict(c))
             for c in (*v.parts, v.total)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i in (0, 3) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    if v.total.ours is None:
        summary = f"course_lib does not count {v.model_type}; transformers builds {v.total.transformers:,} parameters"
    else:
        summary = "course_lib agrees with transformers on every part" if v.agrees else \
            "course_lib DISAGREES with transformers (see the parts above)"
    return "\n".join(lines + [summary])
