"""The same deterministic search beside a process that spins on one core: llama.cpp on every
physical core (`--threads` = the cores, the old default) against the threads the busy-CPU rule
picks (no --threads: edgereason/session/cpu_threads.py), alternating, and once with no spinner.
Issue 64 item 4.

    python benchmarks/busy_cpu.py --model smollm2-135m --repeat 2

A JSON line on stdout as each run ends (what a stopped run keeps), then one JSON object: each run's
wall seconds, the busy-CPU line it printed, and the machine's load before it (1-minute load average
and a 0.2 s CPU percent), since on a shared machine other work counts too."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import psutil

from edgereason.config import physical_cores

PROBLEM = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
    "muffins for her friends every day with four. She sells the remainder at the farmers' market "
    "daily for $2 per fresh duck egg. How much in dollars does she make every day at the "
    "farmers' market?"
)


def spinner() -> subprocess.Popen:
    """A process that holds one core until killed (bounded to an hour should this script die)."""
    code = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def solve(args: argparse.Namespace, threads: int | None) -> dict:
    argv = [sys.executable, "-m", "edgereason", "solve", PROBLEM, "--model", args.model, "--json"]
    argv += ["--temperature", "0", "--seed", "1", "--max-steps", str(args.max_steps)]
    argv += ["--threads", str(threads)] if threads else []
    load = {"loadavg_1m": os.getloadavg()[0], "cpu_percent": psutil.cpu_percent(interval=0.2)}
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    note = [line for line in proc.stderr.splitlines() if " busy (load " in line]
    answer = json.loads(proc.stdout).get("answer")
    run = {"threads": threads or "rule", "wall_s": round(wall, 1), "answer": answer,
           "note": note[0] if note else None, "load_before": load}  # fmt: skip
    print(json.dumps(run), flush=True)
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--repeat", type=int, default=2, help="alternating pairs under the spinner")
    args = p.parse_args()
    cores = physical_cores()
    runs = {"idle_default": [solve(args, cores)], "busy_default": [], "busy_rule": []}
    spin = spinner()
    try:
        time.sleep(1.0)  # spinning before the first sample
        for _ in range(args.repeat):
            runs["busy_default"].append(solve(args, cores))
            runs["busy_rule"].append(solve(args, None))
    finally:
        spin.kill()
        spin.wait()
    print(json.dumps({"physical_cores": cores, "model": args.model, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
