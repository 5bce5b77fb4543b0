"""A real browser for the web view's tests: Debian's Chromium driven by Playwright.

Playwright's own browser download cannot be had here, so it drives the system's
``chromium`` (``scripts/test`` installs the package where it is missing). No Chromium is a
test failure that says how to get one, never a skip. Screenshots go to
``tests/artifacts/`` (or ``PINGO_TEST_ARTIFACTS``), kept for a person to look at.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("PINGO_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts")
# The flags a sandboxed, offline machine needs: no GPU, no calls home.
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium_path() -> str:
    found = os.environ.get("PINGO_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no Chromium for the web view's tests: apt-get install chromium (scripts/test does it as root)")
    return found


@asynccontextmanager
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        try:
            yield b
        finally:
            await b.close()


@asynccontextmanager
async def page(b: Browser, width: int = 1400, height: int = 900, expected: tuple[str, ...] = ()) -> AsyncIterator[Page]:
    """A fresh page; ``expected``: console errors the test causes on purpose (a 401)."""
    context = await b.new_context(viewport={"width": width, "height": height})
    p = await context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        yield p
    finally:
        await context.close()
    # A script error or a refused resource (the Content-Security-Policy) is a failure.
    unexpected = [e for e in errors if not any(x in e for x in expected)]
    assert not unexpected, f"the page reported errors: {unexpected}"


async def screenshot(p: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await p.screenshot(path=str(path), full_page=True)
    return path
