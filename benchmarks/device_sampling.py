"""Device-side top-k sampling against host sampling over the whole row: tok/s of the generator step
by rows per pass, side by side in one process, and the probability mass the top-k cut drops on real
GSM8K rows.

    python benchmarks/device_sampling.py --model smollm2-135m --out ds-cpu.json
    python benchmarks/device_sampling.py --model qwen2.5-coder-0.5b --gpu-layers 999 \\
        --out ds-gpu.json

Speed: two LlamaGenerators on one model (host: device_top_k=0; device: device_top_k=K), each with
the engine's 256 sequence slots; for every rows count, rows sequences forked from one GSM8K prompt
decode one token each per step and draw it at the search's temperature. Steps alternate host,
device, host... for every rows count, so outside load hits both alike; the first round is a warm-up;
tok/s is rows / the median step time. Dropped mass: GSM8K prompts decode --mass-rows rows at the
temperature with host sampling; for each row and k, 1 - (probability of the k most likely tokens) at
that temperature; mean and worst over the rows. """

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split
import numpy as np

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.generator import LlamaGenerator
from edgereason.backends.llamacpp.model import load_model
from edgereason.config import SamplingParams
from edgereason.prompts import solve_messages
from edgereason.protocols import BatchEntry
from edgereason.search.dataset import load_problems
from edgereason.session.settings import DEFAULT_TOP_K

DATASET = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k_test.jsonl"


def speed(
    model,
    prompt: list[int],
    rows: list[int],
    steps: int,
    top_k: int,
    temperature: float,
    threads: int | None,
) -> dict:
    """{"host"|"device": {rows: tok/s}} for the generator step."""
    kv = len(prompt) + sum(rows) * (steps + 2) + 256
    gens = {
        "host": LlamaGenerator(model, kv, n_threads=threads),
        "device": LlamaGenerator(model, kv, n_threads=threads, device_top_k=top_k),
    }
    times: dict[str, dict[int, list[float]]] = {mode: {n: [] for n in rows} for mode in gens}
    try:
        seqs: dict[str, dict[int, list[int]]] = {}
        pending: dict[str, dict[int, list[int]]] = {}
        for mode, g in gens.items():
            root = g.new_seq()
            first = g.step(
                [BatchEntry(root, prompt)], [1], SamplingParams(temperature=temperature)
            )[0]
            seqs[mode] = {n: [g.fork(root) for _ in range(n)] for n in rows}
            pending[mode] = {n: first * n for n in rows}
        for round_ in range(steps + 1):  # round 0 warms up both graphs
            for n in rows:
                for mode, g in gens.items():
                    batch = [BatchEntry(s, [t]) for s, t in zip(seqs[mode][n], pending[mode][n])]
                    params = [
                        SamplingParams(temperature=temperature, seed=1000 * round_ + i)
                        for i in range(n)
                    ]
                    t0 = time.perf_counter()
                    out = g.step(batch, [1] * n, params)
                    dt = time.perf_counter() - t0
                    pending[mode][n] = [d[0] for d in out]
                    if round_:
                        times[mode][n].append(dt)
    finally:
        for g in gens.values():
            g.close()
    return {
        mode: {str(n): n / statistics.median(ts) for n, ts in per.items()}
        for mode, per in times.items()
    }


def dropped_mass(
    model,
    prompts: list[list[int]],
    n_rows: int,
    ks: list[int],
    temperature: float,
    threads: int | None,
) -> dict:
    """{k: {"mean", "max"}} of the mass outside the top k, over n_rows rows of the prompts'
    continuations."""
    g = LlamaGenerator(model, sum(len(p) for p in prompts) + n_rows + 256, n_threads=threads)
    rng = np.random.default_rng(0)
    drops: dict[int, list[float]] = {k: [] for k in ks}

    def on_logits(tag: object, logits: np.ndarray) -> None:
        z = logits.astype(np.float64) / temperature
        probs = np.exp(z - z.max())
        probs /= probs.sum()
        top = np.sort(probs)[::-1]
        for k in ks:
            drops[k].append(float(max(0.0, 1.0 - top[:k].sum())))
        nxt[tag] = _draw(probs, rng)  # type: ignore[index]

    try:
        seqs = [g.new_seq() for _ in prompts]
        nxt: dict[int, int] = {}
        feeds = {i: prompt for i, prompt in enumerate(prompts)}
        while len(drops[ks[0]]) < n_rows:
            items = [DecodeItem(seqs[i], f, [(len(f) - 1, i)]) for i, f in feeds.items()]
            g.ctx.decode(items, on_logits)
            feeds = {i: [nxt[i]] for i in feeds if nxt[i] not in g.eos_ids}
            if not feeds:
                break
    finally:
        g.close()
    return {
        str(k): {
            "mean": float(np.mean(v[:n_rows])),
            "max": float(np.max(v[:n_rows])),
            "rows": len(v[:n_rows]),
        }
        for k, v in drops.items()
    }


def _draw(probs: np.ndarray, rng: np.random.Generator) -> int:
    return int(
        np.searchsorted(np.cumsum(probs), rng.random() * probs.sum(), side="right").clip(
            0, len(probs) - 1
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="registry name or .gguf path")
    ap.add_argument(
        "--gpu-layers", type=int, default=0, help="layers on the GPU, 999 = all (default 0)"
    )
    ap.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: physical cores)"
    )
    ap.add_argument(
        "--top-k", type=int, default=DEFAULT_TOP_K, help=f"device cut (default {DEFAULT_TOP_K})"
    )
    ap.add_argument("--rows", default="1,8,64", help="comma list of rows per pass (default 1,8,64)")
    ap.add_argument(
        "--steps", type=int, default=12, help="timed steps per rows count and mode (default 12)"
    )
    ap.add_argument(
        "--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)"
    )
    ap.add_argument(
        "--mass-rows",
        type=int,
        default=300,
        help="rows for the dropped mass, 0 = skip (default 300)",
    )
    ap.add_argument("--mass-ks", default="20,40,100", help="comma list of k for the dropped mass")
    ap.add_argument("--dataset", default=str(DATASET), help="GSM8K-style JSONL for the prompts")
    ap.add_argument(
        "--problems", type=int, default=8, help="prompts decoded side by side for the mass (8)"
    )
    ap.add_argument("--out", default=None, help="write the result as JSON to this file")
    args = ap.parse_args()

    model = load_model(str(models.resolve(args.model)), args.gpu_layers)
    problems = load_problems(args.dataset, args.problems)
    prompts = [
        model.tokenize(model.apply_chat_template(solve_messages(p.problem)), add_bos=model.add_bos)
        for p in problems
    ]
    rows = [int(x) for x in args.rows.split(",")]
    result: dict = {
        "model": model.path.name,
        "gpu_layers": args.gpu_layers,
        "top_k": args.top_k,
        "temperature": args.temperature,
        "steps": args.steps,
        "n_vocab": model.n_vocab,
    }
    result["tok_s"] = speed(
        model, prompts[0], rows, args.steps, args.top_k, args.temperature, args.threads
    )
    print(
        f"{model.path.name}, gpu layers {args.gpu_layers}: generator step tok/s, host sampling vs "
        f"device top-{args.top_k}"
    )
    for n in rows:
        host, dev = result["tok_s"]["host"][str(n)], result["tok_s"]["device"][str(n)]
        print(f"  {n:4d} rows  host {host:9.1f}  device {dev:9.1f}  device/host {dev / host:5.2f}x")
    if args.mass_rows:
        ks = [int(x) for x in args.mass_ks.split(",")]
        result["dropped_mass"] = dropped_mass(
            model, prompts, args.mass_rows, ks, args.temperature, args.threads
        )
        print(f"probability mass outside the top k at T={args.temperature}:")
        for k, d in result["dropped_mass"].items():
            print(f"  k={k:>4}  mean {d['mean']:.2e}  worst {d['max']:.2e}  ({d['rows']} rows)")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
