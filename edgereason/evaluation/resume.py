"""`bench --resume`: an interrupted bench goes on from its finished problems. Rules:
- it resumes only the bench its flags describe: the settings recorded in results.json must be this
  command's (when it started and the backend auto chose aside);
- a run recorded whole is kept as it is; a run cut short (interrupted: a Ctrl-C, a kill after a
  checkpoint) runs the problems it lacks and its two parts become one record: counts and times
  added, figures over problems computed again over all of them (runner.token_and_latency_numbers),
  marked `resumed` (its timings add up parts run at different times).
"""

from __future__ import annotations

from edgereason.errors import ConfigError
from edgereason.evaluation.report import Results
from edgereason.evaluation.runner import SUMMED, RunSpec, rate_label, token_and_latency_numbers

RunId = tuple[str, int, str, int]  # (label, beams, rate, repeat)

# settings that may differ between a bench and its resumption
FREE = {"started", "resumed", "backend"}
ADDED = (
    "problems", "correct", "failed", "graded_as_text", "wall_s", "gen_time_s", "prm_time_s",
    "prm_calls", "prm_tokens", "recomputed_tokens", "forward_passes", *SUMMED,
)  # fmt: skip


def spec_id(spec: RunSpec) -> RunId:
    return (spec.name, spec.config.beams, str(rate_label(spec.rate)), spec.repeat)


def run_id(run: dict) -> RunId:
    return (run["policy"], int(run["beams"]), str(run["rate"]), int(run.get("repeat", 0)))


def check_same_bench(earlier: Results, config: dict, out: object) -> None:
    """ConfigError, naming the first setting that differs, where this command is not the bench in
    `out`."""
    for key in sorted((set(earlier.config) | set(config)) - FREE):
        if earlier.config.get(key) != config.get(key):
            was, now = earlier.config.get(key), config.get(key)
            differs = (
                f"--resume: the bench in {out} ran with {key} {was!r}, this command has {now!r}"
            )
            raise ConfigError(
                f"{differs}; resume it with its own settings, or run into another --out"
            )


def merge_runs(first: dict, then: dict) -> dict:
    """One record of a run cut short (`first`) and the rest of its problems (`then`)."""
    run = {**then, **{key: first.get(key, 0) + then.get(key, 0) for key in ADDED}}
    run["per_problem"] = first["per_problem"] + then["per_problem"]
    run["accuracy"] = run["correct"] / run["problems"] if run["problems"] else 0.0
    run.update(token_and_latency_numbers(run["per_problem"], run["wall_s"]))
    run["other_time_s"] = max(0.0, run["wall_s"] - run["gen_time_s"] - run["prm_time_s"])
    run["prm_requests_per_call_mean"] = _weighted(
        first, then, "prm_requests_per_call_mean", "prm_calls"
    )
    run["prm_batch_tokens_mean"] = run["prm_tokens"] / run["prm_calls"] if run["prm_calls"] else 0.0
    run["rows_per_pass"] = _weighted(first, then, "rows_per_pass", "forward_passes")
    run["peak_kv_tokens"] = max(first.get("peak_kv_tokens", 0), then.get("peak_kv_tokens", 0))
    if "requests_per_server" in first or "requests_per_server" in then:
        run["requests_per_server"] = _added_requests(first, then)
    run["resumed"] = True
    return run


def _weighted(first: dict, then: dict, mean: str, weight: str) -> float:
    total = first.get(weight, 0) + then.get(weight, 0)
    both = first.get(mean, 0.0) * first.get(weight, 0) + then.get(mean, 0.0) * then.get(weight, 0)
    return both / total if total else 0.0


def _added_requests(first: dict, then: dict) -> dict[str, dict[str, int]]:
    added: dict[str, dict[str, int]] = {}
    for run in (first, then):
        for url, roles in run.get("requests_per_server", {}).items():
            for role, n in roles.items():
                added.setdefault(url, {})[role] = added.get(url, {}).get(role, 0) + n
    return added
