"""Requests per second of the torch verifier on a beam-search-shaped workload: B paths of one
question, each flush scores one new step on every path (the engine's PRM call), each path reusing
its parent's held KV.

    python benchmarks/torch_verifier_batch.py --prm smollm2-135m --beams 8 --steps 4

--prm: a Hugging Face folder or a .gguf (a registry name means its GGUF, read into torch). It times
each flush batched (one score() call) and one request per call (a forward pass each, as before
batching), the two modes alternating run by run so that outside load hits them alike; each figure is
the fastest of --repeat runs of the whole workload after a warm-up run: other work on a shared CPU
only slows a run."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from edgereason import models
from edgereason.backends.transformers import open_verifier
from edgereason.protocols import ScoreRequest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k_test.jsonl"
FALLBACK = Path(__file__).resolve().parents[1] / "examples" / "gsm8k_sample.jsonl"


def workload(beams: int, steps: int) -> tuple[str, list[list[str]]]:
    """One question and `beams` paths of `steps` distinct steps (its solution's lines, numbered per
    path)."""
    row = json.loads(
        (DATA if DATA.exists() else FALLBACK).read_text(encoding="utf-8").splitlines()[0]
    )
    lines = [s for s in row["solution"].split("\n") if s.strip()] or [row["solution"]]
    return row["problem"], [
        [f"Path {b}, step {k + 1}: {lines[k % len(lines)]}" for k in range(steps)]
        for b in range(beams)
    ]


def run(
    verifier, run_id: int, question: str, paths: list[list[str]], batched: bool
) -> tuple[float, int]:
    """Seconds and requests of one search: a flush per step, every path grown by one step."""
    t0, n = time.perf_counter(), 0
    for k in range(len(paths[0])):
        reqs = [
            ScoreRequest(
                f"r{run_id}b{b}s{k}",
                question,
                p[: k + 1],
                [k],
                f"r{run_id}b{b}s{k - 1}" if k else f"r{run_id}root",
                k,
            )
            for b, p in enumerate(paths)
        ]
        for call in [reqs] if batched else [[r] for r in reqs]:
            verifier.score(call)
        n += len(reqs)
    verifier.release(f"r{run_id}")
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prm", default="smollm2-135m", help="HF folder, .gguf path or registry name")
    ap.add_argument("--format", default="judge")
    ap.add_argument("--beams", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    path = models.resolve(args.prm) if args.prm in models.REGISTRY else Path(args.prm)
    verifier = open_verifier(
        path, args.format, kv_tokens=65536, device="cpu", n_threads=args.threads
    )
    question, paths = workload(args.beams, args.steps)
    run(verifier, 0, question, paths, True)  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(args.repeat):
        for batched in (False, True):
            seconds, n = run(verifier, 2 * i + batched + 1, question, paths, batched)
            times[batched].append(seconds)
    tokens = verifier.stats.tokens / (2 * args.repeat + 1)
    print(
        f"{path.name} {args.format}: {args.beams} paths x {args.steps} steps, {n} requests, "
        f"{tokens:.0f} PRM tokens a run; fastest of {args.repeat}:"
    )
    for batched, label in ((False, "one request a pass"), (True, "batched flushes")):
        best = min(times[batched])
        print(
            f"  {label:18}  {best:6.2f} s  {n / best:5.1f} requests/s  {tokens / best:6.0f} "
            "tokens/s"
        )
    print(f"  speed-up {min(times[False]) / min(times[True]):.2f}x")


if __name__ == "__main__":
    main()
