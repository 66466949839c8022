"""`bench --resume`: an interrupted bench goes on from its finished problems. Rules:
- results.json is read against what resuming reads (RESUMED_RESULTS): a file that lacks a field, or
  holds one of the wrong type, is one line naming the field;
- a file that contradicts itself is refused, not repaired: a run recorded twice, a problem recorded
  twice in one run, a count of problems that is not its records'. The bench writes none of these,
  and which record is right cannot be told; its counts and times would be added into the resumed
  run (a run that said 6 problems held 7 records);
- it resumes only the bench its flags describe: the settings recorded in results.json must be this
  command's (when it started and the backend auto chose aside), and so must its problems: their
  fingerprint (PROBLEMS_SHA256: a sha256 over each one's id, text and gold answer), and the id and
  gold answer of every problem it finished. Results written before the fingerprint are checked by
  those alone, and a note says so;
- a run recorded whole is kept as it is; a run cut short (interrupted: a Ctrl-C, a kill after a
  checkpoint) runs the problems it lacks and its two parts become one record: counts and times
  added, figures over problems computed again over all of them (runner.token_and_latency_numbers),
  marked `resumed` (its timings add up parts run at different times).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from edgereason.errors import ConfigError, DamagedFileError
from edgereason.evaluation.report import RATE, RESULTS, TABLE, Results
from edgereason.evaluation.runner import SUMMED, RunSpec, rate_label, token_and_latency_numbers
from edgereason.search.dataset import Problem
from edgereason.util.schema import FLAG, TEXT, Fields, ListOf, MapOf, Maybe, Number

RunId = tuple[str, int, str, int]  # (label, beams, rate, repeat)

PROBLEMS_SHA256 = "problems_sha256"  # the config's fingerprint of the problems
# settings that may differ between a bench and its resumption (the fingerprint is checked apart)
FREE = {"started", "resumed", "backend", PROBLEMS_SHA256}
ADDED = (
    "problems", "correct", "failed", "graded_as_text", "wall_s", "gen_time_s", "prm_time_s",
    "prm_calls", "prm_tokens", "recomputed_tokens", "forward_passes", *SUMMED,
)  # fmt: skip

# what resuming reads: a problem's record (runner._problem_record), a run's, the bench's settings
_COUNT, _AMOUNT = Number(whole=True, least=0), Number(least=0)
_SCORES = ListOf(Maybe(Number()))
_PROBLEM = Fields(
    {
        "id": TEXT,
        "answer": Maybe(TEXT),
        "gold": TEXT,
        "correct": FLAG,
        "latency": _AMOUNT,
        "tokens": _COUNT,
        "final_tokens": _COUNT,
        "waiting_ratio": _AMOUNT,
    },
    {"status": TEXT, "graded_as_text": FLAG, "step_scores": _SCORES, "common_prefix": _SCORES},
)
_LABELS = {"policy": TEXT, "beams": Number(whole=True, above=0), "rate": RATE, "repeat": _COUNT}
_RUN = Fields(
    _LABELS
    | {"interrupted": FLAG, "problems": _COUNT, "generated_tokens": _COUNT}
    | {"per_problem": ListOf(_PROBLEM)}
    | {field: Number() for _, field, _ in TABLE if field not in _LABELS},
    {key: _AMOUNT for key in (*ADDED, "prm_requests_per_call_mean", "peak_kv_tokens")}
    | {"requests_per_server": MapOf(MapOf(_COUNT)), "resumed": FLAG},
)
_CONFIG = Fields({}, {"resumed": ListOf(TEXT), PROBLEMS_SHA256: TEXT})
RESUMED_RESULTS = Fields({"config": _CONFIG, "runs": ListOf(_RUN)})
NOT_RESUMABLE = "it was damaged or edited since the bench wrote it; run into a new --out"


def spec_id(spec: RunSpec) -> RunId:
    return (spec.name, spec.config.beams, str(rate_label(spec.rate)), spec.repeat)


def run_id(run: dict) -> RunId:
    return (run["policy"], int(run["beams"]), str(run["rate"]), int(run.get("repeat", 0)))


def problems_sha256(problems: list[Problem]) -> str:
    """The problems' fingerprint: a sha256 over each one's id, text and gold answer, in order."""
    # ASCII escapes: a text may hold lone surrogates (util/text.py), which UTF-8 cannot encode
    rows = [[p.id, p.problem, p.answer] for p in problems]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=True).encode("ascii")).hexdigest()


def check_records(earlier: Results, out: Path) -> None:
    """DamagedFileError where results.json contradicts itself (the module's rules)."""
    seen: dict[RunId, int] = {}
    for i, run in enumerate(earlier.runs):
        if (twice := seen.setdefault(run_id(run), i)) != i:
            _contradicts(out, f"runs[{twice}] and runs[{i}] are one run ({_label(run)})")
        ids = [record["id"] for record in run["per_problem"]]
        if dup := next((pid for pid in ids if ids.count(pid) > 1), None):
            _contradicts(out, f"runs[{i}].per_problem holds problem {dup!r} twice")
        if run["problems"] != len(ids):
            counts = f"counts {run['problems']} problems and holds {len(ids)} records"
            _contradicts(out, f"runs[{i}] ({_label(run)}) {counts}")


def _contradicts(out: Path, problem: str) -> None:
    raise DamagedFileError(out / RESULTS, problem, NOT_RESUMABLE)


def _label(run: dict) -> str:
    return f"{run['policy']} beams={run['beams']} rate={run['rate']} rep={run['repeat']}"


def check_same_problems(
    earlier: Results, config: dict, problems: list[Problem], out: Path
) -> str | None:
    """ConfigError, saying what changed, where this command's problems are not those the bench in
    `out` ran; a note where its results hold no fingerprint (written before it was recorded)."""
    gold = {p.id: p.answer for p in problems}
    for run in earlier.runs:
        for record in run["per_problem"]:
            pid, was = record["id"], record["gold"]
            if pid not in gold:
                _changed(out, f"problem {pid!r}, which it finished, is not among this command's")
            if gold[pid] != was:
                _changed(out, f"problem {pid!r} had the answer {was!r}, now {gold[pid]!r}")
    recorded = earlier.config.get(PROBLEMS_SHA256)
    if recorded is None:
        return (
            f"{out / RESULTS} was written before benches recorded their problems' fingerprint: "
            "only the finished problems' ids and answers are checked against this command's"
        )
    if recorded != config[PROBLEMS_SHA256]:
        _changed(out, "the problems' ids, texts or answers differ from those it started with")
    return None


def _changed(out: Path, what: str) -> None:
    raise ConfigError(
        f"--resume: the bench in {out} ran on other problems: {what}; resuming would mix the two "
        "sets' answers: run this command into a new --out"
    )


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
