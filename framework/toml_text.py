"""TOML text of recipes: how deeply a text nests (checked before the
standard library's recursive parser reads it) and writing a recipe as TOML
(the standard library reads TOML only: tomli-w writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tomli_w

__all__ = ["bracket_depth", "dumps_toml"]


def bracket_depth(text: str) -> int:
    """The nesting of arrays and inline tables of TOML text, counted outside
    strings and comments, so that text nested past the limit is refused
    before the (recursive) TOML parser sees it. A ``[[steps]]`` header
    counts 2. Malformed text is left to the parser."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in "\"'":
            triple = text.startswith(ch * 3, i)
            quote = ch * 3 if triple else ch
            j = i + len(quote)
            while j < n:
                if ch == '"' and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    break
                if not triple and text[j] == "\n":
                    break
                j += 1
            i = j + len(quote)
            continue
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest


# ---------------------------------------------------------------------------
# Writing TOML (the standard library reads TOML only): tomli-w.
# ---------------------------------------------------------------------------


def _tomlable(value: Any) -> Any:
    """The value with every ``None`` entry of its tables left out (TOML has
    no null: a parameter that is not set is not written)."""
    if isinstance(value, Mapping):
        return {str(k): _tomlable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        if any(v is None for v in value):
            raise ValueError("TOML has no null value")
        return [_tomlable(v) for v in value]
    return value


def dumps_toml(data: Mapping[str, Any]) -> str:
    """Write a recipe dict (or any table of plain data) as TOML text, with
    tomli-w; a ``None`` entry of a table is left out."""
    try:
        return tomli_w.dumps(_tomlable(data))
    except TypeError as err:  # a value TOML cannot hold
        raise ValueError(f"cannot write as TOML: {err}") from None
