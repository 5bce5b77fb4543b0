"""Parser findings said in the workflow language (docs/planning.md, "The workflow definition").

pydantic reports a union's failure once per member, under the member's internal name
(``retries.constrained-int``, ``additionalInput.list[union[...]]``). Here the member that
the JSON type actually written asks for speaks (an object: the object form; a list: the
list form; anything else: the scalar forms), internal names are dropped from locations,
and a type mismatch is said once per place, as what the field must be. A field nobody
knows is named with the closest known one (``difflib``), or with every known one.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

Path = tuple[str | int, ...]

# Names other workflow languages use for a field, which a near-miss search would not find.
SYNONYMS = {
    "parents": "parentActions",
    "dependson": "parentActions",
    "depends_on": "parentActions",
    "after": "parentActions",
    "args": "additionalInput",
    "arguments": "additionalInput",
    "inputs": "additionalInput",
    "argv": "command",
    "cmd": "command",
    "env": "configurationParameters",
    "environment": "configurationParameters",
    "properties": "configurationParameters",
    "folder": "actionFolder",
    "dir": "actionFolder",
    "mainclass": "mainClassName",
    "class": "mainClassName",
    "force": "forceComputation",
    "managed": "isManaged",
    "output": "outputPath",
    "timeout": "timeoutSeconds",
    "retry": "retries",
    "attempts": "count",
    "delay": "delaySeconds",
}

# What a value must be, by its place: the field names on its path (list positions as
# "[]"), matched on the whole path, then its last two names, then its last name.
EXPECTED: dict[tuple[str, ...], str] = {
    (): "an object",
    ("id",): "an integer or a string",
    ("actionId",): "an integer or a string",
    ("name",): "a non-empty string",
    ("type",): "one of COMMAND_LINE, SHELL, MAP_REDUCE, SPARK, SQOOP",
    ("mapper",): 'a streaming command (a list of strings, e.g. ["python3", "mapper.py"]) or a Java class name',
    ("reducer",): 'a streaming command (a list of strings, e.g. ["python3", "reducer.py"]) or a Java class name',
    ("mapper", "[]"): "a string (a streaming command is an argv: a list of strings)",
    ("reducer", "[]"): "a string (a streaming command is an argv: a list of strings)",
    ("inputFormat",): "a Java class name (a string)",
    ("outputFormat",): "a Java class name (a string)",
    ("mapreduceApi",): '"mapred" (the old org.apache.hadoop.mapred API, the default) or "mapreduce" (the new one)',
    ("application",): "a file name inside actionFolder (a string)",
    ("sparkOpts",): "a list of strings (spark-submit options, an argv)",
    ("sparkOpts", "[]"): "a string (sparkOpts is an argv: a list of strings)",
    ("connect",): "a JDBC URL (a string), e.g. jdbc:postgresql://host:5432/db",
    ("table",): "a table name (a string)",
    ("query",): "an SQL query with $CONDITIONS (a string)",
    ("columnNames",): "a list of column names",
    ("columnNames", "[]"): "a column name (a string)",
    ("where",): "an SQL condition (a string)",
    ("splitBy",): "a column name (a string)",
    ("mappers",): "a whole number of map tasks from 1 to 64",
    ("username",): "a database user name (a string)",
    ("passwordFile",): "the path of the file holding the password (a string)",
    ("parentActions",): 'a list of parent ids (or {"id": <parent id>} objects)',
    ("parentActions", "[]"): 'a parent id (an integer or a string) or {"id": <parent id>}',
    ("actionFolder",): "a path (a string)",
    ("mainClassName",): "a Java class name (a string)",
    ("command",): "a list of strings (an argv)",
    ("command", "[]"): "a string (command is an argv: a list of strings)",
    ("additionalInput",): 'a list of arguments (strings, numbers, booleans or {"key": …, "value": …} objects), '
    "or an object of name: value",
    ("additionalInput", "[]"): 'a string, number, boolean or {"key": …, "value": …} object',
    ("configurationParameters",): 'a list of {"key": …, "value": …} objects, or an object of name: value '
    '(a secret value: {"value": …, "secret": true})',
    ("configurationParameters", "[]"): 'a {"key": …, "value": …} object (with "secret": true for a secret value)',
    ("secret",): "true or false",
    ("key",): "a string",
    ("value",): "a string, number or boolean",
    ("forceComputation",): "true or false",
    ("isManaged",): "true or false",
    ("outputPath",): "a path (a string)",
    ("retries",): "a count (0 to 100) or {count, delaySeconds, backoff}",
    ("count",): "a whole number from 0 to 100",
    ("delaySeconds",): "a number of seconds from 0 to 86400",
    ("backoff",): "a number from 1 to 10",
    ("timeoutSeconds",): "a number of seconds (more than 0, at most 2592000: 30 days)",
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCALAR_MEMBERS = frozenset({"int", "str", "float", "bool", "none", "constrained-int", "constrained-float"})
_RANGE = {
    "greater_than_equal": ("at least", "ge"),
    "less_than_equal": ("at most", "le"),
    "greater_than": ("more than", "gt"),
    "less_than": ("less than", "lt"),
}
# Characters that make a command line need a shell: pipes, redirections, globs, variables.
_SHELL_SYNTAX = frozenset("|&;<>()$`*?~{}[]!\n")
_ABSENT = object()


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The known field ``name`` was probably meant to be, if one is close enough."""
    known = list(known)
    if (synonym := SYNONYMS.get(name.lower())) in known:
        return synonym
    lowered = {k.lower(): k for k in known}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[hits[0]] if hits else None


def quoted(name: str) -> str:
    return f"'{name}'" if _NAME.fullmatch(name) else json.dumps(name)


def unknown_field(name: str, known: Iterable[str], where: str) -> str:
    """``unknown field 'parentAction' in action 3 — did you mean 'parentActions'?``"""
    known = list(known)
    if (close := suggest(name, known)) is not None:
        return f"unknown field {quoted(name)} {where} — did you mean {quoted(close)}?"
    return f"unknown field {quoted(name)} {where} (known fields: {', '.join(known)})"


def label(path: Path) -> str:
    """A path inside one object as the user writes it: ``retries.count``, ``command[1]``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _NAME.fullmatch(p):
            out += f".{p}" if out else p
        else:
            out += f"[{json.dumps(p)}]"
    return out


def kind(value: Any) -> str:
    """What was written instead: the value itself when it is short, else its JSON type."""
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def expected(path: Path) -> str:
    names = tuple("[]" if isinstance(p, int) else p for p in path)
    for key in (names, names[-2:], names[-1:]):
        if key in EXPECTED:
            return EXPECTED[key]
    return "of another type"


def _command_hint(command: str) -> str:
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = []
    if argv and not _SHELL_SYNTAX & set(command):
        return f"write {json.dumps(argv)}"
    return f"write {json.dumps(['sh', '-c', command])} if it needs a shell"


def _member_fits(tag: Any, value: Any) -> bool:
    """Whether the union member pydantic calls ``tag`` is the form the JSON value written takes."""
    if not isinstance(tag, str):
        return True
    if tag.startswith("list["):
        return isinstance(value, list)
    if tag.startswith("dict[") or tag[:1].isupper() or tag.startswith("_"):
        return isinstance(value, dict)  # a mapping, or a model (named by its class)
    if tag in _SCALAR_MEMBERS:
        return not isinstance(value, dict | list)
    return True


def _walk(err: Any, raw: Any) -> tuple[Path, Any, bool]:
    """The error's place in ``raw`` without union member names, the value there, and
    whether the error is from the member that the value's JSON type selects."""
    path: list[str | int] = []
    node = raw
    loc = err["loc"]
    for n, part in enumerate(loc):
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif n == len(loc) - 1 and err["type"] == "missing":
            path.append(part)
            node = _ABSENT
        elif not _member_fits(part, node):
            return tuple(path), node, False
    return tuple(path), node, True


def _document_order(path: Path, raw: Any) -> tuple[int, ...]:
    """Where ``path`` comes in ``raw`` as written: violations are listed in that order."""
    out, node = [], raw
    for p in path:
        if isinstance(node, dict) and p in node:
            out.append(list(node).index(p))
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int):
            out.append(p)
            node = node[p]
        else:  # a missing field: after what is there
            out.append(len(node) if isinstance(node, dict | list) else 0)
            node = None
    return tuple(out)


def _known(path: Path, parts: Mapping[str | None, type[BaseModel]]) -> list[str]:
    """The fields known where the field at ``path`` is: those of the model of the object holding it."""
    model = parts.get(next((p for p in reversed(path[:-1]) if isinstance(p, str)), None))
    return list(model.model_fields) if model is not None else []


def _number(bound: Any) -> str:
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


def explain(
    exc: ValidationError, raw: Any, parts: Mapping[str | None, type[BaseModel]], owner: str
) -> list[tuple[Path, str]]:
    """(path inside ``raw``, message) for every place pydantic found a problem in ``raw``.

    ``parts`` names the model of each object level by the field that holds it (None: ``raw``
    itself), for the known fields of an unknown-field message; ``owner`` says whose fields
    they are ("action 3", "defaults")."""
    found: dict[Path, list[Any]] = {}
    values: dict[Path, Any] = {}
    unmatched: dict[Path, Any] = {}
    for err in exc.errors():
        path, value, fits = _walk(err, raw)
        if fits:
            found.setdefault(path, []).append(err)
            values[path] = value
        else:
            unmatched.setdefault(path, value)
    # A value no member of its union takes in its JSON form: say once what it must be.
    for path, value in unmatched.items():
        if not any(p[: len(path)] == path for p in found):
            found[path] = [{"type": "no_member"}]
            values[path] = value
    # A required field given under a misspelled name is reported as the misspelling only.
    meant: set[Path] = set()
    for path, errs in found.items():
        if any(e["type"] == "extra_forbidden" for e in errs) and (close := suggest(str(path[-1]), _known(path, parts))):
            meant.add((*path[:-1], close))
    out: list[tuple[Path, str]] = []
    for path in sorted(found, key=lambda p: _document_order(p, raw)):
        errs = found[path]
        value, types = values[path], {e["type"] for e in errs}
        where = label(path) or owner
        if "extra_forbidden" in types:
            holder = path[:-1]
            whose = f"in {label(holder)} of {owner}" if holder else f"in {owner}"
            out.append((path, unknown_field(str(path[-1]), _known(path, parts), whose)))
        elif types == {"missing"}:
            if path in meant:
                continue
            out.append((path, f"{where} is required"))
        elif len(errs) == 1 and errs[0]["type"] in _RANGE:
            words, key = _RANGE[errs[0]["type"]]
            out.append((path, f"{where} must be {words} {_number(errs[0]['ctx'][key])}, not {kind(value)}"))
        elif len(errs) == 1 and errs[0]["type"] == "value_error":
            out.append((path, str(errs[0]["ctx"]["error"])))
        elif path == ("command",) and isinstance(value, str):
            out.append((path, f"command must be a list of strings (an argv), not a string: {_command_hint(value)}"))
        else:
            out.append((path, f"{where} must be {expected(path)}, not {kind(value)}"))
    return out
