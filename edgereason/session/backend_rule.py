"""Which backend `--backend auto` runs where either could (a GPU that torch runs the models on): the
one measured faster on this device, for these models and this workload, once both were measured
(speed_log.py keeps what real runs measured); until then the prior that an H100's figures make
(issue 63): llama.cpp one search or problem at a time, torch for several problems at once.

What is compared, by workload (settings.WORKLOADS):
- solve, one search a process (solve, chat): seconds from the command to the answer, start-up
  included;
- one-at-a-time and many-at-once, a bench's problems one after another or several in flight: the
  tokens a second of its runs (the process's start-up is not the bench's).

Runs of different problems make different numbers of tokens, so each run's search is scaled to the
same tokens (the mean of the runs compared) before runs are compared; a backend's figure is its
fastest run kept, so that a cold start (weights dequantized into their cache, a first compile) is
not what it is known by."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

LOCAL = ("llamacpp", "torch")
NAMES = {"llamacpp": "llama.cpp", "torch": "torch"}
WORK = {
    "solve": "one search a process",
    "one-at-a-time": "a bench of one problem at a time",
    "many-at-once": "a bench of several problems at once",
}


@dataclass(frozen=True)
class Run:
    """One run as measured: seconds from the command to its search, of the search, and the tokens
    the search made."""

    startup_s: float
    search_s: float
    tokens: int


@dataclass(frozen=True)
class Prior:
    backend: str
    evidence: str  # what was measured, and where


PRIORS = {
    "solve": Prior(
        "llamacpp", "an H100 ran solve, command to answer, in 8.2 s on llama.cpp, 13.5 s on torch"
    ),
    "one-at-a-time": Prior(
        "llamacpp", "an H100's one-row pass takes 2.00 ms on llama.cpp, 4.31 ms on torch"
    ),
    "many-at-once": Prior(
        "torch", "an H100 made 3,356 tok/s on torch, 1,552 on llama.cpp, with 16 problems at once"
    ),
}


def bench_workload(concurrency: int, problems: int) -> str:
    """A bench's workload: its problems in flight at once (concurrency 0: all of them)."""
    in_flight = min(concurrency or problems, problems)
    return "one-at-a-time" if in_flight <= 1 else "many-at-once"


@dataclass(frozen=True)
class BackendChoice:
    backend: str
    workload: str
    seconds: dict[str, float]  # each backend's figure, for `tokens` tokens; {}: the prior chose
    tokens: float
    unmeasured: tuple[str, ...] = ()  # the backends with no run here yet

    def note(self) -> str:
        """One line: the backend, and the measurements or the prior it was chosen by."""
        head = f"edgereason: --backend auto runs on {NAMES[self.backend]} for {WORK[self.workload]}"
        if not self.seconds:
            tried = " and once with ".join(f"--backend {b}" for b in self.unmeasured)
            how = "a solve" if self.workload == "solve" else "the bench"
            return (
                f"{head}, the default until both are measured here "
                f"({PRIORS[self.workload].evidence}); to measure this device, run {how} once with "
                f"{tried}"
            )
        ranked = sorted(self.seconds, key=self.seconds.__getitem__)
        if self.workload == "solve":
            figures = ", ".join(f"{NAMES[b]} {self.seconds[b]:.1f} s" for b in ranked)
            how = f"command to answer, scaled to {self.tokens:,.0f} tokens"
        else:
            figures = ", ".join(
                f"{NAMES[b]} {self.tokens / self.seconds[b]:,.0f} tok/s" for b in ranked
            )
            how = "tokens a second"
        return f"{head}, measured faster on this device: {figures} ({how}, each its fastest run)"


def faster_backend(runs: dict[str, list[Run]], workload: str) -> BackendChoice:
    """The backend for `workload` from each backend's runs on this device and models."""
    prior = PRIORS[workload].backend
    measured = {b: runs[b] for b in LOCAL if runs.get(b)}
    if len(measured) < len(LOCAL):
        missing = tuple(b for b in LOCAL if b not in measured)
        return BackendChoice(prior, workload, {}, 0.0, missing)
    tokens = fmean(run.tokens for kept in measured.values() for run in kept)
    seconds = {
        b: min(_scaled(run, tokens, workload) for run in kept) for b, kept in measured.items()
    }
    fastest = min(seconds.values())
    # a tie keeps the prior
    backend = prior if seconds[prior] == fastest else min(seconds, key=seconds.__getitem__)
    return BackendChoice(backend, workload, seconds, tokens)


def _scaled(run: Run, tokens: float, workload: str) -> float:
    """The run's seconds had its search made `tokens` tokens: start-up counted for a solve only."""
    search = run.search_s * tokens / run.tokens
    return search + (run.startup_s if workload == "solve" else 0.0)
