"""Raw decode pass time of the torch backend (CUDA graphs and eager) beside the llama.cpp backend's,
by rows per pass; one JSON object on stdout. On CUDA the graphs run uncompiled (`torch_graphs`) and
with the decoder's layers compiled (`torch_fused`, the backend's default there), side by side.

    python benchmarks/torch_pass.py --model qwen2.5-coder-1.5b               # CUDA: rows 1,8,64,128
    python benchmarks/torch_pass.py --model smollm2-135m --rows 1,8 --steps 5 # CPU
    python benchmarks/torch_pass.py --model qwen2.5-coder-1.5b --weights bf16,int4  # both kinds

--weights runs each torch setting once per kind of weights (--torch-weights: bf16, or int4, the
GGUF's 4-bit matrices through torch's int4 matmul); a kind other than bf16 is reported under its
setting's name and the kind, e.g. `torch_fused_int4`, with the bytes its weights take.

A pass: `rows` sequences, forked from one prompt of --context tokens, append one token each and draw
one token each (temperature 0.8, a seed per row: a search's decode step; on torch the draw runs on
the device, in the decode graph; llama.cpp's rows are read, not drawn, as its raw decode was
measured before). The first --warmup passes of every setting are left out (CUDA graph capture,
allocator growth); the median of the next --steps is reported, timed around a CUDA synchronize.
llama.cpp runs with every layer on the GPU where its build can offload (else on the CPU) and only
where llama_cpp imports."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models


def _time_passes(run_pass, steps: int, warmup: int, sync) -> float:
    """Median milliseconds of `steps` passes after `warmup` untimed ones."""
    times = []
    for i in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        run_pass()
        sync()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def _rows_passes(ctx, prompt: list[int], rows: int, decode, steps: int, warmup: int, sync) -> float:
    """Fork `rows` sequences from a prefilled prompt; time passes that append one token to each."""
    from edgereason.backends.context_roles import DecodeItem

    root = ctx.new_seq()
    decode(ctx, [DecodeItem(root, prompt, [])])
    seqs = [ctx.fork(root) for _ in range(rows)]
    token = prompt[-1]
    try:
        return _time_passes(
            lambda: decode(ctx, [DecodeItem(s, [token], [(0, i)]) for i, s in enumerate(seqs)]),
            steps,
            warmup,
            sync,
        )
    finally:
        for s in seqs + [root]:
            ctx.free(s)


def torch_times(
    path: Path,
    prompt: list[int],
    rows: list[int],
    steps: int,
    warmup: int,
    graphs: bool,
    fused: bool = False,
    weights: str = "bf16",
) -> dict:
    """fused: the decoder's layers compiled (backends/torch/compiled_layers.py); the first pass's
    seconds include the compile. weights: bf16 or int4 (int4_choice.py)."""
    import os

    import torch

    from edgereason.backends.torch.int4_choice import SWITCH
    from edgereason.backends.torch.model import load_model
    from edgereason.backends.torch.runtime import TorchContext

    os.environ["EDGEREASON_COMPILE"] = "1" if fused else "0"
    os.environ[SWITCH] = weights
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_model(str(path), device)
    kv = len(prompt) + max(rows) * (warmup + steps + 2) + 256
    ctx = TorchContext(model, kv, graphs=graphs)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    from edgereason.config import SamplingParams

    def decode(c, items) -> None:  # the pass and its draws; only the ids come back
        rows = sum(1 for it in items if it.outputs)
        c.forward_draw(
            items, [1] * rows, [SamplingParams(temperature=0.8, seed=i) for i in range(rows)]
        )

    t0 = time.perf_counter()
    # a capture (and a compile) of the first bucket
    first = _rows_passes(ctx, prompt, rows[0], decode, 1, 0, sync)
    return {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "weights": model.decoder.weights_kind,
        "weights_bytes": model.decoder.weights_bytes(),
        "first_pass_s": time.perf_counter() - t0,
        "first_ms": first,
        "ms": {n: _rows_passes(ctx, prompt, n, decode, steps, warmup, sync) for n in rows},
    }


def llama_times(path: Path, prompt: list[int], rows: list[int], steps: int, warmup: int) -> dict:
    from edgereason.backends import load_backend
    from edgereason.backends.llamacpp.model import load_model
    from edgereason.backends.llamacpp.runtime import KVContext

    layers = 999 if load_backend("llamacpp").supports_gpu() else 0
    kv = len(prompt) + max(rows) * (warmup + steps + 2) + 256
    ctx = KVContext(load_model(str(path), layers), kv)
    decode = lambda c, items: c.decode(items, lambda *_: None)  # noqa: E731  one logits row per sequence
    try:
        return {
            "gpu_layers": layers,
            "ms": {
                n: _rows_passes(ctx, prompt, n, decode, steps, warmup, lambda: None) for n in rows
            },
        }
    finally:
        ctx.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="registry name or GGUF path")
    p.add_argument(
        "--rows",
        default=None,
        help="rows per pass, comma-separated (default 1,8,64,128 on CUDA, 1,8 on a CPU)",
    )
    p.add_argument(
        "--context", type=int, default=512, help="prompt tokens every row's sequence starts with"
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument(
        "--skip",
        default="",
        help="comma-separated: torch-graphs, torch-fused, torch-eager, llamacpp",
    )
    p.add_argument(
        "--weights", default="bf16", help="comma-separated kinds of torch weights: bf16, int4"
    )
    args = p.parse_args()
    path = models.resolve(args.model)
    skip = set(filter(None, args.skip.split(",")))
    from edgereason.backends.llama_vocab import load_vocab

    vocab = load_vocab(str(path))
    text = (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
        "May. "
    )
    ids = vocab.tokenize(text * (args.context // 10 + 1), add_bos=vocab.add_bos)
    prompt = ids[: args.context]
    import torch

    on_cuda = torch.cuda.is_available()
    rows = [int(r) for r in (args.rows or ("1,8,64,128" if on_cuda else "1,8")).split(",")]
    out: dict = {
        "model": path.name,
        "context": len(prompt),
        "rows": rows,
        "steps": args.steps,
        "warmup": args.warmup,
        "torch": torch.__version__,
    }
    settings = {  # name -> (graphs, fused)
        "torch_graphs": (True, False) if on_cuda else None,
        "torch_fused": (True, True) if on_cuda else None,
        "torch_eager": (False, False),
    }
    for name, setting in settings.items():
        if setting is None or name.replace("_", "-") in skip:
            continue
        for kind in args.weights.split(","):
            key = name if kind == "bf16" else f"{name}_{kind}"
            graphs, fused = setting
            out[key] = torch_times(path, prompt, rows, args.steps, args.warmup, graphs, fused, kind)
    if "llamacpp" not in skip:
        try:
            out["llamacpp"] = llama_times(path, prompt, rows, args.steps, args.warmup)
        except ImportError as e:
            out["llamacpp"] = {"skipped": str(e)}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
