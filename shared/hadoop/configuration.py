"""Hadoop configuration files (``core-site.xml``, a job's properties):
``<configuration><property><name/><value/></property>...</configuration>``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path


def configuration_xml(properties: dict[str, str]) -> bytes:
    """The document of ``properties``, in their order."""
    root = ET.Element("configuration")
    for name, value in properties.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def read_configuration(path: Path) -> dict[str, str]:
    """A configuration file as name -> value (``ET.ParseError`` if it is not whole XML)."""
    out = {}
    for prop in ET.parse(path).getroot().iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is not None:
            out[name] = value or ""
    return out
