"""An argparse parser that answers a mistyped subcommand or option with the closest one it
knows ("did you mean 'submit'?"), as ``pingo validate`` does for a workflow's keys.

argparse (3.11) has no such hint of its own; the closest name is found with difflib.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# argparse's own words for a value outside ``choices`` (a subcommand is one): stable since 3.2.
INVALID_CHOICE = re.compile(
    r"argument (?P<arg>.+?): invalid choice: (?P<value>'.*?'|\".*?\") \(choose from (?P<choices>.*)\)$"
)


def closest(word: str, known: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


class SuggestingParser(argparse.ArgumentParser):
    """Subparsers made from it are of its class too (argparse passes ``parser_class`` on)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self._subcommand:
            # Judged before argparse, which would answer ``pingo --verzion`` with "the
            # following arguments are required: command" and never name the mistyped option.
            self._check_options(sys.argv[1:] if args is None else list(args))
        ns, extras = super().parse_known_args(args, namespace)
        # A subcommand's parser is the one that knows its options: an option it did not
        # recognise is named here, with its usage, rather than by the top parser, which
        # knows only its own (``pingo submit --wiat``).
        options = [o for o in extras if o[:1] in self.prefix_chars and len(o) > 1]
        if options and self._subcommand:
            known = [s for a in self._actions for s in a.option_strings]
            hints = []
            for option in options:
                guess = closest(option.split("=", 1)[0], known)
                hints.append(f"unrecognized argument {option}" + (f": did you mean {guess}?" if guess else ""))
            self.error("; ".join(hints))
        return ns, extras

    def _check_options(self, args: list[str]) -> None:
        """Name an option before the subcommand that this parser does not know, with the
        closest one it does, or the subcommands that take it."""
        known = {s: a for a in self._actions for s in a.option_strings}
        skip = False
        for token in args:
            if skip:
                skip = False
                continue
            if token == "--" or token[:1] not in self.prefix_chars or len(token) < 2:
                return  # the subcommand: its own parser judges what follows it
            name = token.split("=", 1)[0]
            matches = [k for k in known if k == name or (name.startswith("--") and k.startswith(name))]
            if len(matches) == 1 or name in matches:  # argparse takes a unique abbreviation too
                skip = known[name if name in known else matches[0]].nargs != 0 and "=" not in token
                continue
            takers = [c for c, sub in self._subcommands().items() if name in sub._option_string_actions]
            given = next((a for a in args if a in takers), None)
            if given:
                self.error(f"unrecognized argument {token}: it is an option of {given}, after it: "
                           f"{self.prog} {given} {name} ...")  # fmt: skip
            if takers:
                self.error(f"unrecognized argument {token}: an option of {', '.join(takers)}, after the subcommand")
            guess = closest(name, list(known))
            self.error(f"unrecognized argument {token}" + (f": did you mean {guess}?" if guess else ""))

    def _subcommands(self) -> dict[str, argparse.ArgumentParser]:
        return {
            name: sub
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()
        }

    @property
    def _subcommand(self) -> bool:
        return getattr(self, "is_subcommand", False)

    def error(self, message: str) -> NoReturn:
        if m := INVALID_CHOICE.match(message):
            value = m["value"][1:-1]
            choices = [c.strip().strip("'\"") for c in m["choices"].split(",")]
            if guess := closest(value, choices):
                message += f": did you mean {guess!r}?"
        super().error(message)


def mark_subcommands(parser: argparse.ArgumentParser) -> None:
    """Mark every parser under ``parser`` as a subcommand's, so that it names its own
    unrecognised options (the top one leaves that to argparse)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: Any
            for sub in action.choices.values():
                sub.is_subcommand = True
                mark_subcommands(sub)
