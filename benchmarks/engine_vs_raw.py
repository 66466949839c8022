"""Engine generation speed in an 8-beam search (baseline and edge) against raw batched decode of 8
sequences (the generator's own step in a loop: llama_decode, reading the rows, the draws; no engine
around it), same model, same threads, measured side by side in one process. Warm-up excluded;
reports tok/s and the mean number of sequences per forward pass (a synchronous step leaves slots
idle while stragglers finish).

    python benchmarks/engine_vs_raw.py --model smollm2-135m --beams 8 --repeat 3
    # a GPU
    python benchmarks/engine_vs_raw.py --model qwen2.5-coder-0.5b --gpu-layers 999 \\
        --device-top-k 100
"""

from __future__ import annotations

import argparse
import time

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split
from edgereason.backends import Placement, PRMSpec
from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.backend import LlamaCppBackend
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from edgereason.protocols import BatchEntry

PROBLEM = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
    "muffins for her friends every day with four. She sells the remainder at the farmers' market "
    "daily for $2 per fresh duck egg. How much in dollars does she make every day at the farmers' "
    "market?"
)


def raw_decode(gen, n_seqs: int, n_tokens: int) -> float:
    """tok/s of plain batched decode: prompt once, n_seqs forks, one generator step (llama_decode
    and the draws, as the engine gets them) per token, with no engine around it."""
    prompt = gen.tokenize(gen.apply_chat_template([{"role": "user", "content": PROBLEM}]))
    root = gen.new_seq()
    gen.ctx.decode([DecodeItem(root, prompt, [])], lambda *_: None)
    seqs = [gen.fork(root) for _ in range(n_seqs)]
    last = [prompt[-1]] * n_seqs
    params = [SamplingParams(temperature=0.8, seed=i) for i in range(n_seqs)]
    t0 = time.perf_counter()
    for _ in range(n_tokens):
        draws = gen.step([BatchEntry(s, [t]) for s, t in zip(seqs, last)], [1] * n_seqs, params)
        last = [d[0] for d in draws]
    dt = time.perf_counter() - t0
    for s in seqs + [root]:
        gen.free(s)
    return n_seqs * n_tokens / dt


def engine_search(gen, ver, policy: str, beams: int, width: int, steps: int) -> tuple[float, float]:
    """(generation tok/s, mean sequences per forward pass) of one search."""
    cfg = SearchConfig(
        beams=beams,
        width=width,
        max_steps=steps,
        max_step_tokens=96,
        sampling=SamplingParams(temperature=0.8, seed=0),
    )
    calls = []
    step = gen.step

    def counting_step(batch, samples, sampling):
        calls.append(len(batch))
        return step(batch, samples, sampling)

    gen.step = counting_step
    try:
        m = Engine(gen, ver, parse_policy(policy)).solve(PROBLEM, cfg).metrics
    finally:
        del gen.step
    return m.generated_tokens / m.gen_time_s, sum(calls) / max(1, len(calls))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--beams", type=int, default=8)
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--gpu-layers", type=int, default=0, help="layers on the GPU, 999 = all (default 0)"
    )
    ap.add_argument(
        "--device-top-k",
        type=int,
        default=0,
        help="cut rows to their top k on the device, for raw decode and engine alike (default 0: "
        "off)",
    )
    args = ap.parse_args()
    path = models.resolve(args.model)
    place = Placement(
        n_threads=args.threads, n_gpu_layers=args.gpu_layers, device_top_k=args.device_top_k
    )
    judge = PRMSpec(path, "judge")
    gen, ver = LlamaCppBackend().open_models(path, judge, (16384, 16384), place)
    raw_decode(gen, args.beams, 16)  # warm-up
    engine_search(gen, ver, "baseline", args.beams, args.width, 1)
    rows: dict[str, list[tuple[float, float]]] = {"raw": [], "baseline": [], "edge": []}
    for _ in range(args.repeat):  # alternate so machine drift hits all alike
        rows["raw"].append((raw_decode(gen, args.beams, 128), float(args.beams)))
        for policy in ("baseline", "edge"):
            rows[policy].append(engine_search(gen, ver, policy, args.beams, args.width, args.steps))
    median = {k: sorted(v)[len(v) // 2] for k, v in rows.items()}
    raw = median["raw"][0]
    for name, (tps, occupancy) in median.items():
        runs = [round(r[0]) for r in rows[name]]
        print(
            f"{name:>8}: {tps:7.1f} tok/s  ratio to raw {tps / raw:4.2f}  sequences per forward "
            f"pass {occupancy:4.1f}  (runs: {runs})"
        )
    occupancy = median["baseline"][1]
    same = raw_decode(gen, max(1, round(occupancy)), 128)
    print(
        f"raw decode at the baseline's mean occupancy ({round(occupancy)} seqs): {same:.1f} tok/s; "
        f"baseline / that = {median['baseline'][0] / same:.2f}"
    )


if __name__ == "__main__":
    main()
