"""Token sampling on the host, next to the logits: the rule the torch backend's device_draws.py also
draws by.

A row is a set of candidate tokens with their logits: a device-side top-k, or a whole row on the
host. Each row draws `n` tokens from its own counter-based random stream (its seed and the draw's
index, hashed), so its draws depend on nothing else in the batch and replay exactly after eviction.
The device rows of a pass are drawn in one vectorised call: a call and a numpy generator per row
would add a large part of a GPU pass's time on the host (docs/results.md, "Where a GPU pass's time
goes").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgereason.config import SamplingParams
from edgereason.errors import ModelError

# Tokens more than this far below the best logit (in units of temperature) are left out: each has
# under e^-30 of its probability, so all of a 152k vocabulary together miss less than 2e-8 of the
# mass.
CUTOFF = 30.0

# damaged weights (a file whose tensor data was cut or altered, its header intact) give NaN logits:
# no token can be drawn from them, and an argmax over no candidates was a ValueError traceback
DAMAGED = (
    "the model's output is not a number (NaN or infinite logits): its weights are damaged; "
    "get the model file again (edgereason models pull NAME checks a registry model)"
)

_MASK64 = 0xFFFFFFFFFFFFFFFF
_GOLDEN, _M1, _M2 = (
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
)


def uniforms(seeds: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """seeds, counters: [d] non-negative integers -> [d] float64 in [0, 1).

    Draw j of a stream seeded s is splitmix64 over (s, j), the hash of `tree.mix_seed`: uniform j
    equals (mix_seed(s, j) >> 10) / 2**53."""
    x = _GOLDEN
    for part in (np.asarray(seeds, dtype=np.uint64), np.asarray(counters, dtype=np.uint64)):
        x = (x ^ part) * _M1  # uint64 arrays wrap modulo 2**64, as the hash wants
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def sample(logits: np.ndarray, n: int, params: SamplingParams) -> list[int]:
    """logits: [n_vocab] float32, a whole row. Returns n token ids drawn independently (greedy at
    temperature 0)."""
    ids, kept = _candidates(logits, params.temperature)
    return sample_rows(ids[None], kept[None], [n], [params])[0]


def _candidates(logits: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """A whole row [n_vocab] -> (ids [m], logits [m]) ascending: the best token at temperature 0,
    else every token within CUTOFF + 1 temperatures of the best (sample_rows applies the exact
    cutoff)."""
    top = logits.max()
    if not np.isfinite(top):  # NaN anywhere makes the max NaN
        raise ModelError(DAMAGED)
    if temperature == 0.0:
        best = int(np.argmax(logits))
        return np.array([best]), logits[best : best + 1]
    ids = np.flatnonzero(logits >= top - (CUTOFF + 1.0) * temperature)
    return ids, logits[ids]


def by_id(ids: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device rows (ids [R, k], logits [R, k], any order within a row) put in vocabulary order, as
    sample_rows takes them."""
    order = np.argsort(ids, axis=1, kind="stable")
    at = np.arange(len(ids))[:, None]
    return ids[at, order], logits[at, order]


def sample_rows(
    ids: np.ndarray, logits: np.ndarray, n: Sequence[int], params: Sequence[SamplingParams]
) -> list[list[int]]:
    """ids: [R, k] candidate token ids, ascending within a row; logits: [R, k] their raw logits. Row
    r draws n[r] tokens with params[r], from the stream seeded params[r].seed (draw j uses
    uniforms(seed, j))."""
    # any int: its low 64 bits
    seeds = np.repeat(np.array([p.seed & _MASK64 for p in params], dtype=np.uint64), n)
    counters = np.concatenate([np.arange(c) for c in n]) if len(n) else np.zeros(0, dtype=np.int64)
    return draw_rows(ids, logits, n, params, uniforms(seeds, counters))


def draw_rows(
    ids: np.ndarray,
    logits: np.ndarray,
    n: Sequence[int],
    params: Sequence[SamplingParams],
    u: np.ndarray,
) -> list[list[int]]:
    """sample_rows with its uniforms given: u [sum(n)], row by row.

    Rule, per row: candidates in vocabulary order (ascending ids); those more than CUTOFF
    temperatures below the best are left out; with top_p < 1 the rest are ordered by probability
    (ties in vocabulary order) and cut to the smallest prefix holding top_p of the mass; a draw is
    the first candidate whose cumulative probability exceeds u times the kept mass. Temperature 0
    takes the best candidate (the lowest id among equals)."""
    n_rows, k = ids.shape
    if n_rows == 0:
        return []
    if k == 0 or not np.isfinite(logits.max(axis=1)).all():
        raise ModelError(DAMAGED)
    at = np.arange(n_rows)
    logits = logits.astype(np.float64)
    temps = np.array([p.temperature for p in params])
    top_p = np.array([p.top_p for p in params])
    greedy = temps == 0.0
    best = ids[at, np.argmax(logits, axis=1)]  # [R] the first maximum: the lowest id among equals
    z = (logits - logits.max(1, keepdims=True)) / np.where(greedy, 1.0, temps)[:, None]
    left_out = z < -CUTOFF
    probs = np.exp(z, out=z)  # [R, k]; the best candidate has probability 1
    probs[left_out] = 0.0
    ids, cdf, mass = _nucleus(ids, probs, top_p)
    rows = np.repeat(at, n)  # [D] the row of each draw
    # below the mass, so the first place past the target is in the nucleus even where u * mass
    # rounds up to it
    target = np.minimum(u * mass[rows], np.nextafter(mass[rows], 0.0))
    # a host row of up to the whole vocabulary: a binary search, not a pass per draw
    if n_rows == 1:
        place = np.searchsorted(cdf[0], target, side="right")
    else:  # places <= target, as searchsorted counts them, for all rows at once
        place = (cdf[rows] <= target[:, None]).sum(1)
    tokens = np.where(greedy[rows], best[rows], ids[rows, place]).tolist()
    return _split(tokens, n)


def _nucleus(
    ids: np.ndarray, probs: np.ndarray, top_p: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """draw_rows' top-p step, apart to keep it short: ids and probs [R, k] (probability order where
    top_p < 1) -> (ids [R, k] in that order, cdf [R, k], the kept mass [R])."""
    n_rows, k = ids.shape
    at = np.arange(n_rows)
    nucleus = top_p < 1.0
    if nucleus.any():  # probability order, stable: equal probabilities stay in vocabulary order
        by_prob = np.where(
            nucleus[:, None], np.argsort(-probs, axis=1, kind="stable"), np.arange(k)[None, :]
        )
        ids, probs = ids[at[:, None], by_prob], probs[at[:, None], by_prob]
    cdf = np.cumsum(probs, axis=1)  # [R, k]; a left-out place adds exactly 0
    mass = cdf[:, -1]
    if nucleus.any():  # the cumulative sum where the nucleus ends (the whole mass where top_p is 1)
        mass = cdf[at, (cdf < (top_p * mass)[:, None]).sum(1)]
    return ids, cdf, mass


def _split(tokens: list[int], n: Sequence[int]) -> list[list[int]]:
    """The flat draws back into rows of n[r] each (draw_rows' result), apart to keep it short."""
    out, start = [], 0
    for count in n:
        out.append(tokens[start : start + count])
        start += count
    return out
