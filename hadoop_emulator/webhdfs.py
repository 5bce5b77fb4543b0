"""WebHDFS (docs/hadoop-protocol.md, "WebHDFS"): a NameNode app and a DataNode app over one
:class:`Namespace`.

NameNode: ``/webhdfs/v1/<path>?op=...``. ``CREATE``, ``OPEN`` and ``GETFILECHECKSUM``
answer a real ``307 Temporary Redirect`` to the DataNode app (``noredirect=true``: 200
``{"Location": ...}``), with the query rebuilt as ``op``, ``user.name``,
``namenoderpcaddress``, then the other parameters sorted by name. The DataNode answers
``CREATE`` with ``201`` and ``Location: hdfs://<rpc address><path>``.

Errors are ``{"RemoteException": {"exception", "javaClassName", "message"}}`` with Hadoop's
status mapping (docs/hadoop-protocol.md, "Errors").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

from hadoop_emulator.faults import Faults
from hadoop_emulator.hdfs import DEFAULT_USER, HdfsError, Namespace
from hadoop_emulator.permissions import ALL, READ, READ_EXECUTE, WRITE, Checker

PREFIX = "/webhdfs/v1"
# Every op of each HTTP method in Hadoop 3 (an op under the wrong method is an invalid value).
REAL_OPS = {
    "GET": {
        "OPEN",
        "GETFILESTATUS",
        "LISTSTATUS",
        "GETCONTENTSUMMARY",
        "GETQUOTAUSAGE",
        "GETFILECHECKSUM",
        "GETHOMEDIRECTORY",
        "GETDELEGATIONTOKEN",
        "GETXATTRS",
        "LISTXATTRS",
        "GETACLSTATUS",
        "CHECKACCESS",
        "LISTSTATUS_BATCH",
        "GETTRASHROOT",
        "GETSTORAGEPOLICY",
        "GETALLSTORAGEPOLICY",
        "GETSNAPSHOTDIFF",
        "GETSNAPSHOTTABLEDIRECTORYLIST",
        "GETFILEBLOCKLOCATIONS",
        "GETSERVERDEFAULTS",
        "GETECPOLICY",
        "GETSTATUS",
        "GET_BLOCK_LOCATIONS",
        "GETSNAPSHOTLIST",
        "GETLINKTARGET",
        "GETFILELINKSTATUS",
    },
    "PUT": {
        "CREATE",
        "MKDIRS",
        "CREATESYMLINK",
        "RENAME",
        "SETREPLICATION",
        "SETOWNER",
        "SETPERMISSION",
        "SETTIMES",
        "RENEWDELEGATIONTOKEN",
        "CANCELDELEGATIONTOKEN",
        "MODIFYACLENTRIES",
        "REMOVEACLENTRIES",
        "REMOVEDEFAULTACL",
        "REMOVEACL",
        "SETACL",
        "SETXATTR",
        "REMOVEXATTR",
        "CREATESNAPSHOT",
        "RENAMESNAPSHOT",
        "ALLOWSNAPSHOT",
        "DISALLOWSNAPSHOT",
        "ENABLEECPOLICY",
        "DISABLEECPOLICY",
        "SETECPOLICY",
        "SETSTORAGEPOLICY",
        "SATISFYSTORAGEPOLICY",
    },
    "POST": {"APPEND", "CONCAT", "TRUNCATE", "UNSETSTORAGEPOLICY", "UNSETECPOLICY"},
    "DELETE": {"DELETE", "DELETESNAPSHOT"},
}
WRITE_OPS = {"CREATE", "MKDIRS", "RENAME", "DELETE", "SETPERMISSION", "SETOWNER", "SETREPLICATION"}
_PERMISSION = re.compile(r"[01]?[0-7]{3}")


def _invalid(param: str, detail: str) -> HdfsError:
    return HdfsError("IllegalArgumentException", f'Invalid value for webhdfs parameter "{param}": {detail}')


def _bool(query: Any, name: str, default: bool) -> bool:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise _invalid(name, f'Failed to parse "{raw}" to Boolean.')


def _int(query: Any, name: str, default: int | None, minimum: int = 0) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _invalid(name, f'Failed to parse "{raw}" as a radix-10 integer.') from None
    if value < minimum:
        raise _invalid(name, f"{value} < {minimum}")
    return value


def _permission(query: Any) -> str | None:
    raw = query.get("permission")
    if raw is None or raw == "":
        return None
    if not _PERMISSION.fullmatch(raw):
        raise _invalid("permission", f'Failed to parse "{raw}" as an octal permission (1777 at most).')
    return raw.lstrip("0").rjust(3, "0") if len(raw) == 4 else raw


def _chunks(local: Path, offset: int, end: int) -> Iterator[bytes]:
    with open(local, "rb") as fh:
        fh.seek(offset)
        remaining = end - offset
        while remaining > 0:
            chunk = fh.read(min(1 << 20, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
            yield chunk


def json_error(err: HdfsError, datanode: bool = False) -> web.Response:
    resp = web.json_response(err.body(), status=err.status)
    if datanode:
        resp.force_close()  # Netty's handler answers errors with Connection: close
    return resp


def request_path(request: web.Request) -> str:
    """The HDFS path of the request, percent-decoded, not yet normalized."""
    raw = request.raw_path.split("?", 1)[0]
    rest = raw[len(PREFIX) :] if raw.startswith(PREFIX) else raw
    if rest and not rest.startswith("/"):
        raise web.HTTPNotFound()  # /webhdfs/v1x
    return unquote(rest) or "/"


class WebHdfs:
    def __init__(
        self,
        namespace: Namespace,
        faults: Callable[[], Faults],
        datanode_base: Callable[[web.Request], str],
        rpc_address: str,
        count_unavailable: Callable[[], None],
    ) -> None:
        self.ns = namespace
        self._faults = faults
        self.datanode_base = datanode_base
        self.rpc_address = rpc_address
        self.count_unavailable = count_unavailable
        self.permissions = Checker(namespace, faults)

    # -- common -----------------------------------------------------------------------
    def _burst(self) -> web.Response | None:
        faults = self._faults()
        if faults.standby_burst_webhdfs > 0:
            faults.standby_burst_webhdfs -= 1
            self.count_unavailable()
            return json_error(
                HdfsError("StandbyException", "Operation category READ is not supported in state standby")
            )
        return None

    def _guard(self, request: web.Request, op: str, path: str) -> None:
        faults = self._faults()
        if faults.webhdfs_require_xsrf and request.method not in ("GET", "OPTIONS", "HEAD", "TRACE"):
            if "X-XSRF-HEADER" not in request.headers:
                raise HdfsError("IllegalArgumentException", "Missing Required Header for CSRF Vulnerability Protection")
        if faults.webhdfs_deny_anonymous_writes and op in WRITE_OPS and self._user(request) == DEFAULT_USER:
            raise HdfsError(
                "AccessControlException",
                f'Permission denied: user={DEFAULT_USER}, access=WRITE, inode="{path}":hdfs:supergroup:drwxr-xr-x',
            )

    def _user(self, request: web.Request) -> str:
        """Who the request acts as: ``doas`` if the caller (``user.name``) may act for that
        user (core-site's hadoop.proxyuser settings, here ``proxy_users``; the hosts list is
        not checked), else a 403 ``AuthorizationException``, as Apache Hadoop 3.4's NameNode
        answers (docs/hadoop-protocol.md, "Emulator and real cluster")."""
        caller = request.query.get("user.name") or DEFAULT_USER
        do_as = request.query.get("doas")
        if not do_as or do_as == caller:
            return caller
        faults = self._faults()
        groups = faults.proxy_users.get(caller)
        if groups is None or ("*" not in groups and not set(groups) & set(faults.user_groups.get(do_as, []))):
            raise HdfsError("AuthorizationException", f"User: {caller} is not allowed to impersonate {do_as}")
        return do_as

    @staticmethod
    def _op(request: web.Request, methods: dict[str, set[str]]) -> str:
        raw = request.query.get("op")
        kind = {"GET": "Get", "PUT": "Put", "POST": "Post", "DELETE": "Delete"}.get(request.method)
        if kind is None:
            raise HdfsError("UnsupportedOperationException", f"HTTP method {request.method} is not supported")
        if raw is None:
            raise _invalid("op", f"null ({kind}OpParam)")
        op = raw.upper()
        if op not in REAL_OPS[request.method]:
            raise _invalid("op", f"No enum constant org.apache.hadoop.hdfs.web.resources.{kind}OpParam.Op.{op}")
        if op not in methods.get(request.method, set()):
            raise HdfsError("UnsupportedOperationException", f"{op} is not supported by the Pingo emulator")
        return op

    def _location(self, request: web.Request, path: str, op: str, params: dict[str, str]) -> str:
        query = [
            f"op={op}",
            f"user.name={quote(self._user(request), safe='')}",
            f"namenoderpcaddress={self.rpc_address}",
        ]
        query += [f"{k}={quote(v, safe='')}" for k, v in sorted(params.items())]
        return f"{self.datanode_base(request)}{PREFIX}{quote(path, safe='/')}?{'&'.join(query)}"

    @staticmethod
    def _redirect(request: web.Request, location: str) -> web.Response:
        if _bool(request.query, "noredirect", False):
            return web.json_response({"Location": location})
        return web.Response(
            status=307, headers={"Location": location, "Content-Type": "application/octet-stream"}, body=b""
        )

    # -- NameNode ---------------------------------------------------------------------
    NN_OPS = {
        "GET": {"OPEN", "GETFILESTATUS", "LISTSTATUS", "GETCONTENTSUMMARY", "GETFILECHECKSUM", "GETHOMEDIRECTORY"},
        "PUT": {"CREATE", "MKDIRS", "RENAME", "SETPERMISSION", "SETOWNER", "SETREPLICATION"},
        "DELETE": {"DELETE"},
    }

    def namenode_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", PREFIX + "{tail:.*}", self.namenode)
        return app

    async def namenode(self, request: web.Request) -> web.StreamResponse:
        if (busy := self._burst()) is not None:
            return busy
        try:
            op = self._op(request, self.NN_OPS)
            raw_path = request_path(request)
            self._guard(request, op, raw_path)
            path = self.ns.normalize(raw_path)
            return self._namenode_op(request, op, path)
        except HdfsError as exc:
            return json_error(exc)

    def _namenode_op(self, request: web.Request, op: str, path: str) -> web.Response:
        q = request.query
        user = self._user(request)
        if op != "CREATE":  # the DataNode's create asks the NameNode, which checks then
            self._authorize(user, op, path, q)
        if op == "GETFILESTATUS":
            return web.json_response({"FileStatus": self.ns.status(path)})
        if op == "LISTSTATUS":
            return web.json_response({"FileStatuses": {"FileStatus": self.ns.list(path)}})
        if op == "GETCONTENTSUMMARY":
            return web.json_response({"ContentSummary": self.ns.content_summary(path)})
        if op == "GETHOMEDIRECTORY":
            return web.json_response({"Path": f"/user/{user}"})
        if op == "MKDIRS":
            return web.json_response({"boolean": self.ns.mkdirs(path, user, _permission(q))})
        if op == "DELETE":
            return web.json_response({"boolean": self.ns.delete(path, _bool(q, "recursive", False))})
        if op == "RENAME":
            return self._rename(request, path)
        if op == "SETPERMISSION":
            self.ns.set_permission(path, _permission(q))
            return web.Response(status=200)
        if op == "SETOWNER":
            self.ns.set_owner(path, q.get("owner") or None, q.get("group") or None)
            return web.Response(status=200)
        if op == "SETREPLICATION":
            replication = _int(q, "replication", None, minimum=1)
            return web.json_response({"boolean": self.ns.set_replication(path, replication)})
        if op == "CREATE":
            params = {
                "createparent": str(_bool(q, "createparent", True)).lower(),
                "overwrite": str(_bool(q, "overwrite", False)).lower(),
            }
            if (p := _permission(q)) is not None:
                params["permission"] = p
            for name in ("replication", "blocksize", "buffersize"):
                if (v := _int(q, name, None, minimum=1)) is not None:
                    params[name] = str(v)
            return self._redirect(request, self._location(request, path, op, params))
        if op == "OPEN":
            self.ns.open_file(path)  # 404 at the NameNode for a missing path or a directory
            params = {"offset": str(_int(q, "offset", 0))}
            if (length := _int(q, "length", None)) is not None:
                params["length"] = str(length)
            if (bs := _int(q, "buffersize", None, minimum=1)) is not None:
                params["buffersize"] = str(bs)
            return self._redirect(request, self._location(request, path, op, params))
        if op == "GETFILECHECKSUM":
            self.ns.open_file(path)
            return self._redirect(request, self._location(request, path, op, {}))
        raise HdfsError("UnsupportedOperationException", f"{op} is not supported")

    # What each operation checks (as FSDirStatAndListingOp, FSDirMkdirOp, FSDirDeleteOp,
    # FSDirRenameOp, FSDirAttrOp and FSDirWriteFileOp ask FSPermissionChecker).
    CHECKS: dict[str, dict[str, int]] = {
        "LISTSTATUS": {"access": READ_EXECUTE},
        "GETCONTENTSUMMARY": {"sub": READ_EXECUTE},
        "OPEN": {"access": READ},
        "GETFILECHECKSUM": {"access": READ},
        "MKDIRS": {"ancestor": WRITE},
        "CREATE": {"ancestor": WRITE},
        "DELETE": {"parent": WRITE, "sub": ALL},
        "SETREPLICATION": {"access": WRITE},
        "GETFILESTATUS": {},
    }

    def _authorize(self, user: str, op: str, path: str, q: Any) -> None:
        checker = self.permissions
        caller = checker.caller(user)
        if op == "SETPERMISSION":
            checker.check(caller, path, owner=True)
        elif op == "SETOWNER":
            checker.check(caller, path)
            checker.check_set_owner(caller, path, q.get("owner") or None, q.get("group") or None)
        elif op == "RENAME":
            checker.check(caller, path, parent=WRITE)
            dst = q.get("destination")
            if dst and dst.startswith("/"):
                try:
                    target = self.ns.normalize(dst)
                    if q.get("renameoptions") is None and self.ns.is_dir(target):
                        target = f"{target.rstrip('/')}/{path.rsplit('/', 1)[1]}"  # moved inside it
                    checker.check(caller, target, ancestor=WRITE)
                except HdfsError as exc:
                    if exc.exception == "AccessControlException":
                        raise
        elif op == "MKDIRS" and self.ns.exists(path):
            checker.check(caller, path)  # an existing folder: only the way to it is checked
        elif op == "CREATE" and _bool(q, "overwrite", False) and self.ns.exists(path):
            checker.check(caller, path, ancestor=WRITE, access=WRITE)
        elif op in self.CHECKS:
            checker.check(caller, path, **self.CHECKS[op])
        else:
            checker.check(caller, path, access=None)

    def _rename(self, request: web.Request, path: str) -> web.Response:
        dst = request.query.get("destination")
        if not dst:
            raise HdfsError("IllegalArgumentException", "Required param destination for op: RENAME is null or empty")
        if not dst.startswith("/"):
            raise _invalid("destination", f'Invalid parameter value: destination = "{dst}" is not an absolute path.')
        options = request.query.get("renameoptions")
        if options is None:
            return web.json_response({"boolean": self.ns.rename(path, dst)})
        opts = {o.strip().upper() for o in options.split(",") if o.strip()}
        if not opts <= {"NONE", "OVERWRITE"}:
            raise _invalid("renameoptions", f"No enum constant org.apache.hadoop.fs.Options.Rename.{options}")
        self._rename2(path, dst, "OVERWRITE" in opts)
        return web.Response(status=200)

    def _rename2(self, src: str, dst_raw: str, overwrite: bool) -> None:
        """``rename2`` (with ``renameoptions``): failures are exceptions (docs/hadoop-protocol.md, "RENAME")."""
        try:
            dst = self.ns.normalize(dst_raw)
        except HdfsError:
            raise HdfsError("IOException", f"Invalid name: {dst_raw}") from None
        if not self.ns.exists(src):
            raise HdfsError("FileNotFoundException", f"Source {src} not found.")
        if src == dst:
            raise HdfsError("FileAlreadyExistsException", f"The source {src} and destination {dst} are the same")
        parent = dst.rsplit("/", 1)[0] or "/"
        if not self.ns.exists(parent):
            raise HdfsError("FileNotFoundException", f"rename destination parent {parent} not found.")
        if not self.ns.is_dir(parent):
            raise HdfsError("ParentNotDirectoryException", f"rename destination parent {parent} is a file.")
        if self.ns.exists(dst):
            if not overwrite:
                raise HdfsError("FileAlreadyExistsException", f"rename destination {dst} already exists.")
            if self.ns.is_dir(dst) and any(self.ns.local(dst).iterdir()):
                raise HdfsError("IOException", f"rename destination directory is not empty: {dst}")
            self.ns.delete(dst, recursive=True)
        if not self.ns.rename(src, dst):
            raise HdfsError("IOException", f"Failed to rename {src} to {dst}")

    # -- DataNode ---------------------------------------------------------------------
    DN_OPS = {"GET": {"OPEN", "GETFILECHECKSUM"}, "PUT": {"CREATE"}}

    def datanode_app(self) -> web.Application:
        app = web.Application(client_max_size=1024**4)
        app.router.add_route("*", PREFIX + "{tail:.*}", self.datanode)
        return app

    async def datanode(self, request: web.Request) -> web.StreamResponse:
        if (busy := self._burst()) is not None:
            busy.force_close()
            return busy
        try:
            op = self._op(request, self.DN_OPS)
            if not request.query.get("namenoderpcaddress"):
                raise _invalid("namenoderpcaddress", "namenoderpcaddress is not specified.")
            raw_path = request_path(request)
            self._guard(request, op, raw_path)
            path = self.ns.normalize(raw_path)
            self._authorize(self._user(request), op, path, request.query)
            if op == "CREATE":
                return await self._create(request, path)
            if op == "OPEN":
                return await self._open(request, path)
            return web.json_response(self.ns.checksum(path))
        except HdfsError as exc:
            return json_error(exc, datanode=True)

    async def _create(self, request: web.Request, path: str) -> web.Response:
        q = request.query
        f = self.ns.create(
            path,
            self._user(request),
            overwrite=_bool(q, "overwrite", False),
            permission=_permission(q),
            replication=_int(q, "replication", None, minimum=1),
            block_size=_int(q, "blocksize", None, minimum=1),
            create_parent=_bool(q, "createparent", True),
            client=request.remote or "127.0.0.1",
        )
        with f:
            async for chunk in request.content.iter_chunked(1 << 16):
                f.write(chunk)
        location = f"hdfs://{q.get('namenoderpcaddress')}{quote(path, safe='/')}"
        return web.Response(status=201, headers={"Location": location}, body=b"")

    async def _open(self, request: web.Request, path: str) -> web.StreamResponse:
        q = request.query
        _, local, size = self.ns.open_file(path)
        offset = _int(q, "offset", 0) or 0
        length = _int(q, "length", None)
        if offset > size:
            raise HdfsError("EOFException", "Cannot seek after EOF")
        end = size if length is None else min(size, offset + length)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/octet-stream"})
        resp.content_length = end - offset
        await resp.prepare(request)
        for chunk in _chunks(local, offset, end):
            await resp.write(chunk)
        await resp.write_eof()
        return resp
