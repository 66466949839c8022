"""What real runs measured, in $EDGEREASON_HOME/backend-speed.json: what `--backend auto` chooses by
(backend_rule.py). Every solve and bench run on llama.cpp or torch adds its run under its device,
models, workload and backend; the last KEEP of each stay.

    {"DEVICE/GENERATOR/VERIFIER": {"solve": {"torch": [{"startup_s": 4.1, "search_s": 9.4,
     "tokens": 2010, "created": "2025-..."}]}}}

A file that is not that (damaged, or edited by hand) counts as missing: one note names it, and the
next run writes it anew."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

from edgereason.session.backend_rule import Run
from edgereason.util.files import cache_home, write_atomic

SPEED_FILE = "backend-speed.json"
KEEP = 3  # runs kept per backend: a cold start among them is not the backend's figure
_noted: set[Path] = set()  # damaged files said so already


def speed_path() -> Path:
    return cache_home() / SPEED_FILE


def read_runs(key: str, workload: str) -> dict[str, list[Run]]:
    """Each backend's runs kept for `key` (device and models) and `workload`."""
    kept = _read_log(speed_path()).get(key, {}).get(workload, {})
    return {
        backend: [Run(r["startup_s"], r["search_s"], r["tokens"]) for r in runs]
        for backend, runs in kept.items()
    }


def record_run(key: str, workload: str, backend: str, run: Run) -> None:
    """Add `run` to the log, keeping the backend's last KEEP; an unwritable home costs a note."""
    path = speed_path()
    log = _read_log(path)
    runs = log.setdefault(key, {}).setdefault(workload, {}).setdefault(backend, [])
    runs.append(
        {
            "startup_s": round(run.startup_s, 3),
            "search_s": round(run.search_s, 3),
            "tokens": run.tokens,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    del runs[:-KEEP]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp: tmp.write_text(json.dumps(log, indent=2)))
    except OSError as e:
        print(f"edgereason: could not record this run's speed in {path} ({e})", file=sys.stderr)


def _read_log(path: Path) -> dict:
    """The log, or {} where it is missing, unreadable or damaged (said once a process)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):  # none yet, or no home folder to hold one
        return {}
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON
        data = None
    if _well_formed(data):
        return data
    if path not in _noted:
        _noted.add(path)
        print(
            f"edgereason: {path} is damaged or unreadable; --backend auto counts it as missing, "
            "and the next run that finishes writes it anew",
            file=sys.stderr,
        )
    return {}


def _well_formed(data: object) -> bool:
    """{key: {workload: {backend: [run, ...]}}}, each run's figures of the types they are written
    with."""
    return _dict_of(data, lambda workloads: _dict_of(workloads, lambda by: _dict_of(by, _runs)))


def _dict_of(data: object, check: Callable[[object], bool]) -> bool:
    return isinstance(data, dict) and all(isinstance(k, str) and check(v) for k, v in data.items())


def _runs(runs: object) -> bool:
    return isinstance(runs, list) and all(_is_run(r) for r in runs)


def _is_run(run: object) -> bool:
    if not isinstance(run, dict) or not isinstance(run.get("created"), str):
        return False
    startup, search, tokens = (run.get(k) for k in ("startup_s", "search_s", "tokens"))
    if not all(_is_number(n) for n in (startup, search, tokens)):
        return False
    return (
        isinstance(tokens, int) and tokens > 0 and 0 <= startup < math.inf and 0 < search < math.inf
    )


def _is_number(n: object) -> bool:
    return isinstance(n, int | float) and not isinstance(n, bool)
