"""Train a value head on extracted features (torch, CPU is enough: a few thousand rows of a few hundred values).

Targets: the Monte-Carlo value of a step prefix where one was sampled, else the path's outcome (Math-Shepherd's two
label kinds). Classes are balanced by weight. Validation problems are held out whole (split by problem), and the
epoch with the best validation step AUC is kept.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from edgereason.errors import ConfigError
from edgereason.training.metrics import auc, calibration
from edgereason.value_head import Backbone, ValueHead


@dataclass(frozen=True)
class TrainConfig:
    hidden: int = 256  # 0: a linear head
    epochs: int = 40
    batch: int = 512
    lr: float = 1e-3
    weight_decay: float = 1e-2
    dropout: float = 0.1
    val_fraction: float = 0.15
    seed: int = 0

    def __post_init__(self) -> None:
        if self.hidden < 0 or self.epochs <= 0 or self.batch <= 0 or self.lr <= 0:
            raise ConfigError("training settings must be positive (--hidden may be 0 for a linear head)")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"--val-fraction must be in (0, 1), got {self.val_fraction}")


def split_by_problem(problem: np.ndarray, val_fraction: float, seed: int) -> np.ndarray:
    """A boolean mask of validation rows: whole problems, so no problem is seen on both sides."""
    ids = np.unique(problem)
    rng = np.random.default_rng(seed)
    n_val = max(1, int(round(len(ids) * val_fraction)))
    return np.isin(problem, rng.permutation(ids)[:n_val])


def targets(f: dict[str, np.ndarray]) -> np.ndarray:
    return np.where(np.isnan(f["mc"]), f["outcome"], f["mc"]).astype(np.float32)


def train_head(f: dict[str, np.ndarray], backbone: Backbone, cfg: TrainConfig,
               log=None) -> tuple[ValueHead, dict]:
    """-> (the head, a training record with AUCs and calibration on the validation problems)."""
    import torch

    if len(f.get("x", ())) == 0:
        raise ConfigError("no training rows: the rollouts have no steps (run the rollouts phase first)")
    y = targets(f)
    if (y > 0.5).all() or (y <= 0.5).all():
        raise ConfigError("every training step has the same label (all paths right or all wrong): a head cannot "
                          "learn from that; use more or harder problems, or more samples per problem")
    val = split_by_problem(f["problem"], cfg.val_fraction, cfg.seed)
    x = f["x"].astype(np.float32)
    tokens = f["tokens"].astype(np.int64)
    tr = ~val
    mean = x[tr].mean(0)
    std = x[tr].std(0) + 1e-4
    torch.manual_seed(cfg.seed)
    xt = torch.from_numpy((x - mean) / std)
    yt = torch.from_numpy(y)
    pos = (y[tr] > 0.5).mean()
    # balance the classes: each contributes half of the loss, scaled by each path's potential
    wt = torch.from_numpy(np.where(y > 0.5, 0.5 / pos, 0.5 / (1 - pos)).astype(np.float32) * f["weight"])
    d = x.shape[1]
    net = (torch.nn.Sequential(torch.nn.Dropout(cfg.dropout), torch.nn.Linear(d, cfg.hidden), torch.nn.ReLU(),
                               torch.nn.Dropout(cfg.dropout), torch.nn.Linear(cfg.hidden, 1))
           if cfg.hidden else torch.nn.Sequential(torch.nn.Dropout(cfg.dropout), torch.nn.Linear(d, 1)))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    tr_idx = np.flatnonzero(tr)
    rng = np.random.default_rng(cfg.seed)
    best = (-math.inf, None, 0)
    for epoch in range(cfg.epochs):
        net.train()
        rng.shuffle(tr_idx)
        for lo in range(0, len(tr_idx), cfg.batch):
            b = torch.from_numpy(tr_idx[lo:lo + cfg.batch])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xt[b])[:, 0], yt[b], weight=wt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            scores = torch.sigmoid(net(xt)[:, 0]).numpy()
        val_auc = auc(scores[val], f["outcome"][val])
        if log:
            log(f"epoch {epoch + 1}/{cfg.epochs}: validation step AUC {val_auc:.3f}")
        if val_auc > best[0] or best[1] is None:
            best = (val_auc, {k: v.detach().clone() for k, v in net.state_dict().items()}, epoch + 1)
    net.load_state_dict(best[1])
    head = _to_head(net, backbone, tokens, mean, std, cfg)
    scores = 1.0 / (1.0 + np.exp(-head.logits(x)))
    record = {"config": asdict(cfg), "best_epoch": best[2], "rows": int(len(y)), "train_rows": int(tr.sum()),
              "val_rows": int(val.sum()), "problems": int(len(np.unique(f["problem"]))),
              "val_problems": int(len(np.unique(f["problem"][val]))),
              "positive_fraction": float((f["outcome"] > 0.5).mean()),
              "mc_rows": int((~np.isnan(f["mc"])).sum()),
              **evaluate(scores, f, val)}
    return head, record


def evaluate(scores: np.ndarray, f: dict[str, np.ndarray], val: np.ndarray) -> dict:
    """AUCs of the head and of the rollout PRM (the judge) on the same validation steps."""
    last = val & f["last"]
    has_mc = val & ~np.isnan(f["mc"])
    return {
        "val_step_auc": auc(scores[val], f["outcome"][val]),
        "val_outcome_auc": auc(scores[last], f["outcome"][last]),
        "val_mc_auc": auc(scores[has_mc], f["mc"][has_mc] > 0.5) if has_mc.any() else None,
        "judge_val_step_auc": auc(f["prm"][val], f["outcome"][val]),
        "judge_val_outcome_auc": auc(f["prm"][last], f["outcome"][last]),
        "train_step_auc": auc(scores[~val], f["outcome"][~val]),
        "val_calibration": calibration(scores[val], f["outcome"][val]),
        "judge_val_calibration": calibration(f["prm"][val & ~np.isnan(f["prm"])],
                                             f["outcome"][val & ~np.isnan(f["prm"])]),
    }


def _to_head(net, backbone: Backbone, tokens: np.ndarray, mean: np.ndarray, std: np.ndarray,
             cfg: TrainConfig) -> ValueHead:
    linears = [m for m in net if hasattr(m, "weight")]
    arrays = [(m.weight.detach().numpy().astype(np.float32), m.bias.detach().numpy().astype(np.float32))
              for m in linears]
    if cfg.hidden:
        (w1, b1), (w2, b2) = arrays
        return ValueHead(backbone, tokens, mean.astype(np.float32), std.astype(np.float32), w2, b2, w1, b1)
    (w2, b2), = arrays
    return ValueHead(backbone, tokens, mean.astype(np.float32), std.astype(np.float32), w2, b2)
