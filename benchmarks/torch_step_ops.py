"""Operations of one torch generator decode step, counted on the CPU: what becomes kernels on a GPU, where a small
batch's pass costs a few microseconds a kernel (docs/results.md, "The torch backend on the H200"). One JSON object.

    python benchmarks/torch_step_ops.py --model smollm2-135m --rows 8

A step: `rows` sequences forked from one prompt append one token each and draw one (temperature 0.8, a seed a
row), through TorchGenerator.step with the decode graphs' recorded body run eagerly (no CUDA here to record it).
Counted with torch's profiler: the aten operations called from Python (not those an operation calls inside), less
views and no-op casts, for the whole step ("in_step") and for what runs outside the graph's replay ("outside_graph":
on a GPU each is a launch from Python, and the transfers wait for the device). A count, not a time: the GPU lease
times it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from edgereason import models  # first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)

# Operations that compute nothing (views, metadata, allocation): no kernel on a GPU.
VIEWS = {
    "aten::view", "aten::slice", "aten::select", "aten::unflatten", "aten::transpose", "aten::expand",
    "aten::as_strided", "aten::t", "aten::split", "aten::chunk", "aten::unsqueeze", "aten::detach", "aten::detach_",
    "aten::alias", "aten::flatten", "aten::_unsafe_view", "aten::lift_fresh", "aten::empty", "aten::empty_strided",
    "aten::resize_", "aten::_reshape_alias", "aten::permute", "aten::squeeze", "aten::narrow",
    "aten::split_with_sizes", "aten::item", "aten::_local_scalar_dense", "aten::resolve_conj", "aten::resolve_neg",
    "aten::result_type",
}  # fmt: skip


def _computing(events) -> Counter:
    """Top-level aten operations that compute: a cast or reshape counts only where it copies."""
    out: Counter = Counter()
    for e in events:
        if not e.name.startswith("aten::") or (e.cpu_parent and e.cpu_parent.name.startswith("aten::")):
            continue
        if e.name in VIEWS:
            continue
        if e.name in ("aten::to", "aten::contiguous", "aten::reshape") and not any(
            c.name.startswith("aten::") and c.name not in VIEWS for c in e.cpu_children
        ):
            continue
        out[e.name] += 1
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="registry name or GGUF path")
    p.add_argument("--rows", type=int, default=8)
    args = p.parse_args()
    from torch.profiler import ProfilerActivity, profile

    from edgereason.backends.torch.generator import TorchGenerator
    from edgereason.backends.torch.graphs import DecodeGraphs
    from edgereason.backends.torch.model import load_model
    from edgereason.config import SamplingParams
    from edgereason.protocols import BatchEntry

    class Replay:
        def __init__(self, body) -> None:
            self.replay = body

    class EagerGraphs(DecodeGraphs):  # records nothing: `replay` runs the body a graph would record
        def _capture(self, *key):
            graph = self.graphs[key] = Replay(self._body(*key))
            return graph

    model = load_model(str(models.resolve(args.model)), "cpu")
    gen = TorchGenerator(model, 4096)
    gen.ctx.graphs = EagerGraphs(gen.ctx)
    prompt = model.tokenize("Janet has 16 eggs and eats 3. How many are left?", add_bos=True)
    root = gen.new_seq()
    gen.step([BatchEntry(root, prompt)], [0], SamplingParams())
    seqs = [gen.fork(root) for _ in range(args.rows)]
    params = [SamplingParams(temperature=0.8, seed=i) for i in range(args.rows)]
    last = [prompt[-1]] * args.rows

    def step() -> None:
        nonlocal last
        draws = gen.step([BatchEntry(s, [t]) for s, t in zip(seqs, last)], [1] * args.rows, params)
        last = [d[0] for d in draws]

    step()  # warm-up: the bucket's graph "captured"
    counts = {}
    for part in ("in_step", "outside_graph"):
        if part == "outside_graph":
            for graph in gen.ctx.graphs.graphs.values():
                graph.replay = lambda: None
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        ops = _computing(prof.events())
        counts[part] = {"ops": sum(ops.values()), "by_name": dict(ops.most_common())}
    out = {"model": model.name, "layers": model.n_layer, "rows": args.rows, **counts}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
