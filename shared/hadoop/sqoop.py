"""A SQOOP action's ``sqoop import`` arguments (docs/planning.md, "SQOOP actions"), the
same for the local executor's JVM and Oozie's ``<sqoop>`` action: a list of arguments,
never a shell line, and never a password (Sqoop reads it from ``--password-file``)."""

from __future__ import annotations

from typing import Any

from shared.workflow_spec import SQOOP_FIELDS

# Sqoop's entry point: ``sqoop`` without its launch scripts.
MAIN_CLASS = "org.apache.sqoop.Sqoop"


def sqoop_fields(definition: dict[str, Any]) -> dict[str, Any]:
    """The SQOOP fields an action's definition gives (what ``JobRequest.sqoop`` carries)."""
    return {f: definition[f] for f in SQOOP_FIELDS if definition.get(f) is not None}


def import_arguments(fields: dict[str, Any], output: str) -> list[str]:
    """The tool's own options, after ``import`` and Hadoop's generic options: what to read,
    as whom, split how, and ``output`` as the target folder (which must not exist yet)."""
    args = ["--connect", fields["connect"]]
    if username := fields.get("username"):
        args += ["--username", username]
    if password_file := fields.get("passwordFile"):
        args += ["--password-file", password_file]
    if table := fields.get("table"):
        args += ["--table", table]
        if columns := fields.get("columnNames"):
            args += ["--columns", ",".join(columns)]
        if (where := fields.get("where")) is not None:
            args += ["--where", where]
    else:
        args += ["--query", fields["query"]]
    if split_by := fields.get("splitBy"):
        args += ["--split-by", split_by]
    return [*args, "--num-mappers", str(fields.get("mappers") or 1), "--target-dir", output]


def generic_options(configuration: dict[str, str]) -> list[str]:
    """The action's configuration as Hadoop's generic ``-D`` options (they come right after
    ``import``, before the tool's own)."""
    return [a for k, v in configuration.items() for a in ("-D", f"{k}={v}")]
