"""What one generator step costs at a given number of rows: llama_decode of one token per sequence,
reading the rows and drawing from them, with no engine around it (engine_vs_raw.raw_decode). Median
of --repeat runs of --tokens steps each, warm-up excluded; one JSON line per row count.

    python benchmarks/step_cost.py --model qwen2.5-coder-0.5b --gpu-layers 999 --device-top-k 100 \\
        --rows 1,8,32,64
"""

from __future__ import annotations

import argparse
import json
import statistics

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split
from engine_vs_raw import raw_decode

from edgereason.backends import Placement
from edgereason.backends.llamacpp.backend import LlamaCppBackend


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rows", default="1,8,32,64", help="comma-separated sequences per step")
    ap.add_argument("--tokens", type=int, default=64, help="steps a run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--device-top-k", type=int, default=0)
    args = ap.parse_args()
    path = models.resolve(args.model)
    place = Placement(n_gpu_layers=args.gpu_layers, device_top_k=args.device_top_k)
    gen = LlamaCppBackend().open_generator(path, 16384, place)
    raw_decode(gen, 8, 16)  # warm-up
    for rows in [int(r) for r in args.rows.split(",")]:
        tok_s = statistics.median(raw_decode(gen, rows, args.tokens) for _ in range(args.repeat))
        print(
            json.dumps(
                {
                    "rows": rows,
                    "tok_s": round(tok_s, 1),
                    "ms_per_step": round(1e3 * rows / tok_s, 3),
                    "device_top_k": args.device_top_k,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
