"""Do middle layers rank a problem's own steps better than the final layer? A probe per layer,
beside the shipped features (the logits of a fixed token set: the final layer's normed state), on
the same problems and split.

  speed:   prefill tokens/s of the features phase, without and with the capture, to size a run.
  extract: for the first --problems rollout lines, in shards of --shard-size problems (one .npz
           each; a shard already written is skipped, so a killed run loses at most one shard),
           the verifier's head-format features (edgereason/training/features.py: same prompt,
           tokens, labels) plus the hidden state at each step's last token of each --layers
           layer, all read in one pass (backends/llamacpp/layer_capture.py).
  train:   per feature set, edgereason/training/train.py's train_head (the shipped head's
           settings; validation problems from split_by_problem with each --seeds seed), and its
           validation AUCs, as JSON.
  table:   the report as a markdown table.

  python3 -m benchmarks.lab.layer_probe extract --backbone qwen2.5-coder-0.5b --problems 300 \\
      --out DIR
  python3 -m benchmarks.lab.layer_probe train --out DIR --report report.json
(from the repository root, as a module: this checkout's edgereason, not an installed one)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split

import numpy as np

from edgereason.heads.backbone import feature_tokens
from edgereason.heads.value_head import Backbone
from edgereason.training import features as feats
from edgereason.util.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
# Its rollouts and Monte-Carlo values are not tracked: the folder's README says how to regenerate
# them.
DATA = REPO / "benchmarks" / "results" / "head-qwen2.5-coder-0.5b"
DEPTHS = (1 / 3, 1 / 2, 2 / 3, 5 / 6)
METRICS = ("val_step_auc", "val_within_step_auc", "val_outcome_auc", "val_within_outcome_auc")
POOLED = ("pooled_within_step_auc", "pooled_within_outcome_auc")
FINAL = "final (logits features, shipped)"


def layers_at(n_layer: int, depths: tuple[float, ...]) -> list[int]:
    """Layer indices at fractions of the depth; the last layer (output rows only) is the logits'
    business."""
    return sorted({min(n_layer - 2, round(n_layer * d)) for d in depths})


def shard_path(out: Path, lo: int, hi: int) -> Path:
    return out / f"shard-{lo:04d}-{hi:04d}.npz"


def _verifier(args: argparse.Namespace, model, capture: bool):
    """The features phase's verifier (head format, flash attention), with the layers captured or
    not."""
    from edgereason.backends.llamacpp import LlamaVerifier
    from edgereason.backends.llamacpp.layer_capture import LayerCapture
    from edgereason.backends.prm_format import prm_format

    n_layer = model.n_layer
    layers = args.layers or layers_at(n_layer, DEPTHS)
    cap = LayerCapture(model.n_embd, n_layer, layers) if capture else None
    print(
        f"{args.backbone}: {n_layer} layers, n_embd {model.n_embd}, capturing "
        f"{layers if capture else 'none'}",
        file=sys.stderr,
    )
    return LlamaVerifier(
        model, prm_format("head"), args.kv_tokens, n_threads=args.threads, capture=cap
    ), layers


def _load(args: argparse.Namespace):
    from edgereason.backends.llamacpp import load_model

    model = load_model(str(models.resolve(args.backbone, allow_pull=False)))
    tokens = feature_tokens(model.n_vocab, model.n_embd, model.eog_ids | model.control_ids, 0)
    return (
        model,
        tokens,
        list(read_jsonl(args.rollouts))[: args.problems],
        list(read_jsonl(args.mc)),
    )


def speed(args: argparse.Namespace) -> None:
    """Prefill tokens/s of the features phase on the first --problems problems, without and with the
    capture."""
    model, tokens, rollouts, mc_rows = _load(args)
    for capture in (False, True):
        verifier, _ = _verifier(args, model, capture)
        t0 = time.perf_counter()
        feats.extract(verifier, tokens, rollouts, mc_rows)
        seconds = time.perf_counter() - t0
        print(
            json.dumps(
                {
                    "backbone": args.backbone,
                    "capture": capture,
                    "tokens": verifier.stats.tokens,
                    "seconds": round(seconds, 1),
                    "tokens_per_s": round(verifier.stats.tokens / seconds, 1),
                }
            )
        )
        verifier.close()


def extract(args: argparse.Namespace) -> None:
    model, tokens, rollouts, mc_rows = _load(args)
    verifier, layers = _verifier(args, model, capture=True)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for lo in range(0, len(rollouts), args.shard_size):
            hi = min(lo + args.shard_size, len(rollouts))
            if not shard_path(args.out, lo, hi).exists():
                _extract_shard(verifier, tokens, rollouts, mc_rows, lo, hi, layers, args.out)
    finally:
        verifier.close()


def _extract_shard(
    verifier,
    tokens: np.ndarray,
    rollouts: list[dict],
    mc_rows: list[dict],
    lo: int,
    hi: int,
    layers: list[int],
    out: Path,
) -> None:
    tokens_before, t0 = verifier.stats.tokens, time.perf_counter()
    f = feats.extract(verifier, tokens, rollouts[lo:hi], mc_rows)
    seconds = time.perf_counter() - t0
    n_tok = verifier.stats.tokens - tokens_before
    k, rows = len(tokens), f.pop("x")
    f["x"] = rows[:, :k]
    f["h"] = rows[:, k:].reshape(len(rows), len(layers), -1)
    f["problem"] = f["problem"] + lo
    f["layers"] = np.asarray(layers, dtype=np.int32)
    f["timing"] = np.asarray([n_tok, seconds])  # tokens evaluated, wall seconds
    feats.save(shard_path(out, lo, hi), f)
    print(
        f"problems {lo}-{hi - 1}: {len(rows)} steps, {n_tok} tokens in {seconds:.1f} s "
        f"({n_tok / seconds:.0f} tokens/s)",
        file=sys.stderr,
    )


def load_shards(out: Path) -> dict[str, np.ndarray]:
    parts = []
    for p in sorted(out.glob("shard-*.npz")):
        if not p.name.endswith(".partial.npz"):  # a shard being written when the run was killed
            with np.load(p) as z:
                parts.append({k: z[k] for k in z.files})
    if not parts:
        raise SystemExit(f"no shards in {out}: run extract first")
    if any(
        not (
            np.array_equal(p["layers"], parts[0]["layers"])
            and np.array_equal(p["tokens"], parts[0]["tokens"])
        )
        for p in parts
    ):
        raise SystemExit(
            f"the shards in {out} read different layers or backbones: one folder per run"
        )
    merged = {
        k: np.concatenate([p[k] for p in parts])
        for k in (*feats.FIELDS, "h")
        if k not in ("tokens", "layers")
    }
    merged.update(
        tokens=parts[0]["tokens"],
        layers=parts[0]["layers"],
        timing=np.sum([p["timing"] for p in parts], axis=0),
    )
    return merged


def feature_sets(f: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The shipped features, then one set per captured layer (as training reads them: a layer head
    reads no logits)."""
    labels = {k: f[k] for k in feats.FIELDS if k not in ("tokens", "layers", "x")}
    sets = {FINAL: {**labels, "tokens": f["tokens"], "layers": np.zeros(0, np.int32), "x": f["x"]}}
    for j, il in enumerate(f["layers"]):
        sets[f"layer {il}"] = {
            **labels,
            "tokens": np.zeros(0, np.int32),
            "layers": np.asarray([il], np.int32),
            "x": f["h"][:, j],
        }
    return sets


def train(args: argparse.Namespace) -> None:
    import torch

    from edgereason.training.train import TrainConfig

    torch.set_num_threads(args.threads)
    f = load_shards(args.out)
    report: dict = {
        "features": args.out.name,
        "problems": int(len(np.unique(f["problem"]))),
        "rows": int(len(f["x"])),
        "layers": f["layers"].tolist(),
        "extract_tokens": int(f["timing"][0]),
        "extract_seconds": round(float(f["timing"][1]), 1),
        "train_config": {
            "hidden": args.hidden,
            "val_fraction": TrainConfig().val_fraction,
            "epochs": TrainConfig().epochs,
            "rank_weight": TrainConfig().rank_weight,
        },
        "seeds": args.seeds,
        "sets": {},
    }
    for name, fs in feature_sets(f).items():
        report["sets"][name] = _probe(name, fs, args.seeds, args.hidden)
        # a set at a time: a kill keeps what ran
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    print(
        json.dumps(
            {n: {m: s[m] for m in (*METRICS, *POOLED)} for n, s in report["sets"].items()}, indent=1
        )
    )


def _probe(name: str, fs: dict[str, np.ndarray], seeds: list[int], hidden: int) -> dict:
    """train_head once per split seed; per-split AUCs, their mean and sd, and the within-problem
    AUCs over the pairs of every split's validation problems together (more pairs than one split's
    ~15%)."""
    from edgereason.training.metrics import within_auc
    from edgereason.training.rows import split_by_problem, step_groups
    from edgereason.training.train import TrainConfig, train_head

    runs, pooled = [], {k: [] for k in ("score", "outcome", "group", "problem", "last")}
    groups = step_groups(fs)
    for seed in seeds:
        t0 = time.perf_counter()
        cfg = TrainConfig(hidden=hidden, seed=seed)
        head, record = train_head(fs, Backbone("probe", "probe", "not a shipped head"), cfg)
        runs.append(
            {
                "seed": seed,
                "best_epoch": record["best_epoch"],
                "val_problems": record["val_problems"],
                "seconds": round(time.perf_counter() - t0, 1),
                **{m: record[m] for m in METRICS},
            }
        )
        print(
            f"{name}, split seed {seed}: " + ", ".join(f"{m} {record[m]:.3f}" for m in METRICS),
            file=sys.stderr,
        )
        val = split_by_problem(fs["problem"], cfg.val_fraction, seed)
        offset = (seed + 1) * (int(groups.max()) + 1)  # a problem in two splits counts as two
        for key, col in (
            ("score", head.logits(fs["x"])),
            ("outcome", fs["outcome"]),
            ("group", groups + offset),
            ("problem", fs["problem"] + (seed + 1) * (int(fs["problem"].max()) + 1)),
            ("last", fs["last"]),
        ):
            pooled[key].append(col[val])
    p = {k: np.concatenate(v) for k, v in pooled.items()}
    last = p["last"]
    return {
        "runs": runs,
        **_summary(runs),
        "pooled_within_step_auc": within_auc(p["score"], p["outcome"], p["group"]),
        "pooled_within_outcome_auc": within_auc(
            p["score"][last], p["outcome"][last], p["problem"][last]
        ),
    }


def _summary(runs: list[dict]) -> dict:
    """Mean and sample standard deviation over the splits, per metric."""
    out = {}
    for m in METRICS:
        vals = [r[m] for r in runs if r[m] == r[m]]  # NaN: a split without a mixed problem
        out[m] = {
            "mean": statistics.fmean(vals) if vals else None,
            "sd": statistics.stdev(vals) if len(vals) > 1 else None,
        }
    return out


def table(args: argparse.Namespace) -> None:
    """The report as a markdown table: mean (sd) over the splits, the pooled within-problem AUCs,
    and, paired by split (the same validation problems), the mean difference to the final layer's
    within-problem AUCs with the number of splits where the set did better."""
    report = json.loads(args.report.read_text())
    final = report["sets"][FINAL]["runs"]
    print(
        "| features | step AUC | within step | outcome AUC | within final | pooled within step "
        "| pooled within final | within step vs final | within final vs final |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, s in report["sets"].items():
        cells = [f"{s[m]['mean']:.3f} ({s[m]['sd']:.3f})" for m in METRICS]
        cells += [f"{s[m]:.3f}" for m in POOLED]
        for m in ("val_within_step_auc", "val_within_outcome_auc"):
            diffs = [r[m] - b[m] for r, b in zip(s["runs"], final)]
            cells.append(
                f"{statistics.fmean(diffs):+.3f} ({sum(d > 0 for d in diffs)}/{len(diffs)})"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("speed", "extract"):
        e = sub.add_parser(name)
        e.add_argument("--backbone", default="qwen2.5-coder-1.5b")
        e.add_argument(
            "--rollouts", type=Path, default=DATA / "rollouts-qwen2.5-coder-0.5b.jsonl.gz"
        )
        e.add_argument("--mc", type=Path, default=DATA / "mc-qwen2.5-coder-0.5b.jsonl.gz")
        e.add_argument(
            "--problems",
            type=int,
            default=1 if name == "speed" else 200,
            help="the first N rollout lines",
        )
        e.add_argument(
            "--layers",
            type=int,
            nargs="*",
            help="layer indices (default: 1/3, 1/2, 2/3, 5/6 of depth)",
        )
        e.add_argument("--kv-tokens", type=int, default=16384)
        e.add_argument("--threads", type=int, default=2)
    e.add_argument("--shard-size", type=int, default=8)
    e.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", type=Path, required=True, help="the extract folder")
    t.add_argument("--report", type=Path, required=True)
    t.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="split (and init) seeds"
    )
    t.add_argument(
        "--hidden", type=int, default=256, help="0: a linear probe (the shipped head: 256)"
    )
    t.add_argument("--threads", type=int, default=2)
    sub.add_parser("table").add_argument("--report", type=Path, required=True)
    args = p.parse_args()
    {"speed": speed, "extract": extract, "train": train, "table": table}[args.cmd](args)


if __name__ == "__main__":
    main()
