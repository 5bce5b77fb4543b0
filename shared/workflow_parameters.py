"""Workflow parameters (docs/planning.md, "Parameters"): declared with defaults in a
workflow's ``parameters``, given values by its submitter in ``parameterValues``, and
filled in to the workflow's strings before anything else reads them, so that the lineage
hashes are those of the filled-in workflow: the same workflow run with another value
computes anew, and with the same value reuses.

A reference is ``{{name}}`` (spaces allowed inside: ``{{ name }}``) anywhere in a string
value of the workflow, never in an object key. ``{{{{`` stands for a literal ``{{``. Only
a workflow that declares ``parameters`` is read this way: one without is taken as it is,
so workflows written before parameters existed keep their meaning and their hashes.
``{{`` was chosen over ``${...}``, which shell users, Hadoop properties and Oozie EL all
already write.

Every problem is reported, with the path of the value it is in: a declaration that is not
an object, has a field other than ``default`` and ``description``, or a name that is not
an identifier; a value for a parameter that is not declared; a parameter with no default
and no value; a reference to an undeclared name; a ``{{`` that starts no reference; a
parameter declared and never referenced (its value would change nothing, which is never
what its submitter meant).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.workflow_messages import quoted, suggest, unknown_field

DECLARATIONS = "parameters"
VALUES = "parameterValues"
FOR_EACH = "forEach"
ITEM = "item"  # a fan-out action's item: never a parameter's name
ITEM_REFERENCE = "{{item}}"
# Characters the values may add to a workflow in all: a 1 MiB body could otherwise name a
# large value thousands of times and make gigabytes of text.
MAX_ADDED = 16 * 1024 * 1024
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The escape first, then a reference, then any other ``{{``: a mistake.
TOKEN = re.compile(r"\{\{\{\{|\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}|\{\{")

Path = tuple[str | int, ...]
Problem = tuple[Path, str]
Scalar = str | int | float | bool


class ParameterDeclaration(BaseModel):
    """One entry of a workflow's ``parameters``."""

    model_config = ConfigDict(extra="forbid")
    default: Scalar | None = Field(None, description="Its value when the submitter gives none; none: it is required")
    description: str | None = Field(None, description="What it is, for the people who submit the workflow")


DECLARATION_FIELDS = tuple(ParameterDeclaration.model_fields)


def as_text(value: Scalar) -> str:
    """A default or a value as the text it stands for: as the language reads an input."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _declared(raw: Any, problems: list[Problem]) -> dict[str, str | None]:
    """Each declared parameter's default (None: required)."""
    if not isinstance(raw, dict):
        problems.append(((DECLARATIONS,), 'parameters must be an object: {"name": {"default": "value"}, ...}'))
        return {}
    out: dict[str, str | None] = {}
    for name, decl in raw.items():
        where: Path = (DECLARATIONS, name)
        if not NAME.fullmatch(name):
            problems.append((where, f"parameter name {quoted(name)} must be a letter or _ then letters, digits, _"))
            continue
        if name == ITEM:
            problems.append((where, "'item' is reserved: {{item}} is the item of an action with forEach"))
            continue
        if not isinstance(decl, dict):
            problems.append((where, 'a parameter is declared with an object: {"default": "value"} or {} (required)'))
            continue
        for key in decl:
            if key not in DECLARATION_FIELDS:
                problems.append(((*where, key), unknown_field(key, DECLARATION_FIELDS, f"in parameter {quoted(name)}")))
        default = decl.get("default")
        if default is not None and not _scalar(default):
            problems.append(((*where, "default"), "a default must be a string, number or boolean"))
            default = None
        description = decl.get("description")
        if description is not None and not isinstance(description, str):
            problems.append(((*where, "description"), "a description must be a string"))
        out[name] = None if default is None else as_text(default)
    return out


def _given(raw: Any, declared: dict[str, str | None], problems: list[Problem]) -> dict[str, str]:
    if not isinstance(raw, dict):
        problems.append(((VALUES,), 'parameterValues must be an object: {"name": "value", ...}'))
        return {}
    out: dict[str, str] = {}
    for name, value in raw.items():
        if name not in declared:
            if not declared:
                message = f"unknown parameter {quoted(name)}: the workflow declares no parameters"
            elif (close := suggest(name, list(declared))) is not None:
                message = f"unknown parameter {quoted(name)} — did you mean {quoted(close)}?"
            else:
                message = f"unknown parameter {quoted(name)} (declared: {', '.join(declared)})"
            problems.append(((VALUES, name), message))
        elif not _scalar(value):
            problems.append(((VALUES, name), "a parameter value must be a string, number or boolean"))
        else:
            out[name] = as_text(value)
    return out


def _mapped(body: dict[str, Any]) -> set[int]:
    """Positions of the actions that fan out (``forEach``, docs/planning.md "Fan-out")."""
    actions = body.get("actions")
    if not isinstance(actions, list):
        return set()
    return {i for i, a in enumerate(actions) if isinstance(a, dict) and FOR_EACH in a}


def fill_in(body: Any) -> tuple[Any, list[Problem]]:
    """``body`` with every parameter reference replaced by its value, and every problem
    with where it is. A body that declares no parameters comes back as it is (but values
    given for it are reported), except its fan-out actions. References that cannot be
    filled in are left as written.

    In an action with ``forEach``, ``{{item}}`` and ``{{{{`` are left for the fan-out
    (shared/workflow_fanout.py), which puts in each item; its ``forEach`` list itself is
    text like any other."""
    if not isinstance(body, dict):
        return body, []
    mapped = _mapped(body)
    if DECLARATIONS not in body and VALUES not in body and not mapped:
        return body, []
    problems: list[Problem] = []
    declared = _declared(body[DECLARATIONS], problems) if DECLARATIONS in body else {}
    given = _given(body[VALUES], declared, problems) if VALUES in body else {}
    values = {name: given.get(name, default) for name, default in declared.items()}
    for name, value in values.items():
        if value is None:
            problems.append(((DECLARATIONS, name), f"parameter {quoted(name)} has no default and no value was given "
                                                   f"(pingo submit -p {name}=VALUE, or parameterValues)"))  # fmt: skip
    active = DECLARATIONS in body
    used: set[str] = set()
    added = 0

    def text(value: str, where: Path, in_map: bool) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(0) == "{{{{":
                return m.group(0) if in_map else "{{"
            name = m.group(1)
            if name is None:
                problems.append((where, "'{{' starts a reference, {{name}}: write '{{{{' for a literal '{{'"))
                return m.group(0)
            if in_map and name == ITEM:
                return ITEM_REFERENCE
            used.add(name)
            if name not in declared:
                close = suggest(name, list(declared)) if declared else None
                if name == ITEM:
                    hint = ": {{item}} is the item of an action with forEach"
                elif not active:
                    hint = ": the workflow declares no parameters"
                else:
                    hint = f" — did you mean {quoted(close)}?" if close else f" (declared: {', '.join(declared)})"
                problems.append((where, f"{{{{{name}}}}} names no declared parameter{hint}"))
                return m.group(0)
            value = values[name]
            if value is None:
                return m.group(0)
            nonlocal added
            added += len(value)
            return value

        if "{{" not in value or not (active or in_map):
            return value
        return TOKEN.sub(one, value)

    def walk(value: Any, where: Path, in_map: bool = False) -> Any:
        # Recursive: parse_workflow has already refused a body nested deeper than MAX_DEPTH.
        if isinstance(value, str):
            return text(value, where, in_map)
        if isinstance(value, dict):
            if len(where) == 2 and where[0] == "actions" and where[1] in mapped:
                return {k: walk(v, (*where, k), k != FOR_EACH) for k, v in value.items()}
            return {k: walk(v, (*where, k), in_map) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*where, i), in_map) for i, v in enumerate(value)]
        return value

    out = {k: v if k in (DECLARATIONS, VALUES) else walk(v, (k,)) for k, v in body.items()}
    if added > MAX_ADDED:
        message = f"the parameters' values would add {added} characters to the workflow: at most {MAX_ADDED}"
        return body, [*problems, ((VALUES if VALUES in body else DECLARATIONS,), message)]
    for name in declared:
        if name not in used:
            problems.append(((DECLARATIONS, name), f"parameter {quoted(name)} is declared but never used: write "
                                                   f"{{{{{name}}}}} where its value goes, or remove it"))  # fmt: skip
    return out, problems
