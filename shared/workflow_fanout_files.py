"""Fan-out over files (docs/planning.md, "Fan-out over files"): an action with
``"forEach": {"files": "/data/in/*.csv"}`` becomes one action per file the pattern matches
on the action's storage when the workflow is submitted, exactly as if its ``forEach`` had
listed their paths: each file's path is its item, so it is part of that action's
definition and lineage hash as a listed value is. A file's content is not (yet): a file
changed in place under the same path is reused, not computed again.

The pattern is a glob (``*``, ``?``, ``[...]``, ``**`` for any depth) read by the
language (``shared.workflow_spec``: ``ActionSpec.forEachFiles``, parameters filled in);
here it is checked against the installation and expanded, after ``parse_workflow`` and
before the paths are resolved, by the same expansion as a list (``workflow_fanout.expand``).
What it may match: files inside the action roots (``PINGO_ACTION_ROOTS``, where the
user's code and inputs are read from, and what a sandboxed job may read; the output roots
and the managed root are hidden from jobs), at most ``PINGO_FANOUT_MAX_FILES`` of them.
Local storage only for now.
"""

from __future__ import annotations

import asyncio
import glob
import os
from pathlib import PurePosixPath

from shared.config import Settings
from shared.storage import Storage
from shared.workflow_fanout import expand
from shared.workflow_spec import ActionId, ActionSpec, Violation, WorkflowSpec

_MAGIC = set("*?[")


def _base(pattern: str) -> str:
    """The folder a pattern searches: its parts before the first one with a wildcard."""
    parts = PurePosixPath(pattern).parts
    fixed = []
    for part in parts:
        if _MAGIC & set(part):
            break
        fixed.append(part)
    return str(PurePosixPath(*fixed)) if fixed else "."


def _match(pattern: str, limit: int) -> list[str]:
    """Regular files matching ``pattern`` (absolute), their real paths; ``limit`` + 1 at most,
    so that a pattern matching millions stops early."""
    found: list[str] = []
    for path in glob.iglob(pattern, recursive=True):
        if os.path.isfile(path):
            found.append(path)
            if len(found) > limit:
                break
    return found


async def expand_files(
    spec: WorkflowSpec | None,
    parsed: list[tuple[int, ActionSpec]],
    settings: Settings,
    storage: Storage,
) -> tuple[WorkflowSpec | None, list[Violation]]:
    """``spec`` with every action mapped over a file pattern expanded into one action per
    matching file (``parsed`` updated likewise), or the violations. Actions of a workflow
    that did not parse are still checked, so that one answer lists every problem."""
    violations: list[Violation] = []
    roots = settings.action_root_list()
    matches: dict[ActionId, list[str]] = {}
    for i, a in parsed:
        if a.forEachFiles is None:
            continue

        def bad(message: str, i: int = i, a: ActionSpec = a) -> None:
            violations.append(Violation(loc=f"actions[{i}].forEach.files", actionId=a.id, field="forEach",
                                        message=message))  # fmt: skip

        if settings.on_hdfs:
            bad("forEach.files is for local storage only for now (PINGO_STORAGE=local): list the paths instead")
            continue
        pattern = storage.normalize(roots[0], a.forEachFiles)
        if not storage.inside(storage.normalize(roots[0], _base(a.forEachFiles)), roots):
            bad(f"forEach.files must search inside {', '.join(roots)}")
            continue
        limit = settings.fanout_max_files
        found = await asyncio.to_thread(_match, pattern, limit)
        if len(found) > limit:
            bad(f"forEach.files {a.forEachFiles!r} matches more than {limit} files (PINGO_FANOUT_MAX_FILES): "
                "narrow the pattern or split the workflow")  # fmt: skip
            continue
        if not found:
            bad(f"forEach.files {a.forEachFiles!r} matches no file")
            continue
        items = []
        for path in sorted(found):
            real = storage.normalize(roots[0], path)  # a link is judged by what it points to
            if not storage.inside(real, roots):
                bad(f"{path!r} leads outside {', '.join(roots)}")
            elif "{{" in path:
                bad(f"{path!r}: a path holding '{{{{' cannot be an item")
            else:
                items.append(path)
        matches[a.id] = items
    if spec is None or violations:
        return None, violations
    if not matches:
        return spec, []
    positions = {a.id: i for i, a in parsed}
    actions = [
        a.model_copy(update={"forEach": matches[a.id], "forEachFiles": None}) if a.id in matches else a
        for a in spec.actions
    ]
    parsed[:] = [(i, a.model_copy(update={"forEach": matches[a.id], "forEachFiles": None}) if a.id in matches else a)
                 for i, a in parsed]  # fmt: skip
    actions, _ = expand(
        actions, [positions[a.id] for a in actions], spec.startActionId, spec.endActionId, violations, parsed
    )
    if violations:
        return None, violations
    return spec.model_copy(update={"actions": actions}), []
