"""What one llama.cpp forward pass costs by the number of rows it decodes, and what a prefill token costs: the
numbers that say whether speculation can pay on a machine. Speculative rows fill the slots stragglers leave idle;
they are nearly free only where a pass of 8 rows costs little more than a pass of 1.

    python benchmarks/pass_cost.py --model smollm2-135m
    python benchmarks/pass_cost.py --model smollm2-135m --gpu-layers 999

Rows decode one token each, for sequences that share a 600-token prompt (as beams do); the first pass of every
size is warm-up and left out; the median of the rest is reported. No numpy import here: edgereason must load
llama.cpp before numpy (see edgereason/__init__.py).
"""

from __future__ import annotations

import argparse
import statistics
import time

from edgereason import models
from edgereason.backends.llamacpp.runtime import DecodeItem, KVContext, load_model

PROMPT_TOKENS = 600


def _timed(ctx: KVContext, items: list[DecodeItem]) -> float:
    t0 = time.perf_counter()
    ctx.decode(items, lambda *_: None)
    return time.perf_counter() - t0


def decode_pass_ms(ctx: KVContext, seqs: list[int], rows: int, repeat: int) -> float:
    """Median ms of one pass that decodes one token (with logits) for each of `rows` sequences."""
    times = [_timed(ctx, [DecodeItem(s, [100 + r], [(0, i)]) for i, s in enumerate(seqs[:rows])])
             for r in range(repeat + 1)]
    return statistics.median(times[1:]) * 1e3


def prefill_ms_per_token(ctx: KVContext, root: int, n_tokens: int, repeat: int) -> float:
    times = []
    for r in range(repeat + 1):
        seq = ctx.fork(root)
        times.append(_timed(ctx, [DecodeItem(seq, [5 + (i + r) % 300 for i in range(n_tokens)],
                                             [(n_tokens - 1, 0)])]))
        ctx.free(seq)
    return statistics.median(times[1:]) * 1e3 / n_tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="registry name or .gguf path")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--rows", default="1,2,4,8,16,32,64", help="comma list of rows per pass")
    ap.add_argument("--prefill", default="64,256,512", help="comma list of prefill lengths")
    ap.add_argument("--repeat", type=int, default=6)
    args = ap.parse_args()
    rows = [int(x) for x in args.rows.split(",")]
    model = load_model(str(models.resolve(args.model)), args.gpu_layers)
    ctx = KVContext(model, n_ctx=PROMPT_TOKENS + max(rows) * (args.repeat + 2) + 4096, n_seq_max=max(rows) + 4,
                    n_threads=args.threads)
    root = ctx.new_seq()
    ctx.decode([DecodeItem(root, [1 + i % 500 for i in range(PROMPT_TOKENS)], [])], lambda *_: None)
    seqs = [ctx.fork(root) for _ in range(max(rows))]
    print(f"{model.path.name}: decode passes (one token per row, logits for each)")
    one = None
    for n in rows:
        ms = decode_pass_ms(ctx, seqs, n, args.repeat)
        one = one or ms
        print(f"  {n:4d} rows  {ms:8.1f} ms/pass  {ms / n:6.2f} ms/row  {ms / one:5.2f}x the 1-row pass")
    for s in seqs:
        ctx.free(s)
    print("prefill (one sequence, logits for the last token)")
    for n in (int(x) for x in args.prefill.split(",")):
        print(f"  {n:4d} tokens  {prefill_ms_per_token(ctx, root, n, args.repeat):6.2f} ms/token")
    ctx.close()


if __name__ == "__main__":
    main()
