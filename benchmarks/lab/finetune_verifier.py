"""Would a verifier fine-tuned on the rollouts choose among a generator's paths better than the
shipped value head?

Issue 12's 1.5B target (80% with beam N=8) needs a better verifier than its head: a small MLP on a
frozen backbone's logits, within-problem step AUC 0.756 on its validation problems. This fine-tunes
the backbone itself: LoRA of rank r on attention's four projections (--targets all: the MLP's three
as well) plus a linear readout of the final hidden state (after the final norm, the state every head
reads), trained on the head's labels (every step of a right path is good, of a wrong one bad) and on
the head's training problems only. Both are then read on the head's validation problems
(path_likelihood.validation_rows), in torch from the same GGUF (the hf: backend's loader, which
dequantizes it):

  - per reader (the shipped head; the fine-tuned verifier after each epoch): step AUC,
    within-problem step AUC (the candidates one selection compares), within-problem AUC of the
    final steps;
  - best-of-n's vote over each problem's paths with each reader's scores (path_likelihood.votes:
    the engine's weighted vote with the step scores added up as --agg last/min/mean), beside the
    majority vote and a right answer among the paths.

  python3 -m benchmarks.lab.finetune_verifier --model Q15.gguf \
      --head edgereason/heads/qwen2.5-coder-1.5b.safetensors \
      --rollouts R15.jsonl.gz --shards 16 --extra R05.jsonl.gz --out DIR
  (--epochs 0: the head alone)
DIR/report.json is rewritten after every reading; DIR/scores-*.jsonl.gz hold every path's step
scores, and DIR/lora.safetensors the fine-tuned weights of the last epoch, which
benchmarks/lab/export_lora_head.py turns into a head llama.cpp runs. (From the repository root, as a
module.) """

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split

import numpy as np

from benchmarks.lab.jsonl_gz import write_jsonl_gz
from benchmarks.lab.lora import TARGETS, add_lora
from benchmarks.lab.path_likelihood import prompt_text, validation_rows, votes
from edgereason.backends.transformers.loader import load_checkpoint
from edgereason.heads.value_head import load_head
from edgereason.training.metrics import auc, within_auc
from edgereason.training.report import write_report
from edgereason.training.rows import step_groups
from edgereason.util.jsonl import read_jsonl, without_nan


def encode(tokenizer, row: dict, path: dict) -> tuple[list[int], list[int]]:
    """(token ids of the solve prompt then the steps, index of each step's last token): the head's
    input, each step tokenized on its own as the verifier does."""
    ids = tokenizer.encode(prompt_text(row["problem"]), add_special_tokens=False)
    ends = []
    for step in path["steps"]:
        ids += tokenizer.encode(step, add_special_tokens=False)
        ends.append(len(ids) - 1)
    return ids, ends


def examples(tokenizer, rows: list[dict], keep, max_tokens: int) -> list[dict]:
    """One per path with steps of the rows `keep` admits, at most `max_tokens` long."""
    out = []
    for ri, row in enumerate(rows):
        if not keep(ri, row):
            continue
        for pi, path in enumerate(row["paths"]):
            if path["steps"]:
                ids, ends = encode(tokenizer, row, path)
                if len(ids) <= max_tokens:
                    out.append(
                        {
                            "row": ri,
                            "id": row["id"],
                            "path": pi,
                            "correct": bool(path["correct"]),
                            "answer": path.get("answer"),
                            "ids": ids,
                            "ends": ends,
                        }
                    )
    return out


def batches(items: list[dict], tokens: int, rng: np.random.Generator | None) -> list[list[dict]]:
    """Paths of similar length together, at most `tokens` padded tokens a batch; shuffled when `rng`
    is given."""
    order = sorted(items, key=lambda e: len(e["ids"]))
    out, cur = [], []
    for e in order:
        if cur and len(e["ids"]) * (len(cur) + 1) > tokens:
            out.append(cur)
            cur = []
        cur.append(e)
    if cur:
        out.append(cur)
    if rng is not None:
        out = [out[k] for k in rng.permutation(len(out))]
    return out


def step_states(torch, backbone, batch: list[dict], device, pad: int):
    """[sum of steps, hidden]: the final hidden state at each step's last token. Right padding needs
    no mask: a causal model's states before the padding never see it."""
    width = max(len(e["ids"]) for e in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, : len(e["ids"])] = torch.as_tensor(e["ids"])
    h = backbone(input_ids=ids.to(device)).last_hidden_state  # [B, T, hidden]
    rows = torch.as_tensor([i for i, e in enumerate(batch) for _ in e["ends"]], device=device)
    cols = torch.as_tensor([t for e in batch for t in e["ends"]], device=device)
    return h[rows, cols]


def reading(lines: list[dict]) -> dict:
    """A reader's measures over paths with per-step scores (`head`)."""
    s = np.concatenate([np.asarray(p["head"], dtype=np.float64) for p in lines])
    y = np.concatenate([[float(p["correct"])] * len(p["head"]) for p in lines])
    step = np.concatenate([np.arange(len(p["head"])) for p in lines])
    row = np.concatenate([[p["row"]] * len(p["head"]) for p in lines])
    last = np.asarray([p["head"][-1] for p in lines])
    by_row: dict[int, list[dict]] = defaultdict(list)
    for p in lines:
        by_row[p["row"]].append(p)
    return {
        "paths": len(lines),
        "problems": len(by_row),
        "steps": int(len(s)),
        "step_auc": round(auc(s, y), 4),
        "within_step_auc": round(within_auc(s, y, step_groups({"problem": row, "step": step})), 4),
        "within_final_auc": round(
            within_auc(last, [float(p["correct"]) for p in lines], [p["row"] for p in lines]), 4
        ),
        "votes": votes(by_row),
    }


def read_all(
    torch, backbone, readout, items: list[dict], device, pad: int, tokens: int
) -> list[dict]:
    """Each item with `head`: the readout's score at each step end (no gradients)."""
    out = []
    with torch.no_grad():
        for batch in batches(items, tokens, None):
            scores = readout(step_states(torch, backbone, batch, device, pad))
            at = 0
            for e in batch:
                out.append(
                    {k: e[k] for k in ("row", "id", "path", "correct", "answer")}
                    | {"head": [round(float(v), 5) for v in scores[at : at + len(e["ends"])]]}
                )
                at += len(e["ends"])
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the backbone's .gguf (registry name or path)")
    ap.add_argument(
        "--head", required=True, help="the shipped head on this backbone (.safetensors)"
    )
    ap.add_argument(
        "--rollouts", required=True, help="the rollouts the head was made from (.jsonl.gz)"
    )
    ap.add_argument(
        "--shards", type=int, required=True, help="shards the head's features were made from"
    )
    ap.add_argument(
        "--extra",
        nargs="*",
        default=[],
        help="more rollouts to train on (their validation problems, by id, left out)",
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument(
        "--targets",
        default="attention",
        choices=sorted(TARGETS),
        help="the projections LoRA adapts: attention's q/k/v/o, or all (the MLP's gate/up/down "
        "too)",
    )
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--lr-readout", type=float, default=1e-3)
    ap.add_argument("--batch-tokens", type=int, default=12288)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--seconds", type=float, default=None, help="stop training after this long (then read)"
    )
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--limit", type=int, default=None, help="rollout lines to read (a smoke run)")
    return ap.parse_args(argv)


class Study:
    """One run's backbone and validation paths, and its report: each reading is written as it is
    made (scores, report.json), so a run its time box stops keeps what it read."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.out = args, Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        model_path = models.resolve(args.model)
        self.ck = load_checkpoint(
            model_path, "head", device=args.device, head=load_head(Path(args.head))
        )
        self.torch, self.tokenizer, self.backbone, self.device = (
            __import__("torch"),
            self.ck.tokenizer,
            self.ck.backbone,
            self.ck.device,
        )
        self.torch.manual_seed(args.seed)
        self.pad = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        rows = list(read_jsonl(Path(args.rollouts)))
        self.val = set(validation_rows(len(rows), args.shards))
        self.val_ids = {rows[i]["id"] for i in self.val}
        self.rows = rows[: args.limit]
        self.t0 = time.time()
        self.val_items = examples(
            self.tokenizer, self.rows, lambda ri, r: ri in self.val, args.max_tokens
        )
        self.report: dict = {
            "args": vars(args),
            "model": str(model_path),
            "validation_problems": len(self.val),
            "readings": {},
        }

    def log(self, msg: str) -> None:
        print(f"[{time.time() - self.t0:.0f} s] {msg}", file=sys.stderr, flush=True)

    def read(self, name: str, readout) -> None:
        """Score the validation paths with `readout` and record the reading as `name`."""
        lines = read_all(
            self.torch,
            self.backbone,
            readout,
            self.val_items,
            self.device,
            self.pad,
            self.args.batch_tokens,
        )
        self.report["readings"][name] = reading(lines)
        write_jsonl_gz(self.out / f"scores-{name}.jsonl.gz", lines)
        # undefined AUCs (one class) as null: the head keeps it
        write_report(self.out / "report.json", self.report)
        self.log(f"{name}: {json.dumps(without_nan(self.report['readings'][name]))}")

    def training_paths(self) -> list[dict]:
        """The paths of the head's training problems, and of the extra rollouts less its validation
        problems."""
        args = self.args
        train = examples(
            self.tokenizer, self.rows, lambda ri, r: ri not in self.val, args.max_tokens
        )
        for extra in args.extra:
            train += examples(
                self.tokenizer,
                list(read_jsonl(Path(extra)))[: args.limit],
                lambda ri, r: r["id"] not in self.val_ids,
                args.max_tokens,
            )
        self.report["train_paths"] = len(train)
        self.report["train_tokens"] = sum(len(e["ids"]) for e in train)
        self.log(
            f"{len(train)} training paths, {self.report['train_tokens']} tokens; "
            f"{len(self.val_items)} validation paths"
        )
        return train


def optimizer(torch, lora: list, value, args: argparse.Namespace, steps_total: int):
    """AdamW over the LoRA (no decay) and the readout, with a 3% linear warm-up then cosine to
    zero."""
    opt = torch.optim.AdamW(
        [
            {"params": [p for _, p in lora], "lr": args.lr, "weight_decay": 0.0},
            {"params": value.parameters(), "lr": args.lr_readout, "weight_decay": 0.01},
        ]
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda k: (
            min(1.0, (k + 1) / max(1, 0.03 * steps_total))
            * 0.5
            * (1 + math.cos(math.pi * min(k, steps_total) / steps_total))
        ),
    )
    return opt, schedule


def path_loss(torch, z, batch: list[dict], device):
    """Cross-entropy of each step's logit against its path's outcome; each path weighs the same,
    however many steps it has."""
    y = torch.as_tensor([float(e["correct"]) for e in batch for _ in e["ends"]], device=device)
    w = torch.as_tensor([1.0 / len(e["ends"]) for e in batch for _ in e["ends"]], device=device)
    return (
        torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="none") * w
    ).sum() / len(batch)


def train_epoch(
    study: Study, value, train: list[dict], opt, schedule, rng: np.random.Generator
) -> tuple[int, float, bool]:
    """One pass over the training paths: (paths seen, summed loss, whether --seconds ran out)."""
    torch, args = study.torch, study.args
    study.backbone.train()
    seen, loss_sum = 0, 0.0
    for batch in batches(train, args.batch_tokens, rng):
        z = value(step_states(torch, study.backbone, batch, study.device, study.pad).float())[:, 0]
        loss = path_loss(torch, z, batch, study.device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        seen += len(batch)
        loss_sum += loss.item() * len(batch)
        if args.seconds and time.time() - study.t0 > args.seconds:
            return seen, loss_sum, True
    return seen, loss_sum, False


def save_weights(torch, lora: list, value, path: Path) -> None:
    """The LoRA pairs (fp16) and the readout (fp32), named as export_lora_head reads them."""
    from safetensors.torch import save_file

    readout_weights = {
        "value.weight": value.weight.detach().float().cpu(),
        "value.bias": value.bias.detach().float().cpu(),
    }
    save_file(
        {**{k: p.detach().to(torch.float16).cpu() for k, p in lora}, **readout_weights}, str(path)
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    study = Study(args)
    study.read("head", study.ck.readout)
    if args.epochs <= 0:
        return
    train = study.training_paths()
    torch = study.torch
    lora = add_lora(study.backbone, args.rank, args.alpha, args.targets)
    value = torch.nn.Linear(study.backbone.config.hidden_size, 1).to(study.device)
    opt, schedule = optimizer(
        torch, lora, value, args, args.epochs * len(batches(train, args.batch_tokens, None))
    )
    rng = np.random.default_rng(args.seed)

    def readout(h):
        return torch.sigmoid(value(h.float())[:, 0]).tolist()

    for epoch in range(args.epochs):
        seen, loss_sum, stop = train_epoch(study, value, train, opt, schedule, rng)
        study.log(f"epoch {epoch + 1}: {seen} paths, loss {loss_sum / max(seen, 1):.4f}")
        study.backbone.eval()
        study.read(f"lora-epoch{epoch + 1}", readout)
        save_weights(torch, lora, value, study.out / "lora.safetensors")
        if stop:
            break


if __name__ == "__main__":
    main()
