"""How long a path a workflow may name (``outputPath``, ``actionFolder``): what every
storage Pingo writes to can hold, checked at submission rather than failing at run time
(docs/planning.md, "Path lengths").

- A name (one component of a path) is at most 255 bytes of UTF-8: Linux's NAME_MAX and
  HDFS's ``dfs.namenode.fs-limits.max-component-length`` (255 by default).
- A whole path is at most 4095 bytes: Linux's PATH_MAX (4096, with the terminating NUL).
  HDFS allows 8000 characters; the tighter rule holds for both.

An output is written first under a private attempt name next to it,
``<parent>/.pingo-attempts/<name>.<action>-<digest>.<attempt>`` (``shared.storage``), and
that path must hold the job's own files too. So an output's last name leaves room for the
attempt suffix, and the whole output path leaves room for the attempt folder and one file
name inside it.
"""

from __future__ import annotations

NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095
ATTEMPTS_DIR = ".pingo-attempts"  # shared.storage.base names it from here
# ".<readable id, 48>-<digest, 16>.<attempt, up to 6 digits>": shared.storage.names.path_name.
ATTEMPT_SUFFIX_BYTES = 1 + 48 + 1 + 16 + 1 + 6
OUTPUT_NAME_MAX_BYTES = NAME_MAX_BYTES - ATTEMPT_SUFFIX_BYTES
OUTPUT_PATH_MAX_BYTES = PATH_MAX_BYTES - (1 + len(ATTEMPTS_DIR)) - ATTEMPT_SUFFIX_BYTES - (1 + NAME_MAX_BYTES)


def path_problem(field: str, path: str, output: bool) -> str | None:
    """Why ``path`` (as given, or resolved against its root) is too long, if it is; an
    ``output`` path leaves room for its attempt paths."""
    size = len(path.encode("utf-8", "surrogatepass"))
    limit = OUTPUT_PATH_MAX_BYTES if output else PATH_MAX_BYTES
    if size > limit:
        room = " (room is kept for the attempt folder and the files the job writes)" if output else ""
        return f"{field} is {size} bytes long; at most {limit} bytes{room}"
    names = [n for n in path.split("/") if n]
    for i, name in enumerate(names):
        last = output and i == len(names) - 1
        most = OUTPUT_NAME_MAX_BYTES if last else NAME_MAX_BYTES
        if (n := len(name.encode("utf-8", "surrogatepass"))) > most:
            what = "its last name" if last else "a folder name in it"
            why = f" (an output's last name leaves {ATTEMPT_SUFFIX_BYTES} bytes for its attempt's)" if last else ""
            return f"{field}: {what} is {n} bytes long ({name[:24]!r}...); at most {most} bytes{why}"
    return None
