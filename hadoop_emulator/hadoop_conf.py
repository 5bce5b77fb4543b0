"""Hadoop configuration documents: ``<configuration><property><name/><value/></property>...``.

Used for the body of ``POST /jobs``, ``config-default.xml``, the job ``conf`` string in
``show=info`` and the ``action.xml`` file handed to a running action.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

_VAR = re.compile(r"\$\{([^}$\s]+)\}")
MAX_SUBST = 20


class ConfError(Exception):
    """Not a well-formed configuration document (the real server answers 500)."""


def parse_configuration(data: bytes | str) -> dict[str, str]:
    """Properties in document order; names and values trimmed (``XConfiguration.trim``)."""
    try:
        root = ET.fromstring(data.encode() if isinstance(data, str) else data)
    except ET.ParseError as exc:
        raise ConfError(f"XML parse error: {exc}") from None
    if _local(root.tag) != "configuration":
        raise ConfError(f"bad conf file: top-level element not <configuration>: <{_local(root.tag)}>")
    props: dict[str, str] = {}
    for prop in root:
        if _local(prop.tag) != "property":
            continue
        name = value = None
        for field in prop:
            tag = _local(field.tag)
            if tag == "name":
                name = (field.text or "").strip()
            elif tag == "value":
                value = (field.text or "").strip()
        if name:
            props[name] = value if value is not None else ""
    return props


def resolve_configuration(props: dict[str, str]) -> dict[str, str]:
    """Expand ``${name}`` references between properties, as ``Configuration.get`` does;
    references to undefined names stay as they are."""

    def expand(value: str) -> str:
        for _ in range(MAX_SUBST):
            new = _VAR.sub(lambda m: props.get(m.group(1), m.group(0)), value)
            if new == value:
                break
            value = new
        return value

    return {k: expand(v) for k, v in props.items()}


def to_xml(props: dict[str, str]) -> str:
    lines = ["<configuration>"]
    for name, value in props.items():
        lines.append(
            f"  <property>\n    <name>{escape(name)}</name>\n    <value>{escape(value)}</value>\n  </property>"
        )
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
