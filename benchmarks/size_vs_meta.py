"""Sizing a card in process against building it in transformers on the meta device, one shipped
card per family: how many times faster course_lib answers.

    .venv/bin/python benchmarks/size_vs_meta.py [--repeats 5] [--families qwen3 gpt_oss ...]

Method.  For each family, its first shipped card (``python -m course_lib cards``) as a parsed
dict, so that neither side reads a file:

* sizing: ``shape_from_config(cfg)``, then ``count_params`` (total and active) and
  ``kv_cache_bytes_per_token`` at bf16: the three numbers of the issue's bar, from the card's
  dict.  Run in a loop of ``loops`` calls (chosen so a loop lasts about 0.2 s); per-call time
  = loop time / loops.
* meta build: ``AutoConfig.for_model(**cfg)`` then ``AutoModelForCausalLM.from_config`` under
  ``torch.device("meta")`` and the sum of ``p.numel()`` over its parameters (what the tests
  check course_lib against).  One untimed warm-up build of the family first (imports and
  caches out of the timing), then single timed builds.

Both sides are timed in CPU seconds of this process (``time.process_time``, one torch thread),
so that other jobs on a shared machine slow neither; each is measured ``--repeats`` times,
interleaved, and the table shows the best of each; ratio = best meta build / best sizing.  The two
totals are compared in every run (the script exits 1 if they differ).  Bar: at least 1,000x
for every family.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

import course_lib as cl

BAR = 1000


def size(cfg: dict) -> tuple[int, int, int]:
    s = cl.shape_from_config(cfg)
    p = cl.count_params(s)
    return p.total, p.active, cl.kv_cache_bytes_per_token(s, "bf16")


def meta_total(cfg: dict) -> int:
    config = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def time_sizing(cfg: dict, loops: int) -> float:
    start = time.process_time()
    for _ in range(loops):
        size(cfg)
    return (time.process_time() - start) / loops


def time_meta(cfg: dict) -> float:
    start = time.process_time()
    meta_total(cfg)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--families", nargs="*", default=None)
    args = p.parse_args(argv)
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    cards = {}
    for name in cl.card_names():
        family = cl.card_config(name)["model_type"]
        cards.setdefault(family, name)
    families = args.families or list(cl.SUPPORTED_MODEL_TYPES)
    rows, failed = [], False
    for family in families:
        name = cards[family]
        cfg = cl.card_config(name)
        if size(cfg)[0] != meta_total(cfg):  # also the warm-up build
            print(f"{name}: course_lib and transformers disagree", file=sys.stderr)
            failed = True
        one = time_sizing(cfg, 50)
        loops = max(50, int(0.2 / one))
        sizing, meta = [], []
        for _ in range(args.repeats):
            sizing.append(time_sizing(cfg, loops))
            meta.append(time_meta(cfg))
        ratio = min(meta) / min(sizing)
        failed |= ratio < BAR
        rows.append((family, name, f"{cl.count_params(cl.load_card(name)).total:,}",
                     f"{min(sizing) * 1e6:,.0f}", f"{min(meta) * 1e3:,.0f}", f"{ratio:,.0f}x",
                     "yes" if ratio >= BAR else "NO"))
        print(f"  {family}: {ratio:,.0f}x", file=sys.stderr, flush=True)
    header = ("family", "card", "parameters", "sizing (µs)", "meta build (ms)", "ratio",
              f">= {BAR:,}x")
    print(f"{datetime.date.today()}  {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, 1 torch thread, best of {args.repeats}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(":---" if i < 2 else "---:" for i in range(len(header) - 1)) + "|:---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"slowest ratio: {min(float(r[5][:-1].replace(',', '')) for r in rows):,.0f}x")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
