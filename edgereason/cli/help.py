"""Help that fits a screen: a command's --help shows the flags a user needs first, grouped by
purpose, in at most 50 lines (80 columns); --help-all shows every flag; docs/cli.md says how they
work together.

A command opts in with `brief(parser, command)`; what its brief view shows is in help_briefs.py.
Every parser takes --help-all, those without a brief view too (`models`, `data`, their
subcommands): there it is their --help."""

from __future__ import annotations

import argparse
import copy
import sys
from typing import NoReturn

from edgereason.cli.help_briefs import BRIEFS, Groups

DOCS = "docs/cli.md"


class HelpAll(argparse.Action):
    """--help-all: every flag, grouped, then exit."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> NoReturn:
        parser.print_full_help()
        parser.exit()


class BriefHelpParser(argparse.ArgumentParser):
    """argparse's parser, whose --help is the brief view where the command set one (`brief`), and
    which takes --help-all wherever it takes --help."""

    brief_groups: Groups | None = None
    brief_short: dict[str, str] = {}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.add_help:
            self.add_argument(
                "--help-all", action=HelpAll, help="show every flag, grouped, and exit"
            )

    def format_help(self) -> str:
        return self.format_full_help() if self.brief_groups is None else self._format_brief_help()

    def format_full_help(self) -> str:
        return super().format_help()

    def print_full_help(self) -> None:
        self._print_message(self.format_full_help(), sys.stdout)

    def _format_brief_help(self) -> str:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for title, flags in self.brief_groups or []:
            formatter.start_section(title)
            formatter.add_arguments([self._brief_action(flag) for flag in flags])
            formatter.end_section()
        more = f"`{self.prog} --help-all` lists every flag; {DOCS} says how they work together."
        formatter.add_text(f"More: {more}")
        return formatter.format_help()

    def _brief_action(self, flag: str) -> argparse.Action:
        """The action of `flag` under its one name, with its short help."""
        action = next(a for a in self._actions if flag in a.option_strings or a.dest == flag)
        shown = copy.copy(action)
        if action.option_strings and flag != "-h":  # one name (and its --no- form), not the aliases
            no = [o for o in action.option_strings if o.startswith("--no-") and o != flag]
            shown.option_strings = [flag, *no]
        shown.help = self.brief_short.get(flag, action.help)
        return shown


def brief(p: argparse.ArgumentParser, command: str) -> None:
    """Give `p` its brief --help (help_briefs.BRIEFS[command]) and a compact usage line; the full
    help (--help-all) names the docs at its end."""
    spec = BRIEFS[command]
    p.usage = f"%(prog)s {spec.usage}"
    p.epilog = f"{DOCS} says how the flags work together, with examples."
    p.brief_groups = [*spec.groups, ("help", ["-h", "--help-all"])]
    p.brief_short = spec.short
