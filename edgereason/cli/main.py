"""The `edgereason` command: subcommands register themselves; user errors become one line, not a
traceback."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import NoReturn

from edgereason import __version__
from edgereason.cli import stdout_pipe
from edgereason.cli.crash import crash_line
from edgereason.cli.help import BriefHelpParser
from edgereason.errors import EdgeReasonError
from edgereason.util import interrupts
from edgereason.util.terminal import safe_text


class UsageError(SystemExit):
    """argparse's exit on a bad command line (code 2), keeping its message for a --json report."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class Parser(BriefHelpParser):
    """argparse's parser (its subcommands' too), whose usage errors print as always and raise
    UsageError; a command's --help is its brief view (cli/help.py)."""

    def error(self, message: str) -> NoReturn:
        try:
            super().error(message)
        except SystemExit:
            raise UsageError(message) from None


def build_parser() -> argparse.ArgumentParser:
    # imported here, inside main's handlers, so a Ctrl-C while numpy and llama.cpp load is not a
    # traceback
    from edgereason.cli import bench, chat, data_cmd, memory_profile, models_cmd, solve, train_prm

    parser = Parser(
        prog="edgereason",
        description="Local reasoning with test-time search: a generator proposes steps, a process "
        "reward model scores them, a beam search keeps the best paths. Everything runs offline on "
        "this machine.",
        epilog="`edgereason COMMAND --help` shows a command's common flags, --help-all every flag; "
        "docs/cli.md says how they work together.",
    )
    parser.add_argument("--version", action="version", version=f"edgereason {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="{solve,chat,bench,memory-profile,train-prm,models,data}"
    )
    parser.set_defaults(func=lambda args: _no_command(parser))
    solve.register(sub)
    chat.register(sub)
    bench.register(sub)
    memory_profile.register(sub)
    train_prm.register(sub)
    models_cmd.register(sub)
    data_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 done, 1 a user error or an unfinished search, 2 bad settings, 128 + N stopped
    by signal N (130 Ctrl-C, 143 SIGTERM, 129 a closed terminal) at any moment, imports included,
    and 141 (SIGPIPE) when stdout's reader quit, whatever was being written (an error's JSON
    too). Anything else that escapes is a bug: one line, exit 1, its traceback in a log file
    (crash.py)."""
    with stdout_pipe.whole_writes():
        try:
            try:
                return _run(sys.argv[1:] if argv is None else argv)
            finally:  # --help and --version too, which exit from argparse
                stdout_pipe.flush()
        except BrokenPipeError:
            return stdout_pipe.reader_quit()


def _run(argv: list[str]) -> int:
    args = None
    try:
        with interrupts.stop_signals():
            args = build_parser().parse_args(argv)
            return args.func(args)
    # a mistyped flag: a script that asked for --json still reads one JSON object
    except UsageError as e:
        if "--json" in argv:
            print(json.dumps({"error": e.message, "exit_code": e.code}), flush=True)
        raise
    except EdgeReasonError as e:  # it may quote a server, a data file or a model: safe_text
        _end_progress_line()
        print(f"edgereason: error: {safe_text(str(e))}", file=sys.stderr)
        return _json_error(args, str(e), e.exit_code)
    except KeyboardInterrupt as e:
        new_line = "" if _end_progress_line() else "\n"  # after the "^C" the terminal echoed
        print(f"{new_line}edgereason: {interrupts.describe(e)}", file=sys.stderr)
        return _json_error(args, interrupts.describe(e), interrupts.exit_code(e))
    # the reader of stdout quit (`| head`): main's own handler, not a bug's line
    except BrokenPipeError:
        raise
    except Exception as e:  # noqa: BLE001 - the last resort: a bug, one line and a log (crash.py)
        _end_progress_line()
        line = safe_text(crash_line(e, _secrets(args)), one_line=True)
        print(f"edgereason: error: {line}", file=sys.stderr)
        return _json_error(args, line, 1)


def _secrets(args: argparse.Namespace | None) -> list[str | None]:
    """The API key's value, where a command was given one: never shown, nor logged."""
    variable = getattr(args, "api_key_env", None)
    return [os.environ.get(variable)] if variable else []


def _no_command(parser: argparse.ArgumentParser) -> int:
    """`edgereason` alone: the commands and what they do, rather than argparse's one-line
    complaint."""
    parser.print_help(sys.stderr)
    return 2


def _json_error(args: argparse.Namespace | None, message: str, code: int) -> int:
    """With --json a script reads stdout: it gets one JSON object there on failure too."""
    if getattr(args, "json", False):
        print(json.dumps({"error": message, "exit_code": code}), flush=True)
    return code


def _end_progress_line() -> bool:
    """Whether a progress line was open (and is now ended)."""
    # imported once a command ran; a bar may be open only then
    return (
        "edgereason.cli.progress" in sys.modules
        and sys.modules["edgereason.cli.progress"].end_line()
    )


if __name__ == "__main__":
    sys.exit(main())
