"""Hadoop streaming's command lines (docs/hadoop-protocol.md, "MapReduce streaming").

A streaming mapper or reducer reaches the cluster as one line, which Hadoop streaming
splits into the program's argv itself, never through a shell: at spaces outside quotes,
where a single or a double quote opens and closes a token and is not part of it, with no
escapes. Pingo keeps the command as an argv and writes the line that splits back into it.
"""

from __future__ import annotations


def join_args(argv: list[str]) -> str:
    """The line Hadoop streaming splits into ``argv``; ValueError for an argument no line
    can carry (empty, or holding a space and both kinds of quote)."""
    parts = []
    for arg in argv:
        if not arg:
            raise ValueError("an empty argument cannot be passed to Hadoop streaming")
        if " " not in arg and "'" not in arg and '"' not in arg:
            parts.append(arg)
        elif "'" not in arg:
            parts.append(f"'{arg}'")
        elif '"' not in arg:
            parts.append(f'"{arg}"')
        else:
            raise ValueError(f"argument {arg!r} holds both kinds of quote: Hadoop streaming cannot pass it")
    return " ".join(parts)
