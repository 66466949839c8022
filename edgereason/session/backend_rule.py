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
not what it is known by.

Torch is taken only where it can run the models here (torch_cannot_run: CUDA, the architectures,
the bf16 weights and a little KV under `--gpu-memory` or the GPU's memory); that check imports
torch, so it is asked only where torch is the faster choice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from edgereason.backends import Placement, load_backend
from edgereason.errors import ConfigError, ModelError
from edgereason.memory.device import read_gpu
from edgereason.memory.size import format_size
from edgereason.session.settings import MIN_KV_TOKENS, ModelSettings

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


def torch_cannot_run(
    settings: ModelSettings, gen_path: Path, prm_path: Path, hf: bool
) -> str | None:
    """Why the models cannot run on torch on this GPU (a fallback the user may not expect), or
    None."""
    try:
        torch_backend = load_backend("torch")
        if not torch_backend.supports_gpu():
            return torch_backend.no_gpu_reason()
    except ConfigError as e:  # torch cannot join this process beside this llama.cpp build
        return str(e)
    roles = [gen_path] if hf else [gen_path, prm_path]
    try:
        for path in roles:
            torch_backend.check_architecture(path)
    except ModelError as e:
        return str(e)
    on_gpu = Placement(n_gpu_layers=1)
    need = sum(MIN_KV_TOKENS * torch_backend.kv_bytes_per_token(p, on_gpu) for p in roles)
    need += sum(torch_backend.weights_bytes(p, on_gpu) for p in {p.resolve() for p in roles})
    room, what = settings.gpu_memory_bytes, "--gpu-memory"
    if room is None:
        room, what = read_gpu().total_bytes, "the GPU's memory"
    if need > room:
        return (
            f"the models need {format_size(need)} in bf16 on torch, more than {what} "
            f"{format_size(room)}"
        )
    return None
