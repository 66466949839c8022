"""`--plot FILE`: the two measured curves and the predicted step time of each split, as one PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgereason.profiler.profile import Profile


def write_plot(profile: Profile, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, (ax_gen, ax_prm, ax_split) = plt.subplots(1, 3, figsize=(15, 4.2))
    _plot_generator(ax_gen, profile)
    _plot_prm(ax_prm, profile)
    _plot_split(ax_split, profile)
    fig.suptitle(profile.device.device_id)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_generator(ax: Any, profile: Profile) -> None:
    """Generator decode throughput against concurrent sequences."""
    xs, ys = zip(*profile.gen_curve.points)
    ax.plot(xs, ys, "o-")
    ax.set(
        title=f"generator decode: {profile.generator}",
        xlabel="concurrent sequences",
        ylabel="tok/s",
        xscale="log",
        ylim=(0, None),
    )
    ax.set_xticks(xs, [str(x) for x in xs])


def _plot_prm(ax: Any, profile: Profile) -> None:
    """PRM prefill throughput against batch tokens, with the lazy-verification threshold."""
    xs, ys = zip(*profile.ver_curve.points)
    ax.plot(xs, ys, "o-", color="tab:orange")
    ax.axvline(
        profile.lv_threshold_tokens,
        ls="--",
        color="grey",
        label=f"LV threshold {profile.lv_threshold_tokens}",
    )
    ax.set(
        title=f"PRM prefill: {profile.verifier}",
        xlabel="batch tokens",
        ylabel="tok/s",
        xscale="log",
        ylim=(0, None),
    )
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.legend()


def _plot_split(ax: Any, profile: Profile) -> None:
    """The predicted step time of each feasible split of the KV budget, the chosen one starred."""
    rows = [r for r in profile.plan.rows if r.feasible]
    ax.plot(
        [100 * r.generator_share for r in rows],
        [r.step_time_s for r in rows],
        "o-",
        color="tab:green",
    )
    best = profile.plan.best
    ax.plot([100 * best.generator_share], [best.step_time_s], "r*", ms=14, label="chosen")
    ax.set(
        title=f"predicted step time, budget {profile.budget_bytes / 2**20:.0f} MiB",
        xlabel="generator share of the KV budget (%)",
        ylabel="seconds per search step",
        xlim=(0, 100),
    )
    ax.legend()
