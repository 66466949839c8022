"""vLLM's own batched best-of-N, as search-and-learn runs it (issue 66, side (c)): `LLM.generate`
with n samples a problem on the engine's prompt, each sample cut into steps at blank lines and
scored by the same value head EdgeReason's recipe uses (on llama.cpp here, beside vLLM on the card),
then the weighted vote. One problem at a time, then all at once.

    python benchmarks/vllm_generate.py --hf /root/hf/q15 --model qwen2.5-coder-1.5b \
        --dataset gsm8k_test.jsonl --limit 16 --n 8

Needs vLLM (a GPU machine; not a dependency of the project). One JSON object on stdout: for each
mode, the seconds of generation a problem, generated tokens a second, the head's seconds, and the
accuracy of the head-weighted vote and of the plain majority."""

from __future__ import annotations

import argparse
import json
import time

from edgereason import models
from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.engine.result import FinalPath, vote
from edgereason.prompts import solve_messages
from edgereason.protocols import ScoreRequest
from edgereason.search.dataset import load_problems
from edgereason.search.grading import answers_match
from edgereason.session.prm_choice import choose_prm
from edgereason.util.braces import extract_boxed


def voted(answers: list[str | None], weights: list[float], by_score: bool = True) -> str | None:
    """The search's vote (engine/result.py) over the samples, ranked best first as the search
    ranks its paths."""
    paths = [FinalPath([], w, a, j) for j, (a, w) in enumerate(zip(answers, weights))]
    return vote(sorted(paths, key=lambda p: -p.score), by_score)


def score(verifier, question: str, texts: list[str], key: str) -> list[float]:
    """Each sample's last step's score (the recipe's aggregation: last)."""
    reqs = []
    for j, text in enumerate(texts):
        steps = [s for s in text.split("\n\n") if s.strip()] or [text]
        reqs.append(ScoreRequest(f"{key}/{j}", question, steps, [len(steps) - 1]))
    out = [r.scores[-1] for r in verifier.score(reqs)]
    verifier.release(f"{key}/")
    return out


def run(llm, sampling, verifier, problems, prompts, at_once: bool) -> dict:
    t0, outs = time.perf_counter(), []
    batches = [list(range(len(prompts)))] if at_once else [[i] for i in range(len(prompts))]
    for batch in batches:
        outs += llm.generate([prompts[i] for i in batch], sampling, use_tqdm=False)
    gen_s = time.perf_counter() - t0
    tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
    t1, right, right_majority = time.perf_counter(), 0, 0
    for i, (problem, out) in enumerate(zip(problems, outs)):
        texts = [c.text for c in out.outputs]
        answers = [extract_boxed(t) for t in texts]
        weights = score(verifier, problem.problem, texts, f"p{i}")
        right += answers_match(voted(answers, weights), problem.answer)
        right_majority += answers_match(voted(answers, weights, by_score=False), problem.answer)
    n = len(problems)
    return {
        "problems": n,
        "generate_s_a_problem": round(gen_s / n, 3),
        "generated_tok_s": round(tokens / gen_s, 1),
        "tokens": tokens,
        "head_s_a_problem": round((time.perf_counter() - t1) / n, 3),
        "accuracy_head_vote": round(right / n, 4),
        "accuracy_majority": round(right_majority / n, 4),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf", required=True, help="the Hugging Face folder vLLM serves")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="its GGUF: the head's backbone")
    p.add_argument("--dataset", required=True)
    p.add_argument("--limit", type=int, default=16)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--gpu-share", type=float, default=0.3, help="vLLM's --gpu-memory-utilization")
    args = p.parse_args()
    from vllm import LLM, SamplingParams  # the GPU machine's; imported once the flags are read

    problems = load_problems(args.dataset, limit=args.limit)
    choice = choose_prm(args.model, None, "head", None)
    backbone = models.resolve(args.model)
    verifier = load_backend("llamacpp").open_verifier(
        PRMSpec(backbone, "head", choice.head), 32768, Placement(n_gpu_layers=999)
    )
    llm = LLM(
        model=args.hf,
        gpu_memory_utilization=args.gpu_share,
        max_model_len=8192,
        enable_prefix_caching=True,
        seed=1,
    )
    tok = llm.get_tokenizer()
    template = tok.apply_chat_template
    prompts = [
        template(solve_messages(q.problem), tokenize=False, add_generation_prompt=True)
        for q in problems
    ]
    sampling = SamplingParams(n=args.n, temperature=args.temperature, max_tokens=args.max_tokens)
    llm.generate(prompts[:1], sampling, use_tqdm=False)  # warm-up: graphs and caches
    report = {
        "vllm_generate": {"n": args.n, "temperature": args.temperature, "verifier": "value head"},
        "one_at_a_time": run(llm, sampling, verifier, problems, prompts, at_once=False),
        "at_once": run(llm, sampling, verifier, problems, prompts, at_once=True),
    }
    verifier.close()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
