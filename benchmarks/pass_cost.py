"""What one llama.cpp forward pass costs by the number of rows it decodes, and what a prefill token
costs: the numbers that say whether speculation can pay on a machine. Speculative rows fill the
slots stragglers leave idle; they are nearly free only where a pass of 8 rows costs little more than
a pass of 1.

    python benchmarks/pass_cost.py --model smollm2-135m
    python benchmarks/pass_cost.py --model smollm2-135m --gpu-layers 999

The measurements are the memory profiler's (backends/llamacpp/measure.py): rows decode one token
each for sequences forked from one prompt, prefill runs in 64-token sequences as the PRM sees steps;
each point is the fastest of several passes after a warm-up. No numpy import here: edgereason must
load llama.cpp before numpy (see edgereason/__init__.py)."""

from __future__ import annotations

import argparse

from edgereason import models
from edgereason.backends.llamacpp.measure import measure_decode, measure_prefill
from edgereason.backends.llamacpp.model import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="registry name or .gguf path")
    ap.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: physical cores)"
    )
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--rows", default="1,2,4,8,16,32,64", help="comma list of rows per pass")
    ap.add_argument("--prefill", default="64,256,512", help="comma list of prefill batch tokens")
    ap.add_argument("--repeat", type=int, default=6, help="timed passes per point")
    args = ap.parse_args()
    model = load_model(str(models.resolve(args.model)), args.gpu_layers)
    decode = measure_decode(
        model, [int(x) for x in args.rows.split(",")], args.repeat, args.threads
    )
    prefill = measure_prefill(
        model, [int(x) for x in args.prefill.split(",")], args.repeat, args.threads
    )
    print(f"{model.path.name}: decode passes (one token per row, logits for each)")
    first = None
    for rows, tok_s in decode.points:
        ms = 1e3 * rows / tok_s
        first = first or ms
        print(
            f"  {rows:4d} rows  {ms:8.1f} ms/pass  {ms / rows:6.2f} ms/row  {ms / first:5.2f}x the "
            "first pass"
        )
    print("prefill (64-token sequences, logits at each end)")
    for tokens, tok_s in prefill.points:
        print(f"  {tokens:4d} tokens  {1e3 / tok_s:6.2f} ms/token")


if __name__ == "__main__":
    main()
