"""A decode pass's linears on bf16 and on weight-only int4 weights, timed by rows per pass.

Issue 63 item 5: a model's real weights, every layer's matrices (Q/K/V fused, output, gate/up fused,
down) and the LM head, one pass's worth; one JSON object on stdout.

    python benchmarks/int4_pass.py --model qwen2.5-coder-1.5b           # CUDA: rows 1,8,64
    python benchmarks/int4_pass.py --model smollm2-135m --rows 1 --layers 2 --steps 2  # CPU smoke

Variants: `bf16` (the GGUF dequantized, as the torch backend runs it); `int4_exact` (Q4_0/Q4_1/Q4_K
matrices as 4-bit groups read from their blocks, the rest, Q6_K say, in bf16); `int4` (those
requantized to 4 bits too); `int4_head` (the LM head as well). The int4 matrices go through
backends/torch/int4_weights.py (Int4Linear: tinygemm on CUDA, bf16 activations; its CPU kernel
elsewhere). On CUDA a pass is one CUDA graph, the median of --steps replays after --warmup; on the
CPU the passes run eagerly. Beside the times: the bytes a pass reads in each variant, from the
GGUF's tensor table (`bytes`, all the file's layers and head, whatever --layers times); how far each
int4 product is from x @ dequantize(W)^T (`layout_error`: the kernel's layout and its bf16 rounding,
~3e-3 when right); and each requantized matrix's distance from the GGUF's values
(`requantized_error`)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

INT4_BYTES = 0.5 + 4 / 32  # a code, and a bf16 scale and zero for each group of 32
GROUPS = (("attn_q", "attn_k", "attn_v"), ("attn_output",), ("ffn_gate", "ffn_up"), ("ffn_down",))
VARIANTS = ("bf16", "int4_exact", "int4", "int4_head")


def pass_bytes(weights) -> dict[str, int]:
    """Bytes of weights a decode pass reads in each variant, and in the GGUF's own types: every
    layer's matrices and the LM head (a pass reads a few rows of the embedding; norms and biases are
    left out)."""
    from gguf.constants import GGMLQuantizationType

    from edgereason.backends.torch.int4_weights import EXACT_TYPES

    layer = [t for t in weights.layout.tensors if t.name.startswith("blk.") and len(t.dims) == 2]
    head = weights.tensors.get("output.weight") or weights.tensors["token_embd.weight"]
    exact = sum(t.n_elements for t in layer if GGMLQuantizationType(t.kind) in EXACT_TYPES)
    rest = sum(t.n_elements for t in layer) - exact
    return {
        "bf16": 2 * (exact + rest + head.n_elements),
        "int4_exact": round(INT4_BYTES * exact) + 2 * (rest + head.n_elements),
        "int4": round(INT4_BYTES * (exact + rest)) + 2 * head.n_elements,
        "int4_head": round(INT4_BYTES * (exact + rest + head.n_elements)),
        "gguf": sum(t.n_bytes for t in layer) + head.n_bytes,
    }


def head_name(weights) -> str:
    return "output.weight" if weights.has("output.weight") else "token_embd.weight"


class Matrices:
    """A group of a layer's matrices (or the head) in one variant: the int4 parts as one Int4Linear,
    the bf16 parts as one matrix; each a kernel of the pass. The int4 parts' codes are kept on the
    host until `check` has read them."""

    def __init__(self, bf16, int4, device, names: list[str], in_int4: list[bool]) -> None:
        import torch

        from edgereason.backends.torch.int4_weights import Int4Linear, cat_rows

        picked = [n for n, four in zip(names, in_int4) if four]
        kept = [n for n, four in zip(names, in_int4) if not four]
        parts = [int4.int4(n) for n in picked]
        self.parts = [(n, p.shape[0], p.exact) for n, p in zip(picked, parts)]
        self.weight = cat_rows(parts) if parts else None
        self.int4 = Int4Linear(self.weight, device, torch.bfloat16) if parts else None
        self.bf16 = (
            torch.cat([bf16.load(n, device, torch.bfloat16) for n in kept]) if kept else None
        )
        self.width = (self.bf16 if self.bf16 is not None else self.weight.codes).shape[1]

    def __call__(self, x) -> None:
        import torch.nn.functional as F

        if self.int4 is not None:
            self.int4(x)
        if self.bf16 is not None:
            F.linear(x, self.bf16)

    def nbytes(self) -> int:
        int4 = self.int4.nbytes() if self.int4 is not None else 0
        return int4 + (self.bf16.numel() * 2 if self.bf16 is not None else 0)

    def check(self, bf16, device) -> tuple[float, dict[str, float]]:
        """How far the int4 product is from x @ dequantize(W)^T, and each requantized part from the
        GGUF's values (relative Frobenius); the host's codes are let go."""
        import torch

        w = self.weight.dequantize().double()
        x = torch.randn(8, self.width, device=device).bfloat16()
        want = x.double().cpu() @ w.T
        layout = float((self.int4(x).double().cpu() - want).norm() / want.norm())
        requantized = {}
        for (name, _, exact), part in zip(self.parts, w.split([rows for _, rows, _ in self.parts])):
            if not exact:
                gguf = bf16.load(name, device, torch.bfloat16).double().cpu()
                requantized[name] = float((part - gguf).norm() / gguf.norm())
        self.weight = None
        return layout, requantized


def variant_matrices(bf16, int4, device, layers: int, variant: str) -> list[Matrices]:
    """The pass's matrices in one variant: `layers` layers' groups, then the head."""
    from gguf.constants import GGMLQuantizationType

    from edgereason.backends.torch.int4_weights import EXACT_TYPES

    head = head_name(int4)

    def in_int4(name: str) -> bool:
        if variant == "bf16" or (name == head and variant != "int4_head"):
            return False
        kind = GGMLQuantizationType(int4.tensors[name].kind)
        return variant != "int4_exact" or kind in EXACT_TYPES

    groups = [[f"blk.{i}.{part}.weight" for part in g] for i in range(layers) for g in GROUPS]
    return [
        Matrices(bf16, int4, device, names, [in_int4(n) for n in names])
        for names in [*groups, [head]]
    ]


def time_pass(run, device, steps: int, warmup: int) -> float:
    """Median milliseconds of a pass: on CUDA replays of one CUDA graph of it."""
    import torch

    cuda = device.type == "cuda"
    if cuda:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                run()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        run = graph.replay
    times = []
    for i in range(warmup + steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        if cuda:
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def measure(variant: str, bf16, int4, device, args) -> dict:
    """One variant: its matrices made (seconds), checked, and a pass timed at each row count."""
    import torch

    t0 = time.perf_counter()
    matrices = variant_matrices(bf16, int4, device, args.layers, variant)
    made_s = time.perf_counter() - t0
    checks = [m.check(bf16, device) for m in matrices if m.int4 is not None]
    read = sum(m.nbytes() for m in matrices)
    ms = {}
    for rows in args.rows:
        xs = [torch.randn(rows, m.width, device=device).bfloat16() for m in matrices]
        ms[rows] = time_pass(
            lambda xs=xs: [m(x) for m, x in zip(matrices, xs)], device, args.steps, args.warmup
        )
    return {
        "made_s": round(made_s, 2),
        "bytes_read": read,
        "ms": ms,
        "gb_per_s": {rows: read / t / 1e6 for rows, t in ms.items()},
        "layout_error": max((layout for layout, _ in checks), default=None),
        "requantized_error": {n: e for _, errors in checks for n, e in errors.items()},
    }


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="registry name or GGUF path")
    p.add_argument("--rows", default=None, help="rows per pass (default 1,8,64 on CUDA, 1 on CPU)")
    p.add_argument("--layers", type=int, default=None, help="layers in a pass (default all)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    from edgereason.backends.torch.gguf_weights import Weights
    from edgereason.backends.torch.weight_sources import open_weights

    path = models.resolve(args.model)
    int4, bf16 = Weights(path), open_weights(path, torch.bfloat16)  # bf16: the kept copy, if any
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args.rows = [
        int(r) for r in (args.rows or ("1,8,64" if device.type == "cuda" else "1")).split(",")
    ]
    args.layers = args.layers or int4.config().n_layer
    out = {
        "model": path.name,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "layers": args.layers,
        "pass_bytes": pass_bytes(int4),  # the whole model's, by its tensor table
    }
    for variant in args.variants.split(","):
        out[variant] = measure(variant, bf16, int4, device, args)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
