"""CUDA kernels of one decode pass of the torch backend, per layer, for each decode attention
(backends/torch/attention_choice.py) uncompiled and compiled; one JSON object on stdout. The issue's
goal: at most 8 kernels a layer.

    python benchmarks/kernel_count.py --model qwen2.5-coder-1.5b --rows 8   # CUDA only

A pass: `rows` sequences forked from one prompt append one token each and draw one (temperature
0.8), the decode graph's body run as it is (benchmarks/torch_step_ops.py's step, nothing recorded,
so each launch is seen). Counted with torch's profiler: the kernels the GPU ran (memory copies and
sets apart). A layer's: the pass's kernels less those of the same pass with every layer skipped,
over the layers (`outside_layers`: the embedding, the tables and mask a pass builds, the logits and
the draw). Also what the installed torch offers for paged attention (varlen_attn's parameters, the
flash op's schema). A count, not a time: torch_pass.py times the passes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))  # torch_step_ops, run as a script or imported

COPIES = ("Memcpy", "Memset")


def pass_kernels(step) -> tuple[Counter, int]:
    """The kernels one run of `step` launches on the GPU, by name, and its copies and sets."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    on_gpu = [  # a record_function's range on the GPU's timeline is no kernel
        e.name
        for e in prof.events()
        if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
    ]
    kernels = Counter(n[:90] for n in on_gpu if not n.startswith(COPIES))
    return kernels, sum(1 for n in on_gpu if n.startswith(COPIES))


def count(model_name: str, rows: int, kind: str, compiled: bool) -> dict:
    """One setting's kernels: the pass's, those outside the layers, and a layer's."""
    from torch_step_ops import decode_step

    from edgereason.backends.torch import model as model_module

    os.environ["EDGEREASON_ATTENTION"] = kind
    os.environ["EDGEREASON_COMPILE"] = "1" if compiled else "0"
    model, _, step = decode_step(model_name, rows, "cuda")
    step()  # the bucket's body made (and the layer compiled)
    step()
    whole, copies = pass_kernels(step)
    block, run_block = model_module.block, model_module.run_block
    model_module.block = model_module.run_block = lambda x, *_: x
    try:
        outside, _ = pass_kernels(step)
    finally:
        model_module.block, model_module.run_block = block, run_block
    in_layers = whole - outside
    return {
        "pass": sum(whole.values()),
        "copies": copies,
        "outside_layers": sum(outside.values()),
        "per_layer": sum(in_layers.values()) / model.n_layer,
        "layer_kernels": {n: c / model.n_layer for n, c in in_layers.most_common()},
    }


def main() -> None:
    from edgereason.backends.torch.attention_choice import KINDS, installed_torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="registry name or GGUF path")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--kinds", default=",".join(KINDS), help="decode attentions, comma-separated")
    p.add_argument("--fusion", default="uncompiled,compiled", help="uncompiled, compiled or both")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("kernel_count.py counts the kernels a GPU runs: it needs CUDA")
    out: dict = {
        "model": args.model,
        "rows": args.rows,
        "device": torch.cuda.get_device_name(),
        "installed": installed_torch(),
    }
    for kind in args.kinds.split(","):
        for fusion in args.fusion.split(","):
            out[f"{kind} {fusion}"] = count(args.model, args.rows, kind, fusion == "compiled")
            print(kind, fusion, out[f"{kind} {fusion}"]["per_layer"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
