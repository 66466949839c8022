"""What `open_session` returns: the two open models, and the engines that run on them (`auto`
decided once for the session)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from edgereason.backends import load_backend
from edgereason.engine.events import Event, Listener, Progress
from edgereason.engine.loop import Engine
from edgereason.engine.policy import DEFAULT_LV_THRESHOLD, Policy
from edgereason.protocols import Generator, Points, Verifier
from edgereason.session.auto_policy import (
    MEASURE_ROWS,
    MEASURE_STEPS,
    AutoChoice,
    choice_for,
    is_auto,
    resolve,
)
from edgereason.session.backend_rule import LOCAL, Run
from edgereason.session.profile_choice import device_id, pass_cost_key
from edgereason.session.settings import ModelSettings
from edgereason.session.speed_log import record_run, speed_key
from edgereason.session.start_notes import StartNote


@dataclass
class Session:
    settings: ModelSettings
    generator: Generator
    verifier: Verifier
    generator_path: Path
    prm_path: Path
    backend: str = "llamacpp"  # the generator's backend (what measures its pass cost)
    # the policy's lv_threshold where it leaves it 0: the memory profile's, else the device's
    lv_threshold: int = DEFAULT_LV_THRESHOLD["cpu"]
    profile: dict | None = None
    # said as the first search gets going: the busy cores (cpu_threads.py), how to profile
    start_notes: tuple[StartNote, ...] = ()
    _auto: AutoChoice | None = None

    def engine(self, policy: Policy, on_event: Listener | None = None) -> Engine:
        """An engine running `policy`; `auto` runs the preset this device's pass cost chooses."""
        auto = self.auto_choice() if is_auto(policy) else None
        run = resolve(policy, auto) if auto else policy
        if not run.lv_threshold:
            run = replace(run, lv_threshold=self.lv_threshold)
        return Engine(self.generator, self.verifier, run, on_event=self._noting(on_event))

    def _noting(self, on_event: Listener | None) -> Listener | None:
        """on_event, with the start notes printed at the first Progress: after the checks that stop
        a search at its start, so that their error stays the one line on stderr."""
        if not self.start_notes:
            return on_event

        def listener(event: Event) -> None:
            if isinstance(event, Progress):
                for text in self.take_start_notes():
                    print(text, file=sys.stderr, flush=True)
            if on_event is not None:
                on_event(event)

        return listener

    def take_start_notes(self) -> list[str]:
        """The start notes' lines, once (later calls give none): each is remembered as said."""
        notes, self.start_notes = self.start_notes, ()
        for note in notes:
            note.said()
        return [note.text for note in notes]

    def auto_choice(self) -> AutoChoice:
        """What `auto` runs in this session: decided once (profile, cache or a second's
        measurement)."""
        if self._auto is None:
            runtime, threads = load_backend(self.backend), self.settings.threads

            def decode() -> Points | None:
                return runtime.decode_points(self.generator, MEASURE_ROWS, MEASURE_STEPS, threads)

            measure = decode if runtime.capabilities.measures_decode else None
            key = pass_cost_key(self.settings, self.backend)
            self._auto = choice_for(self.profile, key, measure)
            if self.settings.verbose:
                print(self._auto.note(), file=sys.stderr)
        return self._auto

    def record_speed(self, run: Run) -> None:
        """Keep a finished run's speed for `--backend auto` (speed_log.py): both models here, on
        llama.cpp or torch, so runs of the two compare; a run of no tokens measured nothing."""
        if self.backend in LOCAL and self.settings.remote is None and run.tokens > 0:
            key = speed_key(device_id(self.settings), self.settings)
            record_run(key, self.settings.workload, self.backend, run)

    def requests_per_server(self) -> dict[str, dict[str, int]]:
        """The requests each server answered so far, by role ("generator", "prm"): served roles
        only, so {} where both models run here."""
        counts: dict[str, dict[str, int]] = {}
        for role, model in (("generator", self.generator), ("prm", self.verifier)):
            read = getattr(model, "requests_per_server", None)
            for url, n in (read() if read else {}).items():
                counts.setdefault(url, {})[role] = n
        return counts

    def close(self) -> None:
        for model in (self.generator, self.verifier):
            close = getattr(model, "close", None)
            if close:
                close()
