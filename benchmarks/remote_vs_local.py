"""The same beam search on the local llama.cpp backend and on the remote backend (an
OpenAI-compatible server on this machine), problem by problem, alternating which runs first so drift
on a shared machine hits both alike. Reports throughput, goodput and latency per side, and for the
remote side what the HTTP round trips cost: the time the engine waited on the server against the
server-side generation it paid for.

    python -m edgereason.backends.remote.llamacpp_server \\
        --model $(edgereason models path smollm2-135m) \\
        --host 127.0.0.1 --port 18431 --n_ctx 8192 --n_threads 2 --n_threads_batch 2 &
    python benchmarks/remote_vs_local.py --base-url http://127.0.0.1:18431 --limit 10 --beams 8 \\
        --out benchmarks/results/remote-vs-local
    # later, problems 4.. added to the rows of 0..3 already in --out (the same search settings)
    python benchmarks/remote_vs_local.py --base-url http://127.0.0.1:18431 --offset 4 --limit 6 \\
        --beams 8 --out benchmarks/results/remote-vs-local
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from edgereason import models
from edgereason.backends import Placement, PRMSpec
from edgereason.backends.llamacpp.backend import LlamaCppBackend
from edgereason.backends.remote import Endpoint, open_generator, open_verifier
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from edgereason.search.dataset import load_problems
from edgereason.search.grading import answers_match

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k_test.jsonl"


SEARCH_KEYS = (
    "model",
    "dataset",
    "beams",
    "width",
    "max_steps",
    "max_tokens",
    "max_step_tokens",
    "threads",
)


def run_one(engine: Engine, problem, config: SearchConfig, clients: list, verifier=None) -> dict:
    biased = verifier.biased_scores if verifier is not None else 0
    before = [
        (c.stats.wait_s, c.stats.batches, c.stats.requests, c.stats.completion_tokens)
        for c in clients
    ]
    t0 = time.perf_counter()
    result = engine.solve(problem.problem, config)
    wall = time.perf_counter() - t0
    m = result.metrics
    row = {
        "id": problem.id,
        "status": result.status,
        "correct": bool(result.answer is not None and answers_match(result.answer, problem.answer)),
        "wall_s": wall,
        "generated_tokens": m.generated_tokens,
        "final_tokens": m.final_tokens,
        "throughput_tok_s": m.throughput_tok_s,
        "goodput_tok_s": m.goodput_tok_s,
        "prm_calls": m.prm_calls,
    }
    if clients:
        after = [
            (c.stats.wait_s, c.stats.batches, c.stats.requests, c.stats.completion_tokens)
            for c in clients
        ]
        row["http_wait_s"] = sum(a[0] - b[0] for a, b in zip(after, before))
        row["http_rounds"] = sum(a[1] - b[1] for a, b in zip(after, before))
        row["http_requests"] = sum(a[2] - b[2] for a, b in zip(after, before))
        row["server_completion_tokens"] = sum(a[3] - b[3] for a, b in zip(after, before))
        # scores read with logit_bias (Yes/No not in top 20)
        row["prm_biased_scores"] = verifier.biased_scores - biased
    return row


def round_trip_ms(client, n: int = 20) -> float:
    """Median time of a request that costs the server almost nothing (a one-token prompt, one token
    out): what one HTTP round trip adds, the floor under every request of a search."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.complete([{"prompt": "a", "max_tokens": 1, "temperature": 0.0}])
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def summary(rows: list[dict]) -> dict:
    wall = sum(r["wall_s"] for r in rows)
    out = {
        "problems": len(rows),
        "correct": sum(r["correct"] for r in rows),
        "throughput_tok_s": sum(r["generated_tokens"] for r in rows) / wall,
        "goodput_tok_s": sum(r["final_tokens"] for r in rows) / wall,
        "latency_mean_s": wall / len(rows),
        "latency_median_s": statistics.median(r["wall_s"] for r in rows),
        "generated_tokens": sum(r["generated_tokens"] for r in rows),
    }
    if "http_wait_s" in rows[0]:
        for key in (
            "http_wait_s",
            "http_rounds",
            "http_requests",
            "server_completion_tokens",
            "prm_biased_scores",
        ):
            out[key] = sum(r.get(key, 0) for r in rows)
        out["http_wait_share"] = out["http_wait_s"] / wall
        out["ms_per_round"] = 1000 * out["http_wait_s"] / max(1, out["http_rounds"])
    return out


def earlier_rows(args: argparse.Namespace) -> dict[str, list[dict]]:
    """The rows of the problems before --offset from the earlier run in --out (the same search
    settings)."""
    rows: dict[str, list[dict]] = {"local": [], "remote": []}
    earlier = Path(args.out or "", "results.json")
    if not args.offset or not args.out or not earlier.exists():
        return rows
    old = json.loads(earlier.read_text())
    changed = [
        k for k in SEARCH_KEYS if k in old["config"] and old["config"][k] != getattr(args, k)
    ]
    if changed:
        raise SystemExit(
            f"{earlier} was run with other settings ({', '.join(changed)}); use another --out"
        )
    ids = {p.id for p in load_problems(args.dataset, limit=args.offset)}
    return {side: [r for r in old["rows"][side] if r["id"] in ids] for side in rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--dataset", default=str(DATA))
    p.add_argument("--limit", type=int, default=10)
    p.add_argument(
        "--offset",
        type=int,
        default=0,
        help="problems to skip first; with --out holding an earlier run of the same search "
        "settings, its rows for the skipped problems are kept (to extend that run)",
    )
    p.add_argument("--beams", type=int, default=8)
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--max-step-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    path = models.resolve(args.model)
    config = SearchConfig(
        beams=args.beams,
        width=args.width,
        max_steps=args.max_steps,
        max_path_tokens=args.max_tokens,
        max_step_tokens=args.max_step_tokens,
        sampling=SamplingParams(temperature=0.8, seed=0),
    )
    place, judge = Placement(n_threads=args.threads), PRMSpec(path, "judge")
    gen, ver = LlamaCppBackend().open_models(path, judge, (16384, 16384), place)
    local = Engine(gen, ver, parse_policy("baseline"))
    endpoint = Endpoint(args.base_url, timeout_s=300)
    rgen = open_generator(path, endpoint, 8192, step_tokens=args.max_step_tokens)
    rver = open_verifier(path, "judge", endpoint)
    remote = Engine(rgen, rver, parse_policy("baseline"))
    rows = earlier_rows(args)
    load = {"before": os.getloadavg()}
    for i, problem in enumerate(
        load_problems(args.dataset, limit=args.limit, offset=args.offset), args.offset
    ):
        order = ["local", "remote"] if i % 2 == 0 else ["remote", "local"]
        for side in order:
            engine, clients = (
                (local, []) if side == "local" else (remote, [rgen.client, rver.client])
            )
            row = run_one(engine, problem, config, clients, rver if side == "remote" else None)
            rows[side].append(row)
            print(side, json.dumps(row), flush=True)
        load["after"] = os.getloadavg()
        report = {
            "config": vars(args),
            "load_average_1_5_15": load,
            "summary": {k: summary(v) for k, v in rows.items()},
            "rows": rows,
        }
        if args.out:  # after every problem: a stopped run keeps the pairs it finished
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "results.json").write_text(json.dumps(report, indent=2))
    report["round_trip_ms"] = round_trip_ms(rgen.client)
    print(json.dumps({**report["summary"], "round_trip_ms": report["round_trip_ms"]}, indent=2))
    if args.out:
        (Path(args.out) / "results.json").write_text(json.dumps(report, indent=2))
    rgen.close()
    rver.close()


if __name__ == "__main__":
    main()
