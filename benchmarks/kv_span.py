"""What other sequences' KV costs a decode pass: rows decode one token each while a filler sequence
holds H cells they never attend to (masked), as the other problems' paths are in a unified cache at
16 problems at once. llama.cpp builds a [rows x n_kv] attention mask and attends over n_kv cells for
every pass, n_kv being the span of cells in use, so a pass's cost can grow with H even though no row
reads those cells.

    python benchmarks/kv_span.py --model smollm2-135m --held 0,4096,16384
    python benchmarks/kv_span.py --model qwen2.5-coder-0.5b --gpu-layers 999 --top-k 100 \\
        --held 0,8192,32768,65536

Each point: the median of --passes timed passes after two warm-up passes, in ms, and per row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split
from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.measure import FILLER
from edgereason.backends.llamacpp.model import load_model
from edgereason.backends.llamacpp.runtime import KVContext


def pass_ms(model, held: int, rows: int, passes: int, top_k: int, threads: int | None) -> float:
    prompt = model.tokenize(FILLER, add_bos=model.add_bos)
    ctx = KVContext(
        model,
        n_ctx=held + len(prompt) + rows * (passes + 3) + 256,
        n_seq_max=rows + 2,
        n_threads=threads,
        top_k=top_k,
    )
    try:
        if held:
            filler = ctx.new_seq()
            tokens = (prompt * (held // len(prompt) + 1))[:held]
            for lo in range(0, held, ctx.n_batch):
                ctx.decode([DecodeItem(filler, tokens[lo : lo + ctx.n_batch], [])], lambda *_: None)
        root = ctx.new_seq()
        ctx.decode([DecodeItem(root, prompt, [])], lambda *_: None)
        seqs = [ctx.fork(root) for _ in range(rows)]
        token = prompt[-1]
        times = []
        for i in range(passes + 2):
            t0 = time.perf_counter()
            ctx.decode([DecodeItem(s, [token], [(0, s)]) for s in seqs], lambda *_: None)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        return 1e3 * statistics.median(times)
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="registry name or .gguf path")
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: physical cores)"
    )
    ap.add_argument(
        "--top-k", type=int, default=0, help="device-side top-k cut (0: whole rows to the host)"
    )
    ap.add_argument("--rows", type=int, default=32, help="rows per pass")
    ap.add_argument(
        "--held", default="0,4096,16384", help="comma list of cells the filler sequence holds"
    )
    ap.add_argument("--passes", type=int, default=10, help="timed passes per point")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    model = load_model(str(models.resolve(args.model)), args.gpu_layers)
    points = [
        (h, pass_ms(model, h, args.rows, args.passes, args.top_k, args.threads))
        for h in (int(x) for x in args.held.split(","))
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "model": model.path.name,
                    "rows": args.rows,
                    "top_k": args.top_k,
                    "gpu_layers": args.gpu_layers,
                    "points": [{"held": h, "ms_per_pass": round(ms, 3)} for h, ms in points],
                }
            )
        )
        return
    print(f"{model.path.name}: {args.rows} rows a pass, top-k {args.top_k or 'off'}")
    for h, ms in points:
        print(
            f"  {h:7d} cells held by others  {ms:8.2f} ms/pass  {ms / args.rows:6.3f} ms/row  "
            f"{ms / points[0][1]:5.2f}x"
        )


if __name__ == "__main__":
    main()
