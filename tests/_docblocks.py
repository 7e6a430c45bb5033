"""Read the fenced code blocks of the docs pages, and run them.

Conventions of the pages (see docs/writing-plugins.md for an example):

* a ```python block runs, in order, in one namespace per page, in a fresh
  temporary working folder;
* an HTML comment ``<!-- no-run -->`` on the line before a block keeps it
  from running (or, for a TOML recipe, from being compiled);
* a block with ``title="name.ext"`` is also written to that file in the
  working folder when the run reaches it (a recipe shown in TOML is the recipe
  the next Python block reads);
* a ```text block after ``<!-- output -->`` must equal what the Python block
  before it printed;
* a line ``--8<-- "path"`` inside a block is replaced by that file of the
  repository (pymdownx.snippets does the same for the site).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*?)[ \t]*$")
_SNIPPET = re.compile(r'^[ \t]*--8<--[ \t]+"(?P<path>[^"]+)"[ \t]*$')
_MARKER = re.compile(r"^[ \t]*<!--[ \t]*(?P<name>[a-z-]+)[ \t]*-->[ \t]*$")


class DocRunError(AssertionError):
    """A docs page's example fails, or its documented output is not the real one."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    marker: str | None  # the HTML-comment marker on the line before, if any
    source: str

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def _info(info: str) -> tuple[str, str | None]:
    """The language and ``title="..."`` of a fence's info string."""
    words = shlex.split(info) if info else []
    lang = words[0].lstrip(".").lower() if words else ""
    title = None
    for word in words[1:]:
        if word.startswith("title="):
            title = word.split("=", 1)[1]
    return lang, title


_SECTION_MARK = re.compile(r"--8<--[ \t]+\[(?P<edge>start|end):(?P<name>[^\]]+)\]")


def _include(spec: str) -> str:
    """A snippet: ``path`` (the whole file) or ``path:section`` (the lines
    between ``--8<-- [start:section]`` and ``--8<-- [end:section]``); marker
    lines are left out, as pymdownx.snippets leaves them out."""
    path, _, section = spec.partition(":")
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if section:
        inside, kept, found = False, [], False
        for line in lines:
            mark = _SECTION_MARK.search(line)
            if mark and mark.group("name") == section:
                inside = mark.group("edge") == "start"
                found = found or inside
                continue
            if inside:
                kept.append(line)
        if not found:
            raise DocRunError(f"snippet {spec!r}: no section {section!r} in {path}")
        lines = kept
    return "\n".join(line for line in lines if not _SECTION_MARK.search(line))


def _snippets(text: str) -> str:
    out = []
    for line in text.splitlines():
        match = _SNIPPET.match(line)
        out.append(_include(match.group("path")) if match else line)
    return "\n".join(out) + "\n"


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``docs/<page>``, in order."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    previous = ""
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = lines[i]
            i += 1
            continue
        indent, fence = match.group("indent"), match.group("fence")
        lang, title = _info(match.group("info"))
        marker_match = _MARKER.match(previous)
        marker = marker_match.group("name") if marker_match else None
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            line = lines[j]
            if line.strip().startswith(fence[0] * len(fence)) and line.strip().strip(fence[0]) == "" \
                    and len(line) - len(line.lstrip()) <= len(indent):
                break
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            j += 1
        found.append(Block(page, i + 1, lang, title, marker, _snippets("\n".join(body))))
        previous = ""
        i = j + 1
    return found


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


_DECIMAL = re.compile(r"\d+\.\d+")


def _same_output(documented: str, printed: str) -> bool:
    """The documented output is what was printed, but for decimals one unit apart in their last digit.

    Floating-point results can differ in their last bits from one CPU to another (OpenBLAS
    chooses its kernels by CPU, and iterative fits amplify the difference), so a value near a
    rounding boundary may print one digit apart, e.g. ``42.010`` here and ``42.011`` there.
    Everything else must be equal: the text, every integer, and the number of decimals of every
    decimal.
    """
    documented, printed = _normalise(documented), _normalise(printed)
    if documented == printed:
        return True
    if _DECIMAL.split(documented) != _DECIMAL.split(printed):
        return False
    for one, other in zip(_DECIMAL.findall(documented), _DECIMAL.findall(printed), strict=True):
        places = len(one.split(".")[1])
        if len(other.split(".")[1]) != places:
            return False
        if abs(int(one.replace(".", "")) - int(other.replace(".", ""))) > 1:
            return False
    return True


def run_page(page: str, workdir: Path) -> int:
    """Run the page's Python blocks in ``workdir``; returns how many ran.

    Raises :class:`DocRunError` naming the block's line when a block fails or
    a documented output differs from the real one.
    """
    namespace: dict[str, object] = {"__name__": "__main__"}
    last_output: str | None = None
    last_block: Block | None = None
    ran = 0
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        for block in blocks(page):
            if block.marker == "no-run":
                continue
            if block.title:
                (workdir / block.title).parent.mkdir(parents=True, exist_ok=True)
                (workdir / block.title).write_text(block.source, encoding="utf-8")
            if block.lang in ("python", "py"):
                buffer = io.StringIO()
                try:
                    code = compile(block.source, block.where, "exec")
                    with contextlib.redirect_stdout(buffer):
                        exec(code, namespace)  # noqa: S102 - the docs' own examples
                except Exception as err:
                    raise DocRunError(
                        f"the Python block at {block.where} fails:\n{block.source}\n"
                        + "".join(traceback.format_exception(err))
                    ) from err
                last_output, last_block = buffer.getvalue(), block
                ran += 1
            elif block.marker == "output":
                if last_output is None or last_block is None:
                    raise DocRunError(f"the output block at {block.where} follows no Python block")
                if not _same_output(block.source, last_output):
                    raise DocRunError(
                        f"the output shown at {block.where} is not what the block at {last_block.where} "
                        f"prints.\n--- documented\n{_normalise(block.source)}\n--- printed\n{_normalise(last_output)}"
                    )
    finally:
        os.chdir(cwd)
    return ran
