"""A fine-tuned verifier as a value head llama.cpp runs (design.md section 2, "LoRA heads").

The verifier is LoRA on the backbone's attention (and optionally MLP) projections plus a linear
readout v.h + c of the final hidden state h (benchmarks/lab/finetune_verifier.py trains it in
torch). llama.cpp runs the LoRA as a GGUF adapter on the verifier's own context. The readout becomes
an ordinary linear head over the logits of the head's token set: those logits are z = W_S h (W_S [k,
n_embd], the tokens' rows of the GGUF's output matrix, full column rank), so u = pinv(W_S)^T v gives
u.z = v.h exactly.

Needs gguf-py (the torch extra) to write the adapter and read the output matrix.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from edgereason.heads.backbone import file_sha256
from edgereason.heads.value_head import Adapter, Backbone, ValueHead, head_paths, save_head
from edgereason.util.files import write_atomic

# Hugging Face module names (Qwen2/Llama) -> GGUF tensor names, as llama.cpp's
# convert_lora_to_gguf.py maps them
_GGUF_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_MODULE = re.compile(r"(?:.*\.)?layers\.(\d+)\.(\w+\.\w+)$")


def gguf_weight_name(module: str) -> str:
    """`layers.3.self_attn.q_proj` (any prefix) -> `blk.3.attn_q.weight`, `layers.3.mlp.up_proj` ->
    `blk.3.ffn_up.weight`; ValueError for any other module."""
    m = _MODULE.match(module)
    if not m or m.group(2) not in _GGUF_NAMES:
        raise ValueError(
            f"no GGUF tensor for module {module!r} (LoRA on attention and MLP projections only)"
        )
    return f"blk.{m.group(1)}.{_GGUF_NAMES[m.group(2)]}.weight"


# architectures whose GGUF conversion keeps the projections' rows in Hugging Face order (Qwen2
# rotates with NEOX RoPE) or permutes the rows of q and k for llama.cpp's RoPE (llama:
# convert_hf_to_gguf.py's LlamaModel.permute)
_PLAIN_ARCHS = {"qwen2"}
_PERMUTED_ARCHS = {"llama"}


def _permute_rows(b: np.ndarray, n_head: int) -> np.ndarray:
    """The row order convert_hf_to_gguf.py gives a q or k projection of `n_head` heads, applied to
    LoRA's B."""
    return (
        b.reshape(n_head, 2, b.shape[0] // n_head // 2, *b.shape[1:])
        .swapaxes(1, 2)
        .reshape(b.shape)
    )


def write_adapter(
    path: Path,
    arch: str,
    alpha: float,
    pairs: dict[str, tuple[np.ndarray, np.ndarray]],
    heads: tuple[int, int] = (0, 0),
) -> None:
    """A GGUF LoRA adapter llama.cpp loads (llama_adapter_lora_init). pairs: module name -> (A [r,
    in], B [out, r]), y = W x + (alpha / r) B A x; stored f16 as `<tensor>.lora_a` / `.lora_b` (ggml
    shapes [in, r] and [r, out]). heads: (attention heads, KV heads), for an architecture whose
    conversion permutes q and k rows."""
    import gguf

    if arch not in _PLAIN_ARCHS | _PERMUTED_ARCHS:
        raise ValueError(
            f"LoRA export knows {sorted(_PLAIN_ARCHS | _PERMUTED_ARCHS)} GGUFs, not {arch}"
        )
    if arch in _PERMUTED_ARCHS:
        n_head, n_head_kv = heads
        pairs = {
            m: (
                a,
                _permute_rows(b, n_head if m.endswith("q_proj") else n_head_kv)
                if m.endswith(("q_proj", "k_proj"))
                else b,
            )
            for m, (a, b) in pairs.items()
        }

    def write(tmp: Path) -> None:
        w = gguf.GGUFWriter(str(tmp), arch)
        w.add_type(gguf.GGUFType.ADAPTER)
        w.add_string(gguf.Keys.Adapter.TYPE, "lora")
        w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
        for module, (a, b) in sorted(pairs.items()):
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
                raise ValueError(f"{module}: A {a.shape} and B {b.shape} are not a LoRA pair")
            name = gguf_weight_name(module)
            w.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a, dtype=np.float16))
            w.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b, dtype=np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    write_atomic(Path(path), write)


def backbone_facts(model_path: Path, tokens: np.ndarray) -> tuple[np.ndarray, str, tuple[int, int]]:
    """([k, n_embd] float32: the rows of `tokens` in the output matrix llama.cpp computes logits
    with, dequantized; the GGUF's architecture; its attention and KV head counts). A model without
    `output.weight` ties it to `token_embd.weight`."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(model_path))

    def field(key: str):
        return reader.fields[key].parts[-1]

    arch = bytes(field("general.architecture")).decode()
    n_head = int(field(f"{arch}.attention.head_count")[0])
    kv_key = f"{arch}.attention.head_count_kv"
    heads = (n_head, int(field(kv_key)[0]) if kv_key in reader.fields else n_head)
    by_name = {t.name: t for t in reader.tensors}
    t = by_name.get("output.weight") or by_name["token_embd.weight"]
    rows = np.asarray(t.data)[np.asarray(tokens)]  # quantized rows: one vocabulary entry a row
    return (
        np.asarray(dequantize(rows, t.tensor_type), dtype=np.float32).reshape(len(tokens), -1),
        arch,
        heads,
    )


def readout_on_tokens(rows: np.ndarray, v: np.ndarray) -> np.ndarray:
    """u [k] with u.(rows h) = v.h for every h: the least-norm solution of rows^T u = v. ValueError
    when the rows do not span the hidden space (then no head over their logits equals the
    readout)."""
    u, *_ = np.linalg.lstsq(rows.T.astype(np.float64), v.astype(np.float64), rcond=None)
    if np.linalg.norm(rows.T @ u - v) > 1e-3 * max(np.linalg.norm(v), 1e-12):
        raise ValueError(
            "the token set's output rows do not span the hidden state; choose more tokens"
        )
    return u.astype(np.float32)


def export_lora_head(
    tensors: dict[str, np.ndarray],
    alpha: float,
    model_path: Path,
    backbone_name: str,
    tokens: np.ndarray,
    out: Path,
    record: dict,
) -> tuple[Path, Path, Path]:
    """tensors: `<module>.lora_a`, `<module>.lora_b` and `value.weight` [1, n_embd], `value.bias`
    [1] (what finetune_verifier saves). Writes NAME.safetensors, NAME.json and NAME.lora.gguf (out:
    any of them, or NAME); returns their paths."""
    pairs = {
        k.removesuffix(".lora_a"): (tensors[k], tensors[k.removesuffix(".lora_a") + ".lora_b"])
        for k in tensors
        if k.endswith(".lora_a")
    }
    rows, arch, heads = backbone_facts(model_path, tokens)
    u = readout_on_tokens(rows, np.asarray(tensors["value.weight"], dtype=np.float32).reshape(-1))
    weights_path, _ = head_paths(Path(out))
    adapter_path = weights_path.with_name(
        weights_path.name.removesuffix(".safetensors") + ".lora.gguf"
    )
    adapter_path.parent.mkdir(parents=True, exist_ok=True)
    write_adapter(adapter_path, arch, alpha, pairs, heads)
    k = len(tokens)
    head = ValueHead(
        Backbone(backbone_name, Path(model_path).name, file_sha256(Path(model_path))),
        tokens=np.asarray(tokens, dtype=np.int64),
        mean=np.zeros(k, np.float32),
        std=np.ones(k, np.float32),
        w2=u.reshape(1, k),
        b2=np.asarray(tensors["value.bias"], dtype=np.float32).reshape(1),
        record=record,
        adapter=Adapter(adapter_path.name, file_sha256(adapter_path), adapter_path),
    )
    weights, meta = save_head(head, weights_path)
    return weights, meta, adapter_path
