"""A submission at the gateway: check a workflow's paths and folders against this
installation, before the engine plans and writes it (``shared.lifecycle.submitting``).
A workflow rejected here writes nothing at all.
"""

from __future__ import annotations

import asyncio
import posixpath
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.collector import run_paused
from shared.config import Settings
from shared.executors.base import Executor
from shared.inputs import candidates
from shared.path_limits import path_problem
from shared.storage import Storage
from shared.storage.base import FolderTooLarge, InputTooLarge
from shared.webhooks.urls import refused_webhooks
from shared.workflow_fanout_files import expand_files
from shared.workflow_spec import ActionId, ActionSpec, ActionType, Violation, WorkflowSpec, parse_workflow


@dataclass
class Checked:
    """A submitted body as the engine takes it (``spec``: None if it did not parse), or
    what is wrong with it (``violations``: then nothing is written)."""

    spec: WorkflowSpec | None
    paths: dict[ActionId, dict[str, str]] = field(default_factory=dict)
    prints: dict[ActionId, str] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)


async def check(
    body: Any, settings: Settings, storage: Storage, executor: Executor, owner: str | None, plain: bool | None = None
) -> Checked:
    """Parse ``body`` and check it against this installation, in one answer: every
    violation is listed. A step the workflow does not ask for (a file fan-out, webhooks,
    external inputs) is not taken. ``plain``: ``is_plain(body)``, if asked already."""
    parsed: list[tuple[int, ActionSpec]] = []
    # Parsing a big workflow is CPU work: in a worker thread, other requests are answered meanwhile.
    # With the garbage collector paused (shared/collector.py): half of a big parse's CPU otherwise.
    spec, violations = await asyncio.to_thread(run_paused, parse_workflow, body, parsed, plain=plain)
    if any(a.forEachFiles is not None for _, a in parsed):
        spec, files = await expand_files(spec, parsed, settings, storage)
        violations = [*violations, *files]
    if isinstance(body, dict) and "webhooks" in body:
        violations = [*violations, *refused_webhooks(body, settings)]
    paths, local = await resolve_paths(parsed, settings, storage, executor, owner)
    violations = [*violations, *local]
    if violations:
        return Checked(spec, paths, violations=violations)
    prints, violations = await fingerprints(parsed, paths, storage)
    if any(a.additionalInput for _, a in parsed):
        found, bad_inputs = await inputs(parsed, settings, storage, owner)
        violations = [*violations, *bad_inputs]
        if spec is not None:  # the inputs' fingerprints are part of the actions' definitions
            spec = with_inputs(spec, found)
    if spec is not None and any(a.type == ActionType.SQOOP for a in spec.actions):
        spec = with_import_times(spec, datetime.now(UTC))
    return Checked(spec, paths, prints, violations)


async def resolve_paths(
    actions: list[tuple[int, ActionSpec]],
    settings: Settings,
    storage: Storage,
    executor: Executor,
    owner: str | None = None,
) -> tuple[dict, list[Violation]]:
    """Where each action's folder and unmanaged output are in the storage's namespace
    (local filesystem or HDFS); every path from a request must stay inside the roots the
    operator allowed (output roots for ``owner``: docs/users.md). ``actions`` are
    (position in the submitted list, action)."""
    out: dict[ActionId, dict[str, str]] = {}
    violations: list[Violation] = []
    # Worked out only if an action names a path: most name none.
    action_roots = settings.action_root_list() if any(a.actionFolder for _, a in actions) else []
    output_roots = settings.output_root_list(owner) if any(a.outputPath for _, a in actions) else []
    checked: dict[str, tuple[str, str | None]] = {}  # folder as given -> (normalized, problem)
    for i, a in actions:

        def bad(field: str, message: str, i: int = i, a: ActionSpec = a) -> None:
            violations.append(Violation(loc=f"actions[{i}].{field}", actionId=a.id, field=field, message=message))

        paths: dict[str, str] = {}
        if a.type not in executor.supports:
            bad("type", f"{a.type.value} actions are not supported by the {executor.name} executor")
        else:
            for field, why in executor.refusals(a, owner):
                bad(field, why)
        if a.actionFolder:
            if a.actionFolder not in checked:  # thousands of actions usually share a few folders
                folder, problem = storage.normalize(action_roots[0], a.actionFolder), None
                if not storage.inside(folder, action_roots):
                    problem = f"actionFolder must be inside {', '.join(action_roots)}"
                elif too_long := path_problem("actionFolder", folder, output=False):
                    problem = too_long
                elif not await storage.is_dir(folder):
                    problem = f"actionFolder {a.actionFolder!r} is not a directory"
                checked[a.actionFolder] = (folder, problem)
            folder, problem = checked[a.actionFolder]
            if problem:
                bad("actionFolder", problem)
            paths["action_folder_path"] = folder
        if a.outputPath and not output_roots:
            bad("outputPath", "no output root is open to this user (PINGO_OUTPUT_ROOTS): only managed outputs")
        elif a.outputPath:
            target = storage.normalize(output_roots[0], a.outputPath)
            if not storage.inside(target, output_roots) or target in output_roots:
                bad("outputPath", f"outputPath must be inside {', '.join(output_roots)}")
            elif too_long := path_problem("outputPath", target, output=True):
                bad("outputPath", f"{too_long} once inside {output_roots[0]}")  # its attempts could not be written
            paths["output_path"] = target
        out[a.id] = paths
    return out, violations


async def fingerprints(
    actions: list[tuple[int, ActionSpec]], paths: dict, storage: Storage
) -> tuple[dict[ActionId, str], list[Violation]]:
    """The fingerprint of each action folder's files (part of the lineage hash), computed
    once per folder; a folder too large to fingerprint is a violation of every action
    that names it."""
    by_folder: dict[str, str | FolderTooLarge] = {}
    out: dict[ActionId, str] = {}
    violations: list[Violation] = []
    for i, a in actions:
        folder = paths.get(a.id, {}).get("action_folder_path")
        if not folder:
            continue
        if folder not in by_folder:
            try:
                by_folder[folder] = await storage.fingerprint(folder)
            except FolderTooLarge as exc:
                by_folder[folder] = exc
        found = by_folder[folder]
        if isinstance(found, FolderTooLarge):
            violations.append(
                Violation(loc=f"actions[{i}].actionFolder", actionId=a.id, field="actionFolder", message=str(found))
            )
        else:
            out[a.id] = found
    return out, violations


async def inputs(
    actions: list[tuple[int, ActionSpec]], settings: Settings, storage: Storage, owner: str | None = None
) -> tuple[dict[ActionId, list[dict[str, Any]]], list[Violation]]:
    """The external inputs each action's ``additionalInput`` names, each ``{"path", ...its
    fingerprint}`` (docs/planning.md, "External inputs"), fingerprinted once per path.

    Only a path inside the inputs roots open to ``owner`` is ever looked at, and never one
    in Pingo's own data (its store, its jobs' folders): whether a path outside exists is
    not asked, so its fingerprint, or its existence, cannot be learnt by naming it. A value
    there is taken as text, as before inputs existed; declared as an input, it is a
    violation whether or not it exists."""
    roots = settings.input_root_list(owner)
    # What no user may read, whatever the roots say, but datasets and outputs: Pingo's data
    # folder (its store, its jobs) and, on HDFS, its Oozie applications (a SHELL action's
    # secret values are in their workflow.xml).
    readable = [settings.managed_path(), *settings.output_root_list(owner)]
    if settings.on_hdfs:
        private = [posixpath.join(settings.hdfs_root, "oozie-apps")]
    else:
        private = [str(settings.data_dir.resolve())]
    checksum = settings.input_fingerprint == "checksum"
    seen: dict[str, dict[str, Any] | InputTooLarge | None] = {}
    out: dict[ActionId, list[dict[str, Any]]] = {}
    violations: list[Violation] = []
    for i, a in actions:
        found: dict[str, dict[str, Any]] = {}
        for c in candidates(a, settings.on_hdfs):

            def bad(message: str, i: int = i, a: ActionSpec = a, j: int = c.index) -> None:
                violations.append(
                    Violation(loc=f"actions[{i}].additionalInput[{j}]", actionId=a.id, field="additionalInput",
                              message=message)
                )  # fmt: skip

            if c.problem:
                bad(c.problem)
                continue
            path = storage.normalize("/", c.path)
            hidden = storage.inside(path, private) and not storage.inside(path, readable)
            if not storage.inside(path, roots) or hidden:
                if c.declared:
                    bad(f"input {c.path} must be inside {', '.join(roots) or 'an input root'} (PINGO_INPUT_ROOTS)")
                continue
            if path not in seen:
                try:
                    seen[path] = await storage.input_print(path, checksum, settings.input_max_files, owner)
                except InputTooLarge as exc:
                    seen[path] = exc
            print_ = seen[path]
            if isinstance(print_, InputTooLarge):
                bad(str(print_))
            elif print_ is None:
                if c.declared:
                    bad(f"input {c.path} does not exist")
            else:
                found[path] = {"path": path, **print_}
        if found:
            out[a.id] = [found[p] for p in sorted(found)]
    return out, violations


def with_inputs(spec: WorkflowSpec, found: dict[ActionId, list[dict[str, Any]]]) -> WorkflowSpec:
    """``spec`` with each action's inputs and their fingerprints: part of its definition."""
    if not found:
        return spec
    actions = [a.model_copy(update={"inputs": found[a.id]}) if a.id in found else a for a in spec.actions]
    return spec.model_copy(update={"actions": actions})


def with_import_times(spec: WorkflowSpec, at: datetime) -> WorkflowSpec:
    """``spec`` with each SQOOP import that has no cacheVersion stamped with ``at``, the
    submission's time: a database's content cannot be fingerprinted, so such an import is
    a fresh lineage every time, and a miss that says so (docs/planning.md, "SQOOP actions")."""
    stamp = at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    actions = [
        a.model_copy(update={"importedAt": stamp}) if a.type == ActionType.SQOOP and not a.pinned() else a
        for a in spec.actions
    ]
    return spec.model_copy(update={"actions": actions})
