"""StepContext: the engine's parts that the tree's growth and the selection both act through, built
once by the engine loop (loop.py) and shared by TreeGrower and Selector."""

from __future__ import annotations

from dataclasses import dataclass

from edgereason.engine.events import Emitter
from edgereason.engine.kv_sequences import KVSequences
from edgereason.engine.policy import Policy
from edgereason.engine.verification import VerifyStage
from edgereason.protocols import Generator


@dataclass(frozen=True)
class StepContext:
    generator: Generator
    kv: KVSequences  # the generator's sequences: fork, free
    verification: VerifyStage  # the PRM queue a finished step joins
    policy: Policy  # which techniques apply
    emit: Emitter  # every node event and status change
