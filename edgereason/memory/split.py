"""Choosing how one KV budget is split between the generator and the PRM (design.md section 4,
asymmetric split).

Workload model: R concurrent beam searches (N beams, width M, so k = N / M kept parents each) of D
steps of S tokens after a prompt of P tokens (the PRM's question head: H tokens; a PRM segment is s
= S + o tokens, o the turn markup around a step). Forks share KV, so what a search holds is its
prompt, the kept parents' paths and the new steps, which depend on how long the steps really are:
the working sets W (the most KV cells each model held in a sample search of this shape, its R
searches run at once, see profiler/sample.py) are measured, not derived.

Generator with G KV tokens: a generator short of W runs its R*N sequences in waves of n = R*N * (G -
R*P) / (W - R*P), gen_time = R*N*S / gen_tps(R*N / waves). It is infeasible when one path of D steps
(P + D*S) does not fit.

PRM with V KV tokens: holding W, it scores each step's R*N new segments in one call per search,
prm_time = R*N*s / prm_tps(N*s). Short of W it drops least recently used paths and rebuilds them: a
step evaluates the new segments plus the shortfall (W - V) / W of the extra it would take to rebuild
every path of the mean depth D/2, in calls of at most V tokens. (A cliff, every path rebuilt as soon
as V < W, overstated a short PRM's tokens nearly threefold where this model came close:
docs/results.md, "The KV split and prefix-aware order".) It is infeasible when one path of D steps
(H + D*s) does not fit.

Predicted step time = gen_time + prm_time (the baseline engine runs them one after the other) and
goodput is R*N*S / step time. Curves are interpolated linearly (np.interp) and clamped outside their
measured range."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from edgereason.errors import ConfigError
from edgereason.memory.curve import Curve
from edgereason.memory.size import format_size

MIN_KV_TOKENS = 256  # the smallest KV cache a session accepts per model
# generator share of the budget: 5%, 10%, ..., 95%
SHARES = tuple(round(0.05 * i, 2) for i in range(1, 20))
EVEN = 0.5
# splits predicted within 1% of the best are equal; the one nearest even wins (least surprising)
TIE = 0.01
# A sample search measures its own problems; working sets vary from problem to problem (by half
# again between two word problems: docs/results.md, "The KV split and prefix-aware order"), so a
# split that just fits the measured ones is fragile: the choice minimises the worst step time over
# this range.
WORKING_SET_RANGE = (0.8, 1.0, 1.25)


@dataclass(frozen=True)
class Workload:
    beams: int = 4
    width: int = 4
    requests: int = 1  # searches running at once
    step_tokens: int = 64
    prompt_tokens: int = 200
    head_tokens: int = 120  # the PRM's system turn and question
    steps: int = 4  # steps of a search
    verify_overhead: int = 12  # PRM turn markup around one step
    generator_peak_tokens: int = 0  # measured KV of the R searches at once (0: not measured yet)
    verifier_peak_tokens: int = 0

    @property
    def measured(self) -> bool:
        return self.generator_peak_tokens > 0 and self.verifier_peak_tokens > 0

    @property
    def parents(self) -> int:
        return max(1, self.beams // self.width)

    @property
    def sequences(self) -> int:
        return self.requests * self.beams

    def generator_path_tokens(self, depth: int) -> int:
        return self.prompt_tokens + (depth + 1) * self.step_tokens

    @property
    def verify_tokens(self) -> int:
        return self.step_tokens + self.verify_overhead

    def verifier_path_tokens(self, depth: int) -> int:
        return self.head_tokens + (depth + 1) * self.verify_tokens

    def min_budget_bytes(self, gen_bytes_per_token: int, ver_bytes_per_token: int) -> int:
        """One generator path and one PRM path of the last step (rebuilt every call): less runs
        nothing."""
        last = self.steps - 1
        return (
            max(self.generator_path_tokens(last), MIN_KV_TOKENS) * gen_bytes_per_token
            + max(self.verifier_path_tokens(last), MIN_KV_TOKENS) * ver_bytes_per_token
        )


@dataclass(frozen=True)
class Prediction:
    generator_share: float
    generator_kv_tokens: int
    verifier_kv_tokens: int
    concurrent_seqs: int = 0  # generator sequences resident at once (0: infeasible)
    held_paths: int = 0  # parent paths per search the PRM keeps between steps
    verifier_call_tokens: float = 0.0
    gen_time_s: float = math.inf
    prm_time_s: float = math.inf
    # over the working-set range (WORKING_SET_RANGE); the choice minimises it
    worst_step_time_s: float = math.inf

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.gen_time_s + self.prm_time_s)

    @property
    def step_time_s(self) -> float:
        return self.gen_time_s + self.prm_time_s

    def to_dict(self, workload: Workload) -> dict:
        if not self.feasible:  # infinite times are not JSON
            return {
                "generator_share": self.generator_share,
                "generator_kv_tokens": self.generator_kv_tokens,
                "verifier_kv_tokens": self.verifier_kv_tokens,
                "feasible": False,
            }
        d = asdict(self) | {
            "feasible": True,
            "step_time_s": self.step_time_s,
            "goodput_tok_s": workload.sequences * workload.step_tokens / self.step_time_s,
        }
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


@dataclass(frozen=True)
class SplitPlan:
    rows: tuple[Prediction, ...]
    best: Prediction
    even: Prediction

    @property
    def speedup_vs_even(self) -> float | None:
        """Predicted goodput of the chosen split over the even one (None: the even split cannot
        run)."""
        return self.even.step_time_s / self.best.step_time_s if self.even.feasible else None


def _gen_time(tokens: int, decode: Curve, w: Workload) -> tuple[int, float]:
    need = w.generator_peak_tokens
    prompts = w.requests * w.prompt_tokens
    if tokens < w.generator_path_tokens(w.steps - 1):
        return 0, math.inf
    n = (
        w.sequences
        if tokens >= need
        else max(1, int(w.sequences * (tokens - prompts) / max(1, need - prompts)))
    )
    n = min(n, w.sequences)
    waves = math.ceil(w.sequences / n)
    return n, w.sequences * w.step_tokens / decode.at(w.sequences / waves)


def _prm_time(tokens: int, curve: Curve, w: Workload) -> tuple[int, float, float]:
    if tokens < w.verifier_path_tokens(w.steps - 1):
        return 0, 0.0, math.inf
    held = w.sequences * w.verify_tokens  # each step's new segments, the paths before them held
    if tokens >= w.verifier_peak_tokens:
        return w.parents, held / w.requests, held / curve.at(held / w.requests)
    # Short of its working set the PRM drops its least recently used paths and rebuilds them when
    # they are scored again: what it rebuilds grows with the shortfall, up to every path (of the
    # mean depth) every step.
    short = (w.verifier_peak_tokens - tokens) / w.verifier_peak_tokens
    total = held + short * (w.sequences * w.verifier_path_tokens(w.steps // 2) - held)
    per_call = min(float(tokens), total / w.requests)
    return 0, per_call, total / curve.at(per_call)


def predict(
    share: float, gen_tokens: int, ver_tokens: int, gen_curve: Curve, ver_curve: Curve, w: Workload
) -> Prediction:
    if min(gen_tokens, ver_tokens) < MIN_KV_TOKENS:
        return Prediction(share, gen_tokens, ver_tokens)
    if not w.measured:
        raise ValueError(
            "the split model needs the working sets a sample search measures (profiler/sample.py)"
        )
    n, gen_time = _gen_time(gen_tokens, gen_curve, w)
    held, per_call, prm_time = _prm_time(ver_tokens, ver_curve, w)
    return Prediction(share, gen_tokens, ver_tokens, n, held, per_call, gen_time, prm_time)


def budget_error(
    budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, w: Workload
) -> ConfigError:
    need = w.min_budget_bytes(gen_bytes_per_token, ver_bytes_per_token)
    return ConfigError(
        f"a KV budget of {format_size(budget_bytes)} fits no split: one path of {w.steps} steps "
        f"needs at least {format_size(need)} for the two models together (more for a split on the "
        "5% grid), whatever --beams; raise --kv-budget or lower --steps"
    )


def problem_budget_error(
    budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, w: Workload
) -> ConfigError:
    """The budget would hold one path of a typical problem: the --problem texts are too long for
    it."""
    need = w.min_budget_bytes(gen_bytes_per_token, ver_bytes_per_token)
    return ConfigError(
        f"the --problem texts make a prompt of {w.prompt_tokens} tokens ({w.head_tokens} for the "
        f"PRM): a path of it and {w.steps} steps needs at least {format_size(need)} for the two "
        f"models together, more than the KV budget of {format_size(budget_bytes)}; give a shorter "
        "--problem, one like those you solve, or raise --kv-budget"
    )


def _scaled(w: Workload, f: float) -> Workload:
    return replace(
        w,
        generator_peak_tokens=round(w.generator_peak_tokens * f),
        verifier_peak_tokens=round(w.verifier_peak_tokens * f),
    )


def plan_split(
    budget_bytes: int,
    gen_bytes_per_token: int,
    ver_bytes_per_token: int,
    gen_curve: Curve,
    ver_curve: Curve,
    w: Workload,
    shares: tuple[float, ...] = SHARES,
) -> SplitPlan:
    """Predict every split in `shares` (plus even) and pick the fastest; ConfigError when none can
    run."""
    rows = []
    for share in sorted(set(shares) | {EVEN}):
        gen_tokens = int(budget_bytes * share) // gen_bytes_per_token
        ver_tokens = (budget_bytes - gen_tokens * gen_bytes_per_token) // ver_bytes_per_token
        scaled = {
            f: predict(share, gen_tokens, ver_tokens, gen_curve, ver_curve, _scaled(w, f))
            for f in WORKING_SET_RANGE
        }
        rows.append(
            replace(scaled[1.0], worst_step_time_s=max(p.step_time_s for p in scaled.values()))
        )
    feasible = [r for r in rows if r.feasible and math.isfinite(r.worst_step_time_s)]
    if not feasible:
        raise budget_error(budget_bytes, gen_bytes_per_token, ver_bytes_per_token, w)
    fastest = min(r.worst_step_time_s for r in feasible)
    best = min(
        (r for r in feasible if r.worst_step_time_s <= fastest * (1 + TIE)),
        key=lambda r: (abs(r.generator_share - EVEN), r.worst_step_time_s),
    )
    even = next(r for r in rows if r.generator_share == EVEN)
    return SplitPlan(tuple(rows), best, even)
