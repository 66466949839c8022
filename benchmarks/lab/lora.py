"""LoRA on a torch backbone's projections: the trainable part of a fine-tuned verifier
(benchmarks/lab/finetune_verifier.py), in the form lora_export.py writes as a llama.cpp adapter.

y = W x + (alpha / r) B A x for W in the chosen projections; A [r, in] random, B [out, r] zero at
the start (the backbone unchanged). A and B stay fp32 beside bf16 weights."""

from __future__ import annotations

import math
from typing import Any

# Qwen2's and Llama's projections, by the name of the set a verifier adapts
_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
TARGETS = {"attention": _ATTENTION, "all": _ATTENTION + ("gate_proj", "up_proj", "down_proj")}


def add_lora(
    backbone: Any, rank: int, alpha: float, targets: str = "attention"
) -> list[tuple[str, Any]]:
    """Freeze `backbone` and wrap each projection of the set `targets` (a TARGETS key). Returns
    (`<module>.lora_a` / `.lora_b`, parameter) pairs, the names lora_export.py reads."""
    import torch

    nn = torch.nn

    class LoRALinear(nn.Module):
        def __init__(self, base: nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.lora_a = nn.Parameter(
                torch.randn(rank, base.in_features, device=base.weight.device)
                / math.sqrt(base.in_features)
            )
            self.lora_b = nn.Parameter(
                torch.zeros(base.out_features, rank, device=base.weight.device)
            )

        def forward(self, x: Any) -> Any:
            return self.base(x) + ((x.float() @ self.lora_a.T) @ self.lora_b.T * (alpha / rank)).to(
                x.dtype
            )

    wrap = TARGETS[targets]
    for p in backbone.parameters():
        p.requires_grad_(False)
    named = []
    for name, module in list(backbone.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in wrap and isinstance(child, nn.Linear):
                wrapped = LoRALinear(child)
                setattr(module, child_name, wrapped)
                prefix = f"{name}.{child_name}" if name else child_name
                named += [
                    (f"{prefix}.lora_a", wrapped.lora_a),
                    (f"{prefix}.lora_b", wrapped.lora_b),
                ]
    return named
