"""`--plot FILE`: the two measured curves and the predicted step time of each split, as one PNG."""

from __future__ import annotations

from pathlib import Path

from edgereason.profiler.profile import Profile


def write_plot(profile: Profile, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, (ax_gen, ax_prm, ax_split) = plt.subplots(1, 3, figsize=(15, 4.2))
    xs, ys = zip(*profile.gen_curve.points)
    ax_gen.plot(xs, ys, "o-")
    ax_gen.set(
        title=f"generator decode: {profile.generator}",
        xlabel="concurrent sequences",
        ylabel="tok/s",
        xscale="log",
        ylim=(0, None),
    )
    ax_gen.set_xticks(xs, [str(x) for x in xs])
    xs, ys = zip(*profile.ver_curve.points)
    ax_prm.plot(xs, ys, "o-", color="tab:orange")
    ax_prm.axvline(
        profile.lv_threshold_tokens, ls="--", color="grey", label=f"LV threshold {profile.lv_threshold_tokens}"
    )
    ax_prm.set(
        title=f"PRM prefill: {profile.verifier}", xlabel="batch tokens", ylabel="tok/s", xscale="log", ylim=(0, None)
    )
    ax_prm.set_xticks(xs, [str(x) for x in xs])
    ax_prm.legend()
    rows = [r for r in profile.plan.rows if r.feasible]
    ax_split.plot([100 * r.generator_share for r in rows], [r.step_time_s for r in rows], "o-", color="tab:green")
    best = profile.plan.best
    ax_split.plot([100 * best.generator_share], [best.step_time_s], "r*", ms=14, label="chosen")
    ax_split.set(
        title=f"predicted step time, budget {profile.budget_bytes / 2**20:.0f} MiB",
        xlabel="generator share of the KV budget (%)",
        ylabel="seconds per search step",
        xlim=(0, 100),
    )
    ax_split.legend()
    fig.suptitle(profile.device.device_id)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
