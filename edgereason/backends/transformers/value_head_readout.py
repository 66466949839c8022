"""A trained value head (edgereason/heads/value_head.py) on the transformers backend: whether it can
run here, and its readout; kept apart from loader.py, which only asks for both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgereason.backends.transformers.torch_device import import_torch
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead


def check_head_runs_here(head: ValueHead | None) -> None:
    """ConfigError where the head format has no head, or one that only the llama.cpp backend
    runs."""
    if head is None:
        raise ConfigError(
            "--prm-format head needs a trained value head: pass --prm-head FILE (make one with "
            "edgereason train-prm)"
        )
    if head.adapter:
        raise ConfigError(
            f"this value head runs with a LoRA adapter ({head.adapter.file}), which only the "
            "llama.cpp backend applies; pass its GGUF without hf:"
        )
    if head.layers:
        raise ConfigError(
            f"this value head reads middle layers ({', '.join(map(str, head.layers))}), which only "
            "the llama.cpp backend reads; pass its GGUF without hf:"
        )


def value_head_readout(model: Any, head: ValueHead) -> Callable[[Any], list[float]]:
    """The head reads the logits of its token set (edgereason/heads/value_head.py), as on
    llama.cpp."""
    torch = import_torch()
    lm_head = model.get_output_embeddings()
    tokens = torch.as_tensor(head.tokens, device=lm_head.weight.device)

    def read(h: Any) -> list[float]:
        # [n, k]: only the k logits the head reads
        rows = (h @ lm_head.weight[tokens].T).float().cpu().numpy()
        return [head.score_features(row) for row in rows]

    return read
