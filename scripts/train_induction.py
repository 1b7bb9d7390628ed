"""Reproduce course_lib/weights/induction_2l.pt (lesson 2's two-layer attention-only model).

    .venv/bin/python scripts/train_induction.py [--seed 0] [--steps 1500] [--out DIR]

Trains with course_lib.training.INDUCTION_RECIPE (seeded: same machine, same weights; another
machine's arithmetic may differ in the last bits), then writes the weights (float32 state dict)
and a JSON record: recipe, torch version, seconds, loss curve, and each head's previous-token
and induction scores on repeated tokens of period 10 (in range) and 5 (shorter than any training
period: a head that counts positions instead of matching content would fail there).
"""
import argparse
import json
import platform
from pathlib import Path

import torch

from course_lib.tasks import head_scores, repeated_tokens
from course_lib.training import INDUCTION_RECIPE, WEIGHTS_DIR, next_token_losses, train_induction_model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=INDUCTION_RECIPE["seed"])
    ap.add_argument("--steps", type=int, default=INDUCTION_RECIPE["steps"])
    ap.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    a = ap.parse_args()
    model, result = train_induction_model(seed=a.seed, steps=a.steps)
    record = {"recipe": dict(INDUCTION_RECIPE, seed=a.seed, steps=a.steps),
              "torch": torch.__version__, "machine": platform.machine(),
              "threads": 1, "seconds": round(result.seconds, 1),
              "loss_every_100_steps": [round(sum(result.losses[i:i + 100]) / len(result.losses[i:i + 100]), 3)
                                       for i in range(0, len(result.losses), 100)]}
    for period in (10, 5):
        scores = head_scores(model, period=period)
        record[f"scores_period_{period}"] = {k: [[round(x, 3) for x in row] for row in v.tolist()]
                                             for k, v in scores.items()}
    tokens = repeated_tokens(100, 32, 64, 10, torch.Generator().manual_seed(123))
    with torch.no_grad():
        losses = next_token_losses(model, tokens)  # (100, 31): loss predicting tokens 1..31
    record["eval_loss_first_copy"] = round(losses[:, :9].mean().item(), 3)   # tokens 1..9
    record["eval_loss_repeats"] = round(losses[:, 9:].mean().item(), 3)      # tokens 10..31
    a.out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), a.out / "induction_2l.pt")
    (a.out / "induction_2l.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "loss_every_100_steps"}, indent=1))


if __name__ == "__main__":
    main()
