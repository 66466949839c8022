"""A decoder-only transformer in plain torch, with its weights read from a GGUF (dequantized: bf16
on CUDA, float32 on the CPU) and its tokenizer and chat template from llama.cpp's vocabulary of the
same file, so both backends tokenize alike; or both from a Hugging Face folder (hf_folder.py,
tokenizer.py).

Architectures: llama (SmolLM2, Llama) and qwen2 (Qwen2.5): RMSNorm, rotary positions, grouped-query
attention, SwiGLU, q/k/v biases where the file has them, tied embeddings where it has no output
matrix.

Rotary layout: llama.cpp's converter permutes a llama model's Q and K rows so that its "normal" rope
rotates adjacent pairs (x0, x1), (x2, x3)...; qwen2 keeps the Hugging Face layout, which llama.cpp
rotates as "neox" pairs (x_i, x_{i + d/2}). The llama rows are un-permuted here (as transformers'
GGUF loader does), so one rope, neox, serves both, and a Hugging Face folder's rows, in that layout
already, load as they are."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from edgereason.backends.torch import compile_cache, compiled_layers
from edgereason.backends.torch.compiled_layers import run_block
from edgereason.backends.torch.gguf_weights import ModelConfig
from edgereason.backends.torch.int4_choice import weights_kind
from edgereason.backends.torch.int4_layers import group_names, int4_group, is_int4
from edgereason.backends.torch.int4_weights import Int4Linear
from edgereason.backends.torch.layer import Attend, Layer, Matrix, block, rms_norm
from edgereason.util.startup import phase

OnLayer = Callable[[int, torch.Tensor], None]  # (layer, its output [T, n_embd])


def device_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU (what the weights hold after dequantizing); float32 on the CPU, where bf16
    matmuls are slow and the CPU tests compare with llama.cpp closely."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def unpermute_rope(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's converter permutation of Q/K rows (weights [out, in] or biases [out]):
    within each head the rows went from halves (x_i, x_{i+d/2}) to adjacent pairs (x_2i, x_2i+1);
    this puts them back in halves."""
    rest = w.shape[1:]
    return w.reshape(n_heads, -1, 2, *rest).transpose(1, 2).reshape(w.shape)


class TorchDecoder:
    """The forward pass: token ids and positions in, final normed hidden states out (logits on
    request)."""

    def __init__(self, path: Path, device: torch.device, weights_kind: str = "bf16") -> None:
        """weights_kind: int4 holds the file's 4-bit matrices as such (int4_layers.py)."""
        self.path = Path(path)
        self.device = device
        self.dtype = device_dtype(device)
        from edgereason.backends.torch.weight_sources import open_weights

        weights = open_weights(self.path, self.dtype)
        self.config = cfg = weights.config()
        self._permuted_rope = weights.permuted_rope
        self._int4 = weights.gguf if weights_kind == "int4" else None
        self.weights_kind = "int4" if self._int4 is not None else "bf16"
        read = lambda name: self.oriented(name, weights.load(name, device, self.dtype))  # noqa: E731
        maybe = lambda name: read(name) if weights.has(name) else None  # noqa: E731
        self.embed = read("token_embd.weight")
        self.output = maybe("output.weight")
        if self.output is None:
            self.output = self.embed  # tied embeddings
        self.output_norm = read("output_norm.weight")
        self.layers = [self._layer(read, maybe, i) for i in range(cfg.n_layer)]
        # Llama 3.1's per-frequency divisors, as llama.cpp applies them
        factors = maybe("rope_freqs.weight")
        exponent = (
            torch.arange(0, cfg.head_dim, 2, dtype=torch.float64, device=device) / cfg.head_dim
        )
        inv_freq = 1.0 / (cfg.rope_base**exponent)
        self.inv_freq = (inv_freq / factors.double() if factors is not None else inv_freq).float()

    def _layer(
        self,
        read: Callable[[str], torch.Tensor],
        maybe: Callable[[str], torch.Tensor | None],
        i: int,
    ) -> Layer:
        p, cfg = f"blk.{i}.", self.config
        splits = (cfg.n_head * cfg.head_dim, *(2 * (cfg.n_head_kv * cfg.head_dim,)))
        biases = [maybe(p + f"attn_{x}.bias") for x in "qkv"]
        bqkv = None
        if any(b is not None for b in biases):  # a missing one adds nothing
            bqkv = torch.cat(
                [
                    b if b is not None else torch.zeros(rows, device=self.device, dtype=self.dtype)
                    for b, rows in zip(biases, splits)
                ]
            )
        group = lambda field: self._matrix(read, group_names(i, field))  # noqa: E731
        return Layer(
            attn_norm=read(p + "attn_norm.weight"),
            wqkv=group("wqkv"),
            bqkv=bqkv,
            wo=group("wo"),
            ffn_norm=read(p + "ffn_norm.weight"),
            w_gate_up=group("w_gate_up"),
            w_down=group("w_down"),
            splits=splits,
        )

    def _matrix(self, read: Callable[[str], torch.Tensor], names: list[str]) -> Matrix:
        """A group of matrices stacked by rows: one Int4Linear where int4 is on and every matrix of
        the group is 4-bit in the file, else one tensor."""
        if self._int4 is not None and is_int4(self._int4, names):
            return int4_group(self._int4, names, self.oriented, self.device)
        parts = [read(n) for n in names]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def oriented(self, name: str, w: torch.Tensor) -> torch.Tensor:
        """A GGUF tensor in the rows this decoder computes with: Q and K (weights, biases) of a
        permuted-rope architecture un-permuted, the rest as read."""
        cfg = self.config
        heads = {"attn_q": cfg.n_head, "attn_k": cfg.n_head_kv}.get(name.split(".")[-2])
        return unpermute_rope(w, heads) if heads and self._permuted_rope else w

    def weights_bytes(self) -> int:
        held = [self.embed, self.output_norm, *(w for ly in self.layers for w in vars(ly).values())]
        if self.output is not self.embed:
            held.append(self.output)
        return sum(
            w.nbytes() if isinstance(w, Int4Linear) else w.numel() * w.element_size()
            for w in held
            if isinstance(w, torch.Tensor | Int4Linear)
        )

    def rope_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [T] -> cos, signed sin [T, 1, head_dim] float32: each frequency twice (neox
        halves), the sine negated in the first half, so the rotation is x cos + swap_halves(x) sin
        (see rope_)."""
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)[:, None, :]
        sin = angles.sin()
        sin[..., : sin.shape[-1] // 2].neg_()
        return angles.cos(), sin

    def hidden(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        attend: Attend,
        on_layer: OnLayer | None = None,
        compiled: bool = False,
    ) -> torch.Tensor:
        """tokens, positions [T] -> final normed hidden states [T, n_embd]. `attend(i)` is layer i's
        attention: it stores the layer's keys and values and returns its output; `on_layer(i, x)`,
        where given, sees layer i's output x [T, n_embd] (the residual stream after the layer,
        before any norm: llama.cpp's "l_out-i"). compiled: each layer runs as `block` compiled
        (compiled_layers.py), its kernels fused."""
        run = run_block if compiled else block
        cos, sin = self.rope_tables(positions)
        x = F.embedding(tokens, self.embed)
        for i, layer in enumerate(self.layers):
            x = run(x, layer, cos, sin, attend(i), self.config)
            if on_layer is not None:
                on_layer(i, x)
        return rms_norm(x, self.output_norm, self.config.eps)

    def logits(self, hidden: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """hidden [R, n_embd] -> float32 logits [R, n_vocab], or only the vocabulary `columns` [R,
        len(columns)]."""
        out = self.output if columns is None else self.output[columns]
        return F.linear(hidden, out).float()


@lru_cache(maxsize=4)
@phase("weights")
def load_decoder(path: str, device: str, weights_kind: str = "bf16") -> TorchDecoder:
    """One decoder per file (or folder), device and kind of weights: the two roles share weights
    when they name the same one. Where its passes compile, the compiles of earlier processes are
    loaded (compile_cache.py)."""
    decoder = TorchDecoder(Path(path), torch.device(device), weights_kind)
    if compiled_layers.enabled():
        compile_cache.load(decoder.path, decoder.device)
    return decoder


class TorchModel:
    """The decoder and the tokenizer and chat template of the same GGUF or folder (tokenizer.py):
    what both roles need (context_roles.ContextModel)."""

    def __init__(self, path: Path, device: torch.device, weights_kind: str = "bf16") -> None:
        from edgereason.backends.torch.weight_sources import display_name, open_tokenizer

        self.decoder = load_decoder(str(path), str(device), weights_kind)
        self.path = Path(path)
        self.vocab = open_tokenizer(self.path)
        self.name = display_name(self.path)
        cfg = self.decoder.config
        self.device = device
        self.n_vocab, self.n_embd, self.n_layer = cfg.n_vocab, cfg.n_embd, cfg.n_layer
        self.n_ctx_train = cfg.n_ctx_train
        self.add_bos = self.vocab.add_bos
        self.eog_ids = self.vocab.eog_ids
        self.kv_bytes_per_token = kv_bytes_per_token(cfg, device)

    def tokenize(self, text: str, add_bos: bool = False, special: bool = True) -> list[int]:
        return self.vocab.tokenize(text, add_bos=add_bos, special=special)

    def token_piece(self, token: int) -> bytes:
        return self.vocab.token_piece(token)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.vocab.detokenize(ids)

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], add_assistant: bool = True
    ) -> str:
        return self.vocab.apply_chat_template(messages, add_assistant=add_assistant)


def kv_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU, as the weights; f16 on the CPU, as llama.cpp's cache (attention computes in
    float32 there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float16


def kv_bytes_per_token(cfg: ModelConfig, device: torch.device) -> int:
    """Keys and values of every layer, in the KV cache's dtype."""
    return (
        2
        * cfg.n_layer
        * cfg.n_head_kv
        * cfg.head_dim
        * torch.tensor([], dtype=kv_dtype(device)).element_size()
    )


def load_model(path: str, device: str, asked: str | None = None) -> TorchModel:
    """The model with the weights asked for (--torch-weights; None: int4_choice.py's variable or
    rule)."""
    return _load_model(path, device, weights_kind(device, asked))


@lru_cache(maxsize=4)
def _load_model(path: str, device: str, kind: str) -> TorchModel:
    return TorchModel(Path(path), torch.device(device), kind)
