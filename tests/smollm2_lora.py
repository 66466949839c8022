"""A random LoRA adapter and LoRA head for the real SmolLM2 GGUF (30 layers, n_embd 576, K/V 192
wide): what the LoRA-head tests load into llama.cpp, made by the export that made the shipped LoRA
head (benchmarks/lab/lora_export.py: research code, out of the package; tests/conftest.py puts the
repository root on sys.path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LAYERS, EMBD, KV, FFN = 30, 576, 192, 1536
# projection -> (its module's path under a layer, in features, out features)
SHAPES = {
    "q_proj": ("self_attn", EMBD, EMBD),
    "k_proj": ("self_attn", EMBD, KV),
    "v_proj": ("self_attn", EMBD, KV),
    "o_proj": ("self_attn", EMBD, EMBD),
    "gate_proj": ("mlp", EMBD, FFN),
    "up_proj": ("mlp", EMBD, FFN),
    "down_proj": ("mlp", FFN, EMBD),
}


def random_lora(
    rank: int = 4, scale: float = 0.5, seed: int = 0, targets: str = "attention"
) -> dict[str, np.ndarray]:
    """`model.layers.{i}.{self_attn|mlp}.{proj}.lora_a` [r, in] / `.lora_b` [out, r] for the
    projections of lora.TARGETS[targets], as finetune_verifier saves them."""
    from benchmarks.lab.lora import TARGETS

    rng = np.random.default_rng(seed)
    out = {}
    for i in range(LAYERS):
        for proj in TARGETS[targets]:
            where, n_in, n_out = SHAPES[proj]
            name = f"model.layers.{i}.{where}.{proj}"
            out[f"{name}.lora_a"] = (rng.normal(size=(rank, n_in)) / np.sqrt(n_in)).astype(
                np.float32
            )
            out[f"{name}.lora_b"] = (rng.normal(size=(n_out, rank)) * scale).astype(np.float32)
    return out


def lora_head(model, folder: Path, scale: float = 0.5, seed: int = 0, targets: str = "attention"):
    """A LoRA head on SmolLM2 (export_lora_head of random_lora and a random readout), loaded
    back."""
    from benchmarks.lab.lora_export import export_lora_head
    from edgereason.heads.backbone import feature_tokens
    from edgereason.heads.value_head import load_head

    rng = np.random.default_rng(seed + 1)
    tensors = random_lora(scale=scale, seed=seed, targets=targets) | {
        "value.weight": (rng.normal(size=(1, EMBD)) * 0.05).astype(np.float32),
        "value.bias": np.zeros(1, np.float32),
    }
    tokens = feature_tokens(model.n_vocab, EMBD, model.eog_ids)
    weights, _, _ = export_lora_head(
        tensors, 8.0, model.path, "smollm2-135m", tokens, folder / "lora-head", {}
    )
    return load_head(weights), tensors
