"""Choosing how one KV budget is split between the generator and the PRM (design.md section 4, asymmetric split).

Workload model: R concurrent beam searches (N beams, width M, so k = N / M kept parents each) of D steps of S
tokens after a prompt of P tokens. Each step d = 0 .. D-1 is modelled as below and the step times are averaged,
since a budget that holds the first steps may not hold the last. Forks share KV, so a search's working set is its prompt, the k
parents' paths and the N new steps:
- generator: P + k*d*S + N*S tokens per search;
- PRM: the question's head (P) + k held parent paths of d*(S + o) + the N new segments of S + o, where o is the
  turn markup around a step.

Generator with G KV tokens: with the prompts and parents resident, n = (G - R*(P + k*d*S)) // S of the R*N
sequences run at once, in w = ceil(R*N / n) waves: gen_time = R*N*S / gen_tps(R*N / w). Parents that do not fit are
evicted and rebuilt (recomputed at the generator's prefill speed) for the children that need them.

PRM with V KV tokens: it keeps h <= k parents per search held and rebuilds the paths of the other parents'
children from scratch (what the llama.cpp verifier does when memory is short), so one step prefills
T = R*N*(h/k)*(S + o) + R*N*(1 - h/k)*L_v tokens, L_v = P + (d + 1)*(S + o), in calls of at most
b = V - R*(P + h*d*(S + o)) tokens (a call must fit one whole request). c = ceil(T / b) calls give
prm_time = T / prm_tps(T / c); the best h is taken.

Predicted step time = mean over d of gen_time + prm_time (the baseline engine runs them one after the other) and
goodput is R*N*S / step time. Curves are interpolated linearly (np.interp) and clamped outside their measured range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from edgereason.errors import ConfigError
from edgereason.memory.measure import Curve
from edgereason.memory.size import format_size

MIN_KV_TOKENS = 256  # the smallest KV cache a session accepts per model
SHARES = tuple(round(0.05 * i, 2) for i in range(1, 20))  # generator share of the budget: 5%, 10%, ..., 95%
EVEN = 0.5
TIE = 0.01  # splits predicted within 1% of the best are equal; the one nearest even wins (least surprising)


@dataclass(frozen=True)
class Workload:
    beams: int = 4
    width: int = 4
    requests: int = 1  # searches running at once
    step_tokens: int = 64
    prompt_tokens: int = 200
    steps: int = 4  # steps of a search
    verify_overhead: int = 12  # PRM turn markup around one step

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
        return self.prompt_tokens + (depth + 1) * self.verify_tokens

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


def _gen_time(tokens: int, decode: Curve, prefill: Curve, w: Workload, depth: int) -> tuple[int, float]:
    if tokens < w.generator_path_tokens(depth):
        return 0, math.inf
    shared = w.generator_shared_tokens(depth)
    rebuild = 0.0
    if tokens - shared < w.step_tokens:  # not every parent fits: children rebuild theirs, one wave at a time
        shared = w.prompt_tokens + depth * w.step_tokens
        rebuild = w.sequences * depth * w.step_tokens / prefill.at(depth * w.step_tokens)
    n = min(w.sequences, (tokens - shared) // w.step_tokens)
    waves = math.ceil(w.sequences / n)
    return n, w.sequences * w.step_tokens / decode.at(w.sequences / waves) + rebuild


def _prm_time(tokens: int, curve: Curve, w: Workload, depth: int) -> tuple[int, float, float]:
    best = (0, 0.0, math.inf)
    k, n, step, path = w.parents, w.sequences, w.verify_tokens, w.verifier_path_tokens(depth)
    for held in range(k + 1):
        resident = w.requests * (w.prompt_tokens + held * depth * step) if held else 0
        room = tokens - resident
        if room < (step if held == k else path):
            continue
        total = n * (held / k) * step + n * (1 - held / k) * path
        per_call = total / math.ceil(total / room)
        t = total / curve.at(per_call)
        if t < best[2]:
            best = (held, per_call, t)
    return best


def predict(share: float, gen_tokens: int, ver_tokens: int, gen_curve: Curve, ver_curve: Curve,
            w: Workload, gen_prefill: Curve | None = None) -> Prediction:
    if min(gen_tokens, ver_tokens) < MIN_KV_TOKENS:
        return Prediction(share, gen_tokens, ver_tokens)
    gen = [_gen_time(gen_tokens, gen_curve, gen_prefill or gen_curve, w, d) for d in range(w.steps)]
    prm = [_prm_time(ver_tokens, ver_curve, w, d) for d in range(w.steps)]
    n, held, per_call = gen[-1][0], prm[-1][0], prm[-1][1]  # at the last, tightest step
    return Prediction(share, gen_tokens, ver_tokens, n, held, per_call,
                      sum(t for _, t in gen) / w.steps, sum(t for *_, t in prm) / w.steps)


def budget_error(budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, w: Workload) -> ConfigError:
    need = w.min_budget_bytes(gen_bytes_per_token, ver_bytes_per_token)
    return ConfigError(f"a KV budget of {format_size(budget_bytes)} fits no split for {w.beams} beams; the two "
                       f"models need at least {format_size(need)} together (more for a split on the 5% grid): "
                       "raise --budget or lower --beams")


def plan_split(budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, gen_curve: Curve,
               ver_curve: Curve, w: Workload, shares: tuple[float, ...] = SHARES,
               gen_prefill: Curve | None = None) -> SplitPlan:
    """Predict every split in `shares` (plus even) and pick the fastest; ConfigError when none can run."""
    rows = []
    for share in sorted(set(shares) | {EVEN}):
        gen_tokens = int(budget_bytes * share) // gen_bytes_per_token
        ver_tokens = (budget_bytes - gen_tokens * gen_bytes_per_token) // ver_bytes_per_token
        rows.append(predict(share, gen_tokens, ver_tokens, gen_curve, ver_curve, w, gen_prefill))
    feasible = [r for r in rows if r.feasible]
    if not feasible:
        raise budget_error(budget_bytes, gen_bytes_per_token, ver_bytes_per_token, w)
    fastest = min(r.step_time_s for r in feasible)
    best = min((r for r in feasible if r.step_time_s <= fastest * (1 + TIE)),
               key=lambda r: (abs(r.generator_share - EVEN), r.step_time_s))
    even = next(r for r in rows if r.generator_share == EVEN)
    return SplitPlan(tuple(rows), best, even)
