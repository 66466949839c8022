"""The batched forward pass of the transformers verifier: held paths (`HeldPath`), the rows of one
pass (`Row`) and the pass itself (`forward_rows`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgereason.backends.transformers.loader import Checkpoint


@dataclass
class HeldPath:
    cache: Any  # DynamicCache holding exactly ends[-1] tokens
    ends: list[int]  # cache length after the head (index 0) and after each step's segment
    scores: list[float]  # one per step


@dataclass
class Row:
    """One row of a batched forward pass: `tokens` appended to the first `start` tokens of `base`'s
    cache."""

    key: str
    base_key: str | None  # the prefix the request named (made recent when the row runs)
    base: HeldPath | None
    start: int
    tokens: list[int]
    read_at: list[int]  # indices into tokens whose readout is wanted
    ends: list[int]
    # the base's for the shared steps, then the new ones
    scores: list[float] = field(default_factory=list)


def padded_cells(rows: list[Row]) -> int:
    """KV cells of the batched cache a pass of `rows` builds (every row padded to the longest)."""
    return len(rows) * (max(r.start for r in rows) + max(len(r.tokens) for r in rows))


def fork_cache(checkpoint: Checkpoint, held: HeldPath | None, n_tokens: int) -> Any:
    """A new cache holding the first n_tokens of `held`'s (which stays as it is)."""
    from transformers import DynamicCache

    if held is None:
        return DynamicCache(config=checkpoint.config)
    data = [
        (layer.keys[..., :n_tokens, :], layer.values[..., :n_tokens, :])
        for layer in held.cache.layers
    ]
    return DynamicCache(data, config=checkpoint.config)


def forward_rows(
    checkpoint: Checkpoint, torch: Any, cache_kwarg: str, rows: list[Row]
) -> tuple[list[Any], list[list[float]]]:
    """Append each row's tokens to its prefix in one batched pass: the rows' new caches and
    readouts."""
    from transformers import DynamicCache

    device = checkpoint.device
    past, new = max(r.start for r in rows), max(len(r.tokens) for r in rows)
    ids = torch.zeros((len(rows), new), dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), past + new), dtype=torch.long, device=device)
    positions = torch.zeros((len(rows), new), dtype=torch.long, device=device)
    for i, r in enumerate(rows):
        ids[i, : len(r.tokens)] = torch.tensor(r.tokens, dtype=torch.long)
        # the prefix left-padded, the new tokens right-padded
        mask[i, past - r.start : past + len(r.tokens)] = 1
        positions[i] = torch.arange(r.start, r.start + new)
    cache = DynamicCache(config=checkpoint.config)
    if past:
        cache = DynamicCache(_batched_past(torch, rows, past), config=checkpoint.config)
    padded = any(r.start < past or len(r.tokens) < new for r in rows)
    out = checkpoint.backbone(
        input_ids=ids,
        attention_mask=mask if padded else None,
        position_ids=positions,
        use_cache=True,
        **{cache_kwarg: cache},
    )
    scores = _split_readouts(checkpoint, rows, out.last_hidden_state)
    return _row_caches(checkpoint, torch, cache, rows, past), scores


def _split_readouts(checkpoint: Checkpoint, rows: list[Row], hidden: Any) -> list[list[float]]:
    """Each row's readouts, from one readout call over every wanted position of the pass (one
    call, not one per row, so the head runs batched)."""
    rows_at = [i for i, r in enumerate(rows) for _ in r.read_at]
    cols_at = [p for r in rows for p in r.read_at]
    flat = checkpoint.readout(hidden[rows_at, cols_at]) if rows_at else []
    scores, k = [], 0
    for r in rows:
        scores.append(flat[k : k + len(r.read_at)])
        k += len(r.read_at)
    return scores


def _row_caches(
    checkpoint: Checkpoint, torch: Any, cache: Any, rows: list[Row], past: int
) -> list[Any]:
    """Each row's own cache cut from the batched one: its prefix without the left padding, then its
    new tokens without the right padding, so a held path keeps no padding cells."""
    from transformers import DynamicCache

    return [
        DynamicCache(
            [
                (
                    torch.cat(
                        [
                            layer.keys[i : i + 1, :, past - r.start : past],
                            layer.keys[i : i + 1, :, past : past + len(r.tokens)],
                        ],
                        dim=2,
                    ),
                    torch.cat(
                        [
                            layer.values[i : i + 1, :, past - r.start : past],
                            layer.values[i : i + 1, :, past : past + len(r.tokens)],
                        ],
                        dim=2,
                    ),
                )
                for layer in cache.layers
            ],
            config=checkpoint.config,
        )
        for i, r in enumerate(rows)
    ]


def _batched_past(torch: Any, rows: list[Row], past: int) -> list[tuple[Any, Any]]:
    """Per layer, the rows' held prefixes left-padded with zeros to `past` tokens."""
    layers = []
    template = next(r.base for r in rows if r.base is not None).cache.layers
    for li, layer in enumerate(template):
        shape = (len(rows), layer.keys.shape[1], past, layer.keys.shape[3])
        keys = torch.zeros(shape, dtype=layer.keys.dtype, device=layer.keys.device)
        values = torch.zeros(shape, dtype=layer.values.dtype, device=layer.values.device)
        for i, r in enumerate(rows):
            if r.base is not None and r.start:
                src = r.base.cache.layers[li]
                keys[i, :, past - r.start :] = src.keys[0, :, : r.start]
                values[i, :, past - r.start :] = src.values[0, :, : r.start]
        layers.append((keys, values))
    return layers
