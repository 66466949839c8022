"""`edgereason chat` (not implemented yet)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat (not available yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("edgereason chat: not available in this version yet", file=sys.stderr)
    return 2
