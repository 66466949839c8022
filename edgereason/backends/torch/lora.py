"""A LoRA adapter GGUF (as llama.cpp's convert_lora_to_gguf.py and benchmarks/lab/lora_export.py
write it) merged into a copy of a decoder's weights: the verifier then computes with W + scale * B @
A, what llama.cpp's context with the adapter computes as W x + scale * B (A x) (build_lora_mm).

The file, as llama.cpp reads it (llama_adapter_lora_init): general.type "adapter", adapter.type
"lora", the base model's architecture, `adapter.lora.alpha`; per adapted tensor `<name>.lora_a`,
ggml shape [n_in, r] (numpy [r, n_in]), and `<name>.lora_b`, [r, n_out] (numpy [n_out, r]), in the
base tensor's own row order (the converter permutes a llama model's Q and K rows of B as it permutes
the weights'). Tensors ending in `_norm.weight` are skipped, as llama.cpp skips them. The scale at
the adapter scale 1 the verifier sets: alpha / r (r: B's ggml ne[0]), or 1 where alpha is 0 or
absent (llama_adapter_lora_weight::get_scale).

The merged decoder shares every tensor the adapter leaves alone with the base decoder (which the
generator shares too when both roles read one GGUF) and holds its own copy of each group it adapts
(Q, K and V are one matrix, gate and up another: layer.Layer): the base is never written."""

from __future__ import annotations

import copy
import dataclasses
from functools import lru_cache
from pathlib import Path

import torch

from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.layer import Layer
from edgereason.backends.torch.model import TorchDecoder, TorchModel
from edgereason.errors import ConfigError, ModelError

# a layer's matrices llama.cpp multiplies through build_lora_mm -> the Layer field that holds each
_LAYER_FIELDS = {
    "attn_q": "wq",
    "attn_k": "wk",
    "attn_v": "wv",
    "attn_output": "wo",
    "ffn_gate": "w_gate",
    "ffn_up": "w_up",
    "ffn_down": "w_down",
}
_ALORA = "adapter.alora.invocation_tokens"  # an activated LoRA: applied only after these tokens
_USE_LLAMACPP = "which only the llama.cpp backend applies; use --backend llamacpp"


@lru_cache(maxsize=4)
def with_adapter(model: TorchModel, path: Path) -> TorchModel:
    """`model` with the adapter at `path` merged into its own copy of the decoder (once per model
    and file); `model` and its decoder stay as they are."""
    adapted = copy.copy(model)
    adapted.decoder = merged_decoder(model.decoder, path)
    return adapted


def merged_decoder(decoder: TorchDecoder, path: Path) -> TorchDecoder:
    """A decoder computing with W + scale * B @ A for each tensor the adapter adapts; ModelError
    when the file is not a LoRA adapter of these weights, ConfigError for one the torch backend
    cannot merge."""
    adapter = Weights(Path(path))
    _check_metadata(adapter, decoder)
    alpha = float(adapter.meta("adapter.lora.alpha", 0.0) or 0.0)
    base = Weights(decoder.path)
    merged = copy.copy(decoder)
    # new holders, the same tensors
    merged.layers = [dataclasses.replace(layer) for layer in decoder.layers]
    for name in _adapted_names(adapter):
        owner, field = _holder(merged, base, adapter, name)
        w = _merge(decoder, base, adapter, name, alpha)
        owner.with_part(field, w) if isinstance(owner, Layer) else setattr(owner, field, w)
    return merged


def _check_metadata(adapter: Weights, decoder: TorchDecoder) -> None:
    kind = (
        adapter.meta("general.type"),
        adapter.meta("adapter.type"),
        adapter.meta("general.architecture"),
    )
    if kind != ("adapter", "lora", decoder.config.arch):
        raise ModelError(
            f"{adapter.path.name} is not a LoRA adapter of {decoder.path.name} (general.type, "
            f"adapter.type, architecture: {', '.join(map(str, kind))}; want adapter, lora, "
            f"{decoder.config.arch})"
        )
    if adapter.meta(_ALORA) is not None:
        raise ConfigError(f"{adapter.path.name} is an activated LoRA ({_ALORA}), {_USE_LLAMACPP}")


def _adapted_names(adapter: Weights) -> list[str]:
    """The base tensors the adapter adapts, each with both its A and B."""
    names: dict[str, set[str]] = {}
    for tensor in adapter.tensors:
        if tensor.endswith("_norm.weight"):
            continue
        base, _, part = tensor.rpartition(".")
        if part not in ("lora_a", "lora_b"):
            raise ModelError(
                f"{adapter.path.name}: tensor {tensor} is neither a LoRA A nor B (a corrupt "
                "adapter)"
            )
        names.setdefault(base, set()).add(part)
    lone = sorted(name for name, parts in names.items() if len(parts) < 2)
    if lone:
        raise ModelError(
            f"{adapter.path.name}: {lone[0]} has only one of lora_a and lora_b (a corrupt adapter)"
        )
    return sorted(names)


def _holder(merged: TorchDecoder, base: Weights, adapter: Weights, name: str) -> tuple[object, str]:
    """(object, attribute) that holds the decoder's copy of the GGUF tensor `name`."""
    if not base.has(name):
        raise ModelError(
            f"{adapter.path.name} adapts {name}, which {base.path.name} lacks: not its adapter"
        )
    parts = name.split(".")
    if name == "output.weight":
        return merged, "output"
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _LAYER_FIELDS and parts[3] == "weight":
        return merged.layers[int(parts[1])], _LAYER_FIELDS[parts[2]]
    raise ConfigError(f"{adapter.path.name} adapts {name}, {_USE_LLAMACPP}")


def _merge(
    decoder: TorchDecoder, base: Weights, adapter: Weights, name: str, alpha: float
) -> torch.Tensor:
    """W + scale * B @ A in float32 from the GGUFs (one rounding to the device's dtype), in the
    decoder's rows."""
    device, f32 = decoder.device, torch.float32
    w = base.load(name, device, f32)
    a, b = adapter.load(name + ".lora_a", device, f32), adapter.load(name + ".lora_b", device, f32)
    if (
        a.dim() != 2
        or b.dim() != 2
        or a.shape[0] != b.shape[1]
        or (b.shape[0], a.shape[1]) != tuple(w.shape)
    ):
        raise ModelError(
            f"{adapter.path.name}: {name}'s A {tuple(a.shape)} and B {tuple(b.shape)} do not fit "
            f"its {tuple(w.shape)} in {base.path.name}: not its adapter"
        )
    scale = alpha / b.shape[1] if alpha else 1.0
    return decoder.oriented(name, w + scale * (b @ a)).to(decoder.dtype)
