"""What the terminal shows (pingo/display.py): DAG order, views that fit 80 columns, plain
text off a terminal, a live view that redraws in place only on a terminal."""

from __future__ import annotations

import re
import time
from io import StringIO

from rich.cells import cell_len
from rich.console import Console

from pingo.display import (
    LiveView,
    console,
    dag_order,
    dataset_detail,
    datasets_view,
    levels,
    planned_summary,
    render_progress,
    render_status,
    timeline_table,
    to_text,
    workflows_table,
)

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NOW = time.time()
LONG_ERROR = "exit status 1: Traceback (most recent call last): ValueError: row 3400 of part-00017 has 9 fields, not 7"


def action(local_id: int | str, name: str, parents: list, state: str, **extra) -> dict:
    return {"localId": local_id, "name": name, "parents": parents, "state": state, "decision": "compute", **extra}


def busy_workflow() -> dict:
    """Long names, string and int ids, every kind of note: what squeezes a narrow terminal.
    Its times are relative to when it is made (a test may run long after collection)."""
    now = time.time()
    actions = [
        action("ingest", "ingest-the-raw-clickstream-logs-from-every-edge-server", [], "FINISHED",
               startedAt=now - 90, finishedAt=now - 30),
        action("clean", "clean", ["ingest"], "REUSED", decision="reuse"),
        action("zeta", "join-with-the-customer-table-and-the-orders-table", ["ingest"], "SKIPPED", decision="reuse"),
        action("alpha", "report", ["clean", "zeta"], "FAILED", error=LONG_ERROR),
        action(5, "b", [], "RUNNING"),
        action(6, "c", [5], "FOLLOWING", follows="wf-aaaaaaaaaaaa.3"),
        action(7, "d", [5, 6], "WAITING"),
    ]  # fmt: skip
    return {"id": "wf-0123456789ab", "name": "clickstream-nightly-with-a-long-name", "state": "RUNNING",
            "actions": actions, "createdAt": now - 200, "finishedAt": None}  # fmt: skip


def fits(text: str, width: int = 80) -> list[str]:
    lines = text.splitlines()
    assert lines, "nothing drawn"
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, too_wide
    assert "\x1b" not in text and "\r" not in text  # plain text: no colours, no cursor movement
    assert all(line == line.rstrip() for line in lines)  # no padding at the ends of lines
    return lines


def row_of(lines: list[str], first: str) -> str:
    """The one table row starting with ``first`` (after an action's state glyph, if any)."""
    (line,) = [line for line in lines if re.match(rf"(\S  )?{re.escape(first)}(\s|$)", line)]
    return line


def test_levels_group_actions_by_their_longest_path_from_a_root_ids_in_order():
    actions = [
        {"localId": 10, "parents": []},
        {"localId": 12, "parents": [10]},
        {"localId": 11, "parents": [10]},
        {"localId": 13, "parents": [11, 12]},
        {"localId": 14, "parents": [13, 10]},  # an edge skipping a level
        {"localId": 15, "parents": [13]},
    ]
    assert [[a["localId"] for a in level] for level in levels(actions)] == [[10], [11, 12], [13], [14, 15]]


def test_string_ids_are_listed_in_dag_order_not_alphabetically():
    actions = [  # as the gateway sends them: ints first, then strings alphabetically
        {"localId": 2, "parents": ["report"]},
        {"localId": "clean", "parents": ["ingest"]},
        {"localId": "ingest", "parents": []},
        {"localId": "report", "parents": ["clean"]},
        {"localId": 1, "parents": []},
    ]
    assert [a["localId"] for a in dag_order(actions)] == [1, "ingest", "clean", "report", 2]


def test_a_chain_longer_than_the_recursion_limit_is_drawn():
    chain = [{"localId": i, "parents": [i - 1] if i else []} for i in range(3000)]
    drawn = levels(chain)
    assert len(drawn) == 3000 and [level[0]["localId"] for level in drawn[:3]] == [0, 1, 2]


def test_status_fits_80_columns_with_every_action_on_its_own_row_in_dag_order():
    lines = fits(to_text(render_status(busy_workflow())))
    assert lines[0].startswith("wf-0123456789ab") and lines[0].endswith("RUNNING")
    assert lines[1].startswith("L0") and "5:b" in lines[1] and "ingest:ingest-the-raw" in lines[1]
    level_2 = next(line for line in lines if line.startswith("L2"))
    assert "alpha:report ←clean,zeta" in level_2 and "7:d ←5,6" in level_2  # a cell is never broken
    rows = [row_of(lines, str(i)) for i in (5, "ingest", 6, "clean", "zeta", 7, "alpha")]
    assert rows == sorted(rows, key=lines.index)  # DAG order: levels, ints before strings within one
    assert "RUNNING" in rows[0] and "FINISHED" in rows[1] and "1m00s" in rows[1]
    assert "follows wf-aaaaaaaaaaaa.3" in rows[2] and "REUSED" in rows[3] and "SKIPPED" in rows[4]
    assert "ingest-the-raw" in rows[1] and "…" in rows[1]  # a long name is cut, not wrapped into the next row
    # The error is too long for a column: it comes whole below the table.
    error_at = next(i for i, line in enumerate(lines) if line.startswith("✗ alpha:"))
    assert " ".join(lines[error_at:]).removeprefix("✗ alpha: ") == LONG_ERROR


def test_progress_head_counts_skipped_apart_from_reused():
    wf = busy_workflow()
    lines = fits(to_text(render_progress(wf, NOW - 12)))
    head = " ".join(lines[:2])
    assert head.startswith("wf-0123456789ab ") and "4/7 RUNNING" in head
    assert "computed 1" in head and "reused 1" in head and "skipped 1" in head and "failed 1" in head


def test_the_submit_summary_counts_skipped_actions_apart_from_reused_ones():
    plan = [
        {"decision": "reuse", "state": "REUSED"},
        {"decision": "reuse", "state": "SKIPPED"},
        {"decision": "reuse", "state": "SKIPPED"},
        {"decision": "compute", "state": "READY"},
        {"decision": "compute", "state": "FOLLOWING", "reason": "in_flight"},
    ]
    assert planned_summary(plan) == (
        "1 to compute, 1 reused, 2 skipped (not needed), 1 following a computation in flight"
    )
    assert planned_summary(plan[:1]) == "0 to compute, 1 reused"


def test_the_workflow_list_fits_80_columns_with_outcome_counts():
    running = busy_workflow()
    done = {
        **running,
        "id": "wf-ba9876543210",
        "name": "x",
        "state": "SUCCEEDED",
        "finishedAt": running["createdAt"] + 150,
    }
    lines = fits(to_text(workflows_table([running, done])))
    assert lines[0].split() == ["id", "name", "state", "comp", "reuse", "skip", "fail", "submitted", "took"]
    first, second = row_of(lines, "wf-0123456789ab"), row_of(lines, "wf-ba9876543210")
    assert first.split()[1].startswith("click") and first.split()[1].endswith("…")  # the name narrows first
    assert first.split()[2:7] == ["RUNNING", "1", "1", "1", "1"] and re.search(r" 3m2\ds$", first)  # so far
    assert second.split()[1:7] == ["x", "SUCCEEDED", "1", "1", "1", "1"] and second.endswith("2m30s")


def test_datasets_timeline_and_one_dataset_fit_80_columns():
    body = {
        "capacityBytes": 10 * 1024**3,
        "threshold": 0.9,
        "bytesByState": {"STORED": 3 * 1024**3, "STORED_TO_DELETE": 1024},
        "datasets": [
            {"hash": "ab" * 32, "state": "STORED_TO_DELETE", "size": 123456789, "files": 1200,
             "checksum": "sha256:" + "c" * 64, "computeSeconds": 7384.2, "useCount": 12345, "claims": ["a", "b"]},
        ],
    }  # fmt: skip
    lines = fits(to_text(datasets_view(body)))
    assert "3.0 GiB of 10.0 GiB" in lines[0] or "3.0 GB of 10.0 GB" in lines[0]
    assert ["hash", "state", "size", "files", "checksum", "time", "uses", "claims"] in [line.split() for line in lines]
    row = row_of(lines, "abababababab")
    assert row.split()[1:] == ["STORED_TO_DELETE", "117.7", row.split()[3], "1200", "sha256:c", "2h03m", "12345", "2"]

    rows = [
        {"at": NOW, "kind": "workflow", "id": "wf-0123456789ab", "state": "RUNNING", "by": "workflow_manager"},
        {"at": NOW + 1.5, "kind": "action", "id": "wf-0123456789ab.ingest [ingest-the-raw-clickstream-logs]",
         "state": "STORED_TO_DELETE", "by": "action_manager", "note": "attempt 2 of 3 after exit status 1"},
    ]  # fmt: skip
    lines = fits(to_text(timeline_table(rows)))
    assert lines[1].split()[:2] == ["0.000", "workflow"] and lines[2].split()[:2] == ["1.500", "action"]

    detail = {"hash": "ab" * 32, "state": "STORED", "path": "/data/" + "d" * 90, "size": 2048, "files": 1,
              "checksum": None, "producedBy": "wf-0123456789ab.2",
              "workflow": {"id": "wf-0123456789ab", "href": "/api/v1/workflows/wf-0123456789ab"}}  # fmt: skip
    lines = fits(to_text(dataset_detail(detail)))
    assert lines[-1] == "made by workflow wf-0123456789ab: pingo status wf-0123456789ab"
    assert "".join(line.split()[-1] for line in lines[:2]).endswith("ab" * 32)  # folded, not cut


def test_live_view_redraws_within_80_columns_on_a_terminal_and_prints_lines_elsewhere():
    wf = busy_workflow()
    waiting_to_ready = {**wf, "actions": [*wf["actions"][:-1], {**wf["actions"][-1], "state": "READY"}]}
    b_finished = {**wf["actions"][4], "state": "FINISHED", "startedAt": NOW - 3, "finishedAt": NOW - 1}
    later = {
        **waiting_to_ready,
        "actions": [*waiting_to_ready["actions"][:4], b_finished, *waiting_to_ready["actions"][5:]],
    }
    tty = StringIO()
    view = LiveView(Console(file=tty, width=80, force_terminal=True))  # as on a terminal
    for snapshot in (wf, wf, later):
        view.show(snapshot, NOW)
    view.final(later, NOW)
    drawn = tty.getvalue()
    assert "\x1b[" in drawn  # redrawn in place
    for line in ESCAPE.sub("", drawn).replace("\r", "\n").splitlines():
        assert cell_len(line) <= 80, line

    piped = StringIO()
    view = LiveView(console(piped, 80))
    assert not view.console.is_terminal
    for snapshot in (wf, wf, waiting_to_ready, later):
        view.show(snapshot, NOW)
    view.final(later, NOW)
    lines = piped.getvalue().splitlines()
    heads = [line for line in lines if line.startswith("wf-0123456789ab ")]
    # In a log each update is one whole line (never wrapped mid-way); the tables fit 80 columns.
    assert all("RUNNING" in h or "SUCCEEDED" in h or "FAILED" in h for h in heads), heads
    fits("\n".join(line for line in lines if line not in heads))
    assert "\x1b" not in piped.getvalue() and "\r" not in piped.getvalue()
    # A line when what it shows changes (not for READY: the head line does not show it), then the final view.
    assert len(heads) == 3 and "4/7" in heads[0] and "5/7" in heads[1] and "computed 2" in heads[1]
    assert row_of(lines, "5").split()[3] == "FINISHED" and row_of(lines, "7").split()[3] == "READY"


EVIL = "\x1b[2J evil [bold]x[/bold]\u202e\r"
SHOWN = "\\x1b[2J evil [bold]x[/bold]\\u202e\\x0d"


def test_control_characters_and_markup_in_names_are_shown_not_obeyed():
    wf = {**busy_workflow(), "name": EVIL}
    wf["actions"] = [{**a, "name": EVIL} for a in wf["actions"]]
    wf["actions"][3]["error"] = "line one\nline two \x1b]0;owned\x07"
    rows = [{"at": NOW, "kind": "workflow", "id": wf["id"], "state": "RUNNING", "by": EVIL, "note": EVIL}]
    for out_console in (console(StringIO(), 200), Console(file=StringIO(), width=200, force_terminal=True)):
        for view in (render_status(wf), workflows_table([wf]), render_progress(wf, NOW), timeline_table(rows)):
            out_console.print(view)
        drawn = out_console.file.getvalue()
        for obeyed in ("\x1b[2J", "\x1b]0;", "\u202e", "\r", "\x07"):
            assert obeyed not in drawn, (obeyed, drawn)
        plain = ESCAPE.sub("", drawn)  # less rich's own colours on the terminal
        assert SHOWN in plain
        assert "\\x1b]0;owned\\x07" in plain and "line two" in plain  # an error keeps its lines
    # As in a log: the same, and one row per action still.
    text = to_text(workflows_table([wf]), width=200)
    assert SHOWN in text and len(text.splitlines()) == 2


def test_datasets_say_what_made_them_where_there_is_room_and_never_squeeze_the_rest():
    """At 80 columns the "made by" column is last and the first to go: the other columns
    are never cut for it, and it is cut with … on one line where it is shown."""

    def body(state: str) -> dict:
        return {"capacityBytes": 10 * 1024**3, "threshold": 0.9, "bytesByState": {"STORED": 1024},
                "datasets": [{"hash": "ab" * 32, "state": state, "size": 123456789, "files": 1200,
                              "checksum": "sha256:" + "c" * 64, "computeSeconds": 7384.2, "useCount": 12,
                              "claims": [], "producedBy": "wf-0123456789ab.2",
                              "producedByName": "ingest the raw clickstream logs"}]}  # fmt: skip

    roomy = fits(to_text(datasets_view(body("STORED"))))
    assert roomy[-2].split()[-2:] == ["made", "by"]
    assert "  ingest" in roomy[-1] and roomy[-1].endswith("…")
    tight = fits(to_text(datasets_view(body("STORED_TO_DELETE"))))
    assert tight[-2].split()[-1] == "claims" and "made" not in tight[-2]


def test_an_action_cut_off_early_says_so_and_is_not_called_computed():
    """Planned to compute (its key is new), it ended REUSED at its start: its parent's output
    was an earlier lineage's (docs/planning.md, "Early cutoff")."""
    miss = {"summary": "parent 1 changed (since wf-0123456789ab)", "against": {"workflow": "wf-0123456789ab"}}
    reason = "early cutoff: parent 1's output is identical to wf-0123456789ab's"
    wf = {"id": "wf-fedcba987654", "name": "reads", "state": "SUCCEEDED", "createdAt": NOW, "finishedAt": NOW,
          "actions": [action(1, "read", [], "FINISHED", miss={**miss, "summary": "inputs[0].size changed (4 -> 6)"}),
                      action(2, "count", [1], "REUSED", miss=miss, reason=reason)]}  # fmt: skip
    lines = fits(to_text(render_status(wf)))
    assert "cut off early" in row_of(lines, "2")
    assert "♻ 2 " + reason + "; its key: parent 1 changed (since wf-0123456789ab)" in " ".join(lines)
    assert not any(line.startswith("↯ 2") for line in lines) and any(line.startswith("↯ 1 computed") for line in lines)
