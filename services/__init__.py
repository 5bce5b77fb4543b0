"""Pingo's five services.

The wheel installs them, their core ``shared`` and the command line ``pingo`` as
top-level packages under those names (docs/operations.md, "Installed package names").
Every service process imports this package before anything of ``shared``, so it checks
here, before either runs, that the ``shared`` it would import is Pingo's: a name so
common may also be a package of the user's own, first on the path (``python -m`` puts the
working directory first), or another distribution's, installed over Pingo's files.
Either fails here, saying which, instead of later as a missing module or worse.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

DISTRIBUTION = "pingo"
SHARED_NAMES = ("shared", "services")  # the installed names other projects may also use
WHY = 'docs/operations.md, "Installed package names"'


def _shadowing() -> str | None:
    """Where ``shared`` resolves, if not beside this package."""
    home = Path(__file__).resolve().parent.parent
    spec = importlib.util.find_spec("shared")  # located, not imported (unless it already was)
    origin = spec.origin if spec is not None else None
    if spec is None or origin is None or Path(origin).resolve().parent.parent != home:
        found = "nothing" if spec is None else (origin or ", ".join(spec.submodule_search_locations or []))
        return (
            f"pingo: the package 'shared' that Pingo's services import is {found}, not Pingo's beside "
            f"{home / 'services'}: a package of that name comes first on the Python path (python -m puts the "
            f"working directory first). Run from another directory, or rename that package ({WHY})"
        )
    return None


def _sharing() -> str | None:
    """Other installed distributions that also install ``shared`` or ``services``."""
    others: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        # Raw text, not parsed: every distribution is read, at each service's start.
        files, top = "\n" + (dist.read_text("RECORD") or ""), (dist.read_text("top_level.txt") or "").split()
        names = [n for n in SHARED_NAMES if f"\n{n}/" in files or n in top]
        if names and (name := dist.metadata["Name"] or "?").lower() != DISTRIBUTION:
            others.setdefault(name, set()).update(names)
    if not others:
        return None
    said = "; ".join(f"{name} installs {' and '.join(sorted(n))}" for name, n in sorted(others.items()))
    return (
        f"pingo: another installed distribution uses Pingo's top-level package names ({said}): one overwrites "
        f"the other's files. Install Pingo in a virtual environment of its own ({WHY})"
    )


if (_problem := _shadowing() or _sharing()) is not None:
    raise ImportError(_problem)
