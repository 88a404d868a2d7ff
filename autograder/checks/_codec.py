"""Plain data between the grader and a graded kernel: JSON, no pickle, no objects.

The trusted grader writes each case's *inputs* with :func:`dumps`; the kernel-side probe
(``_probe.py``) reads them with :func:`loads`, runs the student's function and writes what
came back the same way; the grader reads that with :func:`loads` and a size cap. Only these
kinds travel, each tagged: ``None``, ``bool``, ``int``, ``float`` (hex, so nan/inf and every
bit survive), ``str``, ``bytes``, ``list``, ``tuple``, ``dict`` (as key/value pairs), numpy
arrays and scalars and ``torch.Tensor`` (dtype from a fixed list, shape, raw bytes), a
``torch.dtype`` (by name, from the same list), and *builders*: a numpy ``Generator`` (its bit
generator's state, itself plain data), a ``torch.Generator`` (its state tensor), and an
instance of a class registered in ``_builders`` (its builder's name and plain arguments),
rebuilt on the other side. Anything else a student returns becomes :class:`Opaque` (its
type's name only).

>>> loads(dumps((np.arange(3, dtype=np.float32), {"a": [1, 2.5, b"x"]})))
(array([0., 1., 2.], dtype=float32), {'a': [1, 2.5, b'x']})
"""

from __future__ import annotations

import base64
import json

import numpy as np
import torch

from autograder.checks._builders import BUILDERS, BUILT_TYPES

MAX_DEPTH = 32
MAX_ITEMS = 2_000_000  # array elements and container items in one document
_DTYPES = {
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "complex64", "complex128", "uint16",  # uint16: token ids as a memmap stores them
}
_TORCH_DTYPES = {
    "float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "bool": torch.bool, "complex64": torch.complex64,
    "complex128": torch.complex128, "uint16": torch.uint16,
}


class CodecError(ValueError):
    """The data is not one of the kinds this codec carries (or is over a cap)."""


class Opaque:
    """A value of a type the codec does not carry: only its type's name came through."""

    def __init__(self, type_name: str, base: str = ""):
        self.type_name, self.base = type_name, base

    def __repr__(self):
        return f"<{self.type_name} object>"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def encode(x, depth: int = 0):
    """``x`` as JSON-able tagged data (types checked exactly: no subclass passes as a base)."""
    if depth > MAX_DEPTH:
        raise CodecError("nested too deeply")
    t = type(x)
    if x is None or t is bool:
        return x
    if t is int:
        return {"$": "int", "v": str(x)}
    if t is float:
        return {"$": "float", "v": float.hex(x)}
    if t is str:
        return {"$": "str", "v": x}
    if t is bytes:
        return {"$": "bytes", "v": _b64(x)}
    if t in (list, tuple):
        return {"$": t.__name__, "v": [encode(a, depth + 1) for a in list.__iter__(x)]
                if t is list else [encode(a, depth + 1) for a in tuple.__iter__(x)]}
    if t is dict or isinstance(x, dict) and t.__module__ == "collections":
        # Counter, defaultdict, OrderedDict: read through dict's own machinery, sent as a dict
        return {"$": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)]
                                   for k, v in dict.items(x)]}
    if t is np.ndarray or isinstance(x, np.generic) and t.__module__ == "numpy":
        a = np.asarray(x)
        if a.dtype.name not in _DTYPES:
            return {"$": "opaque", "type": f"numpy array of {a.dtype.name}"}
        tag = "nd" if t is np.ndarray else "npscalar"
        return {"$": tag, "dtype": a.dtype.name, "shape": list(a.shape),
                "v": _b64(np.ascontiguousarray(a).tobytes())}
    if t is torch.Tensor:
        with torch._C.DisableTorchFunction():
            a = x.detach().cpu().contiguous()
            name = str(a.dtype).replace("torch.", "")
            if name == "bfloat16":
                raw = a.view(torch.int16).numpy().tobytes()
            elif name in _DTYPES:
                raw = a.numpy().tobytes()
            else:
                return {"$": "opaque", "type": f"torch.Tensor of {name}"}
        return {"$": "tensor", "dtype": name, "shape": list(a.shape), "v": _b64(raw)}
    if t is np.random.Generator:
        return {"$": "np_rng", "state": encode(x.bit_generator.state, depth + 1)}
    if t is torch.Generator:
        return {"$": "torch_gen", "state": encode(x.get_state(), depth + 1)}
    if t is torch.dtype:
        name = str(x).replace("torch.", "")
        if name in _TORCH_DTYPES or name == "bfloat16":
            return {"$": "torch_dtype", "v": name}
        return {"$": "opaque", "type": f"torch.dtype {name}"[:80]}
    if t in BUILT_TYPES:  # an input object made from plain data (see _builders)
        return {"$": "built", "name": BUILT_TYPES[t], "args": encode(tuple(x.plain_args()),
                                                                       depth + 1)}
    base = next((b.__name__ for b in (torch.Tensor, np.ndarray, dict, list, tuple, str, float,
                                      int) if isinstance(x, b)), "")
    return {"$": "opaque", "type": t.__name__[:80], "base": base}


def dumps(x) -> str:
    return json.dumps(encode(x), separators=(",", ":"))


class _Budget:
    def __init__(self):
        self.left = MAX_ITEMS

    def take(self, n: int):
        self.left -= n
        if self.left < 0:
            raise CodecError("too much data")


def _array(d, budget):
    dtype, shape = d.get("dtype"), d.get("shape")
    if dtype not in _DTYPES and dtype != "bfloat16":
        raise CodecError(f"dtype {dtype!r} not carried")
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise CodecError("bad shape")
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    budget.take(n)
    raw = base64.b64decode(d.get("v", ""), validate=True)
    np_dtype = np.dtype("int16" if dtype == "bfloat16" else dtype)
    if len(raw) != n * np_dtype.itemsize:
        raise CodecError("array data does not match its shape")
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()


def decode(d, depth: int = 0, budget: _Budget | None = None):
    """The value :func:`encode` made (fresh objects); :class:`CodecError` on anything else."""
    budget = budget or _Budget()
    if depth > MAX_DEPTH:
        raise CodecError("nested too deeply")
    if d is None or type(d) is bool:
        return d
    if type(d) is not dict or type(d.get("$")) is not str:
        raise CodecError("not a tagged value")
    tag, v = d["$"], d.get("v")
    budget.take(1)
    if tag == "int":
        if type(v) is not str or len(v) > 4000:
            raise CodecError("bad int")
        return int(v)
    if tag == "float":
        return float.fromhex(v)
    if tag == "str" and type(v) is str:
        return v
    if tag == "bytes":
        return base64.b64decode(v, validate=True)
    if tag in ("list", "tuple") and type(v) is list:
        items = [decode(a, depth + 1, budget) for a in v]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and type(v) is list:
        out = {}
        for pair in v:
            if type(pair) is not list or len(pair) != 2:
                raise CodecError("bad dict item")
            out[decode(pair[0], depth + 1, budget)] = decode(pair[1], depth + 1, budget)
        return out
    if tag == "nd":
        return _array(d, budget)
    if tag == "npscalar":
        return _array(d, budget)[()]
    if tag == "tensor":
        a = _array(d, budget)
        if d["dtype"] == "bfloat16":
            return torch.from_numpy(a).view(torch.bfloat16)
        return torch.from_numpy(a) if d["dtype"] in _TORCH_DTYPES else torch.tensor(a)
    if tag == "np_rng":
        state = decode(d.get("state"), depth + 1, budget)
        if type(state) is not dict or state.get("bit_generator") != "PCG64":
            raise CodecError("only PCG64 generators are carried")
        bg = np.random.PCG64()
        bg.state = state
        return np.random.Generator(bg)
    if tag == "torch_gen":
        state = decode(d.get("state"), depth + 1, budget)
        if type(state) is not torch.Tensor or state.dtype != torch.uint8:
            raise CodecError("bad generator state")
        g = torch.Generator()
        g.set_state(state)
        return g
    if tag == "torch_dtype":
        if v == "bfloat16":
            return torch.bfloat16
        if v not in _TORCH_DTYPES:
            raise CodecError(f"dtype {v!r} not carried")
        return _TORCH_DTYPES[v]
    if tag == "built":
        name, args = d.get("name"), decode(d.get("args"), depth + 1, budget)
        if name not in BUILDERS or type(args) is not tuple:
            raise CodecError(f"no builder {name!r}")
        try:
            return BUILDERS[name](*args)
        except (TypeError, ValueError) as e:
            raise CodecError(f"builder {name!r}: {e}") from None
    if tag == "opaque":
        return Opaque(str(d.get("type", "object"))[:80], str(d.get("base", ""))[:20])
    raise CodecError(f"unknown tag {tag!r}")


def loads(text: str):
    return decode(json.loads(text))


def carries_builders(d, depth: int = 0) -> bool:
    """Whether tagged data ``d`` holds a builder (``built``, a generator): the grader reads a
    kernel's *outputs* only as plain data, so it never builds an object a student described.

    >>> carries_builders(encode([1, torch.Generator()])), carries_builders(encode([1.5]))
    (True, False)
    """
    if depth > MAX_DEPTH:
        return True
    if type(d) is list:
        return any(carries_builders(a, depth + 1) for a in d)
    if type(d) is not dict:
        return False
    if d.get("$") in ("built", "np_rng", "torch_gen"):
        return True
    return any(carries_builders(v, depth + 1) for k, v in d.items() if k in ("v", "state"))
