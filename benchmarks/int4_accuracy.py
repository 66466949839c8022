"""What the torch backend's int4 weights (--torch-weights int4) cost in accuracy against its bf16
ones (float32 on the CPU), on the first GSM8K problems; one JSON object on stdout.

    python benchmarks/int4_accuracy.py --model qwen2.5-coder-1.5b --problems 3 --max-tokens 200

On CUDA (where torch sees it) bf16 against int4 as the card runs them, llama.cpp with every layer on
the GPU where its build offloads; on the CPU float32 against int4 (computed in bf16).

The text both read is llama.cpp's greedy answer to each problem (the same GGUF; generating it on
torch's CPU path is far slower), graded against the gold answer. Each torch decoder reads the
prompt and that answer in one pass (teacher-forced), one decoder in memory at a time (the 1.5B in
float32 is 7 GB). `top1_match`: the share of the answer's tokens where int4's most likely next token
is bf16's; `first_difference`: the first such token where they differ (None: never, so on this
path their greedy texts, and answers, are the same as far as it goes); `greedy_path`: the share
where each one's top token is the answer's own next token; `max_logit_diff`: the largest
difference of their logits."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models


def llama_answers(path, prompts: list[str], max_tokens: int, gpu: bool) -> list[str]:
    """llama.cpp's greedy continuation of each prompt."""
    from llama_cpp import Llama

    llm = Llama(str(path), n_ctx=2048, n_gpu_layers=-1 if gpu else 0, verbose=False)
    out = [
        llm.create_completion(p, max_tokens=max_tokens, temperature=0.0)["choices"][0]["text"]
        for p in prompts
    ]
    llm.close()
    print(f"llama.cpp: {sum(len(a) for a in out)} characters of answers", file=sys.stderr)
    return out


def forced_logits(path, kind: str, texts: list[tuple[list[int], list[int]]], device: str) -> list:
    """For each (prompt, answer) the logits [len(answer), n_vocab] before each answer token, with
    `kind` weights, in one prefill."""
    import torch

    from edgereason.backends.context_roles import DecodeItem
    from edgereason.backends.torch.model import TorchModel, load_decoder
    from edgereason.backends.torch.runtime import TorchContext

    t0 = time.perf_counter()
    model = TorchModel(path, torch.device(device), kind)
    print(f"{kind}: loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    out = []
    for prompt, answer in texts:
        ctx = TorchContext(model, len(prompt) + len(answer) + 8, graphs=False)
        at = [(len(prompt) - 1 + i, i) for i in range(len(answer))]
        _, logits = ctx.forward([DecodeItem(ctx.new_seq(), prompt + answer[:-1], at)])
        out.append(logits.float().cpu())
    print(f"{kind}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    del model
    load_decoder.cache_clear()
    return out


def compare(answer: list[int], bf16, int4) -> dict:
    import torch

    a, b = bf16.argmax(-1), int4.argmax(-1)
    differ = (a != b).nonzero()
    want = torch.tensor(answer)
    return {
        "tokens": len(answer),
        "top1_match": round(float((a == b).float().mean()), 4),
        "first_difference": int(differ[0]) if len(differ) else None,
        "greedy_path": {
            "bf16": round(float((a == want).float().mean()), 4),
            "int4": round(float((b == want).float().mean()), 4),
        },
        "max_logit_diff": round(float((bf16 - int4).abs().max()), 3),
    }


def main() -> None:
    from edgereason.backends.torch.weight_sources import open_tokenizer
    from edgereason.prompts import solve_messages
    from edgereason.search.grading import answers_match
    from edgereason.util.braces import extract_boxed

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="registry name or GGUF path")
    p.add_argument("--dataset", default="../shared/data/gsm8k_test.jsonl")
    p.add_argument("--problems", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=200)
    args = p.parse_args()
    path = models.resolve(args.model)
    with open(args.dataset) as f:
        rows = [json.loads(line) for _, line in zip(range(args.problems), f)]
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    vocab = open_tokenizer(path)
    prompts = [vocab.apply_chat_template(solve_messages(r["problem"])) for r in rows]
    answers = llama_answers(path, prompts, args.max_tokens, device == "cuda")
    texts = [
        (vocab.tokenize(p, add_bos=vocab.add_bos), vocab.tokenize(a, special=False))
        for p, a in zip(prompts, answers)
    ]
    os.environ.pop("EDGEREASON_TORCH_WEIGHTS", None)
    logits = {kind: forced_logits(path, kind, texts, device) for kind in ("bf16", "int4")}
    problems = []
    for i, (r, a, (_, answer)) in enumerate(zip(rows, answers, texts)):
        boxed = extract_boxed(a)
        problems.append(
            {"id": r["id"], "gold": r["answer"], "answer": boxed}
            | {"correct": answers_match(boxed, r["answer"])}
            | compare(answer, logits["bf16"][i], logits["int4"][i])
        )
    tokens = sum(p["tokens"] for p in problems)
    summary = {
        "model": path.name,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "tokens": tokens,
        "top1_match": round(sum(p["top1_match"] * p["tokens"] for p in problems) / tokens, 4),
    }
    json.dump(summary | {"problems": problems}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
