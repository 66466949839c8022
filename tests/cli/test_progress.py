"""solve's status line on a terminal: what the engine's events make of it."""

from __future__ import annotations

import io

from edgereason.cli.progress import SearchProgress
from edgereason.events import NodeAdded, NodeStatus, Progress


def test_the_status_line_counts_finished_paths_by_potential_and_clears_itself() -> None:
    stream = io.StringIO()
    status = SearchProgress(paths=4, stream=stream, every_s=1.0)
    status(NodeAdded("r", 1, 0, 1, 3, False))  # three identical candidates in one node
    status(NodeStatus("r", 1, "complete"))
    status(Progress("r", 120, 2.0, 1, 0, 0, 0, 0, 0))
    status(Progress("r", 130, 2.5, 1, 0, 0, 0, 0, 0))  # within every_s of the last line: not drawn
    line = "searching: 120 tokens (60.0 tok/s), 3/4 paths done, 1 PRM calls, 2 s"
    assert stream.getvalue() == "\r" + line
    status.close()
    assert stream.getvalue().endswith("\r" + " " * len(line) + "\r")
