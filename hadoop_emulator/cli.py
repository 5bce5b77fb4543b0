"""The emulator's command line (``python -m hadoop_emulator``, ``pingo emulate-hadoop``):
serve the emulator until SIGINT/SIGTERM.

Every fault knob of :class:`~hadoop_emulator.faults.Faults` is a flag (``--status-lag 5``,
``--reorder-notifications``, ...), so the flags and the ``/emulator/faults`` JSON keys
never drift apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import types
import typing
from typing import Any

from hadoop_emulator.faults import Faults

WRITE_ONLY = {"lose_notification_queue"}


def _flag_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not types.NoneType]
    return args[0] if args else annotation


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", required=True, help="local directory holding the HDFS namespace (/a/b is ROOT/a/b)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--oozie-port", type=int, default=11000, help="Oozie web services port (default 11000)")
    p.add_argument("--namenode-port", type=int, default=9870, help="WebHDFS NameNode port (default 9870)")
    p.add_argument("--datanode-port", type=int, default=9864, help="WebHDFS DataNode port (default 9864)")
    p.add_argument(
        "--rpc-port",
        type=int,
        default=8020,
        help="port named in hdfs:// URIs (not served; hdfs:// authorities are ignored)",
    )
    p.add_argument("--work-dir", help="action working directories (default ROOT/../.emulator-work)")
    p.add_argument("--log-level", default="INFO")
    faults = p.add_argument_group("fault injection (also GET/PUT /emulator/faults on the Oozie port)")
    for name, info in Faults.model_fields.items():
        if name in WRITE_ONLY:
            continue
        flag = "--" + name.replace("_", "-")
        kind = _flag_type(info.annotation)
        help_ = f"{info.description} (default {info.default})"
        if kind is bool:
            faults.add_argument(flag, dest=f"fault_{name}", action="store_true", default=None, help=help_)
        elif typing.get_origin(info.annotation) is dict:  # site configuration: a JSON object
            help_ = f'{info.description} A JSON object, e.g. \'{{"pingo": ["*"]}}\' (default {{}})'
            faults.add_argument(flag, dest=f"fault_{name}", type=json.loads, default=None, metavar="JSON", help=help_)
        else:
            faults.add_argument(flag, dest=f"fault_{name}", type=kind, default=None, metavar=name.upper(), help=help_)


def faults_from(args: argparse.Namespace) -> Faults:
    values = {k.removeprefix("fault_"): v for k, v in vars(args).items() if k.startswith("fault_") and v is not None}
    return Faults.model_validate(values)


async def serve(args: argparse.Namespace) -> int:
    from hadoop_emulator.server import start_emulator

    emu = await start_emulator(
        args.root,
        host=args.host,
        oozie_port=args.oozie_port,
        namenode_port=args.namenode_port,
        datanode_port=args.datanode_port,
        faults=faults_from(args),
        work_dir=args.work_dir,
        rpc_port=args.rpc_port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    print(f"oozie:    {emu.oozie_url}", flush=True)
    print(f"namenode: {emu.namenode_url}  (WebHDFS {emu.namenode_url}/webhdfs/v1/)", flush=True)
    print(f"datanode: {emu.datanode_url}", flush=True)
    print(f"hdfs:     {emu.hdfs_uri} -> {emu.root}  (jobs see PINGO_EMULATOR_HDFS_ROOT)", flush=True)
    try:
        await stop.wait()
    finally:
        await emu.stop()
    return 0


def parser(prog: str = "pingo emulate-hadoop") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run an emulated Oozie + WebHDFS (NameNode, DataNode) over a local directory."
    )
    add_arguments(p)
    return p


def run(args: argparse.Namespace, prog: str = "pingo emulate-hadoop") -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        faults_from(args)
    except ValueError as exc:
        print(f"{prog}: {exc}")
        return 2
    try:
        return asyncio.run(serve(args))
    except OSError as exc:
        print(f"{prog}: {exc}")
        return 1


def main(argv: list[str] | None = None, prog: str = "pingo emulate-hadoop") -> int:
    return run(parser(prog).parse_args(argv), prog)
