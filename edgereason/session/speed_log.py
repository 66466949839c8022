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
import sys
from pathlib import Path
from typing import cast

from edgereason import models
from edgereason.memory import verifier_id
from edgereason.session.backend_rule import Run
from edgereason.session.settings import ModelSettings
from edgereason.util.cache_file import read_cache
from edgereason.util.files import cache_home, write_atomic
from edgereason.util.schema import TEXT, Fields, ListOf, MapOf, Number

SPEED_FILE = "backend-speed.json"
KEEP = 3  # runs kept per backend: a cold start among them is not the backend's figure


def speed_path() -> Path:
    return cache_home() / SPEED_FILE


def speed_key(device: str, settings: ModelSettings) -> str:
    """What a device's runs of both models are kept under: the device and both models, the backend
    aside (the runs of both are compared under one key)."""
    verifier = verifier_id(settings.prm_model, settings.prm_format)
    return f"{device}/{models.display_name(settings.model)}/{verifier}"


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


# {key: {workload: {backend: [run, ...]}}}, each run's figures of the types they are written with
_RUN = Fields(
    {
        "startup_s": Number(least=0),
        "search_s": Number(above=0),
        "tokens": Number(above=0, whole=True),
        "created": TEXT,
    }
)
_LOG = MapOf(MapOf(MapOf(ListOf(_RUN))))


def _read_log(path: Path) -> dict:
    """The log, or {} where it is missing or damaged (util/cache_file.py)."""
    instead = "--backend auto counts it as missing, and the next run that finishes writes it anew"
    return cast(dict, read_cache(path, _LOG, instead) or {})
