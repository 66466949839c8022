"""The `edgereason` command: subcommands register themselves; user errors become one line, not a traceback."""

from __future__ import annotations

import argparse
import sys

from edgereason import __version__
from edgereason.cli import bench, chat, memory_profile, models_cmd, solve
from edgereason.errors import EdgeReasonError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgereason",
        description="Local reasoning with test-time search: a generator proposes steps, a process reward model "
                    "scores them, a beam search keeps the best paths. Everything runs offline on this machine.")
    parser.add_argument("--version", action="version", version=f"edgereason {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{solve,chat,bench,memory-profile,models}")
    solve.register(sub)
    chat.register(sub)
    bench.register(sub)
    memory_profile.register(sub)
    models_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except EdgeReasonError as e:
        print(f"edgereason: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("\nedgereason: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
