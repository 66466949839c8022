"""A sample search that measures the workload the split is modelled on: how long steps are, how long
the prompt and the PRM's question head are, and the most KV cells each model uses (forks share
cells; the PRM holds every candidate of a step until its selection). Measured, because these depend
on the models' tokenizers, chat templates and how they reason, which no fixed formula knows.

Concurrent searches are sampled concurrently, on different problems: searches started together step
together, so their peaks coincide more often than not, and one problem's working set says little
about another's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean
from typing import TypeVar

from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import PRESETS
from edgereason.engine.prompt import prompt_ids
from edgereason.engine.request import Request
from edgereason.errors import ConfigError
from edgereason.protocols import Generator, ProfiledGenerator, ProfiledPRM, Prompter
from edgereason.util.text import clean

T = TypeVar("T")

SAMPLE_PROBLEMS = (
    "A baker makes 24 muffins in the morning and 18 in the afternoon. She sells 3/4 of them and "
    "gives 5 to a neighbour. Each muffin she sells costs $2. How many muffins are left, and how "
    "much money did she make?",
    "A train leaves at 9:40 and travels 150 km at 60 km per hour, then stops for 20 minutes and "
    "travels another 90 km at 45 km per hour. At what time does it arrive?",
    "Tom has three times as many marbles as Ana. After Tom gives Ana 12 marbles, they have the "
    "same number. How many marbles did Tom have at first?",
    "A garden is 12 m long and 8 m wide. A path 1 m wide runs all around the outside of it. What "
    "is the area of the path, and how much does it cost to pave at $15 per square metre?",
)
SAMPLE_KV_TOKENS = 16384  # per search, roomy: the sample must not be shaped by a budget
MAX_SAMPLE_KV_TOKENS = 65536  # llama.cpp allocates the whole cache up front


def sample_kv_tokens(requests: int) -> int:
    """KV tokens each model gets in a sample search of `requests` searches at once."""
    return min(SAMPLE_KV_TOKENS * requests, MAX_SAMPLE_KV_TOKENS)


def sample_problems(problems: Sequence[T], requests: int) -> list[T]:
    """What each of the `requests` searches takes: the problems in turn."""
    return [problems[i % len(problems)] for i in range(requests)]


def check_sequences(beams: int, width: int, requests: int, max_seqs: int) -> None:
    """Before any model loads. A search starts when a sequence per beam can be set aside for it, and
    waits otherwise (scheduler.can_admit): `requests` searches run at once, as the sample search
    measures them and the profile models them, only where requests x beams sequences fit."""
    if beams > max_seqs:
        fix = (
            f"pick --beams {width * (max_seqs // width)} or fewer"
            if width <= max_seqs
            else f"pick a --width and --beams of at most {max_seqs}"
        )
        raise ConfigError(
            f"--beams {beams} is more than one search can hold: the generator runs at most "
            f"{max_seqs} sequences at once, one a beam; {fix}"
        )
    if requests * beams > max_seqs:
        raise ConfigError(
            f"--requests {requests} searches of {beams} beams need {requests * beams} sequences to "
            f"run at once (one a beam) but the generator runs at most {max_seqs}, so the rest "
            "would wait and the profile would model more than it measured; pick --requests "
            f"{max_seqs // beams} or fewer, or lower --beams"
        )


def prompt_lengths(prompter: Prompter, problems: Sequence[str], requests: int) -> list[int]:
    """The generator's prompt tokens of each problem, as a search submits it; ConfigError for one
    beyond the generator's trained context or the sample search's KV (numbered when there are
    several). Tokenizing only: a problem it cannot hold was refused after the minutes of curves
    before."""
    kv_tokens = sample_kv_tokens(requests)
    lengths = []
    for i, problem in enumerate(problems, 1):
        where = f"--problem {i}: " if len(problems) > 1 else ""
        try:
            n = len(prompt_ids(prompter, clean(problem)))  # type: ignore[arg-type]
        except ConfigError as e:
            raise ConfigError(f"{where}{e}") from None
        if n + 16 > kv_tokens:  # prompt_ids' margin
            raise ConfigError(
                f"{where}the problem is {n} tokens but the sample search holds {kv_tokens} KV "
                "tokens; give a shorter problem, one like those you solve"
            )
        lengths.append(n)
    return lengths


@dataclass(frozen=True)
class WorkloadSample:
    step_tokens: int  # mean tokens of a finished step
    prompt_tokens: int
    head_tokens: int
    # the most KV cells in use at once, all the concurrent searches together
    generator_peak_tokens: int
    verifier_peak_tokens: int


def sample_search(
    generator: ProfiledGenerator,
    prm: ProfiledPRM,
    beams: int,
    width: int,
    steps: int,
    max_step_tokens: int,
    requests: int = 1,
    problems: tuple[str, ...] = SAMPLE_PROBLEMS,
) -> WorkloadSample:
    """Run `requests` searches at once, the i-th on problems[i % len(problems)]. Step, prompt and
    head tokens are means over the searches; the peaks count them together."""
    kv_tokens = sample_kv_tokens(requests)
    gen = generator.open_generator(kv_tokens)
    ver = prm.open_verifier(kv_tokens)
    config = SearchConfig(
        beams=beams,
        width=width,
        max_steps=steps,
        max_step_tokens=max_step_tokens,
        sampling=SamplingParams(seed=0),
    )
    chosen = sample_problems(problems, requests)
    try:
        engine = Engine(gen, ver, PRESETS["baseline"])
        reqs = [engine.submit(p, config) for p in chosen]
        gen_peak = _run_to_end(engine, gen)
        _refuse_failed(reqs, beams, kv_tokens)
        finished = [
            len(n.tokens) for r in reqs for n in r.tree.steps() if n.finish is not None
        ] or [max_step_tokens]
        heads = [prm.head_tokens(p) for p in chosen]
        return WorkloadSample(
            round(mean(finished)),
            round(mean(len(r.prompt_ids) for r in reqs)),
            round(mean(heads)),
            gen_peak,
            ver.stats.peak_tokens,
        )
    finally:
        gen.close()
        ver.close()


def _run_to_end(engine: Engine, gen: Generator) -> int:
    """Step the engine until its searches end; the most generator KV cells in use after any step."""
    peak = 0
    while engine.busy:
        engine.step()
        peak = max(peak, gen.kv_used_tokens)
    return peak


def _refuse_failed(reqs: list[Request], beams: int, kv_tokens: int) -> None:
    """A failed search measured nothing to model: ConfigError with the reason of the first."""
    if failed := next((r for r in reqs if r.status == "failed"), None):
        why = failed.reason.split(";")[0]  # its advice is for solve's flags
        raise ConfigError(
            f"the sample search of {len(reqs)} x {beams} beams could not run in {kv_tokens} KV "
            f"tokens a model ({why}); lower --beams or --requests"
        )
