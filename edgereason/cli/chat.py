"""`edgereason chat`: type a problem, watch the PRM-guided search grow its tree live, read the
answer."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable

from edgereason.cli.common import solve_settings
from edgereason.cli.flags_models import add_model_args
from edgereason.cli.flags_search import add_policy_arg, add_search_args
from edgereason.cli.help import brief
from edgereason.cli.progress import is_terminal
from edgereason.errors import ConfigError
from edgereason.session.cpu_threads import free_core_threads
from edgereason.session.opening import Session, open_session


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat",
        help="interactive terminal UI: solve problems and watch the search live",
        description="A terminal chat: each problem is solved with PRM-guided search while the "
        "tree of candidate steps, their scores and the engine counters update live. "
        "F1 shows the keys; Ctrl+Q quits.",
    )
    add_model_args(p, threads_default="the free physical cores less one for the UI")
    add_search_args(p, from_recipe=True)
    add_policy_arg(p)
    brief(p, "chat")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # no keys could reach the UI, nor Ctrl+Q
    if not (is_terminal(sys.stdin) and is_terminal(sys.stdout)):
        raise ConfigError(
            "chat needs an interactive terminal; from a script or a pipe, use "
            "edgereason solve (--json for one JSON object)"
        )
    # flags are checked here, before the screen switches, so a typo is one line on the terminal
    choice, settings, policy = solve_settings(args)
    # the free cores less one for the UI thread: llama.cpp's spinning threads stall if one waits
    threads = None if settings.threads else free_core_threads(keep=1)
    if threads:
        settings = dataclasses.replace(settings, threads=threads.threads)

    def factory(progress: Callable[[str, int, int], None]) -> Session:
        return open_session(settings, progress=progress)

    # Textual: this command only
    from edgereason.ui.app import INTERRUPTED, ChatApp
    from edgereason.ui.terminal_input import decode_terminal_input_leniently

    decode_terminal_input_leniently()
    notes = tuple(n for n in (choice.note(), threads and threads.note) if n)
    app = ChatApp(factory, settings, choice.config, policy, notes=notes)
    try:
        app.run()
    # a stop signal may end the app before on_unmount stops the worker, whose thread would keep us
    # alive
    finally:
        app.runner.stop()
    # Ctrl+C quit it: the app's terminal sent it as a key, not as SIGINT
    if app.return_code == INTERRUPTED:
        # main says "interrupted" and exits 130, as Ctrl-C ends every command
        raise KeyboardInterrupt
    return 0
