"""Decode attention over the torch backend's KV cells, three ways side by side; one JSON object on
stdout.

    # CUDA: rows 8,64, widths 512-2048
    python benchmarks/attention_kinds.py --model qwen2.5-coder-1.5b
    # a CPU: a check
    python benchmarks/attention_kinds.py --model smollm2-135m --rows 2 --widths 256 --reps 2

- `gather`: what the backend runs (attention.py's LayerAttention): each row's table of cells
  gathered into a padded [rows, KVH, width, D] copy, then one masked SDPA call.
- `flex`: FlexAttention reading the cell pool in place, as a paged kernel does: the pool is the keys
  and values ([1, KVH, cells, D], no copy), each row a batch entry of one query, its block mask the
  128-cell blocks its table touches (built on the device from the tables, fixed shapes: no host
  sync, so a CUDA graph records it) and its mask_mod the row's cells (a [rows, cells] bitmap written
  from the tables each pass).
- `paged`: the backend's Triton kernel (backends/torch/paged_decode.py, `triton-paged`): each row's
  cells read through its table from the cache in place, uncompiled; only where it runs (CUDA and
  Triton, or Triton's interpreter).

The tables are a beam search's: every row shares a prompt of half the width and owns the rest, cells
handed out as the backend's free list hands them (lowest first). Timed: one pass of the model's
layers (each its own cache tensor), the cache write included, compiled (torch.compile) and on CUDA
replayed from a CUDA graph; `flex_mask` adds the per-pass mask building to flex. Both results are
checked against `gather`'s. --kinds picks some (flex compiles for every rows and width).

    python benchmarks/attention_kinds.py --model qwen2.5-coder-1.5b --kinds gather,paged
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

BLOCK = 128  # FlexAttention's KV block
KINDS = ("gather", "flex", "paged")


def beam_tables(rows: int, width: int, device):
    """[rows, width] cell ids: a shared prompt of width // 2 cells, then each row's own, lowest
    cells first."""
    import torch

    shared = width // 2
    own = torch.arange(rows * (width - shared)).view(rows, -1) + shared
    tables = torch.cat([torch.arange(shared).expand(rows, shared), own], dim=1)
    return tables.to(device), rows * (width - shared) + shared


def measure(cfg, rows: int, width: int, reps: int, device, dtype, kinds=KINDS) -> dict:
    """The kinds over one pass of the model's layers: their times in ms and their largest
    difference from `gather`."""
    import torch
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    from edgereason.backends.torch.attention import AttentionGroup, LayerAttention, visibility_bias
    from edgereason.backends.torch.paged_decode import PagedDecodeAttention

    heads, kv_heads, dim, layers = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.n_layer
    tables, used = beam_tables(rows, width, device)
    cells = used + rows + 1  # room for this pass's new tokens
    data = [
        torch.randn(cells, 2 * kv_heads, dim, device=device, dtype=dtype) for _ in range(layers)
    ]
    write = torch.arange(used, used + rows, device=device)
    tables[:, -1] = write  # the new token's cell ends each table
    q = torch.randn(rows, heads, dim, device=device, dtype=dtype)
    new_kv = torch.randn(rows, 2 * kv_heads, dim, device=device, dtype=dtype)
    visible = torch.ones(rows, 1, width, dtype=torch.bool, device=device)
    group = AttentionGroup(
        query_rows=torch.arange(rows, device=device)[:, None],
        cells=tables,
        bias=visibility_bias(visible, heads // kv_heads, dtype),
        tokens=None,
        padded_at=None,
    )
    n_blocks = -(-cells // BLOCK)
    member = torch.zeros(rows, n_blocks * BLOCK, dtype=torch.bool, device=device)
    present = torch.zeros(rows, n_blocks, dtype=torch.int32, device=device)
    block_mask: list[BlockMask] = []
    gather_layer = torch.compile(lambda att, q, kv: att(q, kv), dynamic=False)
    flex = torch.compile(flex_attention, dynamic=False)

    def build_mask() -> None:
        member.zero_()
        member.scatter_(1, tables, True)
        present.zero_()
        present.scatter_(1, tables // BLOCK, 1)
        order = torch.argsort(present, dim=1, descending=True, stable=True).int()
        block_mask[:] = [
            BlockMask.from_kv_blocks(
                present.sum(1, dtype=torch.int32)[:, None, None],
                order[:, None, None, :],
                BLOCK_SIZE=(BLOCK, BLOCK),
                mask_mod=lambda b, h, q_idx, kv_idx: member[b, kv_idx],
                seq_lengths=(1, cells),
            )
        ]

    def run_gather() -> torch.Tensor:
        for layer in range(layers):
            o = gather_layer(LayerAttention(data[layer], write, [group]), q, new_kv)
        return o

    def run_flex() -> torch.Tensor:
        for layer in range(layers):
            data[layer].index_copy_(0, write, new_kv)
            both = data[layer].transpose(0, 1)[None]  # [1, 2 KVH, cells, D]: the pool as it is
            k, v = both[:, :kv_heads], both[:, kv_heads:]
            # [rows, H, 1, D]
            o = flex(q[:, :, None], k, v, block_mask=block_mask[0], enable_gqa=True)
        return o.flatten(1)

    paged = [
        PagedDecodeAttention(
            data[layer],
            write,
            tables.int(),
            torch.arange(rows, device=device),
            torch.full((rows,), width - 1, device=device),
        )
        for layer in range(layers)
    ]

    def run_paged() -> torch.Tensor:
        for attend in paged:
            o = attend(q, new_kv)
        return o

    runs = {"gather": run_gather, "flex": run_flex, "paged": run_paged}
    out = {}
    if "flex" in kinds:
        build_mask()
        out["flex_mask"] = timed(build_mask, reps, device)
    want = run_gather().float()
    for kind in kinds:
        out[kind] = timed(runs[kind], reps, device)
        if kind != "gather":
            out[f"{kind}_max_difference"] = (runs[kind]().float() - want).abs().max().item()
    return out


def timed(run, reps: int, device) -> float:
    """Median ms of `reps` runs; on CUDA of a graph's replays (the backend replays its passes)."""
    import torch

    cuda = device.type == "cuda"
    if cuda:
        run()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        run = graph.replay
    times = []
    for _ in range(reps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen2.5-coder-1.5b")
    p.add_argument("--rows", default="8,64")
    p.add_argument("--widths", default="512,1024,2048")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: " + ", ".join(KINDS))
    args = p.parse_args()
    import torch

    from edgereason.backends.torch import attention_choice
    from edgereason.backends.torch.weight_sources import open_weights

    cfg = open_weights(models.resolve(args.model)).config()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    kinds = args.kinds.split(",")
    if "paged" in kinds and attention_choice.KINDS["triton-paged"](device, cfg.head_dim):
        kinds.remove("paged")  # said by its absence from the results
    out: dict = {"model": args.model, "layers": cfg.n_layer, "ms": {}}
    out["device"] = torch.cuda.get_device_name() if cuda else "cpu"
    for rows in map(int, args.rows.split(",")):
        for width in map(int, args.widths.split(",")):
            key = f"rows {rows}, width {width}"
            out["ms"][key] = measure(cfg, rows, width, args.reps, device, dtype, kinds)
            print(key, out["ms"][key], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
