"""What a process that runs one search (`edgereason solve`) asks of the torch backend's decode
attention, without importing torch (a solve on llama.cpp must not pay torch's import): the gathered
SDPA unless EDGEREASON_ATTENTION names another.

Why: the paged kernel's decode graphs cost more to capture than its faster passes save in one
search. On an H100 (2026-12-06, the 1.5B, the README's problem, the same call): 8 captures took
4.5 s paged and 0.4 s gathered, and the whole solve 15.6 s against 11.0-11.4 (docs/results.md).
A process of many searches (bench, chat) keeps the paged default, whose pass is faster by 1.2-2.5
ms."""

from __future__ import annotations

import os

SWITCH = "EDGEREASON_ATTENTION"  # read by attention_choice.py
ONE_SEARCH_ATTENTION = "sdpa-gathered"


def one_search_a_process() -> None:
    """This process runs one search: its decode passes attend gathered, unless the variable is
    set."""
    os.environ.setdefault(SWITCH, ONE_SEARCH_ATTENTION)
