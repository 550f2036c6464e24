"""Read a spec file into a validated ExperimentSpec, turning every failure into one readable line."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from specs.paths import PACKAGE_ROOT, resolve_path
from specs.preflight import check_on_this_machine
from specs.safefile import SPEC_MAX_BYTES, UnsafeFileError, read_text
from specs.schema import ExperimentSpec

__all__ = ["DEFAULT_SPEC", "PACKAGE_ROOT", "SpecError", "load_spec", "parse_spec", "read_spec_text", "resolve_path"]
DEFAULT_SPEC = "specs/smoke.yaml"


class SpecError(ValueError):
    """A spec the user can fix; its message is one line naming the file, the field and what is allowed."""


def load_spec(path: str | Path = DEFAULT_SPEC) -> ExperimentSpec:
    """Load and validate a spec file; raise SpecError with one line on any problem."""
    return parse_spec(read_spec_text(path), source=str(path))


def read_spec_text(path: str | Path) -> str:
    """A spec file's text: a regular file (or a link to one) of at most SPEC_MAX_BYTES, never a FIFO or device
    (which would block or never end); SpecError with one line otherwise."""
    file = resolve_path(path)
    try:
        return read_text(file, SPEC_MAX_BYTES, follow=True)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file") from None
    except UnsafeFileError as exc:
        raise SpecError(f"spec {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read spec file ({exc.__class__.__name__}: {exc})") from None


def parse_spec(text: str, source: str = "<spec>", *, check_files: bool = True) -> ExperimentSpec:
    """Validate YAML text (safe-loaded: no tags, no code, no repeated keys) into an ExperimentSpec; with
    `check_files`, also check it against this machine's files (specs/preflight.py)."""
    try:
        data = _safe_load_unique(text)
    except _RepeatedKey as exc:
        raise SpecError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{source}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a spec must be a mapping with keys name, models, grid, ...")
    try:
        # strict: YAML's `true`/`yes` are booleans, never the integer 1 (nor a float, nor a string)
        spec = ExperimentSpec.model_validate(data, strict=True)
    except ValidationError as exc:
        raise SpecError(f"{source}: {describe_validation_error(exc)}") from None
    if check_files:
        problem = check_on_this_machine(spec)
        if problem is not None:
            raise SpecError(f"{source}: {problem}")
    return spec


class _RepeatedKey(yaml.YAMLError):
    """A mapping gives one key twice; YAML itself would keep the last one without a word."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _safe_load_unique(text: str) -> Any:
    """yaml.safe_load, refusing repeated keys (a second `controls:` block would silently replace the first)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        repeated = _repeated_key(node, (), set())
        if repeated:
            raise _RepeatedKey(repeated)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _repeated_key(node: yaml.Node, path: tuple[Any, ...], visited: set[int]) -> str | None:
    """'field.path: given twice (lines a and b)' for the first repeated key, walking each node once (an
    alias is the same node, so an alias bomb costs no more than its text)."""
    if id(node) in visited:
        return None
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            if key.tag == _MERGE_TAG:  # `<<: *defaults` then a key of its own overrides, as YAML means
                continue
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                field = ".".join(_loc_part(part) for part in (*path, key.value))
                if (key.tag, key.value) in seen:
                    return f"{field}: given twice (lines {seen[key.tag, key.value]} and {line}); give each key once"
                seen[key.tag, key.value] = line
            found = _repeated_key(value, (*path, getattr(key, "value", "?")), visited)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found = _repeated_key(item, (*path, index), visited)
            if found:
                return found
    return None


def describe_validation_error(exc: ValidationError) -> str:
    """The first error as 'field.path: what is wrong; allowed: ...' (pydantic's own words otherwise)."""
    error = _most_specific(exc.errors())
    loc = [part for part in error["loc"] if not _is_union_tag(part)]
    field = ".".join(_loc_part(part) for part in loc) or "spec"
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(error["loc"][:-1])
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"{field}: unknown key{hint}"
    if kind == "missing":
        return f"{field}: required field is missing"
    message = error["msg"]
    message = message.removeprefix("Value error, ")
    if kind == "value_error":
        named = re.match(r"^([A-Za-z_][\w.]*): ", message)
        if named:
            field = ".".join(part for part in (field if loc else "", named.group(1)) if part)
            message = message[named.end():]
    if kind == "literal_error":
        message = message.replace("Input should be", "allowed:")
    value = error.get("input")
    shown = f" (got {value!r})" if kind != "value_error" and _short(value) else ""
    return f"{field}: {message}{shown}".replace("\n", " ")


def _loc_part(part: Any) -> str:
    """Keys as written when plain, quoted when they hold spaces or odd characters (one line, always)."""
    text = str(part)
    return text if re.fullmatch(r"[\w-]+", text) else repr(text)


def _short(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and len(repr(value)) <= 60


def _is_union_tag(part: Any) -> bool:
    """Pydantic puts the union member's class name (or a tagged-union key) in the error location."""
    return isinstance(part, str) and (part[:1].isupper() or part.startswith(("literal[", "function-")))


def _most_specific(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """Of a union's alternative errors, report the deepest: it is the one the user meant."""
    def rank(error: dict[str, Any]) -> tuple[int, bool]:
        depth = len([p for p in error["loc"] if not _is_union_tag(p)])
        # A wrong-type complaint from the union member the user did not mean ranks below a real one.
        return depth, not (error["type"] == "literal_error" or error["type"].endswith("_type"))

    return max(errors, key=rank)


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Walk the schema along an error location to the model whose keys are allowed there."""
    current: Any = ExperimentSpec
    for part in loc:
        current = _step(current, part)
        if current is None:
            return []
    model = _as_model(current)
    return list(model.model_fields) if model else []


def _step(annotation: Any, part: Any) -> Any:
    if isinstance(part, str) and _is_union_tag(part):
        name = re.sub(r"^function-\w+\[.*, (\w+)\]$", r"\1", part)
        return next((a for a in _members(annotation) if getattr(a, "__name__", "") == name), None)
    model = _as_model(annotation)
    if model is not None and isinstance(part, str):
        field = model.model_fields.get(part)
        return field.annotation if field else None
    if isinstance(part, int):
        for member in _members(annotation):
            args = typing.get_args(member)
            if typing.get_origin(member) is list and args:
                return args[0]
    return None


def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    return [annotation]


def _as_model(annotation: Any) -> type[BaseModel] | None:
    models = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    return models[0] if len(models) == 1 else None
