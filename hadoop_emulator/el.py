"""A small subset of Oozie's expression language: ``${name}`` variables (job properties)
and calls such as ``${wf:id()}``, ``${wf:conf('a.b')}``,
``${wf:errorMessage(wf:lastErrorNode())}`` with string literals, variables and nested
calls as arguments. Operators, ternaries and maps are not supported (an :class:`ELError`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Function = Callable[..., object]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ELError(Exception):
    pass


def has_el(text: str) -> bool:
    return "${" in text


def evaluate(text: str, variables: Mapping[str, str], functions: Mapping[str, Function] | None = None) -> str:
    """``text`` with every ``${...}`` replaced by its value."""
    functions = functions or {}
    out: list[str] = []
    i = 0
    while True:
        start = text.find("${", i)
        if start < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:start])
        end = _closing(text, start + 2)
        expr = text[start + 2 : end]
        out.append(_Parser(expr, variables, functions).run())
        i = end + 1


def _closing(text: str, i: int) -> int:
    quote = None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "}":
            return i
        i += 1
    raise ELError(f"Unable to evaluate :{text}: unterminated expression")


class _Parser:
    def __init__(self, expr: str, variables: Mapping[str, str], functions: Mapping[str, Function]) -> None:
        self.s = expr
        self.i = 0
        self.variables = variables
        self.functions = functions

    def run(self) -> str:
        value = self.value()
        self.ws()
        if self.i != len(self.s):
            raise ELError(f"Unable to evaluate :${{{self.s}}}: unsupported expression")
        return "" if value is None else str(value)

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def value(self) -> object:
        self.ws()
        if self.i >= len(self.s):
            raise ELError(f"Unable to evaluate :${{{self.s}}}: empty expression")
        c = self.s[self.i]
        if c in "'\"":
            return self.string(c)
        m = _IDENT.match(self.s, self.i)
        if not m:
            raise ELError(f"Unable to evaluate :${{{self.s}}}: unsupported expression")
        name = m.group(0)
        self.i = m.end()
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == ":" and "." not in name:
            self.i += 1
            m2 = _NAME.match(self.s, self.i)
            if not m2:
                raise ELError(f"Unable to evaluate :${{{self.s}}}: bad function name")
            name = f"{name}:{m2.group(0)}"
            self.i = m2.end()
            self.ws()
            if self.i >= len(self.s) or self.s[self.i] != "(":
                raise ELError(f"Unable to evaluate :${{{self.s}}}: missing '(' after {name}")
        if self.i < len(self.s) and self.s[self.i] == "(":
            return self.call(name)
        if name in ("null",):
            return None
        if name in ("true", "false"):
            return name
        if name in self.variables:
            return self.variables[name]
        raise ELError(f"variable [{name.split('.')[0]}] cannot be resolved")

    def string(self, quote: str) -> str:
        self.i += 1
        out = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "\\" and self.i + 1 < len(self.s):
                out.append(self.s[self.i + 1])
                self.i += 2
                continue
            if c == quote:
                self.i += 1
                return "".join(out)
            out.append(c)
            self.i += 1
        raise ELError(f"Unable to evaluate :${{{self.s}}}: unterminated string")

    def call(self, name: str) -> object:
        self.i += 1  # '('
        args: list[object] = []
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == ")":
            self.i += 1
        else:
            while True:
                args.append(self.value())
                self.ws()
                if self.i < len(self.s) and self.s[self.i] == ",":
                    self.i += 1
                    continue
                if self.i < len(self.s) and self.s[self.i] == ")":
                    self.i += 1
                    break
                raise ELError(f"Unable to evaluate :${{{self.s}}}: bad argument list")
        fn = self.functions.get(name)
        if fn is None:
            raise ELError(f'No function is mapped to the name "{name}"')
        try:
            return fn(*args)
        except TypeError as exc:
            raise ELError(f"Unable to evaluate :${{{self.s}}}: {exc}") from None
