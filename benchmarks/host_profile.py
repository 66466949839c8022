"""The engine's host work beside its device passes, torch backend, a real model: one problem at a
time and N at once; one JSON object on stdout.

    python benchmarks/host_profile.py --model smollm2-135m --max-tokens 96              # a CPU
    python benchmarks/host_profile.py --model qwen2.5-coder-1.5b --at-once 16          # CUDA

The recipe is the 1.5B's default (best-of-8 at T 0.6, the weighted vote), the PRM the same model as
a judge on the same backend. A device pass is TorchContext._run, the one call that computes (a
decode or prefill graph's replay, the eager layers, the draws): on CUDA it is timed between two
synchronizes, so its seconds are the device's and its launches'; everything else in the wall is the
host's (scheduling, layouts, KV tables, tree growth, the PRM queue, selection). Each setting runs
once to warm up (graph captures, allocator growth, a compile) unless --no-warmup, then timed, then
again under cProfile with the profiler off inside the device passes, so `top_host` lists the host's
functions by cumulative seconds (cProfile's overhead inflates them; the timed run does not have it).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine

PROBLEMS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
    "muffins for her friends every day with four. She sells the remainder at the farmers' market "
    "daily for $2 per fresh duck egg. How much in dollars does she make every day?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total "
    "does it take?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
    "How much did she earn?",
]


class DeviceClock:
    """Seconds and count of the device passes (TorchContext._run, synchronised on CUDA); the
    profiler, where one runs, is off inside them."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.sync = sync
        self.seconds = 0.0
        self.cpu_seconds = 0.0  # this thread's CPU time inside the passes
        self.passes = 0
        self.profiler: cProfile.Profile | None = None

    @contextmanager
    def timing(self):
        from edgereason.backends.torch.runtime import TorchContext

        run = TorchContext._run

        def timed(ctx, layout, columns):
            if self.profiler:
                self.profiler.disable()
            self.sync()
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return run(ctx, layout, columns)
            finally:
                self.sync()
                self.seconds += time.perf_counter() - t0
                self.cpu_seconds += time.thread_time() - c0
                self.passes += 1
                if self.profiler:
                    self.profiler.enable()

        TorchContext._run = timed
        try:
            yield self
        finally:
            TorchContext._run = run


def solve(engine: Engine, config: SearchConfig, problems: int, at_once: bool) -> int:
    """The problems one after another or all submitted at once -> tokens generated."""
    configs = [
        config.with_(sampling=SamplingParams(temperature=0.6, seed=i)) for i in range(problems)
    ]
    if not at_once:
        results = [engine.solve(PROBLEMS[i % 4], c) for i, c in enumerate(configs)]
    else:
        for i, c in enumerate(configs):
            engine.submit(PROBLEMS[i % 4], c)
        results = engine.run_until_done()
    return sum(r.metrics.generated_tokens for r in results)


def measure(engine, config, problems, at_once, sync, top: int) -> dict:
    """One timed run, then one under cProfile (where top > 0)."""
    with DeviceClock(sync).timing() as clock:
        t0, c0 = time.perf_counter(), time.thread_time()
        tokens = solve(engine, config, problems, at_once)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    host_cpu = cpu - clock.cpu_seconds
    out = {
        "problems": problems,
        "at_once": problems if at_once else 1,
        "wall_s": round(wall, 3),
        "device_s": round(clock.seconds, 3),
        "host_s": round(wall - clock.seconds, 3),
        "host_fraction": round((wall - clock.seconds) / wall, 4),
        "device_passes": clock.passes,
        "host_ms_a_pass": round(1000 * (wall - clock.seconds) / max(clock.passes, 1), 3),
        # the host's CPU seconds (this thread's, outside the passes): on a shared CPU the wall's
        # host seconds count the time other processes took the core; these do not
        "host_cpu_ms_a_pass": round(1000 * host_cpu / max(clock.passes, 1), 3),
        "tokens": tokens,
        "tokens_a_s": round(tokens / wall, 1),
    }
    if top:
        out["top_host"] = profiled(engine, config, problems, at_once, sync, top)
    return out


def profiled(engine, config, problems, at_once, sync, top: int) -> list[dict]:
    """The host's functions by cumulative seconds (the device passes left out)."""
    profiler = cProfile.Profile()
    with DeviceClock(sync).timing() as clock:
        clock.profiler = profiler
        profiler.enable()
        solve(engine, config, problems, at_once)
        profiler.disable()
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (calls, ncalls, own, cum, _)
    rows = sorted(stats.items(), key=lambda kv: -kv[1][3])
    skip = ("host_profile.py", "{built-in method builtins.exec}", "<string>")
    named = [
        (f"{file.rsplit('/', 2)[-1] if '/' in file else file}:{line}({name})", value)
        for (file, line, name), value in rows
    ]
    return [
        {"function": fn, "cum_s": round(v[3], 3), "own_s": round(v[2], 3), "calls": v[1]}
        for fn, v in named
        if not any(s in fn for s in skip)
    ][:top]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="smollm2-135m", help="registry name or GGUF path")
    p.add_argument("--one-at-a-time", type=int, default=2, help="problems solved one by one")
    p.add_argument("--at-once", type=int, default=16, help="problems submitted together")
    p.add_argument("--beams", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=1024, help="a path's tokens at most")
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--kv-tokens", type=int, default=65536, help="the generator's KV cells")
    p.add_argument("--top", type=int, default=15, help="host functions listed (0: no profile)")
    p.add_argument("--no-warmup", action="store_true", help="time each setting's first run")
    args = p.parse_args()
    import torch

    from edgereason.backends import Placement, PRMSpec, load_backend

    cuda = torch.cuda.is_available()
    path = models.resolve(args.model)
    place = Placement(n_gpu_layers=999 if cuda else 0)
    judge = PRMSpec(path, "judge")
    gen, ver = load_backend("torch").open_models(path, judge, (args.kv_tokens, 16384), place)
    config = SearchConfig(
        strategy="best-of-n",
        beams=args.beams,
        max_steps=args.max_steps,
        max_path_tokens=args.max_tokens,
        vote="weighted",
    )
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out = {"model": path.name, "device": torch.cuda.get_device_name() if cuda else "cpu"}
    for key, problems, at_once in (
        ("one_at_a_time", args.one_at_a_time, False),
        ("at_once", args.at_once, True),
    ):
        if not problems:
            continue
        engine = Engine(gen, ver)
        if not args.no_warmup:
            solve(engine, config, problems, at_once)
        out[key] = measure(engine, config, problems, at_once, sync, args.top)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
