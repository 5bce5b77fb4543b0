"""What changed between two lineage documents (docs/planning.md, "Why an action is computed").

A lineage (``shared.hashing.lineage_of``) is what a hash is computed from: the action's
canonical definition, its parents' hashes, and whatever else enters the key. Two are
compared field by field, generically: every key of the definition is a field, every
other key of the lineage too, so a field added to the key later is named without a
change here. Parents are named by their id in the workflow, when the caller knows which
hash each parent had then and has now.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# A value longer than this is cut in an explanation: it is shown to people, next to a plan.
SHOWN_CHARS = 200
PARENT = "parent"
PARENTS_KEY = "parents"
DEFINITION_KEY = "definition"
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A digest (``sha256:<hex>``, a bare fingerprint): told by its first hex digits in words.
_DIGEST = re.compile(r"((?:[a-z0-9-]+:)?[0-9a-f]{12})[0-9a-f]{20,}")


@dataclass(frozen=True)
class Change:
    """One field whose value differs: ``field`` names it as a path into the lineage
    (``command``, ``additionalInput[1].value``, ``actionFolderFingerprint``...); a parent
    whose output is another dataset now is ``parent`` with its id in ``parent``."""

    field: str
    old: str | None
    new: str | None
    parent: str | None = None

    def describe(self) -> str:
        if self.field == PARENT:
            if self.old is None:
                return f"parent {self.parent} added"
            if self.new is None:
                return f"parent {self.parent} removed"
            return f"parent {self.parent} changed"
        if self.old is None:
            return f"{self.field} added"
        if self.new is None:
            return f"{self.field} removed"
        return f"{self.field} changed ({_brief(self.old)} -> {_brief(self.new)})"


def _brief(value: str) -> str:
    """A digest cut to what tells two apart at a glance (as ``shared.inputs.changes`` tells
    an input's); the change keeps it whole."""
    found = _DIGEST.fullmatch(value)
    return f"{found.group(1)}…" if found else value


def shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _key(path: str, key: Any) -> str:
    k = str(key)
    step = k if _PLAIN.fullmatch(k) else json.dumps(k, ensure_ascii=False)
    if not path:
        return step if _PLAIN.fullmatch(k) else f"[{step}]"
    return f"{path}.{step}" if _PLAIN.fullmatch(k) else f"{path}[{step}]"


_ABSENT = object()


def _diff(path: str, old: Any, new: Any, out: list[Change]) -> None:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            _diff(_key(path, k), old.get(k, _ABSENT), new.get(k, _ABSENT), out)
        return
    # A list of records (additionalInput, configurationParameters) is named item by item;
    # a list of words (a command) as a whole.
    lists = isinstance(old, list) and isinstance(new, list)
    if lists and len(old) == len(new) and all(isinstance(x, dict) for x in (*old, *new)):
        for i, (o, n) in enumerate(zip(old, new, strict=True)):
            _diff(f"{path}[{i}]", o, n, out)
        return
    # A list that grew or shrank is named as a whole: which item moved would be a guess.
    out.append(Change(path, None if old is _ABSENT else shown(old), None if new is _ABSENT else shown(new)))


def _fields(lineage: dict[str, Any]) -> dict[str, Any]:
    """The lineage as fields: the definition's keys at the top, the other keys (but the
    parents) beside them."""
    out = {k: v for k, v in lineage.items() if k not in (DEFINITION_KEY, PARENTS_KEY)}
    definition = lineage.get(DEFINITION_KEY)
    if isinstance(definition, str):
        try:
            definition = json.loads(definition)
        except ValueError:
            pass
    if isinstance(definition, dict):
        out.update(definition)
    elif definition is not None:
        out[DEFINITION_KEY] = definition
    return out


def changes(
    old: dict[str, Any],
    new: dict[str, Any],
    old_parents: dict[str, str] | None = None,
    new_parents: dict[str, str] | None = None,
) -> list[Change]:
    """Every field of ``new`` that differs from ``old``. ``old_parents``/``new_parents``:
    each parent's id -> its hash then and now, to name the parent that changed; without
    them a change of the parents' hashes is named ``parents``."""
    out: list[Change] = []
    _diff("", _fields(old), _fields(new), out)
    if old.get(PARENTS_KEY) == new.get(PARENTS_KEY):
        return out
    if old_parents is None or new_parents is None:
        _diff(PARENTS_KEY, old.get(PARENTS_KEY), new.get(PARENTS_KEY), out)
        return out
    for pid in sorted(set(old_parents) | set(new_parents)):
        before, now = old_parents.get(pid), new_parents.get(pid)
        if before != now:
            out.append(Change(PARENT, before, now, parent=pid))
    return out
