"""Operations of one torch generator decode step, counted: what becomes kernels on a GPU, where a
small batch's pass costs a few microseconds a kernel (docs/results.md, "The torch backend on the
H200"). One JSON object.

    python benchmarks/torch_step_ops.py --model smollm2-135m --rows 8  # the CPU, uncompiled
    # and compiled (compiled_layers.py)
    python benchmarks/torch_step_ops.py --model smollm2-135m --rows 8 --compiled

A step: `rows` sequences forked from one prompt append one token each and draw one (temperature 0.8,
a seed a row), through TorchGenerator.step with the decode graphs' recorded body run as it is (no
CUDA graph is recorded). Uncompiled, counted with torch's profiler: the aten operations called from
Python (not those an operation calls inside), less views and no-op casts, for the whole step
("in_step"), inside the decoder's layers ("per_layer") and outside the graph's replay
("outside_graph": on a GPU each is a launch from Python). Compiled: the kernels the compiled layer
launches (inductor's code: its generated kernels, C++ on a CPU and Triton on CUDA, and the library
calls, matmuls and attention), with the step's operations outside the layers as counted uncompiled.
A count, not a time: torch_pass.py times the passes on a GPU."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# Operations that compute nothing (views, metadata, allocation): no kernel on a GPU.
VIEWS = {
    "aten::view", "aten::slice", "aten::select", "aten::unflatten", "aten::transpose",
    "aten::expand", "aten::as_strided", "aten::t", "aten::split", "aten::chunk", "aten::unsqueeze",
    "aten::detach", "aten::detach_", "aten::alias", "aten::flatten", "aten::_unsafe_view",
    "aten::lift_fresh", "aten::empty", "aten::empty_strided", "aten::resize_",
    "aten::_reshape_alias", "aten::permute", "aten::squeeze", "aten::narrow",
    "aten::split_with_sizes", "aten::item", "aten::_local_scalar_dense", "aten::resolve_conj",
    "aten::resolve_neg", "aten::result_type",
}  # fmt: skip
LAYER = "edgereason::layer"  # the profiler range each decoder layer runs in here
# a launch in the `call` of inductor's code: a generated kernel (C++ or Triton) or a library call
LAUNCH = re.compile(
    r"^\s+(?:buf\d+ = "
    r")?(cpp_fused_\w+|triton_\w+\.run|extern_kernels\.\w+|torch\.ops\.\w+\.\w+\.\w+)\(",
    re.M,
)


def _in_layer(e) -> bool:
    parent = e.cpu_parent
    while parent is not None:
        if parent.name == LAYER:
            return True
        parent = parent.cpu_parent
    return False


def _computing(events, where=lambda e: True) -> Counter:
    """Top-level aten operations that compute: a cast or reshape counts only where it copies."""
    out: Counter = Counter()
    for e in events:
        if not e.name.startswith("aten::") or (
            e.cpu_parent and e.cpu_parent.name.startswith("aten::")
        ):
            continue
        if e.name in VIEWS or not where(e):
            continue
        if e.name in ("aten::to", "aten::contiguous", "aten::reshape") and not any(
            c.name.startswith("aten::") and c.name not in VIEWS for c in e.cpu_children
        ):
            continue
        out[e.name] += 1
    return out


def layer_launches(code: str) -> list[str]:
    """The kernels and library calls in the `call` of one compiled graph's code, in order."""
    return LAUNCH.findall(code[code.index("def call(") :])


class _Replay:
    def __init__(self, body) -> None:
        self.replay = body


def decode_step(model_name: str, rows: int, device: str = "cpu"):
    """A generator whose decode graphs run their bodies as they are, `rows` sequences forked from a
    prompt, and the step: (model, generator, step())."""
    from edgereason.backends.torch.decode_graphs import DecodeGraphs
    from edgereason.backends.torch.generator import TorchGenerator
    from edgereason.backends.torch.model import load_model
    from edgereason.config import SamplingParams
    from edgereason.protocols import BatchEntry

    class EagerGraphs(DecodeGraphs):  # records nothing: `replay` runs the body a graph would record
        def _capture(self, *key):
            graph = self.graphs[key] = _Replay(self._body(*key))
            return graph

    model = load_model(str(models.resolve(model_name)), device)
    gen = TorchGenerator(model, 4096)
    gen.ctx.decode_graphs = EagerGraphs(gen.ctx.model, gen.ctx.cache)
    prompt = model.tokenize("Janet has 16 eggs and eats 3. How many are left?", add_bos=True)
    root = gen.new_seq()
    gen.step([BatchEntry(root, prompt)], [0], SamplingParams())
    seqs = [gen.fork(root) for _ in range(rows)]
    params = [SamplingParams(temperature=0.8, seed=i) for i in range(rows)]
    last = [prompt[-1]] * rows

    def step() -> None:
        nonlocal last
        draws = gen.step([BatchEntry(s, [t]) for s, t in zip(seqs, last)], [1] * rows, params)
        last = [d[0] for d in draws]

    return model, gen, step


def uncompiled_counts(model_name: str, rows: int, device: str = "cpu") -> dict:
    """The aten operations of one uncompiled step: whole, inside the layers (per layer), outside the
    graph."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from edgereason.backends.torch import model as model_module

    os.environ["EDGEREASON_COMPILE"] = "0"
    plain = model_module.block

    def marked_block(*args):
        with torch.profiler.record_function(LAYER):
            return plain(*args)

    model_module.block = marked_block
    try:
        model, gen, step = decode_step(model_name, rows, device)
        step()  # warm-up: the bucket's graph "captured"
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        events = prof.events()
        in_step, in_layers = _computing(events), _computing(events, _in_layer)
        for graph in gen.ctx.decode_graphs.graphs.values():
            graph.replay = lambda: None
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        outside_graph = _computing(prof.events())
    finally:
        model_module.block = plain
    return {
        "layers": model.n_layer,
        "in_step": {"ops": sum(in_step.values()), "by_name": dict(in_step.most_common())},
        "per_layer": sum(in_layers.values()) / model.n_layer,
        "outside_layers": sum(in_step.values()) - sum(in_layers.values()),
        "outside_graph": {
            "ops": sum(outside_graph.values()),
            "by_name": dict(outside_graph.most_common()),
        },
    }


def compiled_counts(
    model_name: str, rows: int, device: str = "cpu", outside_layers: int | None = None
) -> dict:
    """The kernels of one compiled step: the compiled layer's launches (inductor's code) times the
    layers, plus the operations outside the layers (uncompiled_counts': compiling leaves them as
    they are)."""
    from torch._inductor.utils import run_and_get_code

    if outside_layers is None:
        outside_layers = uncompiled_counts(model_name, rows, device)["outside_layers"]
    os.environ["EDGEREASON_COMPILE"] = "1"
    model, _, step = decode_step(model_name, rows, device)
    _, codes = run_and_get_code(step)  # it resets dynamo: the layer compiles in this step
    layer = [layer_launches(code) for code in codes if "def call(" in code]
    assert len(layer) == 1, f"one compiled layer graph expected, got {len(layer)}"
    per_layer = len(layer[0])
    return {
        "layer_kernels": [re.sub(r"_\d+$", "", name) for name in layer[0]],
        "per_layer": per_layer,
        "outside_layers": outside_layers,
        "in_step": per_layer * model.n_layer + outside_layers,
        "in_step_per_layer": (per_layer * model.n_layer + outside_layers) / model.n_layer,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="registry name or GGUF path")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument(
        "--device", default="cpu", help="cpu, or cuda (the compiled layer's Triton kernels)"
    )
    p.add_argument("--compiled", action="store_true", help="count the compiled step's kernels too")
    args = p.parse_args()
    uncompiled = uncompiled_counts(args.model, args.rows, args.device)
    out = {"model": args.model, "rows": args.rows, "device": args.device, "uncompiled": uncompiled}
    if args.compiled:
        out["compiled"] = compiled_counts(
            args.model, args.rows, args.device, uncompiled["outside_layers"]
        )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
