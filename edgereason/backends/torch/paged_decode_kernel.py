"""The Triton kernels of paged decode attention (flash-decoding over cells of one token): imported
only where they run (CUDA, or Triton's interpreter in the tests), as Triton is no dependency.

One query token a row. The split kernel's grid is (row, KV head, split of the table): a program
reads its split's cell ids from the row's table, then those cells' keys and values straight from the
layer's cache [cells, 2 KVH, D], and computes all G query heads of its KV head at once (a [G, D]
block against [BLOCK_N, D], so a key is read once for its G heads). With one split it writes the
output; with several, each split's unnormalized output and its (max, sum) go to a scratch buffer and
the combine kernel, one program a (row, query head), weighs them together."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # cells a step of the split kernel reads
LOG2_E = 1.4426950408889634


@triton.jit
def _split_kernel(
    q_ptr, data_ptr, tables_ptr, seqs_ptr, pos_ptr, out_ptr, part_o_ptr, part_ml_ptr,
    stride_qr, stride_qh, stride_dc, stride_dh, stride_tr, stride_tc, split_len, n_splits,
    scale_log2,
    G: tl.constexpr, KVH: tl.constexpr, D: tl.constexpr, BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr, DIRECT: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    r, h, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    # the query at position p sees cells 0..p of its table
    length = (tl.load(pos_ptr + r) + 1).to(tl.int32)
    table = tables_ptr + tl.load(seqs_ptr + r).to(tl.int64) * stride_tr
    start = s * split_len
    end = tl.minimum(start + split_len, length)
    g, d = tl.arange(0, BLOCK_G), tl.arange(0, D)
    heads = h * G + g
    q = tl.load(
        q_ptr + r * stride_qr + heads[:, None] * stride_qh + d[None, :],
        mask=g[:, None] < G,
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)
    m = tl.full([BLOCK_G], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        valid = n < end
        cell = tl.load(table + n * stride_tc, mask=valid, other=0).to(tl.int64)
        at = data_ptr + cell[:, None] * stride_dc + d[None, :]
        k = tl.load(at + h * stride_dh, mask=valid[:, None], other=0.0).to(q.dtype)
        v = tl.load(at + (KVH + h) * stride_dh, mask=valid[:, None], other=0.0).to(q.dtype)
        scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2
        scores = tl.where(valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(scores - m_new[:, None])
        total = total * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m = m_new
    rows = (r * KVH * G + heads)[:, None]
    if DIRECT:
        tl.store(out_ptr + rows * D + d[None, :], acc / total[:, None], mask=g[:, None] < G)
    else:
        at = (rows * n_splits + s) * D + d[None, :]
        tl.store(part_o_ptr + at, acc, mask=g[:, None] < G)
        ml = part_ml_ptr + (r * KVH * G + heads) * n_splits * 2 + s * 2
        tl.store(ml, m, mask=g < G)
        tl.store(ml + 1, total, mask=g < G)


@triton.jit
def _combine_kernel(
    out_ptr, part_o_ptr, part_ml_ptr, n_splits, D: tl.constexpr, BLOCK_S: tl.constexpr
):
    row = tl.program_id(0)  # a (row, query head)
    s, d = tl.arange(0, BLOCK_S), tl.arange(0, D)
    ml = part_ml_ptr + row * n_splits * 2 + s * 2
    m = tl.load(ml, mask=s < n_splits, other=float("-inf"))
    total = tl.load(ml + 1, mask=s < n_splits, other=0.0)
    o = tl.load(
        part_o_ptr + (row * n_splits + s)[:, None] * D + d[None, :],
        mask=(s < n_splits)[:, None],
        other=0.0,
    )
    # split 0 holds cell 0, so the largest m is finite; an empty split's weight is exp2(-inf) = 0
    w = tl.exp2(m - tl.max(m, 0))
    out = tl.sum(o * w[:, None], 0) / tl.sum(total * w, 0)
    tl.store(out_ptr + row * D + d, out)


def split_count(rows: int, kv_heads: int, width: int, device: torch.device) -> int:
    """Splits of the table a row's KV head is cut into: enough programs to fill the GPU about four
    times over, each split at least BLOCK_N cells."""
    if device.type != "cuda":
        return 1
    programs = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(math.ceil(programs / (rows * kv_heads)), math.ceil(width / BLOCK_N)))


def paged_decode(
    q: torch.Tensor,
    data: torch.Tensor,
    tables: torch.Tensor,
    seqs: torch.Tensor,
    positions: torch.Tensor,
    splits: int | None = None,
) -> torch.Tensor:
    """q [R, H, D], one query a row at positions[r] of sequence seqs[r]; data [cells, 2 KVH, D] a
    layer's cache; tables [sequences, W] each sequence's cells in position order -> [R, H, D] of q's
    dtype: softmax(q k^T / sqrt(D)) v over the row's cells 0..positions[r]."""
    rows, heads, dim = q.shape
    kv_heads, width = data.shape[1] // 2, tables.shape[1]
    group = heads // kv_heads
    splits = splits or split_count(rows, kv_heads, width, q.device)
    # Triton's interpreter (a CPU) multiplies bf16 matrices wrong: there they go in as float32
    upcast = q.device.type == "cpu" and q.dtype == torch.bfloat16
    split_len = math.ceil(math.ceil(width / splits) / BLOCK_N) * BLOCK_N
    splits = math.ceil(width / split_len)
    q = q if q.stride(2) == 1 else q.contiguous()  # the kernel steps rows and heads by strides
    out = q.new_empty(rows, heads, dim)  # q may be a view (of the QKV matmul's output): strided
    part_o = out if splits == 1 else q.new_empty(rows, heads, splits, dim, dtype=torch.float32)
    part_ml = out if splits == 1 else q.new_empty(rows, heads, splits, 2, dtype=torch.float32)
    _split_kernel[(rows, kv_heads, splits)](
        q, data, tables, seqs, positions, out, part_o, part_ml,
        q.stride(0), q.stride(1), data.stride(0), data.stride(1), tables.stride(0),
        tables.stride(1), split_len, splits, LOG2_E / math.sqrt(dim),
        G=group, KVH=kv_heads, D=dim, BLOCK_G=max(16, triton.next_power_of_2(group)),
        BLOCK_N=BLOCK_N, DIRECT=splits == 1, UPCAST=upcast,
        PRECISION="ieee" if upcast or q.dtype == torch.float32 else "tf32",
    )  # fmt: skip
    if splits > 1:
        _combine_kernel[(rows * heads,)](
            out, part_o, part_ml, splits, D=dim, BLOCK_S=triton.next_power_of_2(splits)
        )
    return out
