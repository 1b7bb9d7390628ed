"""Reproduce course_lib/weights/chain_1l.pt (lesson 3's one-layer model of 64 chain facts).

    .venv/bin/python scripts/train_chain.py [--seed 0] [--steps 600] [--out DIR]

Trains with course_lib.compression.CHAIN_RECIPE on one thread (seeded: same machine, same
weights; another machine's arithmetic may differ in the last bits), then writes the weights
(float32 state dict) and a JSON record: recipe, torch version, seconds, loss curve, and the
share of 1-step and 8-step items answered wholly right after pruning each feed-forward layer to
k neurons (course_lib.compression.prune_feed_forward), for k = 64, 60, ..., 8.
"""
import argparse
import json
import platform
from pathlib import Path

import torch

from course_lib.compression import (CHAIN_RECIPE, CHAIN_SHAPE, chain_task, prune_feed_forward,
                                    train_chain_model)
from course_lib.training import WEIGHTS_DIR, num_threads

WIDTHS = list(range(CHAIN_SHAPE.d_ff, 4, -4))
STEPS = (1, 8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=CHAIN_RECIPE["seed"])
    ap.add_argument("--steps", type=int, default=CHAIN_RECIPE["steps"])
    ap.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    a = ap.parse_args()
    model, result = train_chain_model(seed=a.seed, steps=a.steps)
    task = chain_task()
    with num_threads(1):
        accuracy = {str(n): [round(task.accuracy(prune_feed_forward(model, k), n), 4)
                             for k in WIDTHS] for n in STEPS}
    record = {"recipe": dict(CHAIN_RECIPE, seed=a.seed, steps=a.steps),
              "torch": torch.__version__, "machine": platform.machine(),
              "threads": 1, "seconds": round(result.seconds, 1),
              "loss_every_100_steps": [round(sum(result.losses[i:i + 100]) / len(result.losses[i:i + 100]), 4)
                                       for i in range(0, len(result.losses), 100)],
              "final_loss": round(result.losses[-1], 5),
              "pruned_widths": WIDTHS, "pruned_accuracy": accuracy}
    a.out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), a.out / "chain_1l.pt")
    (a.out / "chain_1l.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "loss_every_100_steps"}))


if __name__ == "__main__":
    main()
