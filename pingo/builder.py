"""Writing a workflow in Python (docs/workflows-in-python.md).

A ``Workflow`` collects actions made by its typed methods (``shell``, ``map_reduce``,
``command_line``, ``spark``); each returns an ``Action`` that later actions name as a
parent by reference. ``to_json()`` is a workflow document in today's language (the thesis
format: ``additionalInput`` as ``[{key, value}]``, parents as ids), nothing more: the
server cannot tell how it was written, so its lineage hashes are the ones the same
workflow written as JSON gets. Checking it is the language's own check
(``shared.workflow_spec.parse_workflow``, what ``pingo validate`` runs), and submitting it
goes through ``pingo.client.Client``.

Ids are given in the order actions are made (1, 2, ...) unless one is given. A parent
must be an action of the same workflow, made before its child: a builder's workflow is a
DAG by construction.

``for_each=[...]`` maps an action over a list (docs/planning.md, "Fan-out"), and
``for_each=Files("/data/in/*.csv")`` over the files a pattern matches: ``ITEM`` stands for
``{{item}}``, each item's place; a child given the action as a parent gathers them all.

``workflow.parameter("day", default=...)`` declares a parameter (docs/planning.md,
"Parameters") and returns a ``Parameter``, which stands for its reference ``{{day}}``
wherever text is written: ``inputs={"day": day}``, ``f"--day={day}"``. Its values are
given when the workflow is checked or submitted (``values={"day": "2026-11-21"}``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

if TYPE_CHECKING:  # the client's aiohttp and the language's pydantic are needed only when used
    from pingo.client import Client
    from shared.workflow_spec import ActionId, Violation, WorkflowSpec


@dataclass(frozen=True)
class Parameter:
    """A declared parameter; as text (``str``, f-strings) it is its reference, ``{{name}}``."""

    name: str

    def __str__(self) -> str:
        return "{{" + self.name + "}}"


def _for_each(items: Sequence[Scalar] | Files | None) -> list[Scalar] | dict[str, str] | None:
    if items is None:
        return None
    return items.to_json() if isinstance(items, Files) else list(items)


def _plain(value: Any) -> Any:
    """``value`` with every ``Parameter`` in it turned into its reference."""
    if isinstance(value, Parameter):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# The item of a fan-out action (``for_each=[...]``): as text, ``{{item}}``.
ITEM = Parameter("item")


@dataclass(frozen=True)
class Files:
    """``for_each=Files("/data/in/*.csv")``: one action per file the pattern matches on the
    action's storage, found when the workflow is submitted; ``ITEM`` is each file's path
    (docs/planning.md, "Fan-out over files")."""

    pattern: str | Parameter

    def to_json(self) -> dict[str, str]:
        return {"files": str(self.pattern)}


# What an input or a configuration value may be: the language turns numbers and booleans
# into text (``true``/``false``), as it does for JSON.
Scalar = str | int | float | bool | Parameter
Inputs = Mapping[str, Scalar] | Sequence[Scalar]


class Options(TypedDict, total=False):
    """What every action method also takes (docs/workflows-in-python.md)."""

    id: int | str  # default: 1, 2, ... in the order actions are made
    force: bool  # forceComputation
    output_path: str  # an unmanaged action's output (isManaged: false)
    retries: int | Mapping[str, float]  # 2, or {"count": 2, "delaySeconds": 10, "backoff": 2}
    timeout: float  # seconds, one attempt
    for_each: Sequence[Scalar] | Files  # the items of a fan-out, or Files(pattern); ITEM is each one's place
    cache_version: str  # cacheVersion: part of the key, a fresh lineage when changed


class InvalidWorkflow(ValueError):
    """The workflow breaks the language's rules: ``violations`` lists every one."""

    def __init__(self, name: str, violations: list[Violation]) -> None:
        self.violations = violations
        lines = [f"  - {v.loc}: {v.message}" for v in violations]
        super().__init__(f"workflow {name!r} has {len(violations)} violation(s):\n" + "\n".join(lines))


@dataclass(frozen=True, eq=False)
class Action:
    """One action of a ``Workflow``; pass it as a parent of later actions."""

    workflow: Workflow = field(repr=False)
    id: ActionId
    name: str
    fields: dict[str, Any] = field(repr=False)
    parents: tuple[Action, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, **self.fields}
        if self.parents:
            out["parentActions"] = [p.id for p in self.parents]
        return out


def _pairs(values: Inputs | None) -> list[dict[str, Any]] | None:
    """``{"day": "x"}`` -> ``[{"key": "day", "value": "x"}]``; a sequence gives unkeyed values."""
    if values is None:
        return None
    if isinstance(values, Mapping):
        return [{"key": str(k), "value": v} for k, v in values.items()]
    if isinstance(values, str | bytes):
        raise TypeError("inputs must be a mapping or a list of values, not a single string")
    return [{"value": v} for v in values]


class Workflow:
    """A workflow being written in Python. ``start`` and ``end`` (optional) are actions;
    ``webhooks``: URLs told when it ends (docs/webhooks.md)."""

    def __init__(
        self, name: str, *, retries: int | Mapping[str, float] | None = None, timeout: float | None = None,
        webhooks: Sequence[str] = (),
        cache_version: str | None = None,
    ) -> None:  # fmt: skip
        self.name = name
        self.webhooks = list(webhooks)
        self.cache_version = cache_version
        self.actions: list[Action] = []
        self.start: Action | None = None
        self.end: Action | None = None
        self.defaults = {k: v for k, v in (("retries", retries), ("timeoutSeconds", timeout)) if v is not None}
        self.parameters: dict[str, dict[str, Any]] = {}
        self._ids: set[str] = set()

    def parameter(self, name: str, default: str | int | float | bool | None = None, *,
                  description: str | None = None) -> Parameter:  # fmt: skip
        """Declare a parameter (without a default, every submission must give a value)."""
        if name == ITEM.name:
            raise ValueError("'item' is reserved: ITEM is the item of an action with for_each")
        if name in self.parameters:
            raise ValueError(f"parameter {name!r} is already declared")
        declared = {k: v for k, v in (("default", default), ("description", description)) if v is not None}
        self.parameters[name] = declared
        return Parameter(name)

    # -- actions, one method per type ------------------------------------------------

    def shell(
        self,
        name: str,
        command: Sequence[str],
        *,
        folder: str | None = None,
        inputs: Inputs | None = None,
        env: Mapping[str, Scalar] | None = None,
        parents: Iterable[Action] = (),
        **common: Unpack[Options],
    ) -> Action:
        """A SHELL action: ``command`` is an argv (never a shell line), run in ``folder``;
        ``env`` becomes its environment variables (``configurationParameters``)."""
        return self._add(name, "SHELL", parents, common, actionFolder=folder, command=list(command),
                         additionalInput=_pairs(inputs), configurationParameters=_pairs(env))  # fmt: skip

    def map_reduce(
        self,
        name: str,
        mapper: Sequence[str] | str,
        reducer: Sequence[str] | str | None = None,
        *,
        folder: str | None = None,
        inputs: Inputs | None = None,
        properties: Mapping[str, Scalar] | None = None,
        input_format: str | None = None,
        output_format: str | None = None,
        mapreduce_api: str | None = None,
        parents: Iterable[Action] = (),
        **common: Unpack[Options],
    ) -> Action:
        """A MAP_REDUCE action: streaming commands (argv lists) or Java class names;
        ``inputs`` are input paths, ``properties`` Hadoop job properties, ``mapreduce_api``
        the Java classes' API ("mapred", the default, or "mapreduce")."""

        def side(value: Sequence[str] | str | None) -> list[str] | str | None:
            return value if value is None or isinstance(value, str) else list(value)

        return self._add(name, "MAP_REDUCE", parents, common, actionFolder=folder, mapper=side(mapper),
                         reducer=side(reducer), inputFormat=input_format, outputFormat=output_format,
                         mapreduceApi=mapreduce_api,
                         additionalInput=_pairs(inputs), configurationParameters=_pairs(properties))  # fmt: skip

    def command_line(
        self,
        name: str,
        main_class: str,
        *,
        folder: str,
        inputs: Inputs | None = None,
        properties: Mapping[str, Scalar] | None = None,
        parents: Iterable[Action] = (),
        **common: Unpack[Options],
    ) -> Action:
        """A COMMAND_LINE action: the Java ``main_class`` of the jars in ``folder``;
        ``properties`` become ``-Dkey=value`` system properties."""
        return self._add(name, "COMMAND_LINE", parents, common, actionFolder=folder, mainClassName=main_class,
                         additionalInput=_pairs(inputs), configurationParameters=_pairs(properties))  # fmt: skip

    def spark(
        self,
        name: str,
        application: str,
        *,
        folder: str,
        main_class: str | None = None,
        spark_opts: Sequence[str] | None = None,
        inputs: Inputs | None = None,
        conf: Mapping[str, Scalar] | None = None,
        parents: Iterable[Action] = (),
        **common: Unpack[Options],
    ) -> Action:
        """A SPARK action: ``application`` (``job.py``, or ``app.jar`` with ``main_class``)
        in ``folder``; ``conf`` are Spark properties (``--conf k=v``)."""
        return self._add(name, "SPARK", parents, common, actionFolder=folder, application=application,
                         mainClassName=main_class, sparkOpts=None if spark_opts is None else list(spark_opts),
                         additionalInput=_pairs(inputs), configurationParameters=_pairs(conf))  # fmt: skip

    def sqoop(
        self,
        name: str,
        connect: str,
        *,
        table: str | None = None,
        query: str | None = None,
        columns: Sequence[str] | None = None,
        where: str | None = None,
        split_by: str | None = None,
        mappers: int | None = None,
        username: str | None = None,
        password_file: str | None = None,
        properties: Mapping[str, Scalar] | None = None,
        parents: Iterable[Action] = (),
        **common: Unpack[Options],
    ) -> Action:
        """A SQOOP action: an import of ``table`` (its ``columns``, rows ``where``) or of
        ``query`` from the JDBC database ``connect`` (docs/planning.md, "SQOOP actions");
        the password is the content of ``password_file``, never given here."""
        return self._add(name, "SQOOP", parents, common, connect=connect, table=table, query=query,
                         columnNames=None if columns is None else list(columns), where=where, splitBy=split_by,
                         mappers=mappers, username=username, passwordFile=password_file,
                         configurationParameters=_pairs(properties))  # fmt: skip

    def _add(self, name: str, type_: str, parents: Iterable[Action], options: Options, **fields: Any) -> Action:
        common: dict[str, Any] = dict(options)
        ident = common.pop("id", None)
        settings = {
            "forceComputation": common.pop("force", None),
            "outputPath": common.pop("output_path", None),
            "retries": common.pop("retries", None),
            "timeoutSeconds": common.pop("timeout", None),
            "forEach": _for_each(common.pop("for_each", None)),
            "cacheVersion": common.pop("cache_version", None),
        }
        if common:
            known = "id, force, output_path, retries, timeout, for_each, cache_version"
            raise TypeError(f"{name!r}: unknown option(s) {', '.join(sorted(common))} (known: {known})")
        if settings["outputPath"] is not None:
            settings["isManaged"] = False  # the output goes where the user says; never reused
        parents = tuple(parents)
        for p in parents:
            if not isinstance(p, Action):
                raise TypeError(f"{name!r}: a parent must be an Action this workflow made, not {p!r}")
            if p.workflow is not self:
                raise ValueError(f"{name!r}: parent {p.name!r} is an action of another workflow")
        if ident is None:
            ident = len(self.actions) + 1
            while str(ident) in self._ids:
                ident += 1
        self._ids.add(str(ident))  # a repeated id given by hand is the language's to report
        body = {"type": type_, **{k: _plain(v) for k, v in {**fields, **settings}.items() if v is not None}}
        action = Action(self, ident, str(name), body, parents)
        self.actions.append(action)
        return action

    # -- the document, its check, its hashes ---------------------------------------

    def to_json(self, values: Mapping[str, Scalar] | None = None) -> dict[str, Any]:
        """The workflow document the server receives, with ``values`` for its parameters."""
        out: dict[str, Any] = {"name": str(self.name)}
        if self.parameters:
            out["parameters"] = {name: dict(declared) for name, declared in self.parameters.items()}
        if values:
            out["parameterValues"] = dict(values)
        if self.start is not None:
            out["startActionId"] = self.start.id
        if self.end is not None:
            out["endActionId"] = self.end.id
        if self.defaults:
            out["defaults"] = dict(self.defaults)
        if self.webhooks:
            out["webhooks"] = list(self.webhooks)
        if self.cache_version is not None:
            out["cacheVersion"] = self.cache_version
        out["actions"] = [a.to_json() for a in self.actions]
        return out

    def dumps(self, indent: int | None = 2, values: Mapping[str, Scalar] | None = None) -> str:
        return json.dumps(self.to_json(values), indent=indent, ensure_ascii=False)

    def validate(self, values: Mapping[str, Scalar] | None = None) -> list[Violation]:
        """Every violation of the language's rules, as ``pingo validate`` lists them (none: valid).
        Paths against the allowed roots and executor support are the server's to check."""
        from shared.workflow_spec import parse_workflow

        return parse_workflow(self.to_json(values))[1]

    def spec(self, values: Mapping[str, Scalar] | None = None) -> WorkflowSpec:
        """The normalized workflow the planner sees; ``InvalidWorkflow`` if it breaks a rule."""
        from shared.workflow_spec import parse_workflow

        spec, violations = parse_workflow(self.to_json(values))
        if spec is None:
            raise InvalidWorkflow(self.name, violations)
        return spec

    def hashes(self, values: Mapping[str, Scalar] | None = None) -> dict[ActionId, str]:
        """Each action's lineage hash by id, without the action folders' fingerprints (the
        server adds those: a SPARK or Java folder's files)."""
        from shared.hashing import workflow_hashes

        return workflow_hashes(self.spec(values))

    # -- submitting ----------------------------------------------------------------

    async def submit(
        self, client: Client | None = None, *, values: Mapping[str, Scalar] | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Submit through ``client`` (default: a ``Client`` of ``PINGO_URL`` or the local
        gateway, as ``pingo submit`` would use); ``dry_run``: the plan, nothing written.
        Checked here first, so a workflow that breaks a rule is not sent."""
        self.spec(values)
        if client is None:
            from pingo.client import Client

            async with Client() as own:
                return await self.submit(own, values=values, dry_run=dry_run)
        return await (client.dry_run if dry_run else client.submit)(self.to_json(values))
