"""A random LoRA adapter and LoRA head for the real SmolLM2 GGUF (30 layers, n_embd 576, K/V 192 wide): what the
LoRA-head tests load into llama.cpp."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LAYERS, EMBD, KV = 30, 576, 192
OUT = {"q_proj": EMBD, "k_proj": KV, "v_proj": KV, "o_proj": EMBD}


def random_lora(rank: int = 4, scale: float = 0.5, seed: int = 0) -> dict[str, np.ndarray]:
    """`model.layers.{i}.self_attn.{proj}.lora_a` [r, 576] / `.lora_b` [out, r], as finetune_verifier saves them."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(LAYERS):
        for proj, width in OUT.items():
            name = f"model.layers.{i}.self_attn.{proj}"
            out[f"{name}.lora_a"] = (rng.normal(size=(rank, EMBD)) / np.sqrt(EMBD)).astype(np.float32)
            out[f"{name}.lora_b"] = (rng.normal(size=(width, rank)) * scale).astype(np.float32)
    return out


def lora_head(model, folder: Path, scale: float = 0.5, seed: int = 0):
    """A LoRA head on SmolLM2 (export_lora_head of random_lora and a random readout), loaded back."""
    from edgereason.training.lora_export import export_lora_head
    from edgereason.value_head import feature_tokens, load_head

    rng = np.random.default_rng(seed + 1)
    tensors = random_lora(scale=scale, seed=seed) | {
        "value.weight": (rng.normal(size=(1, EMBD)) * 0.05).astype(np.float32), "value.bias": np.zeros(1, np.float32)}
    tokens = feature_tokens(model.n_vocab, EMBD, model.eog_ids)
    weights, _, _ = export_lora_head(tensors, 8.0, model.path, "smollm2-135m", tokens, folder / "lora-head", {})
    return load_head(weights), tensors
