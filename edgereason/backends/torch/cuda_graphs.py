"""What the CUDA graphs of the decode and prefill passes share (decode_graphs.py,
prefill_graphs.py): the row buckets, the attention of a pass laid out padded, the process's one
graph memory pool, and the capture."""

from __future__ import annotations

from collections.abc import Callable

import torch

from edgereason.backends.torch import compiled_layers
from edgereason.backends.torch.attention import AttentionGroup, attend_groups, visibility_bias
from edgereason.backends.torch.attention_choice import PAGED, decode_kind
from edgereason.backends.torch.kv import GPU_MEMORY_HINT, KVCache
from edgereason.backends.torch.layer import Attend
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.paged_decode import attend_paged
from edgereason.errors import OutOfMemoryError
from edgereason.util.startup import phase

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def bucket(n: int, sizes: tuple[int, ...]) -> int:
    return next(s for s in sizes if s >= n)


def padded_attention(
    model: TorchModel,
    cache: KVCache,
    seqs: torch.Tensor,
    positions: torch.Tensor,
    cells: torch.Tensor,
    longest: int,
    width: int,
) -> Attend:
    """Attention for a pass laid out padded, as the graphs lay theirs out: len(seqs) sequences (rows
    `seqs` of the device tables) of `longest` query slots each, row e * longest + t the flat token
    at `positions` and `cells` of that row; each reads its table's first `width` cells. No gather of
    queries or scatter of outputs. A decode pass (one query slot) reads the cells in place where
    attention_choice.py picks the paged kernel: no tables gathered, no mask."""
    n_seq, device, cfg = seqs.shape[0], model.device, model.decoder.config
    if longest == 1 and decode_kind(device, cfg, model.decoder.dtype) == PAGED:
        tables = cache.device_tables.cells[:, :width]
        return attend_paged(cache.store, cells, tables, seqs, positions)
    visible = torch.arange(width, device=device)[None, None, :] <= positions.view(n_seq, longest, 1)
    group = AttentionGroup(
        query_rows=torch.arange(n_seq * longest, device=device).view(n_seq, longest),
        cells=cache.device_tables.rows(seqs, width),
        bias=visibility_bias(visible, cfg.n_head // cfg.n_head_kv, model.decoder.dtype),
        tokens=None,
        padded_at=None,
    )
    return attend_groups(cache.store, cells, [group])


_POOLS: dict[int, tuple[object, torch.cuda.CUDAGraph]] = {}


def shared_pool(device: torch.device) -> object:
    """The memory pool of every graph of this process on `device` (the generator's and the
    verifier's, decode and prefill): graphs replay one at a time, on one thread, and none keeps a
    tensor of its own past its replay (its inputs and outputs are buffers allocated outside it), so
    each reuses what the others used. The pool holds the largest graph's memory, not the sum of
    all."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _POOLS:
        pool = torch.cuda.graph_pool_handle()
        # a graph kept for the process holds the pool: were every graph of it freed (a context
        # closed), the pool would go with them and a later capture into its handle fail
        anchor = torch.cuda.CUDAGraph()
        with torch.cuda.graph(anchor, pool=pool):
            torch.zeros(1, device=device)
        _POOLS[index] = (pool, anchor)
    return _POOLS[index][0]


@phase("graphs")
def capture(body: Callable[[], None], device: torch.device, what: str) -> torch.cuda.CUDAGraph:
    """Warm up once on a side stream (it computes this very pass: the replay after writes the same
    cells again; a compiled pass compiles there, compiled_layers.first_run), then record `body` into
    a graph drawing on the process's shared pool."""
    try:
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                compiled_layers.first_run(body)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=shared_pool(device)):
                body()
    except torch.OutOfMemoryError:
        raise OutOfMemoryError(
            f"the GPU ran out of memory capturing {what}; {GPU_MEMORY_HINT}"
        ) from None
    return graph
