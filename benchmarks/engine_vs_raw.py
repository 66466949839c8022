"""Engine generation speed in an 8-beam baseline search against raw llama.cpp batched decode of 8 sequences,
same model, same threads, measured side by side in one process. Warm-up excluded; reports tok/s.

    python benchmarks/engine_vs_raw.py --model smollm2-135m --beams 8 --repeat 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from edgereason import models
from edgereason.backends.llamacpp import open_models
from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine import Engine
from edgereason.policy import parse_policy
from edgereason.sampling import sample

PROBLEM = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
           "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
           "fresh duck egg. How much in dollars does she make every day at the farmers' market?")


def raw_decode(gen, n_seqs: int, n_tokens: int) -> float:
    """tok/s of plain batched decode: prompt once, n_seqs forks, one llama_decode per token step."""
    prompt = gen.tokenize(gen.apply_chat_template([{"role": "user", "content": PROBLEM}]))
    root = gen.new_seq()
    gen.ctx.decode([DecodeItem(root, prompt, [])], lambda *_: None)
    seqs = [gen.fork(root) for _ in range(n_seqs)]
    last = [prompt[-1]] * n_seqs
    params = SamplingParams(temperature=0.8, seed=0)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(n_tokens):
        items = [DecodeItem(s, [t], [(0, i)]) for i, (s, t) in enumerate(zip(seqs, last))]
        gen.ctx.decode(items, lambda i, logits: last.__setitem__(i, sample(logits, 1, params, rng)[0]))
    dt = time.perf_counter() - t0
    for s in seqs + [root]:
        gen.free(s)
    return n_seqs * n_tokens / dt


def engine_search(gen, ver, beams: int, width: int, steps: int) -> float:
    cfg = SearchConfig(beams=beams, width=width, max_steps=steps, max_step_tokens=96,
                       sampling=SamplingParams(temperature=0.8, seed=0))
    result = Engine(gen, ver, parse_policy("baseline")).solve(PROBLEM, cfg)
    return result.metrics.generated_tokens / result.metrics.gen_time_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--beams", type=int, default=8)
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = models.resolve(args.model)
    gen, ver = open_models(path, path, "judge", 16384, 16384, n_threads=args.threads)
    raw_decode(gen, args.beams, 16)  # warm-up
    engine_search(gen, ver, args.beams, args.width, 1)
    raws, engs = [], []
    for _ in range(args.repeat):  # alternate so machine drift hits both alike
        raws.append(raw_decode(gen, args.beams, 128))
        engs.append(engine_search(gen, ver, args.beams, args.width, args.steps))
    raw, eng = sorted(raws)[len(raws) // 2], sorted(engs)[len(engs) // 2]
    print(f"raw llama.cpp batched decode, {args.beams} seqs: {raw:8.1f} tok/s  (runs: {[round(x) for x in raws]})")
    print(f"engine generation, {args.beams}-beam baseline:  {eng:8.1f} tok/s  (runs: {[round(x) for x in engs]})")
    print(f"ratio engine/raw: {eng / raw:.2f}")


if __name__ == "__main__":
    main()
