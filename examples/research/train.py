"""A tiny training loop that behaves like a real one: it reads TauGrid's
environment, resumes from a checkpoint, writes metrics and a checkpoint.

It needs only the Python standard library, so the demo runs on any image.
"""

import argparse
import json
import os
import random
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()

    out = os.environ.get("TAU_OUTPUT_DIR", "out")
    ckpt_dir = os.environ.get("TAU_CHECKPOINT_DIR", "ckpt")
    os.makedirs(out, exist_ok=True)
    os.makedirs(ckpt_dir, exist_ok=True)

    start = 0
    resume = os.environ.get("TAU_RESUME_FROM")
    if resume and os.path.exists(resume):
        with open(resume) as f:
            start = json.load(f)["epoch"] + 1
        print(f"resuming from {resume} at epoch {start}")

    weight, rng = 0.0, random.Random(os.environ.get("TAU_COMMIT", "0"))
    with open(os.path.join(out, "metrics.jsonl"), "a") as metrics:
        for epoch in range(start, args.epochs):
            loss = 1.0 / (1 + epoch) + rng.random() * 0.01
            weight -= args.lr * loss
            metrics.write(json.dumps({"_step": epoch, "_timestamp": time.time(), "loss": loss}) + "\n")
            with open(os.path.join(ckpt_dir, "latest.json"), "w") as f:
                json.dump({"epoch": epoch, "weight": weight}, f)
            print(f"run {os.environ.get('TAU_RUN', '-')} epoch {epoch}: loss {loss:.4f}")


if __name__ == "__main__":
    main()
