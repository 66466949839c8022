"""The PRM request queue and when to flush it (design.md section 4, lazy verification).

- eager (asynchronous policies without lazy verification): flush whatever is queued after every engine step.
- synchronous (baseline, fasttts): flush when a sibling group has finished its step, or when the generator idles.
- lazy: flush when queued tokens reach the threshold, when a sibling group is complete, when a request was
  deferred more than `max_defer` times (a deferral: another finished step arrived and the queue still waited),
  or when the generator would otherwise idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgereason.request import Request
from edgereason.tree import Node

# A step's PRM cost is its tokens plus the turn markup around it (user/assistant headers, the answer token).
TURN_OVERHEAD_TOKENS = 12


@dataclass
class Pending:
    request: Request
    node: Node
    deferrals: int = 0


@dataclass
class VerifyQueue:
    mode: str  # eager | sync | lazy
    threshold_tokens: int = 512
    max_defer: int = 6
    items: list[Pending] = field(default_factory=list)
    _arrived: bool = False  # a step finished since the last flush decision

    def push(self, request: Request, node: Node) -> None:
        if not any(p.node is node for p in self.items):
            self.items.append(Pending(request, node))
            self._arrived = True

    def drop_dead(self) -> None:
        self.items = [p for p in self.items if p.node.alive and p.request.status == "running"]

    def queued_tokens(self) -> int:
        return sum(len(p.node.tokens) + TURN_OVERHEAD_TOKENS for p in self.items)

    def should_flush(self, generator_idle: bool) -> bool:
        self.drop_dead()
        if not self.items:
            return False
        if generator_idle or self.mode == "eager":
            return True
        if self._group_complete():
            return True
        if self.mode == "lazy":
            if self.queued_tokens() >= self.threshold_tokens:
                return True
            if any(p.deferrals >= self.max_defer for p in self.items):
                return True
            if self._arrived:  # a flush opportunity passed over: everything waiting was deferred once more
                for p in self.items:
                    p.deferrals += 1
                self._arrived = False
        return False

    def _group_complete(self) -> bool:
        for p in self.items:
            group = p.request.groups.get(p.node.group) if p.node.group is not None else None
            if group is not None and not group.selected and group.steps_done():
                return True
        return False

    def take(self) -> list[Pending]:
        items, self.items = self.items, []
        return items
