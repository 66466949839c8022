"""PNG plots of a bench (matplotlib Agg, no display): speed per policy, latency vs load, waiting,
PRM scores and shared prefixes. Each reads only results.json run dicts, so plots can be redrawn from
a saved folder."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402

from edgereason.evaluation.report import mean_by_key  # noqa: E402


def write_plots(out: Path, runs: list[dict]) -> list[Path]:
    """Every plot the runs have data for; returns the files written."""
    if not runs:
        return []
    written = [_speed(out, runs), accuracy_compute(out / "accuracy_compute.png", runs)]
    for draw in (_latency_vs_rate, _waiting, _prm_scores, _common_prefix):
        path = draw(out, runs)
        if path is not None:
            written.append(path)
    return written


def _by_policy(runs: list[dict], field: str) -> dict[str, list[float]]:
    """Per-problem values of one field, pooled over beams, rates and repeats of each policy."""
    pooled: dict[str, list[float]] = {}
    for run in runs:
        values = pooled.setdefault(run["policy"], [])
        for p in run["per_problem"]:
            v = p.get(field)
            values.extend(v if isinstance(v, list) else [v])
    return pooled


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _speed(out: Path, runs: list[dict]) -> Path:
    means = mean_by_key(runs)
    labels = [f"{p}\nN={b} rate={r}" for p, b, r in means]
    xs = range(len(labels))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(labels)), 4))
    ax.bar(
        [x - 0.2 for x in xs],
        [m["throughput_tok_s"] for m in means.values()],
        0.4,
        label="throughput",
    )
    ax.bar(
        [x + 0.2 for x in xs], [m["goodput_tok_s"] for m in means.values()], 0.4, label="goodput"
    )
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("tokens / s")
    ax.set_title("Throughput and goodput")
    ax.legend()
    return _save(fig, out / "throughput_goodput.png")


def accuracy_compute(path: Path, runs: list[dict]) -> Path:
    """Accuracy against compute, one point per run (policy x N x rate x repeat, or a labelled search
    of several benches): generated tokens a problem (every sampled token, pruned ones included) and
    seconds a problem (mean latency; one problem at a time it is what a user waits)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for run in runs:
        n = max(1, run["problems"])
        label = run.get("label") or f"{run['policy']} N={run['beams']}"
        for ax, x in zip(axes, (run["generated_tokens"] / n, run["latency_s_mean"])):
            ax.scatter([x], [100 * run["accuracy"]])
            ax.annotate(
                label,
                (x, 100 * run["accuracy"]),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
    axes[0].set_xlabel("generated tokens / problem")
    axes[1].set_xlabel("seconds / problem (mean latency, as run)")
    axes[0].set_ylabel("accuracy (%)")
    for ax in axes:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
    fig.suptitle("Accuracy against compute")
    return _save(fig, path)


def _latency_vs_rate(out: Path, runs: list[dict]) -> Path | None:
    finite = [r for r in runs if r["rate"] != "inf"]
    if len({r["rate"] for r in finite}) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for (policy, beams), points in _series(finite).items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=f"{policy} N={beams}")
    ax.set_xlabel("arrival rate (requests / s)")
    ax.set_ylabel("normalized latency (ms / final token)")
    ax.set_title("Normalized latency vs load")
    ax.legend(fontsize=8)
    return _save(fig, out / "latency_vs_rate.png")


def _series(runs: list[dict]) -> dict[tuple[str, int], dict[float, float]]:
    series: dict[tuple[str, int], dict[float, float]] = {}
    for (policy, beams, rate), m in mean_by_key(runs).items():
        series.setdefault((policy, beams), {})[float(rate)] = m["normalized_latency_ms_mean"]
    return series


def _boxes(
    out: Path, pooled: dict[str, list[float]], name: str, ylabel: str, title: str
) -> Path | None:
    pooled = {k: v for k, v in pooled.items() if v}
    if not pooled:
        return None
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(pooled)), 4))
    ax.boxplot(list(pooled.values()))
    ax.set_xticks(range(1, len(pooled) + 1), list(pooled), fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _save(fig, out / name)


def _waiting(out: Path, runs: list[dict]) -> Path | None:
    return _boxes(
        out,
        _by_policy(runs, "waiting_ratio"),
        "waiting_ratio.png",
        "waiting ratio per problem",
        "Waiting ratio",
    )


def _common_prefix(out: Path, runs: list[dict]) -> Path | None:
    return _boxes(
        out,
        _by_policy(runs, "common_prefix"),
        "common_prefix.png",
        "shared-token share per selection",
        "Common prefix share",
    )


def _prm_scores(out: Path, runs: list[dict]) -> Path | None:
    pooled = {k: v for k, v in _by_policy(runs, "step_scores").items() if v}
    if not pooled:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(list(pooled.values()), bins=20, range=(0, 1), label=list(pooled))
    ax.set_xlabel("PRM step score")
    ax.set_ylabel("steps")
    ax.set_title("PRM step scores")
    ax.legend(fontsize=8)
    return _save(fig, out / "prm_scores.png")
