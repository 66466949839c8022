"""Choosing how one KV budget is split between the generator and the PRM (design.md section 4, asymmetric split).

Workload model: R concurrent beam searches (N beams, width M, so k = N / M kept parents each) of D steps of S
tokens after a prompt of P tokens (the PRM's question head: H tokens). Each step d = 0 .. D-1 is modelled as below
and the step times are averaged, since a budget that holds the first steps may not hold the last. Forks share KV,
so a search's working set is its prompt, the k parents' paths and the N new steps:
- generator: P + k*d*S + N*S tokens per search;
- PRM: H + k held parent paths of d*s + the N new segments of s = S + o (o: the turn markup around a step); the
  new segments stay held until the selection that picks the next parents.

Generator with G KV tokens: with the prompts and parents resident, n = (G - R*(P + k*d*S)) // S of the R*N
sequences run at once, in w = ceil(R*N / n) waves: gen_time = R*N*S / gen_tps(R*N / w). Parents that do not fit are
evicted and rebuilt for the children that need them, at the best measured decode throughput (prefill is no
slower).

PRM with V KV tokens: it keeps h <= k parents per search held and rebuilds the paths of the other parents'
children from scratch, so one step prefills T = R*N*(h/k)*s + R*N*(1 - h/k)*L_v tokens, L_v = H + (d + 1)*s, one
call per search; it needs R*(H + h*d*s) + T <= V, and the largest h that fits is taken. When not even h = 0 fits,
the verifier thrashes: every path is rebuilt in calls of at most V tokens, and what it holds is dropped again
(infeasible when one path does not fit).

Measured working sets W (the most KV cells each model used in a sample search of this shape, its R searches
run at once, see memory/sample.py) replace the per-depth formulas above. A generator short of W runs its sequences
in waves, n = R*N * (G - R*P) / (W - R*P); a PRM short of W thrashes, rebuilding every path of the mean depth D/2.

Predicted step time = mean over d of gen_time + prm_time (the baseline engine runs them one after the other) and
goodput is R*N*S / step time. Curves are interpolated linearly (np.interp) and clamped outside their measured range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from edgereason.errors import ConfigError
from edgereason.memory.measure import Curve
from edgereason.memory.size import format_size

MIN_KV_TOKENS = 256  # the smallest KV cache a session accepts per model
SHARES = tuple(round(0.05 * i, 2) for i in range(1, 20))  # generator share of the budget: 5%, 10%, ..., 95%
EVEN = 0.5
TIE = 0.01  # splits predicted within 1% of the best are equal; the one nearest even wins (least surprising)
# A sample search measures one problem; working sets vary from problem to problem (two word problems gave PRM
# peaks of 828 and 1,206 tokens). A PRM short of its working set thrashes while a short generator only runs in
# waves, so a split next to the PRM's cliff is fragile: the choice minimises the worst step time over this range.
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
    generator_peak_tokens: int = 0  # measured KV of the R searches at once (0: the per-depth formulas)
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

    def generator_shared_tokens(self, depth: int) -> int:
        """Prompts and kept parents' paths of every search: what the new steps fork from."""
        return self.requests * (self.prompt_tokens + self.parents * depth * self.step_tokens)

    @property
    def verify_tokens(self) -> int:
        return self.step_tokens + self.verify_overhead

    def verifier_path_tokens(self, depth: int) -> int:
        return self.head_tokens + (depth + 1) * self.verify_tokens

    def min_budget_bytes(self, gen_bytes_per_token: int, ver_bytes_per_token: int) -> int:
        """One generator path and one PRM path of the last step (rebuilt every call): less runs nothing."""
        last = self.steps - 1
        return (max(self.generator_path_tokens(last), MIN_KV_TOKENS) * gen_bytes_per_token
                + max(self.verifier_path_tokens(last), MIN_KV_TOKENS) * ver_bytes_per_token)


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
    worst_step_time_s: float = math.inf  # over the working-set range (WORKING_SET_RANGE); the choice minimises it

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.gen_time_s + self.prm_time_s)

    @property
    def step_time_s(self) -> float:
        return self.gen_time_s + self.prm_time_s

    def to_dict(self, workload: Workload) -> dict:
        if not self.feasible:  # infinite times are not JSON
            return {"generator_share": self.generator_share, "generator_kv_tokens": self.generator_kv_tokens,
                    "verifier_kv_tokens": self.verifier_kv_tokens, "feasible": False}
        d = asdict(self) | {"feasible": True, "step_time_s": self.step_time_s,
                            "goodput_tok_s": workload.sequences * workload.step_tokens / self.step_time_s}
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


@dataclass(frozen=True)
class SplitPlan:
    rows: tuple[Prediction, ...]
    best: Prediction
    even: Prediction

    @property
    def speedup_vs_even(self) -> float | None:
        """Predicted goodput of the chosen split over the even one (None: the even split cannot run)."""
        return self.even.step_time_s / self.best.step_time_s if self.even.feasible else None


def _gen_time(tokens: int, decode: Curve, w: Workload, depth: int) -> tuple[int, float]:
    if tokens < w.generator_path_tokens(depth):
        return 0, math.inf
    shared = w.generator_shared_tokens(depth)
    rebuild = 0.0
    if tokens - shared < w.step_tokens:  # not every parent fits: children rebuild theirs, one wave at a time
        shared = w.prompt_tokens + depth * w.step_tokens
        rebuild = w.sequences * depth * w.step_tokens / max(tps for _, tps in decode.points)
    n = min(w.sequences, (tokens - shared) // w.step_tokens)
    waves = math.ceil(w.sequences / n)
    return n, w.sequences * w.step_tokens / decode.at(w.sequences / waves) + rebuild


def _prm_time(tokens: int, curve: Curve, w: Workload, depth: int) -> tuple[int, float, float]:
    k, n, step, path = w.parents, w.sequences, w.verify_tokens, w.verifier_path_tokens(depth)
    for held in range(k, -1, -1):
        resident = w.requests * (w.head_tokens + held * depth * step) if held else 0
        total = n * (held / k) * step + n * (1 - held / k) * path
        if resident + total <= tokens:
            per_call = total / w.requests
            return held, per_call, total / curve.at(per_call)
    if tokens < path:
        return 0, 0.0, math.inf
    total = n * path  # thrash: every path rebuilt, calls as large as the share
    per_call = min(float(tokens), total)
    return 0, per_call, total / curve.at(per_call)


def _gen_time_measured(tokens: int, decode: Curve, w: Workload) -> tuple[int, float]:
    need = w.generator_peak_tokens
    prompts = w.requests * w.prompt_tokens
    if tokens < w.generator_path_tokens(w.steps - 1):
        return 0, math.inf
    n = w.sequences if tokens >= need else max(1, int(w.sequences * (tokens - prompts) / max(1, need - prompts)))
    n = min(n, w.sequences)
    waves = math.ceil(w.sequences / n)
    return n, w.sequences * w.step_tokens / decode.at(w.sequences / waves)


def _prm_time_measured(tokens: int, curve: Curve, w: Workload) -> tuple[int, float, float]:
    if tokens < w.verifier_path_tokens(w.steps - 1):
        return 0, 0.0, math.inf
    if tokens >= w.verifier_peak_tokens:
        total = w.sequences * w.verify_tokens
        return w.parents, total / w.requests, total / curve.at(total / w.requests)
    total = w.sequences * w.verifier_path_tokens(w.steps // 2)  # thrash: every path rebuilt
    per_call = min(float(tokens), total)
    return 0, per_call, total / curve.at(per_call)


def predict(share: float, gen_tokens: int, ver_tokens: int, gen_curve: Curve, ver_curve: Curve,
            w: Workload) -> Prediction:
    if min(gen_tokens, ver_tokens) < MIN_KV_TOKENS:
        return Prediction(share, gen_tokens, ver_tokens)
    if w.measured:
        n, gen_time = _gen_time_measured(gen_tokens, gen_curve, w)
        held, per_call, prm_time = _prm_time_measured(ver_tokens, ver_curve, w)
        return Prediction(share, gen_tokens, ver_tokens, n, held, per_call, gen_time, prm_time)
    gen = [_gen_time(gen_tokens, gen_curve, w, d) for d in range(w.steps)]
    prm = [_prm_time(ver_tokens, ver_curve, w, d) for d in range(w.steps)]
    n, held, per_call = gen[-1][0], prm[-1][0], prm[-1][1]  # at the last, tightest step
    return Prediction(share, gen_tokens, ver_tokens, n, held, per_call,
                      sum(t for _, t in gen) / w.steps, sum(t for *_, t in prm) / w.steps)


def budget_error(budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, w: Workload) -> ConfigError:
    need = w.min_budget_bytes(gen_bytes_per_token, ver_bytes_per_token)
    return ConfigError(f"a KV budget of {format_size(budget_bytes)} fits no split for {w.beams} beams; the two "
                       f"models need at least {format_size(need)} together (more for a split on the 5% grid): "
                       "raise --budget or lower --beams")


def _scaled(w: Workload, f: float) -> Workload:
    return replace(w, generator_peak_tokens=round(w.generator_peak_tokens * f),
                   verifier_peak_tokens=round(w.verifier_peak_tokens * f))


def plan_split(budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, gen_curve: Curve,
               ver_curve: Curve, w: Workload, shares: tuple[float, ...] = SHARES) -> SplitPlan:
    """Predict every split in `shares` (plus even) and pick the fastest; ConfigError when none can run."""
    rows = []
    for share in sorted(set(shares) | {EVEN}):
        gen_tokens = int(budget_bytes * share) // gen_bytes_per_token
        ver_tokens = (budget_bytes - gen_tokens * gen_bytes_per_token) // ver_bytes_per_token
        row = predict(share, gen_tokens, ver_tokens, gen_curve, ver_curve, w)
        scaled = [predict(share, gen_tokens, ver_tokens, gen_curve, ver_curve, _scaled(w, f))
                  for f in (WORKING_SET_RANGE if w.measured else (1.0,))]
        rows.append(replace(row, worst_step_time_s=max(p.step_time_s for p in scaled)))
    feasible = [r for r in rows if r.feasible and math.isfinite(r.worst_step_time_s)]
    if not feasible:
        raise budget_error(budget_bytes, gen_bytes_per_token, ver_bytes_per_token, w)
    fastest = min(r.worst_step_time_s for r in feasible)
    best = min((r for r in feasible if r.worst_step_time_s <= fastest * (1 + TIE)),
               key=lambda r: (abs(r.generator_share - EVEN), r.worst_step_time_s))
    even = next(r for r in rows if r.generator_share == EVEN)
    return SplitPlan(tuple(rows), best, even)
