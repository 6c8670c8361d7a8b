"""The values a numeric comparison feeds both configurations: generated from a compiled
module's ABI declaration, or given by the user (`--inputs`).

Each side gets the same values in its own signature's element types: a module compiled
with --iree-input-demote-f32-to-f16 takes f16 where the other takes f32, and feeding it
the f32 values makes iree-run-module refuse the call, so the comparison never starts.
Values are held as numpy arrays (npy bytes where they must travel: picklable, hashable,
recordable), cast to the side's type only when its `--input` flag is written.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings
import zipfile
from typing import Any, BinaryIO

import numpy as np

DTYPES = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "si8": np.int8,
    "si16": np.int16,
    "si32": np.int32,
    "si64": np.int64,
    "ui8": np.uint8,
    "ui16": np.uint16,
    "ui32": np.uint32,
    "ui64": np.uint64,
}
#: What a dynamic dimension becomes in the generated inputs.
DYNAMIC_DIM = 4
_TENSOR = re.compile(r"tensor<(?:(.*)x)?(\w+)>")
#: iree-run-module's --input value syntax: [DIMSx]TYPE=VALUES.
_GIVEN = re.compile(r"(?:((?:\d+x)*\d+)x)?(\w+)=(.*)", re.DOTALL)


class Unfit(ValueError):
    """A value that does not fit a side's argument type (another shape or rank)."""


def parse(t: str) -> tuple[list[int | None] | None, str]:
    """(dims, element) of an ABI type: dims None for a scalar, None entries dynamic."""
    m = _TENSOR.fullmatch(t)
    if m is None:
        return None, t
    dims_text, element = m.group(1), m.group(2)
    dims = [None if d == "?" else int(d) for d in dims_text.split("x")] if dims_text else []
    return dims, element


def generated(t: str, k: int) -> np.ndarray | None:
    """Deterministic, varied values for type t (the k-th argument): negatives, zeros,
    fractions; None for a type iree-run-module's --input cannot spell."""
    if t == "index":
        return np.array(5, dtype=np.int64)
    dims, element = parse(t)
    if element not in DTYPES:
        return None
    shape = [DYNAMIC_DIM if d is None else d for d in dims or []]
    n = int(np.prod(shape)) if shape else 1
    values: np.ndarray = ((np.arange(n) * 37 + 11 * k) % 17 - 8) / 4.0
    if element == "i1":
        values = values > 0
    elif not element.startswith("f"):
        values = np.round(values * 4) % 7 + (0 if element.startswith("ui") else -3)
    return values.astype(DTYPES[element]).reshape(shape)


def cast(value: np.ndarray, t: str) -> np.ndarray:
    """value in type t's element type; Unfit if its shape does not fit t's."""
    if t == "index":
        if value.size != 1:
            raise Unfit(f"{t} takes one value, not {value.size}")
        return value.reshape(()).astype(np.int64)
    dims, element = parse(t)
    if element not in DTYPES:
        raise Unfit(f"iree-run-module cannot take {t}")
    if dims is None:
        if value.size != 1:
            raise Unfit(f"{t} takes one value, not {value.size}")
        value = value.reshape(())
    elif len(dims) != value.ndim or any(d is not None and d != n for d, n in zip(dims, value.shape)):
        raise Unfit(f"{t} does not take shape {'x'.join(map(str, value.shape)) or 'scalar'}")
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # f32 past f16's range becomes inf, as on the device
        warnings.simplefilter("ignore")
        return value.astype(DTYPES[element])


def sliced(value: np.ndarray, t: str) -> np.ndarray | None:
    """value's leading sub-block in t's shape (unit dimensions t has dropped, as the
    types strategy does, are taken as 1), or None when t's shape is not a part of it."""
    dims, element = parse(t)
    if element not in DTYPES and t != "index":
        return None
    if dims is None:  # a scalar (or index): the first element
        return value.reshape(-1)[:1].reshape(()) if value.size else None
    if len(dims) > value.ndim:
        return None
    take, shape, rest = [], [], list(dims)
    for n in value.shape:  # t's dimensions in order; a 1 where t has none left that fits
        if rest and (rest[0] is None or rest[0] <= n):
            d = rest.pop(0)
            take.append(n if d is None else d)
            shape.append(take[-1])
        else:
            take.append(1)
    if rest:
        return None
    if shape == list(value.shape):
        return value
    return value[tuple(slice(0, w) for w in take)].reshape(shape)


def fitted(values: list[np.ndarray], types: list[str]) -> list[tuple[np.ndarray, int | None]]:
    """The values for a signature that has changed since they were made, each with the
    place of the given value it comes from (None: generated), so that what was made of
    them can be told (`mismatch._fit_note`). A reduction
    drops arguments, shrinks shapes, demotes element types and adds arguments. Values
    and arguments are paired in order (an alignment preferring exact shapes, then
    leading sub-blocks), an argument with no value gets generated ones, a value with no
    argument goes; element types are cast when the flag is written. Unchanged
    signatures get the values as they are."""
    n, m = len(values), len(types)
    cut = [[sliced(v, t) for t in types] for v in values]
    cost = [[0.0] * (m + 1) for _ in range(n + 1)]  # cost[i][k]: values[i:] onto types[k:]
    for i in range(n, -1, -1):
        for k in range(m, -1, -1):
            if i == n or k == m:
                cost[i][k] = (n - i) * 1.0 + (m - k) * 2.0  # drop a value: 1; generate: 2
                continue
            best = min(cost[i + 1][k] + 1.0, cost[i][k + 1] + 2.0)
            got = cut[i][k]
            if got is not None:
                best = min(best, cost[i + 1][k + 1] + (0.0 if got.shape == values[i].shape else 0.5))
            cost[i][k] = best
    out: list[tuple[np.ndarray, int | None]] = []
    i = k = 0
    while k < m:
        got = cut[i][k] if i < n else None
        if got is not None and cost[i][k] == cost[i + 1][k + 1] + (0.0 if got.shape == values[i].shape else 0.5):
            out.append((got, i))
            i, k = i + 1, k + 1
        elif i < n and cost[i][k] == cost[i + 1][k] + 1.0:
            i += 1
        else:
            made = generated(types[k], k)
            if made is None:
                raise Unfit(f"cannot make a value for a new argument of type {types[k]}")
            out.append((made, None))
            k += 1
    return out


def flag(value: np.ndarray, t: str, path: str) -> str:
    """The --input flag giving value to an argument of type t (a .npy at path for a tensor)."""
    value = cast(value, t)
    if parse(t)[0] is None:  # index too
        return f"--input={scalar(value, t)}"
    np.save(path, value)
    return f"--input=@{path}"


def scalar(value: np.ndarray, t: str) -> str:
    """A scalar as iree-run-module's --input takes it: the bare value (it refuses
    `f32=0.75` for an f32 argument, and `i32=3` for an i32)."""
    item = value.item()
    return repr(float(item)) if parse(t)[1].startswith("f") else str(int(item))


def describe(t: str, value: np.ndarray, given: bool) -> str:
    """An input as a report shows it: the values when few, else how they were made."""
    if value.ndim == 0:
        return f"{t} = {value.item()}"
    if value.size <= 16:
        return f"{t} = {np.array2string(value.ravel(), separator=', ')}"
    return f"{t} = " + ("given" if given else "((i * 37 + 11 * k) % 17 - 8) / 4")


def to_bytes(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, value, allow_pickle=False)
    return out.getvalue()


def from_bytes(blob: bytes) -> np.ndarray:
    return np.asarray(np.load(io.BytesIO(blob), allow_pickle=False))


class Unreadable(ValueError):
    """An --inputs file that cannot be read: a missing input (exit 3), where a value
    written wrong is a bad command line (exit 2)."""


def given(entry: str, base: str = ".") -> np.ndarray:
    """One --inputs entry: a .npy file (also as iree-run-module's '@file.npy'), or a
    value in iree-run-module's --input syntax ('2x3xf32=1 2 3 4 5 6', 'f32=0.5'; one
    value fills the tensor). ValueError says what is wrong with it (Unreadable: the file)."""
    text = entry[len("--input=") :] if entry.startswith("--input=") else entry
    m = _GIVEN.fullmatch(text)
    if m is None or text.startswith("@"):
        if not text.lstrip("@"):  # os.path.join(base, "") is the folder: "Is a directory" said nothing
            raise ValueError(f"{entry!r} names no file (the name after it is empty)")
        path = os.path.join(base, text.lstrip("@"))
        if not text.startswith("@") and not os.path.exists(path):
            for read in (lambda w: int(w, 0), float):  # a bare scalar, as iree-run-module takes one ('5.5')
                with contextlib.suppress(ValueError):
                    return _numbers([read(text)]).reshape(())  # cast to its argument's type when the run fits it
            if not text.endswith(".npy"):
                raise ValueError(f"{entry!r} is neither a value (such as 4xf32=1 2 3 4 or 0.5) nor a file")
        return _npy(path, text.lstrip("@"))
    dims_text, element, values_text = m.groups()
    if element not in DTYPES:
        raise ValueError(f"{entry!r}: unknown element type {element!r}")
    shape = [int(d) for d in dims_text.split("x")] if dims_text else []
    words = [w for w in re.split(r"[\s,\[\]]+", values_text) if w]
    n = int(np.prod(shape, dtype=object)) if shape else 1
    if n > MAX_ELEMENTS:  # one value filling it would take all the memory there is
        raise ValueError(f"{entry!r}: {n} elements is more than {MAX_ELEMENTS}; give a .npy file")
    if any("=" in w for w in words):  # two values joined with ',': a list only names files
        raise ValueError(f"{entry!r} holds more than one value; give each its own --inputs")
    if len(words) not in (1, n):
        raise ValueError(f"{entry!r}: {len(words)} values for {n} elements")
    try:
        numbers = _numbers([float(w) if element.startswith("f") else int(w, 0) for w in words])
        dtype = np.dtype(DTYPES[element])
        limits = np.iinfo(dtype.name) if dtype.kind in "iu" else None
        if limits is not None and not limits.min <= numbers.min() <= numbers.max() <= limits.max:
            raise ValueError(f"a value out of {element}'s range")  # numpy would wrap it round
        return np.broadcast_to(numbers, (n,)).astype(dtype).reshape(shape)
    except ValueError as exc:
        raise ValueError(f"{entry!r}: {exc}") from None


#: How a .npy file and a zip (.npz, empty or not) start: numpy reads anything else as a pickle.
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
#: The most elements a value written on the command line may fill (a .npy file has none).
MAX_ELEMENTS = 1 << 28


class NotNpy(ValueError):
    """A file that does not start as a .npy file does."""


def npy_header(f: BinaryIO) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """The shape and element type a .npy file open at its start says it holds, and the
    bytes that follow its header, read without np.load (which would unpickle objects).
    ValueError when it is no .npy header (numpy's parse of one raises TokenError and
    TypeError too), NotNpy when the file does not even start as one."""
    if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
        raise NotNpy("it does not start with \\x93NUMPY, as np.save writes one")
    f.seek(0)
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
    except OSError:
        raise
    except Exception as exc:  # a header cut short or not numpy's
        raise ValueError(str(exc) or type(exc).__name__) from None
    start = f.tell()
    return shape, dtype, f.seek(0, os.SEEK_END) - start


def _npy(path: str, name: str) -> np.ndarray:
    """A .npy file's array of numbers, never unpickled. Its header is read first, so what is
    not one, holds no numbers, or claims more than the file has is said so, not left to
    np.load (a text file was "pickled (object) data", a header of 2^40 elements a
    MemoryError)."""
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        raise Unreadable(f"{name!r} is not a regular file (a FIFO or a device); give a .npy file")
    try:
        with open(path, "rb") as f:
            if f.read(len(_NPY_MAGIC)).startswith(_ZIP_MAGICS):
                _refuse_archive(path, name)
            f.seek(0)
            shape, dtype, held = npy_header(f)
    except OSError as exc:
        raise Unreadable(f"cannot read {name!r} as a .npy file: {exc.strerror}") from None
    except NotNpy as exc:
        raise Unreadable(f"{name!r} is not a .npy file: {exc}") from None
    except ValueError as exc:
        raise Unreadable(f"cannot read {name!r} as a .npy file: {exc}") from None
    if dtype.kind not in "biufc":  # objects would need unpickling; strings are no tensor
        what = "Python objects" if dtype.hasobject else f"{dtype} values"
        raise Unreadable(f"{name!r} holds {what}, not numbers; give an array of numbers")
    if dtype.kind == "c":  # no argument type here is complex: the cast would drop the imaginary parts
        raise Unreadable(f"{name!r} holds complex numbers ({dtype}), which no argument takes here; give real ones")
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if need > held:
        raise Unreadable(f"{name!r} is cut short: its header says {shape} of {dtype} ({need} bytes), it holds {held}")
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise Unreadable(f"cannot read {name!r} as a .npy file: {exc}") from None


def _refuse_archive(path: str, name: str) -> None:
    """A zip is an .npz archive (np.asarray of one is an array of its keys), or a damaged one."""
    try:
        np.load(path, allow_pickle=False).close()
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise Unreadable(f"cannot read {name!r} as a .npy file: {exc}") from None
    raise Unreadable(f"{name!r} is a .npz archive: give each array as a .npy file")


def _numbers(numbers: list[float] | list[int]) -> np.ndarray:
    """numbers as an array; an integer past 64 bits made an object array, which no .npy
    file takes."""
    array = np.asarray(numbers)
    if array.dtype == object:
        raise ValueError("a value out of the 64-bit range")
    return array
