"""The comments a spec's author wrote beside its fields, by the field's dotted path: a frozen spec explains its
choices there (`warmup: 1  # ...`), and the report quotes them where a choice departs from the study."""

from __future__ import annotations

import re

# A block-style key, in a mapping or opening a list item: indent, "- ", key, the rest of the line.
_KEY = re.compile(r"^(?P<indent> *)(?P<item>- )?(?P<key>[A-Za-z_][\w-]*):(?P<rest>.*)$")


def field_comments(text: str) -> dict[str, str]:
    """{"controls.warmup": "...", ...}: each block-style key's trailing comment, else the comment lines right
    above it; list items add no index to the path. Flow-style mappings ({a: 1}) give their key only."""
    comments: dict[str, str] = {}
    path: list[tuple[int, str]] = []  # (indent, key) of the keys enclosing the current line
    above: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if match is None:
            above = []
            continue
        indent = len(match["indent"]) + (2 if match["item"] else 0)
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match["key"]))
        trailing = match["rest"].partition(" #")[2].strip() if " #" in match["rest"] else ""
        comment = trailing or " ".join(above)
        if comment:
            comments.setdefault(".".join(key for _, key in path), comment)
        above = []
    return comments
