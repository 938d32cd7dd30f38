"""A tiny training loop that behaves like a real one: it reads TauGrid's
environment, resumes from the latest complete checkpoint, writes metrics,
and saves a checkpoint every epoch and when it is asked to stop.

The checkpoint convention TauGrid resumes from:
  * each checkpoint is its own directory under $TAU_CHECKPOINT_DIR;
  * the file TAU_COMPLETE is written into it last, once everything else is
    on disk; a directory without it is a partial write and is ignored;
  * on a retried attempt $TAU_RESUME_FROM is a link to the newest complete
    checkpoint of this run (it does not exist when there is none).
On preemption the pod gets SIGTERM and resilience.termination_grace to save.
After each epoch it reports how far it is ($TAU_PROGRESS_URL), so the runs
waiting behind it are told when they start.

It needs only the Python standard library, so the demo runs on any image.
"""

import argparse
import json
import os
import random
import signal
import time
import urllib.request

stop = False


def on_sigterm(_signum, _frame) -> None:
    global stop
    stop = True  # finish the step, save a checkpoint, exit


def save(ckpt_dir: str, epoch: int, weight: float) -> str:
    d = os.path.join(ckpt_dir, f"epoch-{epoch:06d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "state.json"), "w") as f:
        json.dump({"epoch": epoch, "weight": weight}, f)
        f.flush()
        os.fsync(f.fileno())
    with open(os.path.join(d, "TAU_COMPLETE"), "w") as f:  # last: marks it complete
        f.flush()
        os.fsync(f.fileno())
    return d


def report_progress(fraction: float) -> None:
    """Tells TauGrid how far the run is (0 to 1); never stops the training."""
    url, token_file = os.environ.get("TAU_PROGRESS_URL"), os.environ.get("TAU_PROGRESS_TOKEN_FILE")
    if not url or not token_file:
        return
    try:
        with open(token_file) as f:
            token = f.read().strip()
        req = urllib.request.Request(url, data=f"{fraction:.3f}".encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
        urllib.request.urlopen(req, timeout=5).close()
    except OSError as e:  # the estimate goes without it
        print(f"progress not reported: {e}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)

    out = os.environ.get("TAU_OUTPUT_DIR", "out")
    ckpt_dir = os.environ.get("TAU_CHECKPOINT_DIR", "ckpt")
    os.makedirs(out, exist_ok=True)
    os.makedirs(ckpt_dir, exist_ok=True)

    start, weight = 0, 0.0
    resume = os.environ.get("TAU_RESUME_FROM")
    if resume and os.path.exists(os.path.join(resume, "state.json")):
        with open(os.path.join(resume, "state.json")) as f:
            state = json.load(f)
        start, weight = state["epoch"] + 1, state["weight"]
        print(f"resuming from {os.path.realpath(resume)} at epoch {start}")

    rng = random.Random(os.environ.get("TAU_COMMIT", "0"))
    with open(os.path.join(out, "metrics.jsonl"), "a") as metrics:
        for epoch in range(start, args.epochs):
            loss = 1.0 / (1 + epoch) + rng.random() * 0.01
            weight -= args.lr * loss
            metrics.write(json.dumps({"_step": epoch, "_timestamp": time.time(), "loss": loss}) + "\n")
            saved = save(ckpt_dir, epoch, weight)
            print(f"run {os.environ.get('TAU_RUN', '-')} epoch {epoch}: loss {loss:.4f}, saved {saved}")
            report_progress((epoch + 1) / args.epochs)
            if stop:
                print("stopping on SIGTERM after a checkpoint")
                return


if __name__ == "__main__":
    main()
