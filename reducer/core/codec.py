"""A data format for what a run records in its state directory: JSON, with the programs
in it as text files of their own. Decoding builds only classes registered here by the
code that defines them: a class is looked up by its name in that registry, and no module
a file names is ever imported, so a planted state directory is data and nothing else
(a pickle would run whatever code it names as it loads).

None, bool, int, str and finite floats are themselves and a list is an array; anything
else is an object with one "$" key:

    {"$float": "nan" | "inf" | "-inf"}
    {"$tuple": [...]}
    {"$dict": [[key, value], ...]}
    {"$bytes": "<base64>"}
    {"$class": "module:QualName", "$fields": {"name": value, ...}}   a registered attrs class
    {"$text": "findings.dispatch.text"}   a program field, stored apart (see `record`)
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T", bound=type)

#: Registered classes by name, and the fields of each that hold programs.
_classes: dict[str, type] = {}
_programs: dict[str, tuple[str, ...]] = {}
#: Called (once) when a class is not registered: they import modules whose classes
#: register themselves, which a rerun that reads a start has not needed yet.
_importers: list[Callable[[], object]] = []

#: Deeper than any start; a file nested deeper is not one ireereduce wrote.
MAX_DEPTH = 64

#: Reads a program stored apart, by its name; or stores one.
ReadText = Callable[[str], str]
WriteText = Callable[[str, str], None]


class CodecError(ValueError):
    """A value that cannot be recorded, or a record that is not one ireereduce wrote."""


def name_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def register(cls: T, programs: tuple[str, ...] = ()) -> T:
    """Let records hold instances of cls (an attrs class); `programs`: its str fields
    that hold a program, stored as a text file of their own when the caller stores texts.
    A later class of the same name replaces an earlier one (attrs rebuilds a slotted class)."""
    _classes[name_of(cls)] = cls
    _programs[name_of(cls)] = programs
    return cls


def record(*programs: str) -> Callable[[T], T]:
    """`register` as a class decorator: `@codec.record()`, or `@codec.record("text")`."""
    return lambda cls: register(cls, programs)


def on_unknown(importer: Callable[[], object]) -> None:
    """Call importer once, when a record meets a class not registered yet."""
    _importers.append(importer)


def _lookup(name: str) -> type | None:
    if name not in _classes:
        while _importers:
            importer = _importers.pop(0)
            try:
                importer()
            except Exception:  # noqa: BLE001 - a room that cannot load: its classes stay unknown
                pass
    return _classes.get(name)


def encode(value: Any, texts: WriteText | None = None) -> Any:
    """value as JSON data; with `texts`, program fields are handed to it by a dotted name
    (their path from value: "text", "findings.dispatch.text") and recorded as that name."""
    return _encode(value, texts, ())


def _encode(value: Any, texts: WriteText | None, path: tuple[str, ...]) -> Any:
    if len(path) > MAX_DEPTH:
        raise CodecError("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"$float": repr(float(value))}
    if isinstance(value, list):
        return [_encode(v, texts, (*path, str(i))) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v, texts, (*path, str(i))) for i, v in enumerate(value)]}
    if isinstance(value, dict):
        return {"$dict": [[_encode(k, texts, path), _encode(v, texts, (*path, str(k)))] for k, v in value.items()]}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    cls = type(value)
    name = name_of(cls)
    if _lookup(name) is not cls or not attrs.has(cls):
        raise CodecError(f"{name} is not a class a record may hold (see reducer/core/codec.py)")
    fields: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if not field.init:
            continue
        item = getattr(value, field.name)
        if texts is not None and field.name in _programs[name] and isinstance(item, str):
            texts(".".join((*path, field.name)), item)
            fields[field.alias] = {"$text": ".".join((*path, field.name))}
        else:
            fields[field.alias] = _encode(item, texts, (*path, field.name))
    return {"$class": name, "$fields": fields}


def decode(data: Any, texts: ReadText | None = None) -> Any:
    """What `encode` made of a value, from JSON data; `texts` reads the programs stored apart.
    Raises CodecError for anything `encode` does not make, a class not registered first."""
    return _decode(data, texts, 0)


def _decode(data: Any, texts: ReadText | None, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode(v, texts, depth + 1) for v in data]
    if not isinstance(data, dict):
        raise CodecError(f"not a recorded value: {type(data).__name__}")
    keys = sorted(data)
    if keys == ["$class", "$fields"]:
        return _instance(data["$class"], data["$fields"], texts, depth)
    if len(keys) != 1:
        raise CodecError(f"not a recorded value: an object with keys {', '.join(keys)}")
    (key, item) = next(iter(data.items()))
    if key == "$float" and item in ("nan", "inf", "-inf"):
        return float(item)
    if key == "$tuple" and isinstance(item, list):
        return tuple(_decode(v, texts, depth + 1) for v in item)
    if key == "$dict" and isinstance(item, list) and all(isinstance(p, list) and len(p) == 2 for p in item):
        return {_decode(k, texts, depth + 1): _decode(v, texts, depth + 1) for k, v in item}
    if key == "$bytes" and isinstance(item, str):
        try:
            return base64.b64decode(item, validate=True)
        except ValueError:
            raise CodecError("bad base64") from None
    if key == "$text" and isinstance(item, str) and texts is not None:
        return texts(item)
    raise CodecError(f"not a recorded value: {key}")


def _instance(name: Any, fields: Any, texts: ReadText | None, depth: int) -> Any:
    cls = _lookup(name) if isinstance(name, str) else None
    if cls is None or not attrs.has(cls):
        raise CodecError(f"it names a class ireereduce does not know: {name}")
    if not isinstance(fields, dict):
        raise CodecError(f"{name}: its fields are not an object")
    allowed = {f.alias for f in attrs.fields(cls) if f.init}
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise CodecError(f"{name} has no field {', '.join(unknown)}")
    kwargs = {k: _decode(v, texts, depth + 1) for k, v in fields.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{name}: {exc}") from None
