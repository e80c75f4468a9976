"""From a stack file (or the config Pulumi hands the program) to a checked :class:`StackSpec`.

Every problem comes back at once as a :class:`SpecError`, each naming the stack file, the
YAML line, the key path, the value and what is allowed. Pulumi hands a program its config
flat (``ns:key`` -> text, objects as JSON); :func:`load` takes that form, so the program,
the offline engine, the policy pack and the CLI all read one model the same way.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
import typing
from collections.abc import Iterator, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from . import names, rules, source
from .errors import MISSING, Problem, SpecError, StackFileError
from .model import NS, StackSpec

ROOT = Path(__file__).resolve().parents[1]


def _stack_config_dir(project: Path) -> Path:
    """Where Pulumi reads a project's stack files: its Pulumi.yaml's ``stackConfigDir``, else the project's own
    directory (https://www.pulumi.com/docs/iac/concepts/projects/project-file/, "stackConfigDir")."""
    try:
        declared = yaml.safe_load((project / "Pulumi.yaml").read_text()).get("stackConfigDir")
    except (OSError, AttributeError, yaml.YAMLError):
        declared = None
    return project / declared if isinstance(declared, str) and declared else project


STACKS_DIR = _stack_config_dir(ROOT)  # stacks/ (Pulumi.yaml says so, for Pulumi's engine as for the CLI)
# The provider keys the spec reads; other gcp:*, kubernetes:* or pulumi:* keys are the
# providers' own and pass through untouched.
GCP_KEYS = ("gcp:project", "gcp:region", "gcp:zone")
# Keys a stack file may carry beside config: (Pulumi writes them).
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


def _object_sections() -> frozenset[str]:
    """The spec's sections that are objects or lists (every key of ours but ``environment``), from the model."""
    return frozenset(f.alias.removeprefix(f"{NS}:") for f in StackSpec.model_fields.values()
                     if f.alias and f.alias.startswith(f"{NS}:") and f.alias != f"{NS}:environment")


def flat_config(config: Mapping[str, Any]) -> dict[str, str]:
    """A stack file's ``config:`` block as Pulumi hands it to a program: ``ns:key`` -> text."""
    out = {}
    for key, value in config.items():
        key = str(key)
        if ":" not in key:
            key = f"{NS}:{key}"
        out[key] = value if isinstance(value, str) else json.dumps(value, default=_yaml_scalar)
    return out


def _yaml_scalar(value: Any) -> Any:
    """YAML's own scalars JSON has no type for (an unquoted 2026-03-07T02:00:00Z is a timestamp): as text."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a stack config value")


def _decode(config: Mapping[str, Any]) -> dict[str, Any]:
    """Flat config -> the model's input: our keys and the gcp keys the spec reads, objects decoded."""
    data: dict[str, Any] = {}
    for key, value in config.items():
        key = str(key)
        if ":" not in key:
            key = f"{NS}:{key}"
        if key.startswith(f"{NS}:"):
            if key.removeprefix(f"{NS}:") in _object_sections() and isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError:
                    pass  # the model says what it should have been
            data[key] = value
        elif key in GCP_KEYS:
            data[key] = value
    return data


# A stack file's problems of shape (stackspec/source.py, stack_config): its YAML, its top level, its config: block.
_SHAPE_KEYS = ("(yaml)", "(top level)", "config")


def load(stack: str, config: Mapping[str, Any], document: source.StackDocument | None = None,
         stack_file: str | None = None, as_written: bool = False) -> StackSpec:
    """The checked spec of ``stack`` from its flat config; :class:`SpecError` lists every problem.

    ``as_written``: the config is the stack file's own, as the workflows read it (``lint``, ``slicectl stacks``,
    the bootstrap): what only the workflows use (``deploy.clusterDrill``) is checked too. A program rendering an
    edited config (tests, Pulumi's config overrides) is not held to it.

    ``document`` (the parsed stack file) gives each problem its line and the file's
    top-level keys (the secrets provider).
    """
    src = stack_file or (document.source if document and document.source else names.stack_file(stack))
    problems = list(document.problems) if document else []
    if any(p.key in _SHAPE_KEYS for p in problems):
        # Unreadable (not YAML, not a mapping, no config: mapping): the keys it lacks are not problems of their own.
        # lint and preview both come here, so they answer alike.
        raise SpecError(src, [p for p in problems if p.key in _SHAPE_KEYS])
    data = _decode(config)
    if document:
        for key in ("secretsprovider", "encryptedkey", "encryptionsalt"):
            if key in document.data:
                data[key] = document.data[key]
    data["stack"] = stack
    sink: list[Problem] = []
    spec = None
    # The stack file's own keys (the secrets provider) are checked only when the file was read.
    context = {"problems": sink, "stack_file": document is not None, "as_written": as_written}
    try:
        # As written (each section and its own rules), then resolved in one pure step and checked across sections.
        written = StackSpec.model_validate(data, context=context)
    except ValidationError as e:
        problems += [_problem(err, data) for err in e.errors(include_url=False)]
    else:
        spec, across = rules.checked(written, context)
        sink += across
    problems += sink
    if problems:
        if document:
            problems = [p if p.line else Problem(p.key, p.value, p.message, document.line(key_path(p.key)))
                        for p in problems]
        raise SpecError(src, _unique(problems))
    assert spec is not None
    return spec.model_copy(update={"source": src})


def _unique(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.key, p.message) not in seen:
            seen.add((p.key, p.message))
            out.append(p)
    return out


def read_stack(path: Path) -> source.StackDocument:
    """Parse a stack file; a missing or unreadable file is a :class:`StackFileError`."""
    try:
        return source.read(path, _shown(path))
    except (OSError, UnicodeDecodeError) as e:
        raise StackFileError(f"{path}: cannot read the stack file ({getattr(e, 'strerror', None) or e})") from None


def stack_names(stacks_dir: Path | None = None, *, some: bool = False) -> list[str]:
    """The stacks of a stacks directory (``Pulumi.<stack>.yaml``). A directory that is not there is a
    :class:`StackFileError` naming it (a typo must not check nothing); with ``some``, so is one with no stack file."""
    where = stacks_dir or STACKS_DIR
    if not where.is_dir():
        raise StackFileError(f"{_shown(where)}: no such stacks directory"
                             + ("" if not where.exists() else " (it is a file)"))
    out = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in where.glob("Pulumi.*.yaml"))
    if some and not out:
        raise StackFileError(f"{_shown(where)}: no stack file (Pulumi.<stack>.yaml) in this directory")
    return out


def stack_path(stack: str, stacks_dir: Path | None = None) -> Path:
    stacks_dir = stacks_dir or STACKS_DIR
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        avail = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stacks_dir.glob("Pulumi.*.yaml"))
        raise StackFileError(f"{_shown(path)}: no such stack file; stacks here: {', '.join(avail) or 'none'}")
    return path


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def stack_config(stack: str, stacks_dir: Path | None = None) -> tuple[dict[str, str], source.StackDocument]:
    """The flat config Pulumi would hand the program for ``stack``, and the parsed file."""
    path = stack_path(stack, stacks_dir)
    doc = read_stack(path)
    problems = []
    for key in doc.data:
        if key not in STACK_FILE_KEYS:
            problems.append(Problem(str(key), doc.data[key], f"unknown stack-file key; allowed: "
                                    f"{', '.join(STACK_FILE_KEYS)}", doc.lines.get((key,))))
    config = doc.data.get("config")
    if config is None and not doc.problems:
        problems.append(Problem("config", MISSING, "required: the stack's settings live under config:", 1))
    elif config is not None and not isinstance(config, Mapping):
        problems.append(Problem("config", config, "must be a mapping of keys", doc.lines.get(("config",))))
    doc.problems += problems
    if isinstance(config, Mapping):
        # Unqualified keys belong to the project: index their lines under the full key.
        for p, line in list(doc.lines.items()):
            if len(p) >= 2 and p[0] == "config" and isinstance(p[1], str) and ":" not in p[1]:
                doc.lines[("config", f"{NS}:{p[1]}", *p[2:])] = line
    return flat_config(config if isinstance(config, Mapping) else {}), doc


def load_file(path: str | Path, stack: str | None = None) -> StackSpec:
    """Read and check a stack file directly (tests, tools)."""
    path = Path(path)
    stack = stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    config, doc = stack_config(stack, path.parent)
    return load(stack, config, doc, _shown(path), as_written=True)


def load_stack(stack: str, stacks_dir: Path | None = None, config: Mapping[str, Any] | None = None) -> StackSpec:
    """The spec of ``stacks/Pulumi.<stack>.yaml`` (``config`` replaces its config: block)."""
    file_config, doc = stack_config(stack, stacks_dir)
    return load(stack, file_config if config is None else config, doc, _shown(stack_path(stack, stacks_dir)),
                as_written=config is None)


# The stack file of the run under way, handed over by an engine that read it already (offline.engine.render reads
# the one of its --stacks-dir; None: an edited config for a stack without a file). Unset under Pulumi's own engine.
_NOT_HANDED = object()
_run_document: Any = _NOT_HANDED


@contextlib.contextmanager
def stack_file_of_run(document: source.StackDocument | None) -> Iterator[None]:
    """While an engine runs the program: the stack file it read for the run (its config came from it), so
    :func:`from_pulumi` names that file and its lines without reading it again. Restored on the way out."""
    global _run_document
    before, _run_document = _run_document, document
    try:
        yield
    finally:
        _run_document = before


def from_pulumi() -> StackSpec:
    """The spec of the stack Pulumi is running (real engine or the offline mocks).

    Pulumi's config is what counts; the stack file gives problems their lines and the file's own keys (the secrets
    provider): the one the engine handed over (:func:`stack_file_of_run`), else the one Pulumi's engine reads,
    ``Pulumi.<stack>.yaml`` in the project's ``stackConfigDir``.
    """
    import pulumi
    from pulumi.runtime import config as runtime_config

    stack = pulumi.get_stack()
    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    doc = _run_document
    if doc is _NOT_HANDED:
        path = STACKS_DIR / f"Pulumi.{stack}.yaml"
        doc = stack_config(stack)[1] if path.is_file() else None
    return load(stack, raw, doc)


_ENVIRONMENT = TypeAdapter(StackSpec.model_fields["environment"].annotation)


def environment_of(config: Mapping[str, Any]) -> str | None:
    """The stack's environment as the model reads it from flat config, or None if missing/invalid.

    The policy pack reads the environment through this, so online and offline runs and
    the program agree; a stack without a valid one never deploys (the model requires it).
    """
    value = config.get(f"{NS}:environment")
    try:
        return _ENVIRONMENT.validate_python(value)
    except ValidationError:
        return None


# --------------------------------------------------------------------------- messages


def key_path(key: str) -> tuple[str | int, ...]:
    """``tpu-multislice:slices[0].topology`` -> ``("config", "tpu-multislice:slices", 0, "topology")``."""
    if key in ("secretsprovider", "encryptionsalt", "encryptedkey"):
        return (key,)
    parts = re.findall(r"\[(\d+)\]|([^.\[\]]+)", key)
    return ("config", *(int(i) if i else name for i, name in parts))


def _key(loc: tuple[str | int, ...]) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _problem(err: Mapping[str, Any], data: Mapping[str, Any]) -> Problem:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (p.startswith(("function-", "literal[")))))
    kind, msg = err["type"], err["msg"]
    value = err.get("input", MISSING)
    if kind == "missing":
        value, msg = MISSING, "required"
        allowed = _allowed_values(loc)
        if allowed:
            msg += f"; allowed: {allowed}"
    elif kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        msg = f"unknown key{hint}; allowed: {', '.join(sorted(known))}"
    elif kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        if msg.startswith("@"):
            sub, _, msg = msg[1:].partition(": ")
            loc = (*loc, *sub.split("."))
            value = _lookup(data, loc)
    elif kind == "literal_error":
        msg = f"allowed: {_allowed_values(loc) or err.get('ctx', {}).get('expected', '')}"
    elif kind in ("int_parsing", "int_type", "int_from_float"):
        msg = "must be an integer"
    elif kind in ("bool_parsing", "bool_type"):
        msg = "must be true or false"
    elif kind in ("string_type",):
        msg = "must be a string"
    elif kind in ("model_type", "dict_type") and isinstance(value, str):
        msg = f"must be an object (a YAML mapping); {msg}"
    elif kind in _BOUNDS:
        words, bound = _BOUNDS[kind]
        msg = f"must be {words} {err.get('ctx', {}).get(bound)}"
    elif kind in ("tuple_type", "list_type"):
        item = _model_at(loc)
        one = (json.dumps(value) if isinstance(value, dict) else
               f"{{type: {value}}}" if item is not None and "type" in item.model_fields else json.dumps(value))
        msg = f"must be a list (a YAML sequence): one item is a list of one, [{one}]"
    elif kind == "too_short":
        msg = f"needs at least {err.get('ctx', {}).get('min_length', 1)} item(s)"
    elif kind == "too_long":
        msg = f"takes at most {err.get('ctx', {}).get('max_length')} item(s)"
    elif kind in ("float_parsing", "float_type"):
        msg = "must be a number"
    elif kind in ("finite_number",):
        msg = "must be a finite number"
    if value is not MISSING and isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True, exclude_none=True)
    return Problem(_key(loc), value, msg)


# pydantic's bound errors (their ctx key), in words.
_BOUNDS = {"greater_than_equal": ("at least", "ge"), "greater_than": ("greater than", "gt"),
           "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}


def _lookup(data: Any, loc: tuple[str | int, ...]) -> Any:
    cur = data
    for p in loc:
        try:
            cur = cur[p]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return cur


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    cur: Any = StackSpec
    for p in loc:
        if isinstance(p, int):
            continue
        if not (isinstance(cur, type) and issubclass(cur, BaseModel)):
            return None
        field = next((f for n, f in cur.model_fields.items() if p in (n, f.alias)), None)
        if field is None:
            return None
        cur = _unwrap(field.annotation)
    return cur if isinstance(cur, type) and issubclass(cur, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        for inner in typing.get_args(arg):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return annotation


def _known_keys(loc: tuple[str | int, ...]) -> list[str]:
    model = _model_at(loc)
    if model is None:
        return []
    keys = [f.alias or n for n, f in model.model_fields.items() if n != "stack" and not f.exclude]
    return [k for k in keys if k not in ("secretsprovider", "encryptionsalt", "encryptedkey")]


def _allowed_values(loc: tuple[str | int, ...]) -> str | None:
    model = _model_at(loc[:-1])
    if model is None:
        return None
    field = next((f for n, f in model.model_fields.items() if loc[-1] in (n, f.alias)), None)
    if field is None:
        return None
    values = _literals(field.annotation)
    return ", ".join(values) if values else None


def _literals(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return [v for arg in typing.get_args(annotation) for v in _literals(arg)]
