"""One command through nx-27017's handler, as its server takes it off the wire: what the
embedded store's tests compare between nx-27017's own path and ours."""

from __future__ import annotations

from typing import Any

import bson
from nx_27017.handler import NeoSQLiteHandler
from nx_27017.wire_protocol import ResponseBuilder


def serve(
    handler: NeoSQLiteHandler, request_id: int, body: dict[str, Any], db: str = "pingo"
) -> tuple[bytes, list[str]]:
    """The command's encoded reply, and the SQL statements it ran on database ``db``."""
    ran: list[str] = []
    handler.get_database(db).db.set_trace_callback(ran.append)
    msg = {"request_id": request_id, "sections": [("body", bson.decode(bson.encode(body)))], "_conn_id": "c"}
    _, reply = (handler.handle_insert if "insert" in body else handler.handle_command)(msg)
    return ResponseBuilder.build_op_msg_reply(request_id=request_id, response_to=request_id, document=reply), ran
