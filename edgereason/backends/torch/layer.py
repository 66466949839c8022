"""One decoder layer in plain torch: its weights (`Layer`, Q/K/V and gate/up fused), RMSNorm, the
rotary positions, and `block`, the layer from its input to its output with its attention. Tensors
and the model's config alone, so one compiled copy serves every layer of a model
(compiled_layers.py). A matrix is a tensor, or with --torch-weights int4 an Int4Linear of the file's
4-bit codes (int4_layers.py); `linear` runs either."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from edgereason.backends.torch.gguf_weights import ModelConfig
from edgereason.backends.torch.int4_weights import Int4Linear
from edgereason.errors import ConfigError

Matrix = torch.Tensor | Int4Linear  # [out, in]: in the decoder's dtype, or 4-bit codes
# the field holding each part
_GROUP_OF = {"wq": "wqkv", "wk": "wqkv", "wv": "wqkv", "w_gate": "w_gate_up", "w_up": "w_gate_up"}


def linear(x: torch.Tensor, w: Matrix, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ w.T (+ bias), through the int4 kernel where w is 4-bit."""
    if isinstance(w, Int4Linear):
        out = w(x)
        return out if bias is None else out + bias
    return F.linear(x, w, bias)


def add_linear(x: torch.Tensor, h: torch.Tensor, w: Matrix) -> torch.Tensor:
    """x + h @ w.T: a tensor's residual added in its matmul (addmm), an int4 product's after it."""
    if isinstance(w, Int4Linear):
        return x + w(h)
    return torch.addmm(x, h, w.t())


@dataclass
class Layer:
    """One block's weights. Q, K and V are one matrix (and one bias), gate and up another, so a pass
    multiplies each group in one kernel: on a GPU a decode pass costs about a few microseconds a
    kernel, and the kernels of 28 layers are most of a small batch's time. The parts (`wq`,
    `w_up`...) are row views of the groups."""

    attn_norm: torch.Tensor
    wqkv: Matrix  # [(n_head + 2 n_head_kv) * head_dim, n_embd]
    bqkv: torch.Tensor | None
    wo: Matrix
    ffn_norm: torch.Tensor
    w_gate_up: Matrix  # [2 n_ff, n_embd]
    w_down: Matrix
    splits: tuple[int, int, int]  # rows of Q, K and V in wqkv

    @property
    def wq(self) -> torch.Tensor:
        return self.wqkv.split(self.splits)[0]

    @property
    def wk(self) -> torch.Tensor:
        return self.wqkv.split(self.splits)[1]

    @property
    def wv(self) -> torch.Tensor:
        return self.wqkv.split(self.splits)[2]

    @property
    def w_gate(self) -> torch.Tensor:
        return self.w_gate_up.chunk(2)[0]

    @property
    def w_up(self) -> torch.Tensor:
        return self.w_gate_up.chunk(2)[1]

    def with_part(self, part: str, w: torch.Tensor) -> None:
        """Put `w` in place of part `part` (wq, wk, wv, w_gate, w_up, wo, w_down): the group that
        holds it is made anew (the tensor it replaces, which another decoder may share, is not
        written). A LoRA merges into a tensor: a 4-bit group cannot take it."""
        if isinstance(getattr(self, _GROUP_OF.get(part, part)), Int4Linear):
            raise ConfigError(
                "a LoRA adapter merges into the torch backend's bf16 weights, not its 4-bit ones: "
                "use --torch-weights bf16"
            )
        if part in ("wq", "wk", "wv"):
            parts = dict(zip(("wq", "wk", "wv"), self.wqkv.split(self.splits)))
            parts[part] = w
            self.wqkv = torch.cat(list(parts.values()))
        elif part in ("w_gate", "w_up"):
            parts = dict(zip(("w_gate", "w_up"), self.w_gate_up.chunk(2)))
            parts[part] = w
            self.w_gate_up = torch.cat(list(parts.values()))
        else:
            setattr(self, part, w)


# One layer's attention over the KV cache: (q [T, n_head, head_dim], kv [T, 2 n_head_kv, head_dim]:
# keys, then values) -> [T, n_embd]. It writes kv to the tokens' cells and attends over each
# sequence's.
LayerAttend = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# layer index -> its attention for this pass (the KV context supplies it)
Attend = Callable[[int], LayerAttend]


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def rope_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Rotate x [T, heads, head_dim] in place; neox pairs (x_i, x_{i+d/2}): x cos + (-x2, x1) sin,
    with the sign in rope_tables' sine, so the halves are swapped by one flip and no negation or
    concatenation runs a pass."""
    xf = x.float()
    swapped = xf.unflatten(-1, (2, -1)).flip(-2).flatten(-2)  # (x2, x1)
    x.copy_(xf * cos + swapped * sin)


def block(
    x: torch.Tensor,
    layer: Layer,
    cos: torch.Tensor,
    sin: torch.Tensor,
    attend: LayerAttend,
    cfg: ModelConfig,
) -> torch.Tensor:
    """One decoder layer: x [T, n_embd] -> [T, n_embd]; cos, sin [T, 1, head_dim] (rope_tables).
    Tensors and the model's config alone, so one compiled copy serves every layer of a model
    (compiled_layers.py)."""
    n, heads, kv_heads = x.shape[0], cfg.n_head, cfg.n_head_kv
    h = rms_norm(x, layer.attn_norm, cfg.eps)
    qkv = linear(h, layer.wqkv, layer.bqkv).view(n, heads + 2 * kv_heads, cfg.head_dim)
    rope_(qkv[:, : heads + kv_heads], cos, sin)  # Q and K rotated in one go, in place
    out = attend(qkv[:, :heads], qkv[:, heads:])  # K and V side by side, as the cache keeps them
    x = add_linear(x, out, layer.wo)
    h = rms_norm(x, layer.ffn_norm, cfg.eps)
    gate, up = linear(h, layer.w_gate_up).chunk(2, dim=-1)
    return add_linear(x, F.silu(gate) * up, layer.w_down)
