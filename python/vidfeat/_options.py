"""The options of a run, written once: _Options turns the command's options (by their Python
names, and any other of vf_config's fields by its own name) into a vf_config. Extractor,
extract() and frames() show exactly these after their own parameters (with_options), run()
and Database's calls take them too."""
import ctypes
import inspect
from typing import Any, Optional

import numpy as np

from . import _capi as C
from ._common import PathLike, Seconds, UsageError, _bytes

# ---- options ----------------------------------------------------------------------------

_DEVICES = {"cpu": b"cpu", "auto": b"auto", "ref": b"ref", "cuda": b"cuda", "gpu": b"cuda"}


class _Options:
    """A vf_config and the bytes its pointers point into (kept alive with it)."""

    def __init__(self, model: Optional[str] = None, layer: Optional[str] = None,
                 fps: Optional[float] = None, every: Optional[int] = None,
                 keyframes: bool = False, start: Seconds = None, duration: Seconds = None,
                 batch: int = 32, precision: str = "f32", device: str = "cpu", threads: int = 0,
                 models_dir: Optional[PathLike] = None, db: Optional[PathLike] = None,
                 **more: Any) -> None:
        self._keep = []
        c = C.vf_config_default()
        c.model = self._str(model) if model is not None else None
        c.layer = self._str(layer)
        c.models_dir = self._str(models_dir)
        c.db_path = self._str(db)
        if device not in _DEVICES:
            raise UsageError("device %r: expected one of %s" % (device, ", ".join(_DEVICES)),
                             C.ERR_INVALID)
        c.backend = _DEVICES[device]
        p = ctypes.c_int()
        if C.vf_precision_parse(_bytes(str(precision)), ctypes.byref(p)) < 0:
            raise UsageError("precision %r: expected f32, bf16, int8, f16, tf32 or auto"
                             % precision, C.ERR_INVALID)
        c.precision = p.value
        c.batch_size = _count("batch", batch, 1, 4096)
        c.n_threads = _count("threads", threads, 0, 4096)
        if fps is not None:
            if not fps > 0:
                raise UsageError("fps must be above 0", C.ERR_INVALID)
            c.sample_fps = float(fps)
        if every is not None:
            c.every = _count("every", every, 1, 1 << 30)
        c.keyframes = 1 if keyframes else 0
        c.start = _seconds("start", start)
        c.duration = _seconds("duration", duration)
        fields = dict(C.Config._fields_)
        for name, value in more.items():  # the command's other options, by vf_config's names
            if name not in fields:
                raise UsageError("unknown option %r" % name, C.ERR_INVALID)
            setattr(c, name, self._field(name, fields[name], value))
        self.config = c

    def _str(self, s, what="a path"):
        b = _bytes(s, what)
        if b is not None:
            self._keep.append(b)
        return b

    def _field(self, name, ctype, value):
        """value as vf_config's field of that C type takes it: TypeError for another kind of
        value, UsageError for a number the field cannot hold (2**32 + 8 is not 8)."""
        if ctype is ctypes.c_char_p:
            return self._str(value, name)
        if ctype in (ctypes.c_double, ctypes.c_float):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise TypeError("%s must be a number, not %s" % (name, type(value).__name__))
            return float(value)
        if issubclass(ctype, ctypes._SimpleCData) and ctype._type_ in "bBhHiIlLqQ":
            if not isinstance(value, (bool, int, np.integer)):
                raise TypeError("%s must be a whole number, not %s" % (name, type(value).__name__))
            bits = 8 * ctypes.sizeof(ctype)
            lo, hi = (0, (1 << bits) - 1) if ctype._type_.isupper() else (-(1 << (bits - 1)),
                                                                           (1 << (bits - 1)) - 1)
            if not lo <= int(value) <= hi:
                raise UsageError("%s %d is out of range (%d to %d)" % (name, value, lo, hi),
                                 C.ERR_INVALID)
            return int(value)
        raise TypeError("%s cannot be set from Python" % name)


def _count(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise UsageError("%s must be a whole number from %d to %d" % (name, lo, hi),
                         C.ERR_INVALID)
    return int(value)


def _seconds(name, value):
    """A time as the command takes one: seconds, or text such as "1:30" or "500ms"."""
    if value is None:
        return 0.0
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        if value < 0:
            raise UsageError("%s must not be negative" % name, C.ERR_INVALID)
        return float(value)
    out = ctypes.c_double()
    if C.vf_parse_time(_bytes(str(value)), ctypes.byref(out)) < 0 or out.value < 0:
        raise UsageError("%s %r: expected seconds or [[HH:]MM:]SS[.frac]" % (name, value),
                         C.ERR_INVALID)
    return out.value


def with_options(fn):
    """fn(..., **options) as help() and inspect show it: its own parameters, then _Options'
    (keyword only, with their defaults and types), then **options for vf_config's other
    fields. The options are written once, in _Options.__init__."""
    own = inspect.signature(fn)
    mine = [p for p in own.parameters.values() if p.kind != p.VAR_KEYWORD]
    names = {p.name for p in mine} | {"self", "db", "more"}
    run = [p.replace(kind=p.KEYWORD_ONLY)
           for p in inspect.signature(_Options.__init__).parameters.values()
           if p.name not in names and p.kind != p.VAR_KEYWORD]
    rest = [p for p in own.parameters.values() if p.kind == p.VAR_KEYWORD]
    fn.__signature__ = own.replace(parameters=mine + run + rest)
    return fn
