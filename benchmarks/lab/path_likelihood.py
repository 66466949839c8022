"""Does a model's likelihood of a path's tokens tell a problem's right paths from its wrong ones,
beside the head?

Issue 12's head reads the 1.5B's state at the end of each step; it never sees how surprised a model
was by the tokens inside the step ("18 x 2 = 36" where the problem asks for 18). This measures that
signal on the 0.5B's sampled paths of the validation problems the shipped head did not train on
(train.py's split_by_problem, seed 0, over the problems in the order its features were merged:
`validation_rows`), for any GGUF: the 1.5B (a stronger reader) or the 0.5B itself (its own
confidence, free while it samples).

  score: per path, the log-probability of every step token (after the generator's solve prompt,
         the steps verbatim: the head's input) and, with --head, the head's score at each step
         end, read from the same logits (the head's features are logits of a fixed token set).
         JSONL, appended; problems done are skipped.
  table: per signal, the within-problem AUC of path correctness (pairs of one right and one wrong
         path of one problem) and how often the best-scored path is right, on the problems with
         both; and, over every scored problem, best-of-n's weighted vote (the engine's rule) with
         each way of adding up the head's step scores (bench --agg last/min/mean), beside the
         majority vote and a right answer among the paths; JSON and tables.

  python3 -m benchmarks.lab.path_likelihood score --model qwen2.5-coder-1.5b --head H.safetensors \\
      --out q15.jsonl
  python3 -m benchmarks.lab.path_likelihood table q15.jsonl [q05.jsonl] --out table.json
(from the repository root, as a module: this checkout's edgereason)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split

import numpy as np

from edgereason.engine.result import FinalPath, vote
from edgereason.heads.value_head import load_head
from edgereason.prompts import SYSTEM_PROMPT
from edgereason.search.grading import answers_match
from edgereason.training.metrics import within_auc
from edgereason.training.rows import split_by_problem
from edgereason.tree import aggregate
from edgereason.util.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
# Not tracked: benchmarks/results/head-qwen2.5-coder-0.5b/README.md says how to regenerate it.
ROLLOUTS = REPO / "benchmarks/results/head-qwen2.5-coder-0.5b/rollouts-qwen2.5-coder-0.5b.jsonl.gz"


def validation_rows(n_rows: int, shards: int, fraction: float = 0.15, seed: int = 0) -> list[int]:
    """The rollout lines of a head's validation problems. The heads' features came from `shards`
    shards of the rollout file (`split -n r/SHARDS`: line i to shard i % SHARDS), merged shard after
    shard (features.merge), and train.py's split_by_problem drew its problems in that merged order,
    not the file's."""
    merged = [i for shard in range(shards) for i in range(shard, n_rows, shards)]
    return sorted(
        merged[j] for j in np.flatnonzero(split_by_problem(np.arange(n_rows), fraction, seed))
    )


def prompt_text(problem: str) -> str:
    """Qwen2.5's chat template around the solve prompt (both models of this study share it)."""
    return (
        f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{problem.strip()}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def score(args: argparse.Namespace) -> None:
    from llama_cpp import Llama

    head = load_head(Path(args.head)) if args.head else None
    llm = Llama(
        model_path=str(models.resolve(args.model)),
        n_ctx=args.ctx,
        logits_all=True,
        n_batch=512,
        n_gpu_layers=args.gpu_layers,
        n_threads=args.threads,
        verbose=False,
    )
    rows = list(read_jsonl(Path(args.rollouts)))
    out = Path(args.out)
    done = (
        {json.loads(line)["row"] for line in out.open(encoding="utf-8")} if out.exists() else set()
    )
    todo = [i for i in validation_rows(len(rows), args.shards) if i not in done][: args.limit]
    t0 = time.time()
    with out.open("a", encoding="utf-8") as f:
        for n, i in enumerate(todo):
            for line in _score_problem(llm, head, i, rows[i]):
                f.write(json.dumps(line) + "\n")
            f.flush()
            print(
                f"{n + 1}/{len(todo)} problems, {time.time() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def _score_problem(llm, head, i: int, row: dict) -> list[dict]:
    """One line per path with steps. The prompt is evaluated once; each path re-reads from its
    end."""
    ptoks = llm.tokenize(prompt_text(row["problem"]).encode(), add_bos=False, special=True)
    n0, lines = len(ptoks), []
    llm.reset()
    llm.eval(ptoks)
    for pi, path in enumerate(row["paths"]):
        steps = [llm.tokenize(s.encode(), add_bos=False, special=False) for s in path["steps"]]
        toks = ptoks + [t for s in steps for t in s]
        if not path["steps"] or len(toks) > llm.n_ctx():
            continue
        llm._ctx.kv_cache_seq_rm(-1, n0, -1)  # back to the prompt's end
        llm.n_tokens = n0
        llm.eval(toks[n0:])
        # logits [len(toks) - n0 + 1, n_vocab]: row j is read after token n0 - 1 + j and predicts
        # token n0 + j
        logits = np.asarray(llm.scores[n0 - 1 : len(toks)], dtype=np.float32)
        m = logits[:-1].max(axis=1, keepdims=True)
        lse = np.log(np.exp(logits[:-1] - m).sum(axis=1)) + m[:, 0]
        lp = logits[np.arange(len(toks) - n0), toks[n0:]] - lse
        per_step, heads, at = [], [], 0
        for s in steps:
            per_step.append([round(float(v), 4) for v in lp[at : at + len(s)]])
            at += len(s)
            if head is not None:  # the row read after the step's last token
                heads.append(round(float(head.score_features(logits[at][head.tokens])), 5))
        lines.append(
            {
                "row": i,
                "id": row["id"],
                "path": pi,
                "correct": bool(path["correct"]),
                "answer": path.get("answer"),
                "token_logprobs": per_step,
                **({"head": heads} if heads else {}),
            }
        )
    return lines


def signals(line: dict) -> dict[str, float]:
    """Path-level scores, each higher = more likely right."""
    lp = np.concatenate([np.asarray(s, dtype=np.float64) for s in line["token_logprobs"]])
    out = {
        "logprob mean": lp.mean(),
        "logprob 10th percentile": np.quantile(lp, 0.1),
        "logprob min": lp.min(),
        "tokens below -3 (fraction, negated)": -float(np.mean(lp < -3)),
        "worst step's mean logprob": min(float(np.mean(s)) for s in line["token_logprobs"] if s),
    }
    if "head" in line:
        h = np.clip(np.asarray(line["head"]), 1e-6, 1 - 1e-6)
        out.update(
            {
                "head, last step": h[-1],
                "head, min over steps": h.min(),
                "head, mean over steps": h.mean(),
            }
        )
    return out


def table(args: argparse.Namespace) -> None:
    result = {}
    for name in args.files:
        paths = [json.loads(line) for line in open(name, encoding="utf-8")]
        by_row: dict[int, list[dict]] = defaultdict(list)
        for p in paths:
            by_row[p["row"]].append(p)
        mixed = [g for g in by_row.values() if 0 < sum(p["correct"] for p in g) < len(g)]
        rows = [(gi, p, signals(p)) for gi, g in enumerate(mixed) for p in g]
        cols = {k: np.asarray([s[k] for _, _, s in rows]) for k in rows[0][2]} if rows else {}
        group = np.asarray([gi for gi, _, _ in rows])
        right = np.asarray([float(p["correct"]) for _, p, _ in rows])
        if "head, last step" in cols:  # parameter-free blends: z-scores within the problem, summed
            logit = np.log(cols["head, last step"] / (1 - cols["head, last step"]))
            for k in ("logprob mean", "logprob 10th percentile"):
                cols[f"head, last step + {k} (z within problem)"] = _z(logit, group) + _z(
                    cols[k], group
                )
        rep = {
            "problems": len(by_row),
            "mixed problems": len(mixed),
            "paths": len(rows),
            "signals": {},
        }
        for k, v in cols.items():
            best = [
                max(np.flatnonzero(group == gi), key=lambda j: v[j]) for gi in range(len(mixed))
            ]
            rep["signals"][k] = {
                "within_problem_auc": round(within_auc(v, right, group), 4),
                "best_scored_right": round(float(right[best].mean()), 4),
            }
        result[Path(name).name] = rep
        print(
            f"\n{name}: {rep['mixed problems']} problems with right and wrong paths "
            f"({rep['paths']} paths)"
        )
        print("| signal | within-problem AUC | best-scored path right |\n|---|---|---|")
        for k, r in rep["signals"].items():
            print(f"| {k} | {r['within_problem_auc']:.3f} | {r['best_scored_right']:.3f} |")
        if all("head" in p for p in paths):
            rep["votes"] = votes(by_row)
            print(f"\nbest-of-n over all {len(by_row)} problems: answer right under each vote")
            print("| vote | accuracy |\n|---|---|")
            for k, v in rep["votes"].items():
                print(f"| {k} | {v:.3f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


AGGREGATIONS = ("last", "min", "mean")  # bench --agg


def votes(by_row: dict[int, list[dict]]) -> dict[str, float]:
    """Fraction of problems whose vote over their paths is right, per rule: the paths as best-of-n's
    finals."""
    right: dict[str, int] = defaultdict(int)
    for group in by_row.values():
        for name in AGGREGATIONS:
            finals = sorted(
                (
                    FinalPath([], aggregate(p["head"], name), p["answer"], i)
                    for i, p in enumerate(group)
                ),
                key=lambda f: -f.score,
            )
            right[f"weighted, --agg {name}"] += _right(vote(finals, by_score=True), group)
        right["majority"] += _right(
            vote([FinalPath([], 1.0, p["answer"], i) for i, p in enumerate(group)], by_score=False),
            group,
        )
        right["right answer among the paths"] += any(p["correct"] for p in group)
    return {k: round(v / len(by_row), 4) for k, v in right.items()}


def _right(answer: str | None, group: list[dict]) -> bool:
    """A voted answer is right when it matches the answer of a right path (the rollouts graded every
    path)."""
    return answer is not None and any(
        p["correct"] and answers_match(answer, p["answer"]) for p in group
    )


def _z(v: np.ndarray, group: np.ndarray) -> np.ndarray:
    out = np.zeros_like(v, dtype=np.float64)
    for g in np.unique(group):
        idx = group == g
        sd = v[idx].std()
        out[idx] = (v[idx] - v[idx].mean()) / sd if sd > 0 else 0.0
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("--model", required=True, help="registry name or .gguf")
    s.add_argument(
        "--head", help="value head (.safetensors) on this model, scored from the same logits"
    )
    s.add_argument("--rollouts", default=str(ROLLOUTS))
    s.add_argument(
        "--shards",
        type=int,
        default=8,
        help="shards the head's features were made from (its results README: 8 for the heads on "
        "the 0.5B's rollouts, 16 for the 1.5B's own)",
    )
    s.add_argument("--out", required=True)
    s.add_argument(
        "--limit", type=int, default=None, help="validation problems to score (default all)"
    )
    s.add_argument("--gpu-layers", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--ctx", type=int, default=4096)
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    t.add_argument("--out")
    args = ap.parse_args(argv)
    score(args) if args.cmd == "score" else table(args)


if __name__ == "__main__":
    main()
