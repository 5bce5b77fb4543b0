"""The embedded store's JSON paths, each field's worked out once.

neosqlite turns a field name into a JSON path (``"a.b[0]"`` -> ``"$.a.b[0]"``,
``parse_json_path``) character by character in Python, every time it writes a field
into SQL: sixteen times a command on Pingo's commands, for the same few dozen field
names (docs/performance.md, "The embedded store's CPU per command"). The path is a pure
function of the name, so each is remembered (``functools.lru_cache``, bounded); every
module of neosqlite that imported the function gets the remembering one.
Imported by ``shared.store.embedded_server`` only, in the server's process.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

from neosqlite.collection import json_path_utils

PATHS = 4096  # field names remembered (Pingo's collections use a few hundred)


def remember_json_paths() -> None:
    """``parse_json_path`` remembered, in neosqlite's modules loaded and to be loaded."""
    parse: Callable[[str], str] = json_path_utils.parse_json_path
    if hasattr(parse, "cache_info"):
        return  # already
    remembered = functools.lru_cache(maxsize=PATHS)(parse)

    @functools.wraps(parse)
    def parse_json_path(field: str) -> str:
        try:
            return remembered(field)
        except TypeError:  # not hashable: not a field name, neosqlite says what it makes of it
            return parse(field)

    parse_json_path.cache_info = remembered.cache_info  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if name.startswith("neosqlite") and getattr(module, "parse_json_path", None) is parse:
            module.parse_json_path = parse_json_path  # type: ignore[attr-defined]
