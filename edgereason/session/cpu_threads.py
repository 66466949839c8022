"""How many threads llama.cpp gets on the CPU when --threads is not given: the physical cores that
other processes leave free at start.

llama.cpp's threads meet at a barrier after every operation, so one thread on a core another
process holds makes all of them wait: with a spinning process on one of 2 cores, a search ran 7.7x
slower on 2 threads (issue 64). One thread fewer than the busy core costs at most that core."""

from __future__ import annotations

from dataclasses import dataclass, replace

import psutil

from edgereason.backends import Placement
from edgereason.config import physical_cores
from edgereason.session.settings import ModelSettings
from edgereason.session.start_notes import StartNote

# long enough to see a process that holds a core, short enough not to be felt at start
SAMPLE_S = 0.2
# a core counts as taken once another process holds half of it: a thread sharing it runs at half
# speed and its siblings wait for it at every barrier
TAKEN_FROM = 0.5


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    note: str | None  # one line for stderr where busy cores cost threads, else None


def threads_for(physical: int, busy: float, keep: int = 0) -> ThreadChoice:
    """The cores `busy` leaves free, less `keep` for our own other threads (the chat's UI), at
    least 1; a note when busy cores took any."""
    taken = min(physical, int(busy + (1 - TAKEN_FROM)))
    threads = max(1, physical - taken - keep)
    if taken == 0:
        return ThreadChoice(threads, None)
    verb = "is" if taken == 1 else "are"
    note = (
        f"edgereason: {taken} of {physical} cores {verb} busy (load {busy:.1f}): running "
        f"llama.cpp on {threads} thread{'s' if threads > 1 else ''}; --threads N overrides"
    )
    return ThreadChoice(threads, note)


def free_core_threads(keep: int = 0) -> ThreadChoice:
    """threads_for this machine's load now, sampled for SAMPLE_S: the CPU percent of the moment,
    not the load average, which lags a minute and counts our own pull and load before it."""
    physical = physical_cores()
    # percent of all logical CPUs; as physical cores, a busy hyperthread holds half its core
    busy = psutil.cpu_percent(interval=SAMPLE_S) / 100 * physical
    return threads_for(physical, busy, keep)


def fit_threads_to_load(
    settings: ModelSettings, place: Placement, backend: str
) -> tuple[ModelSettings, Placement, StartNote | None]:
    """settings and their placement with the free cores' threads where llama.cpp runs on the CPU
    and --threads was not given, and the line that says so; unchanged where no core is busy (None:
    the physical cores). The session says the line as its first search gets going
    (start_notes.py)."""
    if settings.threads is not None or settings.n_gpu_layers or backend != "llamacpp":
        return settings, place, None
    choice = free_core_threads()
    if choice.note is None:
        return settings, place, None
    fitted = replace(settings, threads=choice.threads)
    return fitted, replace(place, n_threads=choice.threads), StartNote(choice.note)
