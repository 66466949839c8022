"""`edgereason bench` (not implemented yet)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="bench (not available yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("edgereason bench: not available in this version yet", file=sys.stderr)
    return 2
