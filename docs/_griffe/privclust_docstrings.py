"""A griffe extension for the generated reference (mkdocs.yml loads it).

privclust's docstrings are written for Sphinx and for ``help()``: they use
Sphinx roles (``:class:`~privclust.Registry```) and document module constants
with ``#:`` comments. This extension, run once the package is loaded, shows
each role as inline code (the short name for ``~``-prefixed targets, as
Sphinx does), drops the reStructuredText ``::`` lines that open literal
blocks (the indented block is a Markdown code block as it is) and takes a
constant's ``#:`` comment as its docstring when it has none. It changes nothing in the package itself.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: A reStructuredText literal-block marker alone on its line (the indented block
#: that follows is already a Markdown code block).
_LITERAL = re.compile(r"^[ \t]*::[ \t]*$\n?", flags=re.M)
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|obj|exc|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    if "<" in target and target.endswith(">"):  # :class:`text <target>`
        return f"`{target.split('<', 1)[0].strip()}`"
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def _comment_above(obj: griffe.Object) -> str | None:
    lines = obj.module.lines if obj.lineno else []
    found = []
    i = (obj.lineno or 0) - 2
    while i >= 0 and lines[i].lstrip().startswith("#:"):
        found.append(lines[i].lstrip()[2:].strip())
        i -= 1
    return " ".join(reversed(found)) or None


class PrivclustDocstrings(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.is_attribute and obj.docstring is None:
                text = _comment_above(obj)
                if text:
                    obj.docstring = griffe.Docstring(text, parent=obj)
            if obj.docstring is not None:
                obj.docstring.value = _LITERAL.sub("", _ROLE.sub(_role, obj.docstring.value))
            stack.extend(m for m in obj.members.values() if not m.is_alias)
