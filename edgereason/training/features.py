"""Features for the value head: at the last token of every step of every rollout path, the
backbone's logits of a fixed token set (a full-rank image of its final hidden state; see
edgereason/heads/value_head.py), then the hidden states of the middle layers the verifier's layer
capture reads (none without one), read through the same verifier code that scores with the head
later (prompt, tokenisation and all), so training and scoring see the same numbers. One row per
step, with its labels:

  tokens [k] int32        the vocabulary ids read (one set for the file)
  layers [m] int32        the middle layers read (empty: none)
  x [n, k + m * n_embd] float16   their logits, then each layer's hidden state
  problem, path, step [n] int32   where it comes from (problem = index of the rollout line)
  last [n] bool           the path's final step
  outcome [n] float32     1 when the path's answer is right (every prefix of a right path is good)
  mc [n] float32          Monte-Carlo value of the prefix ending at this step, NaN where none was
                          sampled
  prm [n] float32         the rollout PRM's score for this step (the judge's, for comparison), NaN
                          where none or where a beam search made the path (its PRM chose the path:
                          no fair comparison)
  weight [n] float32      the path's potential (deduplicated paths stand for several samples)
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from edgereason.protocols import FeatureReader, ScoreRequest
from edgereason.training.rollouts import Progress

FIELDS = (
    "tokens",
    "layers",
    "x",
    "problem",
    "path",
    "step",
    "last",
    "outcome",
    "mc",
    "prm",
    "weight",
)
_ZIP_MAGIC = b"PK\x03\x04"  # an .npz is a zip archive


def mc_values(mc_rows: list[dict]) -> dict[tuple[str, int, int], float]:
    """(problem id, path, steps in prefix) -> value. The prefix of k steps ends at step index
    k-1."""
    return {(r["id"], int(r["path"]), int(r["steps"])): float(r["value"]) for r in mc_rows}


# (rollout line, path index, path, the request that reads its steps)
PathJob = tuple[int, int, dict, ScoreRequest]
_COLUMN_TYPES = {
    "problem": np.int32,
    "path": np.int32,
    "step": np.int32,
    "last": bool,
    "outcome": np.float32,
    "mc": np.float32,
    "prm": np.float32,
    "weight": np.float32,
}


def extract(
    verifier: FeatureReader,
    tokens: np.ndarray,
    rollouts: list[dict],
    mc_rows: list[dict],
    paths_per_call: int = 32,
    progress: Progress | None = None,
) -> dict[str, np.ndarray]:
    """verifier: the backbone's verifier in the head format (a llama.cpp one reads features)."""
    mc = mc_values(mc_rows)
    cols: dict[str, list] = {k: [] for k in FIELDS}
    batch: list[PathJob] = []
    total = len(rollouts)
    for ri, row in enumerate(rollouts):
        batch += _path_jobs(ri, row)
        if len(batch) >= paths_per_call:
            _read_batch(verifier, tokens, batch, rollouts, mc, cols)
            batch = []
        if progress:
            progress(ri + 1, total)
    if batch:
        _read_batch(verifier, tokens, batch, rollouts, mc, cols)
    if not cols["x"]:
        return {}
    return _as_arrays(cols, tokens, verifier.feature_layers)


def _path_jobs(ri: int, row: dict) -> list[PathJob]:
    """One request per path with steps of rollout line ri, all its paths under one shared prompt
    prefix."""
    root = f"feat{ri}/"
    return [
        (
            ri,
            pi,
            path,
            ScoreRequest(
                f"{root}{pi}", row["problem"], path["steps"], range(len(path["steps"])), root, 0
            ),
        )
        for pi, path in enumerate(row["paths"])
        if path["steps"]
    ]


def _read_batch(
    verifier: FeatureReader,
    tokens: np.ndarray,
    batch: list[PathJob],
    rollouts: list[dict],
    mc: dict[tuple[str, int, int], float],
    cols: dict[str, list],
) -> None:
    """Read the batch's features in one call, add a row per step to cols, then free the prompts'
    cache."""
    states = verifier.features([job[3] for job in batch], tokens)
    for (ri, pi, path, _), x in zip(batch, states):
        _add_path_rows(cols, ri, pi, path, rollouts[ri], x, mc)
    for key in {job[3].prefix_key for job in batch}:
        verifier.release(key)


def _add_path_rows(
    cols: dict[str, list],
    ri: int,
    pi: int,
    path: dict,
    row: dict,
    x: np.ndarray,
    mc: dict[tuple[str, int, int], float],
) -> None:
    """One row per step of a path: its features and labels."""
    n = len(path["steps"])
    searched = path.get("search", row.get("search", "best-of-n")) != "best-of-n"
    scores = [None] * n if searched else list(path.get("prm") or [None] * n)
    cols["x"].append(x.astype(np.float16))
    cols["problem"] += [ri] * n
    cols["path"] += [pi] * n
    cols["step"] += list(range(n))
    cols["last"] += [k == n - 1 for k in range(n)]
    cols["outcome"] += [float(bool(path["correct"]))] * n
    cols["mc"] += [mc.get((row["id"], pi, k + 1), np.nan) for k in range(n)]
    cols["prm"] += [np.nan if s is None else float(s) for s in scores]
    cols["weight"] += [float(path.get("potential", 1))] * n


def _as_arrays(
    cols: dict[str, list],
    tokens: np.ndarray,
    layers: tuple[int, ...],
) -> dict[str, np.ndarray]:
    """The collected columns as the feature file's arrays."""
    out = {
        "tokens": np.asarray(tokens, dtype=np.int32),
        "layers": np.asarray(layers, dtype=np.int32),
        "x": np.concatenate(cols["x"]),
    }
    out.update({k: np.asarray(cols[k], dtype=t) for k, t in _COLUMN_TYPES.items()})
    return out


def save(path: Path, features: dict[str, np.ndarray]) -> None:
    tmp = path.with_name(path.name + ".partial.npz")  # np.savez keeps a name that ends in .npz
    np.savez(tmp, **features)
    tmp.replace(path)


def load(path: Path) -> dict[str, np.ndarray]:
    """ValueError for a file that is not a whole feature file (cut short, or from another version or
    tool)."""
    try:
        # np.load reads other bytes as a pickle (and refuses it) or a .npy
        if _first_bytes(path) != _ZIP_MAGIC:
            raise ValueError(
                "not a feature file (not an .npz archive); run the features phase again"
            )
        with np.load(path) as z:
            f = {k: z[k] for k in FIELDS if k != "layers"}
            # older files: logits only
            f["layers"] = z["layers"] if "layers" in z.files else np.zeros(0, np.int32)
            return f
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise ValueError(f"not a whole feature file ({e}); run the features phase again") from None


def _first_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(len(_ZIP_MAGIC))


def merge(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One feature set from several (e.g. one per shard of the rollouts). `problem` indexes its own
    file's rollout lines, so each part's indices are shifted past the previous parts': problems stay
    distinct for the split."""
    if not parts:
        raise ValueError("no feature sets to merge")
    if any(not np.array_equal(p["tokens"], parts[0]["tokens"]) for p in parts):
        raise ValueError(
            "the feature sets read different token sets (different backbones or seeds)"
        )
    if any(not np.array_equal(p["layers"], parts[0]["layers"]) for p in parts):
        raise ValueError(
            "the feature sets read different layers; extract them all with the same --layers"
        )
    out = {"tokens": parts[0]["tokens"], "layers": parts[0]["layers"]}
    shift, problems = 0, []
    for p in parts:
        problems.append(p["problem"] + shift)
        shift += int(p["problem"].max()) + 1 if len(p["problem"]) else 0
    out["problem"] = np.concatenate(problems)
    for k in FIELDS:
        if k not in out:
            out[k] = np.concatenate([p[k] for p in parts])
    return out


def select(f: dict[str, np.ndarray], layers: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The columns a head reads: the logits alone (no layers), or the named layers' hidden states
    alone."""
    have = [int(il) for il in f["layers"]]
    k = len(f["tokens"])
    if not layers:
        return {**f, "x": f["x"][:, :k], "layers": np.zeros(0, np.int32)}
    if missing := [il for il in layers if il not in have]:
        raise ValueError(
            f"the features hold layers {have or 'none'}, not {missing}; run the features phase "
            f"with --layers {' '.join(map(str, layers))}"
        )
    width = (f["x"].shape[1] - k) // len(have)
    cols = [k + have.index(il) * width + np.arange(width) for il in layers]
    return {
        **f,
        "x": f["x"][:, np.concatenate(cols)],
        "tokens": np.zeros(0, np.int32),
        "layers": np.asarray(layers, dtype=np.int32),
    }
