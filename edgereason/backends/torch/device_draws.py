"""Sampling on the device, by the rule of backends/host_sampling.py (`draw_rows`) over whole rows:
each row draws from its own counter-based stream (splitmix64 of its seed and the draw's index,
computed here with int64 ops), so its draws depend on nothing else in the batch, and equal logits
give the llama.cpp backend's draws. Only the drawn ids come back to the host."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from edgereason.backends.host_sampling import CUTOFF
from edgereason.config import SamplingParams

_MASK64 = (1 << 64) - 1
_GOLDEN, _M1, _M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def signed(x: int) -> int:
    """A 64-bit pattern as the int64 that holds it."""
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (>> on int64 is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def uniforms(seeds: torch.Tensor, counters: torch.Tensor) -> torch.Tensor:
    """seeds, counters: [d] int64 (seeds as 64-bit patterns) -> [d] float64 in [0, 1), equal to
    edgereason.backends.host_sampling.uniforms. int64 products wrap modulo 2**64, as the hash
    wants."""
    x = torch.full_like(seeds, signed(_GOLDEN))
    for part in (seeds, counters):
        x = (x ^ part) * signed(_M1)
        x = x ^ _shr(x, 27)
        x = x * signed(_M2)
        x = x ^ _shr(x, 31)
    return _shr(x, 11).double() * 2.0**-53


def row_settings(
    params: Sequence[SamplingParams], device: torch.device
) -> tuple[torch.Tensor, ...]:
    """Each row's temperature and top_p [R] float64 and seed [R] int64 (its 64-bit pattern), as
    draw_tensor takes them."""
    temps = torch.tensor([p.temperature for p in params], dtype=torch.float64, device=device)
    top_p = torch.tensor([p.top_p for p in params], dtype=torch.float64, device=device)
    seeds = torch.tensor([signed(p.seed) for p in params], dtype=torch.int64, device=device)
    return temps, top_p, seeds


def draw_tensor(
    logits: torch.Tensor,
    temps: torch.Tensor,
    top_p: torch.Tensor,
    seeds: torch.Tensor,
    width: int,
    nucleus: bool,
) -> torch.Tensor:
    """logits [R, n_vocab] float32; temps, top_p [R] float64; seeds [R] int64 -> [R, width] int64:
    draw j of row r, from uniforms(seeds[r], j). Nothing here waits for the device, so a CUDA graph
    records it. nucleus: some row has top_p < 1 (only then is the vocabulary sorted).

    The rule of edgereason.backends.host_sampling.draw_rows: tokens more than CUTOFF temperatures
    below the best are left out; with top_p < 1 the rest, by probability (ties in vocabulary order),
    are cut to the smallest prefix holding top_p of the mass; a draw is the first token whose
    cumulative probability exceeds u times the kept mass; temperature 0 takes the best token (the
    lowest id among equals)."""
    n_rows, vocab = logits.shape
    device = logits.device
    greedy = temps == 0.0
    best = logits.argmax(1)  # the first maximum
    z = logits.double()
    z = (z - z.max(1, keepdim=True).values) / torch.where(greedy, 1.0, temps)[:, None]
    probs = torch.where(z < -CUTOFF, 0.0, z.exp())
    ids = None
    if nucleus:  # probability order, stable: equal probabilities in vocabulary order
        by_prob = torch.argsort(-probs, dim=1, stable=True)
        ids = torch.where(
            (top_p < 1.0)[:, None], by_prob, torch.arange(vocab, device=device)[None, :]
        )
        probs = probs.gather(1, ids)
    cdf = probs.cumsum(1)
    mass = cdf[:, -1]
    # the cumulative sum where the nucleus ends (the whole mass where top_p is 1)
    if ids is not None:
        at = torch.arange(n_rows, device=device)
        mass = cdf[at, (cdf < (top_p * mass)[:, None]).sum(1)]
    counters = torch.arange(width, device=device)[None, :].expand(n_rows, width)
    u = uniforms(seeds[:, None].expand(n_rows, width).reshape(-1), counters.reshape(-1)).view(
        n_rows, width
    )
    # below the mass, so the first place past the target is kept even where u * mass rounds up to it
    target = torch.minimum(
        u * mass[:, None], torch.nextafter(mass, torch.zeros_like(mass))[:, None]
    )
    place = torch.searchsorted(cdf, target, right=True)
    tokens = place if ids is None else ids.gather(1, place)
    return torch.where(greedy[:, None], best[:, None], tokens)


def draw_rows(
    logits: torch.Tensor, n: Sequence[int], params: Sequence[SamplingParams]
) -> list[list[int]]:
    """logits: [R, n_vocab] on the device; row r draws n[r] tokens with params[r] (draw_tensor's
    rule and streams). The drawn ids are the one transfer to the host."""
    if logits.shape[0] == 0:
        return []
    temps, top_p, seeds = row_settings(params, logits.device)
    nucleus = any(p.top_p < 1.0 for p in params)
    drawn = draw_tensor(logits, temps, top_p, seeds, max(n), nucleus).tolist()
    return [row[:count] for row, count in zip(drawn, n)]
