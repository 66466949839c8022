"""Train a value head on extracted features (torch, CPU is enough: a few thousand rows of a few hundred values).

Targets: the Monte-Carlo value of a step prefix where one was sampled, else the path's outcome (Math-Shepherd's two
label kinds). Classes are balanced by weight. A search only ever compares candidates of one problem, so besides the
pooled loss a ranking loss (rank_weight) pushes each right path above each wrong one of the same problem at the same
step, and above it among the final steps; batches hold whole problems so those pairs exist. Validation problems are
held out whole (split by problem), and the epoch with the best within-problem validation step AUC is kept.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgereason.errors import ConfigError
from edgereason.training.metrics import auc, calibration, within_auc
from edgereason.heads.value_head import Backbone, ValueHead

if TYPE_CHECKING:  # torch is the optional [torch] extra: imported where training runs
    import torch


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
    rank_weight: float = 0.0  # weight of the within-problem ranking loss against the pooled one

    def __post_init__(self) -> None:
        if self.hidden < 0 or self.epochs <= 0 or self.batch <= 0 or self.lr <= 0 or self.rank_weight < 0:
            raise ConfigError("training settings must be positive (--hidden may be 0 for a linear head, "
                              "--rank-weight 0 for no ranking loss)")
        if not math.isfinite(self.rank_weight):
            raise ConfigError(f"--rank-weight must be a finite number >= 0 (0 = no ranking loss), got "
                              f"{self.rank_weight}")
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


def step_groups(f: dict[str, np.ndarray]) -> np.ndarray:
    """[n] int64: one id per (problem, step index): the candidates one selection of a search compares."""
    return f["problem"].astype(np.int64) * (int(f["step"].max()) + 1) + f["step"]


def problem_batches(problem: np.ndarray, rows: np.ndarray, batch: int, rng: np.random.Generator) -> list[np.ndarray]:
    """`rows` in shuffled batches of whole problems, about `batch` rows each."""
    order = rows[np.argsort(problem[rows], kind="stable")]
    chunks = np.split(order, np.flatnonzero(np.diff(problem[order])) + 1)
    per = max(1, round(batch * len(chunks) / max(len(rows), 1)))
    perm = rng.permutation(len(chunks))
    return [np.concatenate([chunks[k] for k in perm[lo:lo + per]]) for lo in range(0, len(chunks), per)]


def rank_loss(z: torch.Tensor, y: np.ndarray, group: np.ndarray, problem: np.ndarray, last: np.ndarray,
              weight: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss over (right, wrong) pairs of one batch that share a step group, or a problem among final
    steps; weighted by both paths' potentials. z, weight: float tensors [b]; y, group, problem, last: numpy [b]."""
    import torch

    pos, neg = y > 0.5, y <= 0.5
    same = (group[:, None] == group[None, :]) | ((problem[:, None] == problem[None, :]) & last[:, None] & last[None, :])
    i, j = np.nonzero(same & pos[:, None] & neg[None, :])
    if not len(i):
        return z.sum() * 0.0
    i, j = torch.from_numpy(i), torch.from_numpy(j)
    w = weight[i] * weight[j]
    return (torch.nn.functional.softplus(z[j] - z[i]) * w).sum() / w.sum()


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
    if val.all():  # one problem: it is held out whole, and a head fitted to no rows is all NaN
        raise ConfigError("training needs steps of at least 2 problems: whole problems are held out for "
                          "validation; roll out more problems")
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
    groups = step_groups(f)
    path_weight = torch.from_numpy(f["weight"].astype(np.float32))
    rng = np.random.default_rng(cfg.seed)
    best = (-math.inf, None, 0)
    for epoch in range(cfg.epochs):
        net.train()
        for rows in problem_batches(f["problem"], tr_idx, cfg.batch, rng):
            b = torch.from_numpy(rows)
            z = net(xt[b])[:, 0]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z, yt[b], weight=wt[b])
            if cfg.rank_weight:
                loss = loss + cfg.rank_weight * rank_loss(z, y[rows], groups[rows], f["problem"][rows],
                                                          f["last"][rows], path_weight[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            scores = torch.sigmoid(net(xt)[:, 0]).numpy()
        val_auc = within_auc(scores[val], f["outcome"][val], groups[val])
        if math.isnan(val_auc):  # no validation problem has both right and wrong paths
            val_auc = auc(scores[val], f["outcome"][val])
        if log:
            log(f"epoch {epoch + 1}/{cfg.epochs}: validation within-problem step AUC {val_auc:.3f}")
        if val_auc > best[0] or best[1] is None:
            best = (val_auc, {k: v.detach().clone() for k, v in net.state_dict().items()}, epoch + 1)
    net.load_state_dict(best[1])
    head = _to_head(net, backbone, tokens, tuple(int(il) for il in f["layers"]), mean, std, cfg)
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
    groups = step_groups(f)
    return {
        "val_step_auc": auc(scores[val], f["outcome"][val]),
        "val_within_step_auc": within_auc(scores[val], f["outcome"][val], groups[val]),
        "val_outcome_auc": auc(scores[last], f["outcome"][last]),
        "val_within_outcome_auc": within_auc(scores[last], f["outcome"][last], f["problem"][last]),
        "val_mc_auc": auc(scores[has_mc], f["mc"][has_mc] > 0.5) if has_mc.any() else None,
        "judge_val_step_auc": auc(f["prm"][val], f["outcome"][val]),
        "judge_val_within_step_auc": within_auc(f["prm"][val], f["outcome"][val], groups[val]),
        "judge_val_outcome_auc": auc(f["prm"][last], f["outcome"][last]),
        "judge_val_within_outcome_auc": within_auc(f["prm"][last], f["outcome"][last], f["problem"][last]),
        "train_step_auc": auc(scores[~val], f["outcome"][~val]),
        "val_calibration": calibration(scores[val], f["outcome"][val]),
        "judge_val_calibration": calibration(f["prm"][val & ~np.isnan(f["prm"])],
                                             f["outcome"][val & ~np.isnan(f["prm"])]),
    }


def _to_head(net, backbone: Backbone, tokens: np.ndarray, layers: tuple[int, ...], mean: np.ndarray, std: np.ndarray,
             cfg: TrainConfig) -> ValueHead:
    linears = [m for m in net if hasattr(m, "weight")]
    arrays = [(m.weight.detach().numpy().astype(np.float32), m.bias.detach().numpy().astype(np.float32))
              for m in linears]
    (w1, b1), (w2, b2) = arrays if cfg.hidden else ((None, None), *arrays)
    return ValueHead(backbone, tokens, mean.astype(np.float32), std.astype(np.float32), w2, b2, w1, b1,
                     layers=layers)
