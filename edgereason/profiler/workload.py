"""The search memory-profile models its split on: first from the flags (checked before any model
loads), then with the prompt and head lengths of its problems, then with what a sample search of it
measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from statistics import mean

from edgereason.errors import ConfigError
from edgereason.memory.split import Workload
from edgereason.profiler.sample import (
    SAMPLE_PROBLEMS,
    check_sequences,
    sample_problems,
    sample_search,
)
from edgereason.protocols import ProfiledGenerator, ProfiledPRM, Progress

DEFAULT_BEAMS = {"cpu": 4, "gpu": 8}  # design.md section 3


@dataclass(frozen=True)
class SampleSearch:
    """The search memory-profile models the split on, and runs a sample of to measure it."""

    beams: int | None = None  # None: DEFAULT_BEAMS on the device
    width: int = 4
    requests: int = 1  # searches at once
    max_step_tokens: int = 96
    steps: int = 4
    given: tuple[str, ...] = ()  # the --problem texts

    @property
    def problems(self) -> tuple[str, ...]:
        """The problems the sample search takes: the given ones, else SAMPLE_PROBLEMS."""
        return self.given or SAMPLE_PROBLEMS


# for the budget check before the sample search measures the real step length
TYPICAL_STEP_TOKENS = 64


def modelled_search(
    beams: int | None,
    width: int,
    requests: int,
    max_step_tokens: int,
    steps: int,
    device_kind: str,
    max_seqs: int,
    problems: tuple[str, ...],
) -> Workload:
    """The search the split is modelled on, checked before any model loads."""
    if min(1 if beams is None else beams, width, requests, max_step_tokens, steps) <= 0:
        raise ConfigError(
            "--beams, --width, --requests, --steps and --max-step-tokens must be positive"
        )
    beams = DEFAULT_BEAMS[device_kind] if beams is None else beams
    # first: the beams the next check suggests may be beyond them
    check_sequences(beams, width, requests, max_seqs)
    if beams % width:
        fix = (
            f"pick --beams {width * max(1, beams // width)} or another --width"
            if width <= max_seqs
            else f"pick a --width that divides {beams}"
        )  # no --beams of a multiple of it can run
        raise ConfigError(
            f"the modelled beam search of --beams {beams} cannot keep beams/width paths with "
            f"--width {width}: {fix}"
        )
    if not all(p.strip() for p in problems):
        raise ConfigError("a --problem is empty; give the text of a problem like those you solve")
    return Workload(
        beams=beams,
        width=width,
        requests=requests,
        step_tokens=min(TYPICAL_STEP_TOKENS, max_step_tokens),
        steps=steps,
    )


def with_prompts(
    w: Workload, problems: tuple[str, ...], lengths: list[int], prm: ProfiledPRM
) -> Workload:
    """The workload with the prompt and PRM head lengths of the problems its searches take (means,
    as the sample search measures them), in place of the typical ones."""
    chosen = sample_problems(range(len(problems)), w.requests)
    heads = [prm.head_tokens(p) for p in problems]
    return replace(
        w,
        prompt_tokens=round(mean(lengths[i] for i in chosen)),
        head_tokens=round(mean(heads[i] for i in chosen)),
    )


def sampled_workload(
    gen: ProfiledGenerator,
    prm: ProfiledPRM,
    workload: Workload,
    max_step_tokens: int,
    problems: tuple[str, ...],
    progress: Progress | None,
) -> Workload:
    """The workload with what a sample search measured: step length, prompt and head tokens, peak
    KV."""
    if progress:
        progress(
            f"sample search: {workload.requests} x {workload.beams} beams, width {workload.width}, "
            f"{workload.steps} steps"
        )
    sample = sample_search(
        gen,
        prm,
        workload.beams,
        workload.width,
        workload.steps,
        max_step_tokens,
        workload.requests,
        problems,
    )
    if progress:
        progress(
            f"sample search: {sample.step_tokens} tokens a step; KV in use at most "
            f"{sample.generator_peak_tokens} generator, {sample.verifier_peak_tokens} PRM tokens"
        )
    return replace(workload, **asdict(sample))  # the sample's fields are Workload's measured fields
