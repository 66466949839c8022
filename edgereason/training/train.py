"""Train a value head on extracted features (torch, CPU is enough: a few thousand rows of a few
hundred values).

Targets: the Monte-Carlo value of a step prefix where one was sampled, else the path's outcome
(Math-Shepherd's two label kinds). Classes are balanced by weight. A search only ever compares
candidates of one problem, so besides the pooled loss a ranking loss (rank_weight) pushes each right
path above each wrong one of the same problem at the same step, and above it among the final steps;
batches hold whole problems so those pairs exist. Validation problems are held out whole (split by
problem), and the epoch with the best within-problem validation step AUC is kept."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgereason.errors import ConfigError
from edgereason.heads.value_head import Backbone, ValueHead
from edgereason.training.losses import batch_loss
from edgereason.training.metrics import auc, calibration, within_auc
from edgereason.training.rows import problem_batches, split_by_problem, step_groups, targets

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
        if (
            self.hidden < 0
            or self.epochs <= 0
            or self.batch <= 0
            or self.lr <= 0
            or self.rank_weight < 0
        ):
            raise ConfigError(
                "training settings must be positive (--hidden may be 0 for a linear head, "
                "--rank-weight 0 for no ranking loss)"
            )
        if not math.isfinite(self.rank_weight):
            raise ConfigError(
                "--rank-weight must be a finite number >= 0 (0 = no ranking loss), got "
                f"{self.rank_weight}"
            )
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"--val-fraction must be in (0, 1), got {self.val_fraction}")


def train_head(
    f: dict[str, np.ndarray], backbone: Backbone, cfg: TrainConfig, log=None
) -> tuple[ValueHead, dict]:
    """-> (the head, a training record with AUCs and calibration on the validation problems)."""
    y, val = _labels_and_split(f, cfg)
    x = f["x"].astype(np.float32)
    mean = x[~val].mean(0)
    std = x[~val].std(0) + 1e-4
    net, best_epoch = _fit(f, (x - mean) / std, y, val, cfg, log)
    head = _to_head(
        net,
        backbone,
        f["tokens"].astype(np.int64),
        tuple(int(il) for il in f["layers"]),
        mean,
        std,
        cfg,
    )
    scores = 1.0 / (1.0 + np.exp(-head.logits(x)))
    return head, _record(f, y, val, cfg, best_epoch) | evaluate(scores, f, val)


def _labels_and_split(f: dict[str, np.ndarray], cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """(the targets, the validation mask); ConfigError for features no head can learn from."""
    if len(f.get("x", ())) == 0:
        raise ConfigError(
            "no training rows: the rollouts have no steps (run the rollouts phase first)"
        )
    y = targets(f)
    if (y > 0.5).all() or (y <= 0.5).all():
        raise ConfigError(
            "every training step has the same label (all paths right or all wrong): a head cannot "
            "learn from that; use more or harder problems, or more samples per problem"
        )
    val = split_by_problem(f["problem"], cfg.val_fraction, cfg.seed)
    if val.all():  # one problem: it is held out whole, and a head fitted to no rows is all NaN
        raise ConfigError(
            "training needs steps of at least 2 problems: whole problems are held out for "
            "validation; roll out more problems"
        )
    return y, val


def _fit(
    f: dict[str, np.ndarray], xs: np.ndarray, y: np.ndarray, val: np.ndarray, cfg: TrainConfig, log
) -> tuple[torch.nn.Module, int]:
    """The network at the epoch with the best within-problem validation step AUC, and that epoch
    (from 1). xs: the standardized features."""
    import torch

    torch.manual_seed(cfg.seed)
    net = _network(xs.shape[1], cfg)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    xt = torch.from_numpy(xs)
    loss = batch_loss(f, y, val, cfg.rank_weight)
    train_rows = np.flatnonzero(~val)
    rng = np.random.default_rng(cfg.seed)
    best = (-math.inf, None, 0)
    for epoch in range(cfg.epochs):
        _train_epoch(net, opt, xt, loss, problem_batches(f["problem"], train_rows, cfg.batch, rng))
        val_auc = _validation_auc(net, xt, f, val)
        if log:
            log(f"epoch {epoch + 1}/{cfg.epochs}: validation within-problem step AUC {val_auc:.3f}")
        if val_auc > best[0] or best[1] is None:
            best = (
                val_auc,
                {k: v.detach().clone() for k, v in net.state_dict().items()},
                epoch + 1,
            )
    net.load_state_dict(best[1])
    return net, best[2]


def _network(d: int, cfg: TrainConfig) -> torch.nn.Module:
    """An MLP of `cfg.hidden` units over `d` features, or a linear head where hidden is 0."""
    import torch

    nn = torch.nn
    if not cfg.hidden:
        return nn.Sequential(nn.Dropout(cfg.dropout), nn.Linear(d, 1))
    return nn.Sequential(
        nn.Dropout(cfg.dropout),
        nn.Linear(d, cfg.hidden),
        nn.ReLU(),
        nn.Dropout(cfg.dropout),
        nn.Linear(cfg.hidden, 1),
    )


def _train_epoch(
    net: torch.nn.Module,
    opt: torch.optim.Optimizer,
    xt: torch.Tensor,
    loss,
    batches: list[np.ndarray],
) -> None:
    import torch

    net.train()
    for rows in batches:
        value = loss(net(xt[torch.from_numpy(rows)])[:, 0], rows)
        opt.zero_grad()
        value.backward()
        opt.step()


def _validation_auc(
    net: torch.nn.Module, xt: torch.Tensor, f: dict[str, np.ndarray], val: np.ndarray
) -> float:
    """Within-problem step AUC on the validation rows; the pooled AUC where no validation problem
    has both right and wrong paths."""
    import torch

    net.eval()
    with torch.no_grad():
        scores = torch.sigmoid(net(xt)[:, 0]).numpy()
    val_auc = within_auc(scores[val], f["outcome"][val], step_groups(f)[val])
    return auc(scores[val], f["outcome"][val]) if math.isnan(val_auc) else val_auc


def _record(
    f: dict[str, np.ndarray], y: np.ndarray, val: np.ndarray, cfg: TrainConfig, best_epoch: int
) -> dict:
    """What the training saw: its settings, the kept epoch, the rows and problems on each side."""
    return {
        "config": asdict(cfg),
        "best_epoch": best_epoch,
        "rows": int(len(y)),
        "train_rows": int((~val).sum()),
        "val_rows": int(val.sum()),
        "problems": int(len(np.unique(f["problem"]))),
        "val_problems": int(len(np.unique(f["problem"][val]))),
        "positive_fraction": float((f["outcome"] > 0.5).mean()),
        "mc_rows": int((~np.isnan(f["mc"])).sum()),
    }


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
        "judge_val_within_outcome_auc": within_auc(
            f["prm"][last], f["outcome"][last], f["problem"][last]
        ),
        "train_step_auc": auc(scores[~val], f["outcome"][~val]),
        "val_calibration": calibration(scores[val], f["outcome"][val]),
        "judge_val_calibration": calibration(
            f["prm"][val & ~np.isnan(f["prm"])], f["outcome"][val & ~np.isnan(f["prm"])]
        ),
    }


def _to_head(
    net,
    backbone: Backbone,
    tokens: np.ndarray,
    layers: tuple[int, ...],
    mean: np.ndarray,
    std: np.ndarray,
    cfg: TrainConfig,
) -> ValueHead:
    linears = [m for m in net if hasattr(m, "weight")]
    arrays = [
        (m.weight.detach().numpy().astype(np.float32), m.bias.detach().numpy().astype(np.float32))
        for m in linears
    ]
    (w1, b1), (w2, b2) = arrays if cfg.hidden else ((None, None), *arrays)
    return ValueHead(
        backbone,
        tokens,
        mean.astype(np.float32),
        std.astype(np.float32),
        w2,
        b2,
        w1,
        b1,
        layers=layers,
    )
