"""What Linux's /proc says about processes (start time, parent, open files), without psutil."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def start_ticks(pid: int) -> int | None:
    """When a live process started (clock ticks since boot; with the pid, its identity against pid reuse),
    or None when no such process runs (zombies included). 0 where /proc is absent but the pid runs."""
    if not PROC.is_dir():
        return _exists_without_proc(pid)
    try:
        fields = _stat_fields(pid)
    except OSError:
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def parent(pid: int) -> int | None:
    try:
        return int(_stat_fields(pid)[1])
    except (OSError, IndexError, ValueError):
        return None


def pids() -> list[int]:
    try:
        return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of `root`: pid → start ticks."""
    children: dict[int, list[int]] = {}
    for pid in pids():
        ppid = parent(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        ticks = start_ticks(pid)
        if ticks is not None and pid not in found:
            found[pid] = ticks
            stack.extend(children.get(pid, []))
    return found


def open_paths(pid: int) -> list[str]:
    """The files a process holds open, and its working directory (what it can read of them)."""
    paths = []
    base = PROC / str(pid)
    try:
        for fd in os.listdir(base / "fd"):
            try:
                paths.append(os.readlink(base / "fd" / fd))
            except OSError:
                continue
    except OSError:
        pass
    try:
        paths.append(os.readlink(base / "cwd"))
    except OSError:
        pass
    return paths


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (which may hold spaces and parentheses): state first."""
    text = (PROC / str(pid) / "stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def _exists_without_proc(pid: int) -> int | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return 0
    return 0
