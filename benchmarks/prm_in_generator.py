"""A value head on the generator's own weights, scored two ways side by side in one process: in the
generator's context (one row a step, what `--prm self` does with host sampling) and in a PRM context
of its own (a prefill of every step, as before). Same model, problems, search and seeds, so the two
searches draw the same tokens and differ only in where the scores come from; runs alternate, the
first of each is a warm-up left out. `--ways judge, generator` sets the judge PRM (Yes/No on the
same weights, its own context) beside the head: best-of-n draws the same tokens under either, so
only the scoring time and the weighted vote differ.

    python benchmarks/prm_in_generator.py --model qwen2.5-coder-1.5b --limit 3 --beams 4 \\
        --temperature 0.4
    python benchmarks/prm_in_generator.py --ways judge,generator --limit 3 --beams 4 \\
        --temperature 0.4
    python benchmarks/prm_in_generator.py --model smollm2-135m --prm-head HEAD --limit 2  # any head
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split
from edgereason.backends.llamacpp import LlamaGenerator, LlamaVerifier, load_model
from edgereason.backends.prm_format import prm_format
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from edgereason.heads.value_head import load_head
from edgereason.search.grading import answers_match
from edgereason.session.prm_choice import shipped_head

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k_test.jsonl"
WAYS = {"context": "PRM context", "generator": "generator rows", "judge": "judge PRM"}


def run(args: argparse.Namespace, way: str, problems: list[dict]) -> dict:
    path = models.resolve(args.model)
    model = load_model(str(path))
    gen = LlamaGenerator(model, args.kv_tokens, n_threads=args.threads)
    if way == "judge":
        ver = LlamaVerifier(model, prm_format("judge"), args.kv_tokens, n_threads=args.threads)
    else:
        head_file = Path(args.prm_head) if args.prm_head else shipped_head(args.model, args.model)
        if head_file is None:
            raise SystemExit(f"no value head ships for {args.model}: pass --prm-head")
        ver = LlamaVerifier(
            model,
            prm_format("head"),
            args.kv_tokens,
            n_threads=args.threads,
            head=load_head(head_file),
            generator_ctx=gen.ctx if way == "generator" else None,
        )
    config = SearchConfig(
        strategy=args.strategy,
        beams=args.beams,
        width=args.width,
        max_steps=args.max_steps,
        max_path_tokens=args.max_tokens,
        vote="weighted",
        sampling=SamplingParams(temperature=args.temperature, seed=0),
    )
    engine = Engine(gen, ver, parse_policy(args.policy))
    out = {"way": way, "seconds": 0.0, "prm_seconds": 0.0, "generated_tokens": 0, "correct": 0}
    try:
        for p in problems:  # one at a time, as `solve` runs them
            t0 = time.perf_counter()
            r = engine.solve(p["problem"], config)
            out["seconds"] += time.perf_counter() - t0
            out["prm_seconds"] += r.metrics.prm_time_s
            out["generated_tokens"] += r.metrics.generated_tokens
            out["correct"] += int(answers_match(r.answer, str(p["answer"])))
    finally:
        gen.close()
        ver.close()
    out.update(
        prm_tokens=ver.stats.tokens,
        generator_rows=ver.stats.generator_rows,
        seconds_per_problem=out["seconds"] / len(problems),
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="qwen2.5-coder-1.5b")
    p.add_argument(
        "--prm-head", default=None, help="a head file (default: the one that ships for the model)"
    )
    p.add_argument("--dataset", default=str(DATA))
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--limit", type=int, default=3)
    p.add_argument("--strategy", default="best-of-n")
    p.add_argument("--beams", type=int, default=4)
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--temperature", type=float, default=0.4)
    p.add_argument("--policy", default="baseline")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--kv-tokens", type=int, default=16384)
    p.add_argument("--ways", default="context,generator", help=f"comma list of {', '.join(WAYS)}")
    p.add_argument("--repeat", type=int, default=1, help="measured runs of each way, alternating")
    p.add_argument("--out", default=None, help="write the runs as JSON here")
    args = p.parse_args()
    with open(args.dataset, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    problems = lines[args.offset : args.offset + args.limit]
    ways = [w.strip() for w in args.ways.split(",")]
    if len(ways) != 2 or not set(ways) <= set(WAYS):
        raise SystemExit(f"--ways takes two of {', '.join(WAYS)}")
    run(args, ways[1], problems[:1])  # warm-up: model load, caches
    runs = [run(args, way, problems) for _ in range(args.repeat) for way in ways]
    for r in runs:
        print(
            f"{WAYS[r['way']]:15s}  {r['seconds_per_problem']:7.1f} s a problem  PRM "
            f"{r['prm_seconds']:6.1f} s  PRM tokens {r['prm_tokens']:6d}  rows "
            f"{r['generator_rows']:4d}  generated {r['generated_tokens']:6d}  right "
            f"{r['correct']}/{len(problems)}"
        )
    old, new = ([r["seconds"] for r in runs if r["way"] == w] for w in ways)
    print(f"{WAYS[ways[0]]} / {WAYS[ways[1]]}, wall time: {sum(old) / sum(new):.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
