"""The workflow definition language (docs/planning.md, "The workflow definition"): parsing and validation.

Both accepted formats are turned into one normalized ``WorkflowSpec``. Validation never
stops at the first problem: it returns every violation with where it is, so a user fixes
a workflow in one round trip.

An accepted body is stored as it came (a BSON document) and its strings reach process
launchers, so the body as a whole must also be storable and launchable: it nests at most
``MAX_DEPTH`` levels; no key or string holds NUL (a C string terminator: BSON keys, argv,
environment) or a lone surrogate (not encodable as UTF-8); every integer fits a signed
64-bit integer; every number is finite.

The language is strict: a field it does not know is a violation (with the closest known
field as a suggestion), at every level, and every message speaks of the workflow's fields,
never of the parser's types.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Annotated, Any

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, field_validator

from shared.path_limits import path_problem
from shared.sizes import Bytes
from shared.strict_json import RepeatedKeys
from shared.workflow_fanout import expand, files_pattern_problem
from shared.workflow_messages import explain, kind, unknown_field
from shared.workflow_parameters import DECLARATIONS, fill_in

ActionId = int | str

MAX_DEPTH = 64  # objects and arrays inside each other; MongoDB refuses documents past 100
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TIMEOUT = 30 * 86_400  # seconds: a month; longer is a mistake, not a timeout
MAX_REPORTED = 100  # document violations listed in one answer: the rest would only repeat them
WORKFLOW_FIELDS = (
    "name", "startActionId", "endActionId", "actions", "defaults", "parameters", "parameterValues", "webhooks",
    "cacheVersion",
)  # fmt: skip


class ActionType(StrEnum):
    COMMAND_LINE = "COMMAND_LINE"
    SHELL = "SHELL"
    MAP_REDUCE = "MAP_REDUCE"
    SPARK = "SPARK"
    SQOOP = "SQOOP"


# SQOOP: an import of a table or a query from a JDBC database (docs/planning.md, "SQOOP
# actions"). The password is never among them: ``passwordFile`` names the file holding it.
SQOOP_FIELDS = ("connect", "table", "query", "columnNames", "where", "splitBy", "mappers", "username", "passwordFile")
MAX_MAPPERS = 64
# List fields of these types are sets for equivalence (thesis Fig. 3.3).
ORDER_INSENSITIVE = frozenset({ActionType.MAP_REDUCE})
REQUIRED_FIELDS: dict[ActionType, tuple[str, ...]] = {
    ActionType.COMMAND_LINE: ("actionFolder", "mainClassName"),
    ActionType.SHELL: ("command",),
    ActionType.MAP_REDUCE: ("mapper",),
    ActionType.SPARK: ("actionFolder", "application"),
    ActionType.SQOOP: ("connect",),
}
# The fields only some types have (docs/planning.md, "The workflow definition"): in the
# definition, hence the lineage hash, of those types alone, so that adding them changed
# no hash of the others.
TYPE_FIELDS: dict[ActionType, tuple[str, ...]] = {
    ActionType.MAP_REDUCE: ("mapper", "reducer", "inputFormat", "outputFormat", "mapreduceApi"),
    ActionType.SPARK: ("application", "sparkOpts"),
    ActionType.SQOOP: SQOOP_FIELDS,
}
# Type fields added after the first hashes were taken, and their default: left out of the
# definition while they hold it, so that no earlier action's hash changed and writing the
# default is the same computation as leaving it out.
LATER_FIELDS: dict[str, Any] = {"mapreduceApi": "mapred", "mappers": 1}
# A Java MAP_REDUCE job's API (docs/planning.md, "Fields of one type"): the old
# org.apache.hadoop.mapred classes, or the new org.apache.hadoop.mapreduce ones (the
# thesis's "MapReduce v2.0").
MAPREDUCE_APIS = ("mapred", "mapreduce")


class Param(BaseModel):
    model_config = ConfigDict(frozen=True)
    key: str | None = None
    value: str
    # A configuration value never shown or logged (docs/planning.md, "Secret values"): it
    # reaches the job's environment, and its digest, not itself, the lineage hash.
    secret: bool = False
    # An additionalInput value's part in input detection (docs/planning.md, "External
    # inputs"): False, never an input; True, an input that must exist; a path, the input
    # this value reads where detection cannot see it (``--in=/data/x.csv``); None, detected.
    input: bool | str | None = None

    def definition(self) -> dict[str, Any]:
        """As hashed: ``secret`` and ``input`` only where set, so that the definitions (and
        lineage hashes) of parameters without them are what they were before they existed."""
        out: dict[str, Any] = {"key": self.key, "value": self.value}
        if self.secret:
            out["secret"] = True
        if self.input is not None:
            out["input"] = self.input
        return out


MASK = "***"  # what every view shows instead of a secret value


def masked_parameters(params: Any) -> Any:
    """``configurationParameters`` as stored or submitted (a list of ``{key, value, secret}``
    or an object of values), with each secret value replaced by ``MASK``."""
    if isinstance(params, list):
        return [{**p, "value": MASK} if isinstance(p, dict) and p.get("secret") is True else p for p in params]
    if isinstance(params, dict):
        return {
            k: {**v, "value": MASK} if isinstance(v, dict) and v.get("secret") is True else v for k, v in params.items()
        }
    return params


def masked_body(body: Any) -> Any:
    """A submitted workflow with its secret values masked: what is kept of it."""
    if not isinstance(body, dict) or not isinstance(body.get("actions"), list):
        return body
    actions = [
        {**a, "configurationParameters": masked_parameters(a["configurationParameters"])}
        if isinstance(a, dict) and "configurationParameters" in a
        else a
        for a in body["actions"]
    ]
    return {**body, "actions": actions}


# Strict: a boolean is not a count (Python's True is 1), nor is the text "3".
RetryCount = Annotated[int, Field(strict=True, ge=0, le=100)]
Seconds = Annotated[float, Field(strict=True, gt=0, le=MAX_TIMEOUT)]


class RetryPolicy(BaseModel):
    """How often a failed attempt is tried again, and after how long. An execution setting:
    not part of the lineage hash (docs/state-machines.md, "Retries and timeouts")."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    count: int = Field(default=0, strict=True, ge=0, le=100, description="Attempts after the first one")
    delaySeconds: float = Field(default=10.0, strict=True, ge=0, le=86_400, description="Wait before the first retry")
    backoff: float = Field(
        default=2.0, strict=True, ge=1, le=10, description="Each later wait is the previous one times this"
    )

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 = the first retry)."""
        return self.delaySeconds * self.backoff ** max(retry - 1, 0)


class Violation(BaseModel):
    loc: str = Field(description="Where, as a JSON path: actions[2].mainClassName")
    message: str
    actionId: ActionId | None = None
    field: str | None = None


class TypeFields(BaseModel):
    """The fields of one action type only (``TYPE_FIELDS``), as submitted and as parsed."""

    # MAP_REDUCE: a streaming command (an argv) or a Java class, for each side.
    mapper: list[str] | str | None = None
    reducer: list[str] | str | None = None
    inputFormat: str | None = None
    outputFormat: str | None = None
    # MAP_REDUCE with Java classes: which Hadoop API they use (None: "mapred").
    mapreduceApi: str | None = None
    # SPARK: the application file inside actionFolder, and spark-submit options (an argv).
    application: str | None = None
    sparkOpts: list[str] | None = None
    # SQOOP: the JDBC URL, a table (with its columns and a row filter) or a query, how the
    # rows are split among the map tasks, and who connects (the password from a file).
    connect: str | None = None
    table: str | None = None
    query: str | None = None
    columnNames: list[str] | None = None
    where: str | None = None
    splitBy: str | None = None
    mappers: Annotated[int, Field(strict=True, ge=1, le=MAX_MAPPERS)] | None = None
    username: str | None = None
    passwordFile: str | None = None


class ActionSpec(TypeFields):
    id: ActionId
    name: str
    type: ActionType
    parents: list[ActionId] = Field(default_factory=list)
    actionFolder: str | None = None
    mainClassName: str | None = None
    command: list[str] | None = None
    additionalInput: list[Param] = Field(default_factory=list)
    configurationParameters: list[Param] = Field(default_factory=list)
    forceComputation: bool = False
    isManaged: bool = True
    outputPath: str | None = None
    # Execution settings: how to run it, not what it computes (kept out of definition()).
    retries: RetryPolicy = Field(default_factory=RetryPolicy)
    timeoutSeconds: float | None = None
    # What its output is expected to take: reserved in the storage budget before it starts.
    expectedBytes: int | None = None
    # A definition mapped over these items; expanded before planning (shared/workflow_fanout.py).
    forEach: list[str] | None = None
    # Or over the files this pattern matches, found at submission (shared/workflow_fanout_files.py).
    forEachFiles: str | None = None
    # Any text the user changes to force a fresh lineage: the action's own, and its
    # workflow's (copied to every action), both hashed (docs/planning.md, "Lineage hashes").
    cacheVersion: str | None = None
    workflowCacheVersion: str | None = None
    # The external inputs its additionalInput names, each with its fingerprint taken at the
    # gateway when the workflow is planned (``InputPrint.document()``); hashed.
    inputs: list[dict[str, Any]] = Field(default_factory=list)
    # A SQOOP import without a cacheVersion: when its workflow was submitted. A database's
    # content cannot be fingerprinted, so each submission is a fresh lineage (docs/planning.md,
    # "SQOOP actions"); set at the gateway, hashed.
    importedAt: str | None = None

    def definition(self) -> dict[str, Any]:
        """The fields that define the computation: what equivalence is judged on."""
        params = [p.definition() for p in self.additionalInput]
        conf = [p.definition() for p in self.configurationParameters]
        if self.type in ORDER_INSENSITIVE:
            params.sort(key=lambda p: (p["key"] or "", p["value"]))
            conf.sort(key=lambda p: (p["key"] or "", p["value"]))
        out = {
            "type": self.type.value,
            "name": self.name,
            "actionFolder": self.actionFolder,
            "mainClassName": self.mainClassName,
            "command": self.command,
            "additionalInput": params,
            "configurationParameters": conf,
        }
        for field in TYPE_FIELDS.get(self.type, ()):
            value = getattr(self, field)
            if field in LATER_FIELDS and value in (None, LATER_FIELDS[field]):
                continue
            out[field] = value
        # Only where given or found: a workflow without them keeps the hashes it had.
        if self.cacheVersion is not None:
            out["cacheVersion"] = self.cacheVersion
        if self.workflowCacheVersion is not None:
            out["workflowCacheVersion"] = self.workflowCacheVersion
        if self.inputs:
            out["inputs"] = self.inputs
        if self.importedAt is not None:
            out["importedAt"] = self.importedAt
        return out

    def pinned(self) -> bool:
        """Whether the user gave a cacheVersion (its own or its workflow's): a SQOOP import
        is then reused on its definition alone, trusting the earlier import."""
        return self.cacheVersion is not None or self.workflowCacheVersion is not None


class WorkflowSpec(BaseModel):
    name: str
    startActionId: ActionId | None = None
    endActionId: ActionId | None = None
    actions: list[ActionSpec]
    # URLs told when the workflow ends (docs/webhooks.md): not what it computes, so in no
    # lineage hash (those are of actions alone).
    webhooks: list[str] = Field(default_factory=list)

    def by_id(self) -> dict[ActionId, ActionSpec]:
        return {a.id: a for a in self.actions}

    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for a in self.actions:
            g.add_node(a.id)
            for p in a.parents:
                g.add_edge(p, a.id)
        return g


def id_order(value: ActionId) -> tuple[int, int | str]:
    """Parents are ordered by id (the argument contract); ints before strings."""
    return (0, value) if isinstance(value, int) else (1, value)


class _RawParam(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str | None = None
    value: str | int | float | bool

    def to_param(self) -> Param:
        v = self.value
        text = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return Param(key=self.key, value=text)


class _RawInput(_RawParam):
    """An additionalInput value: it may say whether it names an external input
    (docs/planning.md, "External inputs")."""

    input: StrictBool | str | None = None

    def to_param(self) -> Param:
        return super().to_param().model_copy(update={"input": self.input})


class _RawSetting(_RawParam):
    """A configuration parameter: it may be marked secret (docs/planning.md, "Secret values")."""

    secret: StrictBool = False

    def to_param(self) -> Param:
        return super().to_param().model_copy(update={"secret": self.secret})


class _RawSecret(BaseModel):
    """A secret value in the object form: ``{"API_KEY": {"value": "…", "secret": true}}``."""

    model_config = ConfigDict(extra="forbid")
    value: str | int | float | bool
    secret: StrictBool = True


class _RawParent(BaseModel):
    """A parent given as an object: ``{"id": 1}`` (either format's id field)."""

    model_config = ConfigDict(extra="forbid")
    id: StrictInt | str | None = None
    actionId: StrictInt | str | None = None


class ForEachFiles(BaseModel):
    """``"forEach": {"files": "/data/in/*.csv"}``: one action per file the pattern matches
    (docs/planning.md, "Fan-out over files")."""

    model_config = ConfigDict(extra="forbid")
    files: str


class _RawAction(TypeFields):
    """One action as submitted, in either format. A field it does not know is a violation."""

    model_config = ConfigDict(extra="forbid")

    id: ActionId | None = None
    actionId: ActionId | None = None
    name: str | None = None
    type: str | None = None
    parentActions: list[StrictInt | str | _RawParent] = Field(default_factory=list)
    actionFolder: str | None = None
    mainClassName: str | None = None
    command: list[str] | None = None
    additionalInput: list[_RawInput | str | int | float] | dict[str, Any] = Field(
        default_factory=list,
        description='Values passed first to the job: [value, {"key", "value"}] or {name: value}; '
        '{"value", "input": false} is never an external input, {"value", "input": true} must be one, '
        '{"value", "input": "/path"} names the input a value reads',
    )
    cacheVersion: str | None = None
    configurationParameters: list[_RawSetting] | dict[str, str | int | float | bool | _RawSecret] = Field(
        default_factory=list,
        description='Named settings: [{"key", "value"}] or {name: value}; a SHELL action\'s value may be secret: '
        '{"key", "value", "secret": true} or {name: {"value", "secret": true}} (never shown or logged)',
    )
    forceComputation: bool = False
    isManaged: bool | None = None
    outputPath: str | None = None
    retries: RetryCount | RetryPolicy | None = None
    timeoutSeconds: Seconds | None = None
    expectedBytes: Bytes | None = None
    forEach: list[str | int | float | bool] | ForEachFiles | None = None

    @field_validator("id", "actionId", mode="before")
    @classmethod
    def _id_is_int_or_text(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("an action id must be an integer or a string, not a boolean")
        if isinstance(v, str) and not v.strip():
            raise ValueError("an action id must not be empty")
        return v

    @field_validator("additionalInput", mode="before")
    @classmethod
    def _scalar_values(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for key, value in v.items():
                if isinstance(value, dict | list) or value is None:
                    raise ValueError(f"the value of {key!r} must be a string, number or boolean")
        return v

    @field_validator("configurationParameters", mode="before")
    @classmethod
    def _setting_values(cls, v: Any) -> Any:
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for key, value in v.items():
                if isinstance(value, dict):
                    try:
                        out[key] = _RawSecret.model_validate(value)
                    except ValidationError:
                        raise ValueError(
                            f'the value of {key!r} must be a string, number or boolean, or {{"value": ..., '
                            '"secret": true}'
                        ) from None
                elif isinstance(value, list) or value is None:
                    raise ValueError(
                        f'the value of {key!r} must be a string, number or boolean, or {{"value": ..., "secret": true}}'
                    )
                else:
                    out[key] = value
            return out
        return v


class ExecutionDefaults(BaseModel):
    """The workflow's ``defaults``: execution settings for every action that gives none."""

    model_config = ConfigDict(extra="forbid")
    retries: RetryCount | RetryPolicy | None = None
    timeoutSeconds: Seconds | None = None


# The model of each object level of an action and of ``defaults``, by the field holding it:
# whose known fields an unknown field is compared with.
_ACTION_PARTS = {
    None: _RawAction,
    "retries": RetryPolicy,
    "additionalInput": _RawInput,
    "configurationParameters": _RawSetting,
    "parentActions": _RawParent,
    "forEach": ForEachFiles,
}
_DEFAULTS_PARTS = {None: ExecutionDefaults, "retries": RetryPolicy}


def _policy(raw: int | RetryPolicy | None) -> RetryPolicy | None:
    """``"retries": 2`` is shorthand for ``{"count": 2}`` with the default delays."""
    return RetryPolicy(count=raw) if isinstance(raw, int) else raw


def _defaults(body: dict[str, Any], violations: list[Violation]) -> ExecutionDefaults:
    raw = body.get("defaults")
    if raw is None:
        return ExecutionDefaults()
    try:
        return ExecutionDefaults.model_validate(raw)
    except ValidationError as exc:
        for path, message in explain(exc, raw, _DEFAULTS_PARTS, "defaults"):
            violations.append(Violation(loc=_join("defaults", path), field="defaults", message=message))
        return ExecutionDefaults()


def _webhooks(raw: Any, violations: list[Violation]) -> list[str]:
    """The workflow's ``webhooks``: a list of http(s) URLs (docs/webhooks.md). Which hosts
    they may call is the installation's to say, at submission (shared/webhooks/urls.py)."""
    from shared.webhooks.urls import MAX_PER_WORKFLOW, url_problem

    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_PER_WORKFLOW:
        message = f"webhooks must be a list of at most {MAX_PER_WORKFLOW} URLs"
        violations.append(Violation(loc="webhooks", field="webhooks", message=message))
        return []
    for i, url in enumerate(raw):
        problem = url_problem(url) if isinstance(url, str) else "a webhook is a URL, in a string"
        if problem:
            violations.append(Violation(loc=f"webhooks[{i}]", field="webhooks", message=problem))
    texts = [u for u in raw if isinstance(u, str)]
    if len(set(texts)) < len(texts):
        violations.append(Violation(loc="webhooks", field="webhooks", message="a webhook URL is given twice"))
    return texts


def _params(raw: list | dict) -> list[Param]:
    if isinstance(raw, dict):
        return [
            _RawSetting(key=str(k), value=v.value, secret=v.secret).to_param()
            if isinstance(v, _RawSecret)
            else Param(key=str(k), value=str(v))
            for k, v in raw.items()
        ]
    out = []
    for item in raw:
        out.append(item.to_param() if isinstance(item, _RawParam) else Param(value=str(item)))
    return out


def _normalize_type(raw: str) -> ActionType | None:
    key = raw.strip().upper().replace("-", "_")
    try:
        return ActionType(key)
    except ValueError:
        return None


def _join(where: str, path: tuple[str | int, ...]) -> str:
    """The location of ``path`` inside the value at ``where``."""
    for p in path:
        where = f"{where}[{p}]" if isinstance(p, int) else _key_loc(where, p)
    return where


def _is_clean_path(value: str) -> bool:
    p = PurePosixPath(value)
    return ".." not in p.parts and "\x00" not in value


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _key_loc(parent: str, key: str) -> str:
    """``parent.key``, or ``parent["k e y"]`` (JSON-escaped, ASCII) for keys that are not plain names."""
    if _NAME.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{_json_text(key)}]" if parent else f"$[{_json_text(key)}]"


def _json_text(value: str) -> str:
    """A string as an ASCII JSON literal: safe to put in a message whatever it holds."""
    return json.dumps(value)


def _string_problem(value: str) -> str | None:
    if "\x00" in value:
        return "NUL characters are not allowed"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogates (unpaired \\ud800-\\udfff escapes) are not allowed: the text is not valid Unicode"
    return None


def _plain_text(value: str) -> bool:
    """Whether ``_string_problem`` finds nothing in ``value``: ASCII without NUL, at once."""
    return "\x00" not in value and (value.isascii() or _string_problem(value) is None)


def _plain(body: Any, *, depth_only: bool = False) -> bool:
    """Whether the document walks below (``too_deep``; unless ``depth_only``, also
    ``document_violations`` and ``repeated_keys``) have nothing to report on ``body``.
    One walk that builds no location: the common body pays no location string per node
    (a 10,000-action workflow: three walks of 0.2 s each; docs/performance.md, "A big
    workflow"). A body it refuses is walked again by them, to say what and where."""
    if not isinstance(body, dict | list):
        return depth_only or _scalar_problem(body) is None
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if isinstance(value, dict):
            if not depth_only and isinstance(value, RepeatedKeys):
                return False
            for k, v in value.items():
                if not depth_only and not (isinstance(k, str) and _plain_text(k)):
                    return False
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1))
                elif not depth_only and _scalar_problem(v) is not None:
                    return False
        else:
            for v in value:
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1))
                elif not depth_only and _scalar_problem(v) is not None:
                    return False
    return True


def _scalar_problem(value: Any) -> str | None:
    """What ``document_violations`` says of a scalar, or None: the one home of its rules
    (``_plain`` asks them too, without a location)."""
    if isinstance(value, str):
        return None if _plain_text(value) else _string_problem(value)
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return "integers must fit a signed 64-bit integer (-2^63 to 2^63-1)"
    if isinstance(value, float) and not math.isfinite(value):
        return "numbers must be finite"
    return None


def is_plain(body: Any) -> bool:
    """Whether none of the document checks (depth, ``document_violations``,
    ``repeated_keys``) has anything to say of ``body``: one walk without locations. A
    caller that asked it hands the answer to ``parse_workflow`` (``plain``), so that a big
    body is walked once before it is parsed (docs/performance.md, "A big workflow")."""
    return _plain(body)


def too_deep(body: Any) -> Violation | None:
    """Where ``body`` first nests deeper than ``MAX_DEPTH`` containers, if it does.

    Iterative, so that it is safe on anything ``json.loads`` accepted."""
    if _plain(body, depth_only=True):
        return None
    stack: list[tuple[Any, str, int]] = [(body, "$", 1)]
    while stack:
        value, loc, depth = stack.pop()
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            return Violation(loc=loc, message=f"nested deeper than {MAX_DEPTH} levels of objects and arrays")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(v, dict | list):
                child = f"{loc}[{k}]" if isinstance(k, int) else _key_loc("" if loc == "$" else loc, str(k))
                stack.append((v, child, depth + 1))
    return None


def document_violations(body: Any) -> list[Violation]:
    """Everything that would stop ``body`` from being stored as BSON or passed to a process:
    NUL or lone surrogates in keys and strings, integers outside int64, non-finite numbers
    (``1e999`` parses as infinity). At most ``MAX_REPORTED``, in document order. Iterative:
    safe at any depth, though ``parse_workflow`` refuses bodies deeper than ``MAX_DEPTH`` first."""
    out: list[Violation] = []
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack and len(out) < MAX_REPORTED:
        value, loc = stack.pop()
        where = loc or "$"
        if isinstance(value, dict):
            children = []
            for k, v in value.items():
                child = _key_loc(loc, k)
                if problem := _string_problem(k):
                    out.append(_located(body, child, f"key {_json_text(k)}: {problem}"))
                children.append((v, child))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
        elif problem := _scalar_problem(value):
            out.append(_located(body, where, problem))
    return out


def repeated_keys(body: Any) -> list[Violation]:
    """Each key given more than once in one object of ``body`` (read by
    ``shared.strict_json.loads``), where it is: such a document means different things to
    different JSON parsers (the last value, the first, or an error). At most ``MAX_REPORTED``."""
    out: list[Violation] = []
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack and len(out) < MAX_REPORTED:
        value, loc = stack.pop()
        if isinstance(value, dict):
            for key in value.repeated if isinstance(value, RepeatedKeys) else ():
                message = f"key {_json_text(key)} is given more than once in this object: keys must be unique"
                out.append(_located(body, _key_loc(loc, key), message))
            stack.extend((v, _key_loc(loc, k)) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((v, f"{loc or '$'}[{i}]") for i, v in reversed(list(enumerate(value))))
    return out


_ACTION_LOC = re.compile(r"actions\[(\d+)\](?:\.([A-Za-z_][A-Za-z0-9_]*))?")


def _located(body: Any, loc: str, message: str) -> Violation:
    """A violation at ``loc``, with the action id and field when it is inside an action."""
    m = _ACTION_LOC.match(loc)
    if not m:
        field = _NAME.match(loc)
        return Violation(loc=loc, field=field.group(0) if field else None, message=message)
    raw = body["actions"][int(m.group(1))] if isinstance(body, dict) else None
    return Violation(loc=loc, actionId=_id_hint(raw), field=m.group(2), message=message)


def _id_hint(raw: Any) -> ActionId | None:
    """The id an action was given, when it is a usable one: violations name their action by it."""
    if not isinstance(raw, dict):
        return None
    value = raw.get("id", raw.get("actionId"))
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return None
    if isinstance(value, str) and _string_problem(value):
        return None
    return value


def parse_workflow(
    body: Any, parsed: list[tuple[int, ActionSpec]] | None = None, *, plain: bool | None = None
) -> tuple[WorkflowSpec | None, list[Violation]]:
    """Normalize a submitted workflow; on any violation return (None, every violation).

    ``parsed``, if given, receives every action that parsed on its own, with its position,
    so that checks against the installation can report on them in the same response.
    ``plain``: ``is_plain(body)``, if the caller asked it already."""
    # The common body: no walk below has anything to report, its depth included, so one
    # walk without locations stands in for all three.
    if plain is None:
        plain = _plain(body)
    if not plain and (deep := too_deep(body)) is not None:
        return None, [deep]
    violations = [] if plain else document_violations(body)
    repeated = [] if plain else repeated_keys(body)  # of the body as written: filling in parameters copies it
    violations += _secret_references(body)
    # Parameters are filled in before anything reads the workflow: hashes are of the filled-in
    # workflow (docs/planning.md, "Parameters").
    body, filled = fill_in(body)
    violations += [_located(body, _join("", path), message) for path, message in filled]
    # An action with a string that cannot be stored or launched is not handed on to the
    # installation checks (paths, executor): they would stumble on it.
    tainted = {int(m.group(1)) for v in violations if (m := _ACTION_LOC.match(v.loc))}
    violations = [*repeated, *violations]
    if not isinstance(body, dict):
        return None, [*violations, Violation(loc="$", message="a workflow must be a JSON object")]
    # A place the document checks already reject is reported once, by them.
    documented, placed = len(violations), {v.loc for v in violations}
    name, raw_actions = _top_level(body, violations)
    defaults = _defaults(body, violations)
    webhooks = _webhooks(body.get("webhooks"), violations)
    actions, positions, rejected = _parse_actions(raw_actions, violations, defaults, tainted, parsed)
    seen = _unique_ids(actions, positions, violations)
    start, end = _references(body, actions, seen, rejected, violations)
    _graph_problems(actions, seen, start, end, violations)
    if any(a.forEach is not None for a in actions):  # a fan-out only where the workflow asks for one
        actions, positions = expand(actions, positions, start, end, violations, parsed)
    actions = _workflow_cache_version(body, actions, violations)
    violations = [v for j, v in enumerate(violations) if j < documented or v.loc not in placed]
    if violations:
        return None, violations
    return WorkflowSpec(name=name.strip(), startActionId=start, endActionId=end, actions=actions, webhooks=webhooks), []


def _workflow_cache_version(
    body: dict[str, Any], actions: list[ActionSpec], violations: list[Violation]
) -> list[ActionSpec]:
    """The workflow's ``cacheVersion``, copied into every action: every action's hash, so
    every dataset, is new when it changes (docs/planning.md, "Lineage hashes")."""
    version = body.get("cacheVersion")
    if version is not None and not isinstance(version, str):
        message = f"cacheVersion must be a string, not {kind(version)}"
        violations.append(Violation(loc="cacheVersion", field="cacheVersion", message=message))
    elif version is not None:
        return [a.model_copy(update={"workflowCacheVersion": version}) for a in actions]
    return actions


def _top_level(body: dict[str, Any], violations: list[Violation]) -> tuple[str, list[Any]]:
    """The workflow's own fields: unknown ones reported, its name and its raw actions."""
    for key in body:
        if key not in WORKFLOW_FIELDS:
            message = unknown_field(key, WORKFLOW_FIELDS, "in the workflow")
            violations.append(Violation(loc=_key_loc("", key), field=key, message=message))
    name = body.get("name", "workflow")
    if not isinstance(name, str) or not name.strip():
        violations.append(Violation(loc="name", field="name", message="name must be a non-empty string"))
        name = "workflow"
    raw_actions = body.get("actions")
    if raw_actions is not None and not isinstance(raw_actions, list):
        message = f"actions must be a list of action objects, not {kind(raw_actions)}"
        violations.append(Violation(loc="actions", field="actions", message=message))
        raw_actions = []
    elif not raw_actions:
        violations.append(Violation(loc="actions", field="actions", message="a workflow must have at least one action"))
        raw_actions = []
    return name, raw_actions


def _parse_actions(
    raw_actions: list[Any], violations: list[Violation], defaults: ExecutionDefaults, tainted: set[int],
    parsed: list[tuple[int, ActionSpec]] | None,
) -> tuple[list[ActionSpec], list[int], set[ActionId]]:  # fmt: skip
    """Each action that parses on its own, with its position in the submitted list
    (locations point there), and the ids of those rejected: their children do not report
    them missing too."""
    positions: list[int] = []
    actions: list[ActionSpec] = []
    rejected: set[ActionId] = set()
    for i, raw in enumerate(raw_actions):
        action = _parse_action(i, raw, violations, defaults)
        if action is not None:
            actions.append(action)
            positions.append(i)
            if parsed is not None and i not in tainted:
                parsed.append((i, action))
        elif (hint := _id_hint(raw)) is not None:
            rejected.add(hint)
    return actions, positions, rejected


def _unique_ids(actions: list[ActionSpec], positions: list[int], violations: list[Violation]) -> dict[ActionId, int]:
    """The position of each action id, duplicates reported. Stored actions are named
    "<workflow>.<id>": 1 and "1" would be one document, so they are one id here too."""
    seen: dict[ActionId, int] = {}
    named: dict[str, tuple[ActionId, int]] = {}
    for i, a in zip(positions, actions, strict=True):
        if str(a.id) in named:
            other, j = named[str(a.id)]
            same = "" if other == a.id else f": {json.dumps(other)} and {json.dumps(a.id)} name the same action"
            violations.append(
                Violation(
                    loc=f"actions[{i}].id",
                    actionId=a.id,
                    field="id",
                    message=f"duplicate action id {a.id!r} (also at actions[{j}]){same}",
                )
            )
        else:
            seen[a.id] = i
            named[str(a.id)] = (a.id, i)
    return seen


def _references(
    body: dict[str, Any], actions: list[ActionSpec], seen: dict[ActionId, int], rejected: set[ActionId],
    violations: list[Violation],
) -> tuple[ActionId | None, ActionId | None]:  # fmt: skip
    """The start and end action ids (None where unusable) and the parents, each checked to
    name an action of this workflow."""
    refs: dict[str, Any] = {"startActionId": body.get("startActionId"), "endActionId": body.get("endActionId")}
    for field, ref in refs.items():
        if ref is not None and (isinstance(ref, bool) or not isinstance(ref, int | str)):
            violations.append(Violation(loc=field, field=field, message=f"{field} must be an action id"))
            refs[field] = None
        elif ref is not None and ref not in seen:
            violations.append(
                Violation(loc=field, field=field, message=f"{field} {ref!r} is not an action of this workflow")
            )
    for a in actions:
        for p in a.parents:
            if p not in seen and p not in rejected:
                violations.append(
                    Violation(
                        loc=f"actions[{seen.get(a.id, 0)}].parentActions",
                        actionId=a.id,
                        field="parentActions",
                        message=f"parent {p!r} is not an action of this workflow",
                    )
                )
            elif p == a.id:
                violations.append(
                    Violation(
                        loc=f"actions[{seen[a.id]}].parentActions",
                        actionId=a.id,
                        field="parentActions",
                        message="an action cannot be its own parent",
                    )
                )
    return refs["startActionId"], refs["endActionId"]


def _graph_problems(
    actions: list[ActionSpec], seen: dict[ActionId, int], start: ActionId | None, end: ActionId | None,
    violations: list[Violation],
) -> None:  # fmt: skip
    """Cycles among the parents, and an end action that comes before the start."""
    g = nx.DiGraph()
    g.add_nodes_from(seen)
    g.add_edges_from((p, a.id) for a in actions for p in a.parents if p in seen and p != a.id)
    # Looked for only in a graph that has one: listing cycles walks every component (0.03-0.2 s
    # for 10,000 actions), telling whether there is one is a topological sort (docs/performance.md).
    acyclic = nx.is_directed_acyclic_graph(g)
    for cycle in () if acyclic else nx.simple_cycles(g):
        path = " -> ".join(str(n) for n in [*cycle, cycle[0]])
        violations.append(Violation(loc="actions", field="parentActions", actionId=cycle[0], message=f"cycle: {path}"))
        if len(violations) > 200:
            break
    if start in seen and end in seen and acyclic and start in nx.descendants(g, end):
        violations.append(
            Violation(
                loc="endActionId",
                field="endActionId",
                message=f"end action {end!r} is an ancestor of start action {start!r}",
            )
        )


def _configuration_problems(conf: list[_RawParam] | dict[str, Any], atype: ActionType) -> list[tuple[str, str]]:
    """(location, message) of each unusable configuration key. Configuration parameters are
    named: ``-Dkey=value`` (COMMAND_LINE), an environment variable (SHELL), a Hadoop property
    (MAP_REDUCE). A name must be non-empty and hold no ``=``, which would move the split
    between name and value. (NUL is refused everywhere, by ``document_violations``.)"""
    field = "configurationParameters"
    if isinstance(conf, dict):
        keys = [(_key_loc(field, k), k) for k in conf]
    else:
        keys = [(f"{field}[{j}].key", p.key) for j, p in enumerate(conf)]
    names = {ActionType.COMMAND_LINE: "a Java system property", ActionType.SHELL: "an environment variable"}
    out = []
    for where, key in keys:
        if key is None or not key.strip():
            what = names.get(atype, "a Hadoop property")
            out.append((where, f"a configuration parameter needs a key: it names {what}"))
        elif "=" in key:
            out.append((where, f"a configuration parameter key must not contain '=' (key {_json_text(key)})"))
    return out


def _secret_references(body: Any) -> list[Violation]:
    """A secret value that refers to a parameter or a fan-out item: the value it would take
    is kept with the workflow, in clear (``parameterValues``, ``forEach``), so it would not
    stay secret (docs/planning.md, "Secret values"). Only where the workflow declares
    parameters or the action fans out: elsewhere ``{{`` is a value's own text."""
    actions = body.get("actions") if isinstance(body, dict) else None
    if not isinstance(actions, list):
        return []
    out: list[Violation] = []
    for i, a in enumerate(actions):
        if not isinstance(a, dict) or (DECLARATIONS not in body and "forEach" not in a):
            continue
        field, conf = f"actions[{i}].configurationParameters", a.get("configurationParameters")
        if isinstance(conf, list):
            places = [(f"{field}[{j}].value", p.get("value")) for j, p in enumerate(conf)
                      if isinstance(p, dict) and p.get("secret") is True]  # fmt: skip
        elif isinstance(conf, dict):
            places = [(f"{_key_loc(field, k)}.value", v.get("value")) for k, v in conf.items()
                      if isinstance(v, dict) and v.get("secret") is True]  # fmt: skip
        else:
            continue
        message = (
            "a secret value cannot use {{...}}: a parameter's value or a fan-out item is kept with the "
            "workflow in clear; put the secret itself here"
        )
        out += [_located(body, loc, message) for loc, value in places if isinstance(value, str) and "{{" in value]
    return out


def _secret_problems(conf: list[_RawSetting] | dict[str, Any], atype: ActionType) -> list[tuple[str, str]]:
    """(location, message) of each secret value an action of this type cannot keep secret:
    only a SHELL action gets its configuration as environment variables; the others would
    carry it on their command line (-Dkey=value, --conf), which every process of the host
    can read (docs/planning.md, "Secret values")."""
    if atype == ActionType.SHELL:
        return []
    field = "configurationParameters"
    if isinstance(conf, dict):
        places = [_key_loc(field, k) for k, v in conf.items() if isinstance(v, _RawSecret) and v.secret]
    else:
        places = [f"{field}[{j}].secret" for j, p in enumerate(conf) if p.secret]
    message = (f"secret values are for SHELL actions only (environment variables); a {atype.value} action "
               "would carry it on its command line, which every process of the host can read")  # fmt: skip
    return [(where, message) for where in places]


_JAVA_CLASS = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*")
# spark-submit options Pingo sets itself (docs/planning.md, "SPARK actions").
SPARK_OWN_OPTIONS = ("--master", "--deploy-mode", "--name", "--class")


def is_streaming(side: list[str] | str | None) -> bool:
    """A MAP_REDUCE mapper or reducer given as a command (Hadoop streaming), not a Java class."""
    return isinstance(side, list)


def _type_problems(r: _RawAction, atype: ActionType) -> list[tuple[str, str]]:
    """(field, message) for each type field that cannot be run as given."""
    out: list[tuple[str, str]] = []
    if atype == ActionType.MAP_REDUCE:
        for field in ("mapper", "reducer"):
            side = getattr(r, field)
            # An empty mapper is reported as missing (it is required).
            if isinstance(side, list) and ((not side and field == "reducer") or any(not c for c in side)):
                out.append((field, f"{field} must be a non-empty list of non-empty strings (a streaming command, "
                                   "an argv: never a shell line) or a Java class name"))  # fmt: skip
            elif isinstance(side, str) and not _JAVA_CLASS.fullmatch(side):
                out.append((field, f"{field} {_json_text(side)} is not a Java class name; a streaming command is a "
                                   'list of strings, e.g. ["python3", "mapper.py"]'))  # fmt: skip
        shaped = not out  # a side already reported is not compared with the other
        if (
            shaped
            and r.mapper is not None
            and r.reducer is not None
            and is_streaming(r.mapper) != is_streaming(r.reducer)
        ):
            out.append(("reducer", "mapper and reducer must both be streaming commands (lists) or both Java classes"))
        java = [f for f in ("mapper", "reducer") if isinstance(getattr(r, f), str)]
        if r.mapreduceApi is not None and r.mapreduceApi not in MAPREDUCE_APIS:
            given = _json_text(r.mapreduceApi)
            out.append(("mapreduceApi", f'mapreduceApi must be "mapred" (the old org.apache.hadoop.mapred API, the '
                                        f'default) or "mapreduce" (the new one), not {given}'))  # fmt: skip
        elif r.mapreduceApi is not None and is_streaming(r.mapper):
            out.append(("mapreduceApi", "mapreduceApi names the API of Java classes; a streaming job has none"))
        if java and not r.actionFolder:
            out.append(("actionFolder", f"a Java {java[0]} needs actionFolder: the folder holding its jar"))
        for field in ("inputFormat", "outputFormat"):
            value = getattr(r, field)
            if value is not None and not _JAVA_CLASS.fullmatch(value):
                out.append((field, f"{field} must be a Java class name"))
    elif atype == ActionType.SPARK and r.application:
        app = PurePosixPath(r.application)
        if app.is_absolute() or not _is_clean_path(r.application):
            out.append(("application", "application must be a file inside actionFolder (a relative path, no '..')"))
        elif app.suffix not in (".py", ".jar"):
            out.append(("application", "application must be a .py (PySpark) or .jar file"))
        elif app.suffix == ".jar" and not r.mainClassName:
            out.append(("mainClassName", "mainClassName is required for a jar application"))
        elif app.suffix == ".py" and r.mainClassName:
            out.append(("mainClassName", "mainClassName is only for jar applications"))
    if atype == ActionType.SQOOP:
        out += _sqoop_problems(r)
    if atype == ActionType.SPARK and r.sparkOpts is not None:
        if any(not o for o in r.sparkOpts):
            out.append(("sparkOpts", "sparkOpts must be a list of non-empty strings (spark-submit options, an argv)"))
        for opt in r.sparkOpts:
            if (name := opt.split("=", 1)[0]) in SPARK_OWN_OPTIONS:
                out.append(("sparkOpts", f"{name} is set by Pingo, not in sparkOpts"))
    return out


_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?")
# What a SQOOP action does not have: it runs Sqoop itself, on no program of the user's,
# and reads no dataset (docs/planning.md, "SQOOP actions").
SQOOP_NOT_USED = ("actionFolder", "mainClassName", "command", "additionalInput")


def _sqoop_problems(r: _RawAction) -> list[tuple[str, str]]:
    """(field, message) for each SQOOP field that Sqoop could not run as given."""
    out: list[tuple[str, str]] = []
    for field in SQOOP_NOT_USED:
        if getattr(r, field) not in (None, [], {}):
            out.append((field, f"{field} is not used by SQOOP actions: Sqoop itself runs the import"))
    # The URL is not echoed: it may hold what it must not.
    if r.connect and re.search(r"password\s*=", r.connect, re.IGNORECASE):
        out.append(("connect", "connect must not hold a password (it would be stored, hashed and shown): "
                               "put it in the file passwordFile names"))  # fmt: skip
    elif r.connect and not r.connect.startswith("jdbc:"):
        out.append(("connect", "connect must be a JDBC URL (jdbc:postgresql://host:5432/db)"))
    if (r.table is None) == (r.query is None):
        out.append(("table", "a SQOOP action imports either a table or a query: give exactly one of them"))
    if r.table is not None and not _SQL_NAME.fullmatch(r.table):
        out.append(("table", f"table {_json_text(r.table)} is not a table name (name or schema.name)"))
    if r.query is not None:
        if "$CONDITIONS" not in r.query:
            out.append(("query", "query must contain $CONDITIONS in its WHERE clause (where Sqoop puts each map "
                                 "task's range), e.g. SELECT id, name FROM t WHERE $CONDITIONS"))  # fmt: skip
        for field in ("columnNames", "where"):
            if getattr(r, field) is not None:
                out.append((field, f"{field} is for a table import; a query says its columns and rows itself"))
        if (r.mappers or 1) > 1 and r.splitBy is None:
            out.append(("splitBy", "a query imported by more than one mapper needs splitBy: the column whose "
                                   "range is divided among them"))  # fmt: skip
    if r.columnNames is not None and (not r.columnNames or any(not _SQL_NAME.fullmatch(c) for c in r.columnNames)):
        out.append(("columnNames", "columnNames must be a non-empty list of column names"))
    for field in ("where", "username", "passwordFile"):
        if getattr(r, field) == "":
            out.append((field, f"{field} must not be empty (leave it out instead)"))
    if r.splitBy is not None and not _SQL_NAME.fullmatch(r.splitBy):
        out.append(("splitBy", f"splitBy {_json_text(r.splitBy)} is not a column name"))
    if r.passwordFile:
        if r.username is None:
            out.append(("username", "a passwordFile needs the username it is the password of"))
        if not r.passwordFile.startswith("/") or not _is_clean_path(r.passwordFile):
            out.append(("passwordFile", "passwordFile must be an absolute path without '..': the file holding "
                                        "the password, on the executor's file system"))  # fmt: skip
    return out


def _check_type_fields(r: _RawAction, atype: ActionType, bad: Callable[[str, str], None]) -> None:
    """The fields its type requires, and those of other types it must not have."""
    for field in REQUIRED_FIELDS[atype]:
        value = getattr(r, field)
        if value is None or value == "" or value == [] or value == {}:
            bad(field, f"{field} is required for {atype.value} actions")
    if r.command is not None and any(not isinstance(c, str) or not c for c in r.command):
        bad("command", "command must be a list of non-empty strings (an argv, never a shell line)")
    for field in sorted(TypeFields.model_fields.keys() - set(TYPE_FIELDS.get(atype, ()))):
        if getattr(r, field) is not None:
            owners = " and ".join(t.value for t, fields in TYPE_FIELDS.items() if field in fields)
            bad(field, f"{field} is a field of {owners} actions, not of {atype.value}")
    for field, message in _type_problems(r, atype):
        bad(field, message)


def _check_paths(r: _RawAction, managed: bool, bad: Callable[[str, str], None]) -> None:
    """An output path exactly when unmanaged, and paths that stay where they are put."""
    if not managed and not r.outputPath:
        bad("outputPath", "an unmanaged action (isManaged: false) needs an outputPath")
    if managed and r.outputPath:
        bad("outputPath", "outputPath is only for unmanaged actions (isManaged: false)")
    for field in ("actionFolder", "outputPath"):
        value = getattr(r, field)
        if value and not _is_clean_path(value):
            bad(field, f"{field} must not contain '..' or NUL")
        elif value and (too_long := path_problem(field, value, output=field == "outputPath")):
            bad(field, too_long)


def _parse_action(
    i: int, raw: Any, violations: list[Violation], defaults: ExecutionDefaults | None = None
) -> ActionSpec | None:
    where = f"actions[{i}]"
    if not isinstance(raw, dict):
        violations.append(Violation(loc=where, message="an action must be a JSON object"))
        return None
    hint = _id_hint(raw)
    before = len(violations)
    try:
        r = _RawAction.model_validate(raw)
    except ValidationError as exc:
        owner = f"action {json.dumps(hint)}" if hint is not None else where
        for path, message in explain(exc, raw, _ACTION_PARTS, owner):
            field = path[0] if path and isinstance(path[0], str) else None
            violations.append(Violation(loc=_join(where, path), actionId=hint, field=field, message=message))
        return None

    def bad(field: str, message: str) -> None:
        violations.append(Violation(loc=f"{where}.{field}", actionId=hint, field=field, message=message))

    ident = r.id if r.id is not None else r.actionId
    if ident is None:
        bad("id", "missing action id (id or actionId)")
    if not r.name or not r.name.strip():
        bad("name", "missing action name")
    atype = None
    if not r.type:
        bad("type", "missing action type")
    else:
        atype = _normalize_type(r.type)
        if atype is None:
            known = ", ".join(t.value for t in ActionType)
            bad("type", f"unknown action type {r.type!r} (known: {known})")
    parents: list[ActionId] = []
    for j, p in enumerate(r.parentActions):
        pid = (p.id if p.id is not None else p.actionId) if isinstance(p, _RawParent) else p
        if pid is None:
            bad(f"parentActions[{j}]", 'a parent must be an action id or {"id": <action id>}')
        else:
            parents.append(pid)
    if atype is not None:
        _check_type_fields(r, atype, bad)
    managed = r.isManaged if r.isManaged is not None else r.outputPath is None
    _check_paths(r, managed, bad)
    if isinstance(r.forEach, ForEachFiles) and (problem := files_pattern_problem(r.forEach.files, raw)):
        bad("forEach", problem)
    if len(violations) > before or ident is None or atype is None:
        return None
    # Not a reason to drop the action: its children would then report a missing parent.
    for loc, message in _configuration_problems(r.configurationParameters, atype):
        violations.append(
            Violation(loc=f"{where}.{loc}", actionId=hint, field="configurationParameters", message=message)
        )
    for loc, message in _secret_problems(r.configurationParameters, atype):
        violations.append(
            Violation(loc=f"{where}.{loc}", actionId=hint, field="configurationParameters", message=message)
        )
    return ActionSpec(
        id=ident,
        name=r.name.strip(),
        type=atype,
        parents=sorted(dict.fromkeys(parents), key=id_order),
        actionFolder=r.actionFolder,
        mainClassName=r.mainClassName,
        **{field: getattr(r, field) for field in TypeFields.model_fields},
        command=r.command,
        additionalInput=_params(r.additionalInput),
        configurationParameters=_params(r.configurationParameters),
        forceComputation=r.forceComputation,
        isManaged=managed,
        outputPath=r.outputPath,
        retries=_policy(r.retries) or _policy(defaults.retries if defaults else None) or RetryPolicy(),
        timeoutSeconds=r.timeoutSeconds if r.timeoutSeconds is not None else (defaults and defaults.timeoutSeconds),
        expectedBytes=r.expectedBytes,
        forEach=None if not isinstance(r.forEach, list) else [_RawParam(value=v).to_param().value for v in r.forEach],
        forEachFiles=r.forEach.files if isinstance(r.forEach, ForEachFiles) else None,
        cacheVersion=r.cacheVersion,
    )
