"""A Hugging Face folder read into the torch backend: the hyperparameters from config.json, the
weights from its safetensors (one file, or the shards model.safetensors.index.json lists), served
under the GGUF tensor names the decoder loads (model.py), so one decoder reads both.

The Hugging Face layout is already the decoder's rotary layout (no un-permutation). A llama3 or
linear rope scaling becomes the per-frequency divisors a GGUF of the model stores as
`rope_freqs.weight` (as llama.cpp's converter computes them); any other scaling, architecture or
tensor the decoder does not read is one ModelError line."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch

from edgereason.backends.torch.gguf_weights import ARCHITECTURES, ModelConfig
from edgereason.errors import ModelError

INDEX = "model.safetensors.index.json"
FLOAT_DTYPES = ("F32", "F16", "BF16")
ROPE_TYPES = ("default", "linear", "llama3")
ROPE_FREQS = "rope_freqs.weight"
_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
# a buffer older checkpoints saved; rope_theta gives it
_RECOMPUTED = re.compile(r".*\.rotary_emb\.inv_freq")


def gguf_name(hf_name: str) -> str | None:
    """The GGUF name of a Hugging Face tensor, or None where the decoder has no use for it."""
    if hf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[hf_name]
    match = _LAYER.fullmatch(hf_name)
    if match and match.group(2) in _LAYER_NAMES:
        return f"blk.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}"
    return None


def read_settings(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{folder} has no config.json: not a Hugging Face model folder") from None
    except (OSError, ValueError) as e:
        raise ModelError(f"{path}: unreadable ({e})") from None


def rope_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The rope parameters, from transformers 5's `rope_parameters` or the older `rope_theta` +
    `rope_scaling`."""
    rope = dict(settings.get("rope_parameters") or settings.get("rope_scaling") or {})
    rope.setdefault("rope_theta", settings.get("rope_theta", 10000.0))
    rope["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
    return rope


def check_supported(settings: dict[str, Any], folder: Path) -> None:
    """One ModelError line for what the decoder does not compute: another architecture, activation,
    rope scaling, sliding-window attention or quantized weights."""
    arch, rope = settings.get("model_type"), rope_settings(settings)
    where = f"{folder / 'config.json'}"
    if arch not in ARCHITECTURES:
        raise ModelError(
            f"{where} names a {arch} model; the torch backend runs {', '.join(ARCHITECTURES)}"
        )
    if settings.get("hidden_act", "silu") != "silu":
        raise ModelError(
            f"{where}: activation {settings['hidden_act']}, where the torch backend computes silu"
        )
    if rope["rope_type"] not in ROPE_TYPES:
        raise ModelError(
            f"{where} scales its rotary positions ({rope['rope_type']}); the torch backend "
            f"computes {', '.join(ROPE_TYPES)}"
        )
    if settings.get("use_sliding_window"):
        raise ModelError(
            f"{where} uses sliding-window attention, which the torch backend does not compute"
        )
    if "quantization_config" in settings:
        method = settings["quantization_config"].get("quant_method", "quantized")
        raise ModelError(
            f"{where}: {method} weights; the torch backend reads float safetensors (or a GGUF)"
        )


def model_config(settings: dict[str, Any], folder: Path) -> ModelConfig:
    check_supported(settings, folder)
    n_embd, n_head = int(settings["hidden_size"]), int(settings["num_attention_heads"])
    try:
        return ModelConfig(
            arch=settings["model_type"],
            n_layer=int(settings["num_hidden_layers"]),
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=int(settings.get("num_key_value_heads") or n_head),
            head_dim=int(settings.get("head_dim") or n_embd // n_head),
            n_vocab=int(settings["vocab_size"]),
            n_ctx_train=int(settings.get("max_position_embeddings", 0)),
            eps=float(settings["rms_norm_eps"]),
            rope_base=float(rope_settings(settings)["rope_theta"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(
            f"{folder / 'config.json'}: a missing or bad hyperparameter ({e})"
        ) from None


def rope_divisors(rope: dict[str, Any], head_dim: int) -> torch.Tensor | None:
    """What each rotary frequency is divided by (llama.cpp's rope_freqs), or None for plain rope."""
    if rope["rope_type"] == "linear":
        return torch.full((head_dim // 2,), float(rope["factor"]))
    if rope["rope_type"] != "llama3":
        return None
    factor, low, high = (
        float(rope["factor"]),
        float(rope["low_freq_factor"]),
        float(rope["high_freq_factor"]),
    )
    old_context = float(rope["original_max_position_embeddings"])
    divisors = []
    for i in range(0, head_dim, 2):
        wavelength = 2 * math.pi * float(rope["rope_theta"]) ** (i / head_dim)
        if wavelength < old_context / high:
            divisors.append(1.0)
        elif wavelength > old_context / low:
            divisors.append(factor)
        else:
            smooth = (old_context / wavelength - low) / (high - low)
            divisors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(divisors, dtype=torch.float32)


def shard_files(folder: Path) -> list[Path]:
    """The safetensors files holding the weights: the index's shards, else every *.safetensors in
    the folder."""
    index = folder / INDEX
    if index.is_file():
        try:
            names = sorted(
                set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            )
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"{index}: unreadable ({e})") from None
        files = [folder / name for name in names]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ModelError(f"{folder}: the shard {missing[0]} that {INDEX} lists is missing")
        return files
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelError(
            f"{folder} has no *.safetensors weights; the torch backend reads safetensors (save the "
            "model with save_pretrained(..., safe_serialization=True))"
        )
    return files


class HFWeights:
    """model.Weights' interface (has, load, config, n_elements, permuted_rope, gguf) over a Hugging
    Face folder."""

    permuted_rope = False  # the Hugging Face layout is the decoder's
    gguf = None  # no GGUF's raw blocks: its matrices are not 4-bit

    def __init__(self, folder: Path) -> None:
        from safetensors import SafetensorError, safe_open

        self.path = folder
        self.settings = read_settings(folder)
        self._config = model_config(self.settings, folder)
        self.tensors: dict[str, tuple[Any, str]] = {}  # GGUF name -> (open file, Hugging Face name)
        for file in shard_files(folder):
            try:
                handle = safe_open(str(file), framework="pt", device="cpu")
            except (OSError, SafetensorError) as e:
                raise ModelError(f"{file}: not a safetensors file ({e})") from None
            for hf_name in handle.keys():
                self._add(handle, hf_name)
        if self.settings.get("tie_word_embeddings", False):  # False: llama and qwen2's default
            self.tensors.pop("output.weight", None)  # the embedding serves as the output matrix
        divisors = rope_divisors(rope_settings(self.settings), self._config.head_dim)
        self._divisors = {ROPE_FREQS: divisors} if divisors is not None else {}

    def _add(self, handle: Any, hf_name: str) -> None:
        name = gguf_name(hf_name)
        if name is None:
            if _RECOMPUTED.fullmatch(hf_name):
                return
            raise ModelError(
                f"{self.path.name} has the tensor {hf_name}, which the torch backend does not "
                "compute"
            )
        dtype = handle.get_slice(hf_name).get_dtype()
        if dtype not in FLOAT_DTYPES:
            raise ModelError(
                f"{self.path.name}: tensor {hf_name} holds {dtype}; the torch backend reads float "
                "weights"
            )
        self.tensors[name] = (handle, hf_name)

    def config(self) -> ModelConfig:
        return self._config

    def has(self, name: str) -> bool:
        return name in self.tensors or name in self._divisors

    def load(self, name: str, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if name in self._divisors:
            return self._divisors[name].to(device=device, dtype=dtype)
        if name not in self.tensors:
            raise ModelError(
                f"{self.path.name} has no tensor for {name}: an incomplete or unsupported "
                "checkpoint"
            )
        handle, hf_name = self.tensors[name]
        return handle.get_tensor(hf_name).to(device=device, dtype=dtype)

    def n_elements(self) -> int:
        sizes = [
            math.prod(handle.get_slice(hf_name).get_shape())
            for handle, hf_name in self.tensors.values()
        ]
        return sum(sizes) + sum(t.numel() for t in self._divisors.values())
