"""A workflow written in Python, as ``pingo validate|submit FILE.py`` reads it
(docs/workflows-in-python.md).

The file is run with ``runpy`` in the ``pingo`` process, as ``python FILE.py`` would run
it (its folder first on ``sys.path``, so it can import its neighbours), but under the
module name ``__pingo__``: code under ``if __name__ == "__main__":`` does not run. It is
the user's own code run on their own machine with their rights, exactly as if they ran it
with Python; nothing of it reaches the server but the JSON document it builds. It must
leave a ``pingo.builder.Workflow`` in a module-level variable named ``workflow``.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from pingo.builder import Workflow

VARIABLE = "workflow"
RUN_NAME = "__pingo__"


class WorkflowFileError(Exception):
    """The file could not be run, or did not leave a workflow: the message says which."""


def load(path: str) -> dict[str, Any]:
    """The workflow document the Python file at ``path`` builds."""
    file = Path(path)
    if not file.is_file():
        raise WorkflowFileError(f"cannot read {path}: no such file")
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)
    try:
        names = runpy.run_path(str(file), run_name=RUN_NAME)
    except SystemExit as exc:
        raise WorkflowFileError(f"{path} exited (code {exc.code}) instead of building a workflow") from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        # The user's own code failed: its traceback, from the file's frames on, is what they need.
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != str(file):
            tb = tb.tb_next
        shown = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
        raise WorkflowFileError(f"{path} failed while building its workflow:\n{shown.rstrip()}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    found = names.get(VARIABLE)
    if not isinstance(found, Workflow):
        what = "no variable named 'workflow'" if found is None else f"'workflow' is {type(found).__name__}"
        raise WorkflowFileError(
            f"{path}: {what}; a workflow file must set workflow = pingo.builder.Workflow(...) at module level"
        )
    return found.to_json()
