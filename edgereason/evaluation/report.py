"""Bench output: results.json (everything), results.csv (one scalar row per run), the terminal
table, and the ratios between two result folders."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple, TextIO, cast

import numpy as np

from edgereason.errors import ConfigError
from edgereason.util.files import write_text_atomic
from edgereason.util.schema import TEXT, Fields, ListOf, Number, OneOf, Schema, Text, read_json_file
from edgereason.util.terminal import safe_text

RunKey = tuple[str, int, str]

TABLE = [  # (header, field, format)
    ("policy", "policy", "{}"),
    ("beams", "beams", "{}"),
    ("rate", "rate", "{}"),
    ("rep", "repeat", "{}"),
    ("acc", "accuracy", "{:.2f}"),
    ("tok/s", "throughput_tok_s", "{:.1f}"),
    ("good/s", "goodput_tok_s", "{:.1f}"),
    ("lat_s", "latency_s_mean", "{:.1f}"),
    ("p90_s", "latency_s_p90", "{:.1f}"),
    ("ms/tok", "normalized_latency_ms_mean", "{:.0f}"),
    ("wait", "waiting_ratio_median", "{:.2f}"),
    ("gen_s", "gen_time_s", "{:.1f}"),
    ("prm_s", "prm_time_s", "{:.1f}"),
    ("other_s", "other_time_s", "{:.1f}"),
    ("prm_calls", "prm_calls", "{}"),
    ("rows/pass", "rows_per_pass", "{:.1f}"),
]

RESULTS = "results.json"
CSV = "results.csv"
COMPARED = (
    "accuracy",
    "throughput_tok_s",
    "goodput_tok_s",
    "latency_s_mean",
    "normalized_latency_ms_mean",
    "waiting_ratio_median",
    "prm_calls",
    "wall_s",
)


def write_results(out: Path, config: dict, runs: list[dict]) -> None:
    """Rewritten after every finished problem (out_folder.py), so an interrupted bench keeps what
    finished. Both files are rendered first and each is replaced whole: a failed write leaves the
    previous ones as they were."""
    results = json.dumps({"config": config, "runs": runs}, indent=1)
    scalars = [{k: v for k, v in run.items() if not isinstance(v, (dict, list))} for run in runs]
    table = io.StringIO(newline="")
    writer = csv.DictWriter(
        table, fieldnames=list(dict.fromkeys(k for row in scalars for k in row))
    )
    writer.writeheader()
    writer.writerows(scalars)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / RESULTS, results)
    write_text_atomic(out / CSV, table.getvalue())


# what --compare reads from each run
RATE = OneOf((Text(pattern="inf", name='"inf"'), Number(above=0)))
COMPARED_RUN = Fields(
    {
        "policy": TEXT,
        "beams": Number(whole=True, above=0),
        "rate": RATE,
        **{f: Number() for f in COMPARED},
    }
)
COMPARED_RESULTS = Fields({"runs": ListOf(COMPARED_RUN)}, {"config": Fields({})})
NOT_RESULTS = "compare folders written by `edgereason bench --out`"


class Results(NamedTuple):
    config: dict  # the bench's settings ({} where the file has none)
    runs: list[dict]


def load_results(
    folder: str | Path, schema: Schema = COMPARED_RESULTS, todo: str = NOT_RESULTS
) -> Results:
    """A results folder's settings and runs, checked against `schema` (what --compare reads, by
    default); DamagedFileError naming the file, its first wrong field, and `todo`, otherwise."""
    path = Path(folder) / RESULTS
    if not path.is_file():
        raise ConfigError(
            f"no {RESULTS} in {folder}; pass folders written by `edgereason bench --out`"
        )
    data = cast(dict, read_json_file(path, schema, todo))
    return Results(data.get("config", {}), data["runs"])


def print_table(runs: Iterable[dict], file: TextIO) -> None:
    """The table, then each served run's requests per server."""
    runs = list(runs)
    rows = [[h for h, _, _ in TABLE]] + [
        [fmt.format(run[k]) for _, k, fmt in TABLE] for run in runs
    ]
    _print_rows(rows, file)
    for run in runs:
        if counts := run.get("requests_per_server"):
            spread = ", ".join(
                f"{url} {' + '.join(f'{n} {role}' for role, n in roles.items())}"
                for url, roles in counts.items()
            )
            label = f"{run['policy']} beams={run['beams']} rate={run['rate']} rep={run['repeat']}"
            _say(f"requests per server, {label}: {spread}", file)


def run_key(run: dict) -> RunKey:
    return (run["policy"], int(run["beams"]), str(run["rate"]))


def mean_by_key(runs: list[dict]) -> dict[RunKey, dict[str, float]]:
    """Repetitions of one (policy, beams, rate) averaged, field by field."""
    grouped: dict[RunKey, list[dict]] = {}
    for run in runs:
        grouped.setdefault(run_key(run), []).append(run)
    return {
        key: {f: float(np.mean([r[f] for r in rs])) for f in COMPARED}
        for key, rs in grouped.items()
    }


# What may differ between two benches whose runs are compared: what they compare, and when they ran.
_CONFIG_FREE = {"version", "started", "policies", "beams", "rates", "repeat", "strategy", "split"}


def unlike(results: list[tuple[str | Path, Results]]) -> list[str]:
    """Why two benches' ratios ((folder, results) of base, then new) may not mean what they seem:
    settings that differ, runs cut short."""
    base, new = (r.config for _, r in results)
    notes = [
        f"the benches differ in {k}: {base.get(k)!r} against {new.get(k)!r}"
        for k in sorted((set(base) | set(new)) - _CONFIG_FREE)
        if base.get(k) != new.get(k)
    ]
    for folder, r in results:
        notes += [
            f"{run['policy']} beams={run['beams']} rate={run['rate']} in {folder} was interrupted "
            f"after {run.get('problems', '?')} problems"
            for run in r.runs
            if run.get("interrupted")
        ]
    return notes


def print_compare(
    base_dir: str | Path, new_dir: str | Path, file: TextIO, notes: TextIO | None = None
) -> int:
    """Ratios new / base for runs present in both folders; returns how many runs matched. Notes on
    unlike settings and interrupted runs go to `notes` (default: `file`)."""
    results = [(base_dir, load_results(base_dir)), (new_dir, load_results(new_dir))]
    base, new = (mean_by_key(r.runs) for _, r in results)
    common = [k for k in base if k in new]
    if not common:
        raise ConfigError(f"no run (policy, beams, rate) appears in both {base_dir} and {new_dir}")
    _say(f"ratios {new_dir} / {base_dir} (repeats averaged):", file)
    rows = [["policy", "beams", "rate", *COMPARED]]
    for key in common:
        rows.append(
            [key[0], str(key[1]), key[2], *(_ratio(new[key][f], base[key][f]) for f in COMPARED)]
        )
    _print_rows(rows, file)
    for label, keys in (
        ("only in " + str(base_dir), set(base) - set(new)),
        ("only in " + str(new_dir), set(new) - set(base)),
    ):
        if keys:
            _say(
                f"{label}: {', '.join(f'{p} beams={b} rate={r}' for p, b, r in sorted(keys))}", file
            )
    for note in unlike(results):
        _say(f"note: {note}", notes or file)
    return len(common)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def _print_rows(rows: list[list[str]], file: TextIO) -> None:
    rows = [[safe_text(cell, one_line=True) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(
                cell.rjust(w) if i else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(row, widths))
            ),
            file=file,
        )


def _say(line: str, file: TextIO) -> None:
    """A line of the table's or the comparison's notes: names and URLs from a results file (which
    anyone may have written) made safe to print."""
    print(safe_text(line, one_line=True), file=file)
