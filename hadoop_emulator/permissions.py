"""HDFS permission checks, as the NameNode makes them with ``dfs.permissions.enabled``
(docs/emulator.md, "Permissions"): owner, group and other bits of each inode, the sticky
bit on directories, a superuser who bypasses everything, and the checks each WebHDFS
operation asks for (traverse, ancestor, parent, the path itself, everything below it,
ownership). ACLs and extended attributes are not modelled.

Failures are ``AccessControlException`` with the NameNode's messages, answered 403.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from hadoop_emulator.faults import Faults
from hadoop_emulator.hdfs import SUPERGROUP, SUPERUSER, HdfsError, Namespace

READ, WRITE, EXECUTE = 4, 2, 1
ALL = READ | WRITE | EXECUTE
READ_EXECUTE = READ | EXECUTE
_NAMES = {0: "NONE", READ: "READ", WRITE: "WRITE", EXECUTE: "EXECUTE", ALL: "ALL", READ_EXECUTE: "READ_EXECUTE",
          READ | WRITE: "READ_WRITE", WRITE | EXECUTE: "WRITE_EXECUTE"}  # fmt: skip


@dataclass(frozen=True)
class Caller:
    user: str
    groups: frozenset[str]

    @property
    def superuser(self) -> bool:
        """The NameNode's own user, or a member of ``dfs.permissions.superusergroup``."""
        return self.user == SUPERUSER or SUPERGROUP in self.groups


def mode_bits(permission: str | None, is_dir: bool) -> int:
    """The octal mode of an inode (``None``: the default, 755 for folders, 644 for files)."""
    return int(permission, 8) if permission else (0o755 if is_dir else 0o644)


def symbolic(bits: int, is_dir: bool) -> str:
    """``drwxr-xr-x``; the sticky bit shows as ``t`` (``T`` without other's execute)."""
    out = ["d" if is_dir else "-"]
    for shift in (6, 3, 0):
        part = (bits >> shift) & 7
        out += ["r" if part & READ else "-", "w" if part & WRITE else "-", "x" if part & EXECUTE else "-"]
    if bits & 0o1000:
        out[-1] = "t" if out[-1] == "x" else "T"
    return "".join(out)


def denied(message: str) -> HdfsError:
    return HdfsError("AccessControlException", message)


class Checker:
    """The checks of one request, for one caller, against the live namespace; a no-op while
    ``hdfs_permissions`` is off (the superuser is never checked either)."""

    def __init__(self, ns: Namespace, faults: Callable[[], Faults]) -> None:
        self.ns = ns
        self._faults = faults

    def caller(self, user: str) -> Caller:
        return Caller(user, frozenset(self._faults().user_groups.get(user, [])))

    def enabled_for(self, caller: Caller) -> bool:
        return self._faults().hdfs_permissions and not caller.superuser

    # -- inodes -----------------------------------------------------------------------
    def _inode(self, path: str) -> tuple[int, bool, str, str] | None:
        """(mode, is a folder, owner, group) of an existing path; None if it does not exist."""
        try:
            st = os.lstat(self.ns.local(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        is_dir = stat.S_ISDIR(st.st_mode)
        m = self.ns.meta(path)
        return mode_bits(m.permission, is_dir), is_dir, m.owner, m.group

    def _allows(self, caller: Caller, inode: tuple[int, bool, str, str], access: int) -> bool:
        mode, _, owner, group = inode
        if caller.user == owner:
            bits = mode >> 6
        elif group in caller.groups:
            bits = mode >> 3
        else:
            bits = mode
        return bits & access == access

    def _check(self, caller: Caller, path: str, access: int) -> None:
        inode = self._inode(path)
        if inode is not None and not self._allows(caller, inode, access):
            mode, is_dir, owner, group = inode
            raise denied(
                f"Permission denied: user={caller.user}, access={_NAMES[access]}, "
                f'inode="{path}":{owner}:{group}:{symbolic(mode, is_dir)}'
            )

    @staticmethod
    def _ancestors(path: str) -> list[str]:
        """``/a/b/c`` -> ``["/", "/a", "/a/b"]``."""
        parts = path.split("/")[1:-1]
        out = ["/"]
        for i in range(len(parts)):
            out.append("/" + "/".join(parts[: i + 1]))
        return out if path != "/" else []

    # -- the checks of FSPermissionChecker.checkPermission ------------------------------
    def check(
        self,
        caller: Caller,
        path: str,
        *,
        ancestor: int | None = None,
        parent: int | None = None,
        access: int | None = None,
        sub: int | None = None,
        owner: bool = False,
    ) -> None:
        """Execute on every folder on the way; then ``ancestor`` on the deepest existing
        ancestor, ``parent`` on the parent (with its sticky bit), ``access`` on the path,
        ``sub`` on the path and every folder below it (empty ones left out, as a delete
        does), ``owner``: the caller must own the path."""
        if not self.enabled_for(caller):
            return
        ancestors = self._ancestors(path)
        existing = []
        for a in ancestors:
            inode = self._inode(a)
            if inode is None or not inode[1]:
                break  # the operation itself reports the missing folder or the file in the way
            self._check(caller, a, EXECUTE)
            existing.append(a)
        if owner:
            inode = self._inode(path)
            if inode is not None and inode[2] != caller.user:
                raise denied(f"Permission denied. user={caller.user} is not the owner of inode={path}")
        if ancestor is not None and existing:
            self._check(caller, existing[-1], ancestor)  # the deepest existing folder above the path
        if parent is not None and ancestors and ancestors[-1] in existing:
            self._check(caller, ancestors[-1], parent)
            if parent & WRITE:
                self._sticky(caller, ancestors[-1], path)
        if access is not None:
            self._check(caller, path, access)
        if sub is not None:
            self._sub(caller, path, sub)

    def _sticky(self, caller: Caller, parent: str, path: str) -> None:
        """In a folder with the sticky bit, only the owner of an entry or of the folder may
        remove or rename the entry."""
        p, child = self._inode(parent), self._inode(path)
        if p is None or child is None or not p[0] & 0o1000:
            return
        if caller.user in (p[2], child[2]):
            return
        raise denied(
            f"Permission denied by sticky bit: user={caller.user}, "
            f'path="{path}":{child[2]}:{child[3]}:{symbolic(child[0], child[1])}, '
            f'parent="{parent}":{p[2]}:{p[3]}:{symbolic(p[0], p[1])}'
        )

    def _sub(self, caller: Caller, path: str, access: int) -> None:
        stack = [path]
        while stack:
            current = stack.pop()
            inode = self._inode(current)
            if inode is None or not inode[1]:
                continue
            children = sorted(os.listdir(self.ns.local(current)))
            if children:  # an empty folder is not checked
                self._check(caller, current, access)
            stack += [f"{current.rstrip('/')}/{c}" for c in children]

    def check_set_owner(self, caller: Caller, path: str, owner: str | None, group: str | None) -> None:
        """SETOWNER: the owner of the path may change its group to one of their own groups;
        only the superuser may change its owner."""
        if not self._faults().hdfs_permissions or caller.superuser:
            return
        self.check(caller, path, owner=True)
        if owner is not None:
            raise denied(f"User {caller.user} is not a super user (non-super user cannot change owner).")
        if group is not None and group not in caller.groups:
            raise denied(f"User {caller.user} does not belong to {group}")
