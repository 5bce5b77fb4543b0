"""Fan-out (docs/planning.md, "Fan-out"): an action with ``forEach: [v1, v2, ...]`` is one
definition mapped over a list of values. It becomes one action per item, each with
``{{item}}`` replaced by its item wherever it is written in the action, so each has its own
definition and so its own lineage hash: an item already computed, by this workflow or any
other, is reused, and only new items compute. A child naming the mapped action as a parent
gathers every item's action: their outputs come in item order (the argument contract
orders parents by id, and the item actions' ids sort in item order).

The item actions are named ``<id>-<n>``, ``n`` counting items from 1, zero-padded to the
width of the count (``3-01`` ... ``3-12``) so that text order is item order. Each keeps
the position of its definition in the submitted list: a violation of one is reported where
the user wrote it, with the item action's id.

Runs on parsed actions, after the language's checks, so that a 1,000-way fan-out costs one
parse of its definition and 1,000 copies, not 1,000 parses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shared.workflow_parameters import ITEM_REFERENCE

if TYPE_CHECKING:
    from shared.workflow_spec import ActionId, ActionSpec, Violation

MAX_ACTIONS = 10_000  # after fan-out: more would take minutes to plan (docs/performance.md)
MAX_TEXT = 32 * 1024 * 1024  # characters of definitions after fan-out: a small body must not make gigabytes
# What parameters' filling-in leaves in a mapped action: the item, and a literal "{{".
_MARK = re.compile(r"\{\{\{\{|" + re.escape(ITEM_REFERENCE))
_PATH_FIELDS = ("actionFolder", "outputPath")


def _put(value: Any, item: str) -> Any:
    """``value`` (a dumped action) with the item put in every string."""
    if isinstance(value, str):
        if "{{" not in value:
            return value
        return _MARK.sub(lambda m: "{{" if m.group(0) == "{{{{" else item, value)
    if isinstance(value, dict):
        return {k: _put(v, item) for k, v in value.items()}
    if isinstance(value, list):
        return [_put(v, item) for v in value]
    return value


def _uses_item(value: Any) -> bool:
    if isinstance(value, str):
        return ITEM_REFERENCE in value
    if isinstance(value, dict):
        return any(_uses_item(v) for v in value.values())
    if isinstance(value, list):
        return any(_uses_item(v) for v in value)
    return False


def files_pattern_problem(pattern: str, raw_action: dict[str, Any]) -> str | None:
    """What is wrong with ``"forEach": {"files": pattern}`` as written, before any file is
    looked for (shared/workflow_fanout_files.py finds them at submission)."""
    if not pattern.strip():
        return "forEach.files must be a file pattern, e.g. /data/in/*.csv"
    if ".." in pattern.split("/"):
        return "forEach.files must not contain '..'"
    if ITEM_REFERENCE in pattern:
        return "forEach.files cannot use {{item}}: each matching file is the item"
    if not _uses_item({k: v for k, v in raw_action.items() if k != "forEach"}):
        return ("an action with forEach must write {{item}} where each item goes (its command, inputs, ...): "
                "without it every file is the same computation")  # fmt: skip
    return None


def _text_size(template: dict[str, Any], items: list[str]) -> int:
    """About how many characters the copies of ``template`` for ``items`` hold: known before
    making them, so that a small body cannot make gigabytes."""
    text = json.dumps(template)
    return len(items) * len(text) + text.count(ITEM_REFERENCE) * sum(map(len, items))


def item_ids(aid: ActionId, count: int) -> list[str]:
    width = len(str(count))
    return [f"{aid}-{n:0{width}d}" for n in range(1, count + 1)]


def expand(
    actions: list[ActionSpec],
    positions: list[int],
    start: ActionId | None,
    end: ActionId | None,
    violations: list[Violation],
    parsed: list[tuple[int, ActionSpec]] | None = None,
) -> tuple[list[ActionSpec], list[int]]:
    """Every mapped action replaced by its item actions, and every parent naming a mapped
    action by all of them; the new positions alongside. Problems go to ``violations``.
    ``parsed`` (parse_workflow's list for the installation checks) is updated likewise."""
    from shared.workflow_spec import Violation

    mapped = [(i, a) for i, a in zip(positions, actions, strict=True) if a.forEach is not None]
    if not mapped:
        return actions, positions

    def bad(i: int, a: ActionSpec, place: str, message: str, aid: ActionId | None = None) -> None:
        field = place.partition("[")[0]
        where = f"actions[{i}].{place}"
        violations.append(Violation(loc=where, actionId=a.id if aid is None else aid, field=field, message=message))

    before = len(violations)
    templates = {a.id: a.model_dump(exclude={"id", "parents", "forEach"}) for _, a in mapped}
    _check_size(actions, mapped, templates, violations)
    # Too large: nothing is made of it (the limits are checked before any copy is made).
    expanding = mapped if len(violations) == before else []
    copies: dict[ActionId, list[ActionSpec]] = {}
    taken = {str(a.id) for a in actions}
    for i, a in expanding:
        made = _item_actions(i, a, templates[a.id], taken, bad)
        if made is not None:
            copies[a.id] = made
    for field, ref in (("startActionId", start), ("endActionId", end)):
        if ref is not None and any(a.id == ref for _, a in mapped):
            violations.append(Violation(loc=field, field=field, message=f"{field} cannot name an action with forEach"))
    if parsed is not None:  # a definition that cannot fan out is not checked against the installation
        failed = {a.id for _, a in mapped if a.id not in copies}
        parsed[:] = [(i, a) for i, a in parsed if a.id not in failed]
    if len(violations) > before:
        return actions, positions
    return _replaced(actions, positions, copies, parsed)


def _check_size(
    actions: list[ActionSpec], mapped: list[tuple[int, ActionSpec]], templates: dict[ActionId, dict[str, Any]],
    violations: list[Violation],
) -> None:  # fmt: skip
    """The workflow's limits, counted before any copy is made: actions, and characters of definitions."""
    from shared.workflow_spec import Violation

    total = len(actions) - len(mapped) + sum(len(a.forEach or ()) for _, a in mapped)
    if total > MAX_ACTIONS:
        message = f"the workflow fans out to {total} actions: at most {MAX_ACTIONS}"
        violations.append(Violation(loc="actions", field="forEach", message=message))
    size = sum(_text_size(templates[a.id], a.forEach or []) for _, a in mapped)
    if size > MAX_TEXT:
        message = f"the workflow fans out to {size} characters of definitions: at most {MAX_TEXT}"
        violations.append(Violation(loc="actions", field="forEach", message=message))


def _item_actions(
    i: int, a: ActionSpec, template: dict[str, Any], taken: set[str], bad: Callable[..., None]
) -> list[ActionSpec] | None:
    """The item actions of one mapped action (their ids added to ``taken``), or None if it
    cannot fan out (the reasons go to ``bad``)."""
    from shared.workflow_spec import ActionSpec, _is_clean_path

    items = a.forEach or []
    if not items:
        bad(i, a, "forEach", "forEach needs at least one item")
        return None
    first: dict[str, int] = {}
    for k, item in enumerate(items):
        if item in first:
            bad(i, a, f"forEach[{k}]", f"item {k} repeats item {first[item]}: the two would be one computation")
        first.setdefault(item, k)
    if not _uses_item(template):
        bad(i, a, "forEach", "an action with forEach must write {{item}} where each item goes (its command, "
                             "inputs, ...): without it every item is the same computation")  # fmt: skip
        return None
    ids = item_ids(a.id, len(items))
    if clash := next((x for x in ids if x in taken), None):
        bad(i, a, "id", f"the item actions of {a.id!r} are named {ids[0]} ... {ids[-1]}: {clash!r} is taken")
        return None
    taken.update(ids)
    made = []
    for aid, item in zip(ids, items, strict=True):
        copy = ActionSpec.model_validate({**_put(template, item), "id": aid, "parents": a.parents})
        for field in _PATH_FIELDS:
            value = getattr(copy, field)
            if value and not _is_clean_path(value):
                bad(i, a, field, f"{field} must not contain '..' or NUL (item {item!r})", aid)
        for p in copy.configurationParameters:
            if not p.key or "=" in p.key:
                bad(i, a, "configurationParameters", f"item {item!r} makes a key empty or with '='", aid)
        made.append(copy)
    return made


def _replaced(
    actions: list[ActionSpec], positions: list[int], copies: dict[ActionId, list[ActionSpec]],
    parsed: list[tuple[int, ActionSpec]] | None,
) -> tuple[list[ActionSpec], list[int]]:  # fmt: skip
    """Each mapped action replaced by its copies, and each parent naming one by all of them."""
    from shared.workflow_spec import id_order

    def gathered(parents: list[ActionId]) -> list[ActionId]:
        if not any(p in copies for p in parents):
            return parents
        out = [c.id for p in parents for c in copies.get(p, ())] + [p for p in parents if p not in copies]
        return sorted(dict.fromkeys(out), key=id_order)

    out_actions: list[ActionSpec] = []
    out_positions: list[int] = []
    for i, a in zip(positions, actions, strict=True):
        made = copies.get(a.id, [a])
        for c in made:
            parents = gathered(c.parents)
            out_actions.append(c if parents is c.parents else c.model_copy(update={"parents": parents}))
            out_positions.append(i)
    if parsed is not None:
        by_id = {a.id: a for a in out_actions}
        parsed[:] = [(i, by_id[c.id]) for i, a in parsed for c in copies.get(a.id, [a])]
    return out_actions, out_positions
