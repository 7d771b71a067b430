"""What every part of the package shares: the ``vidfeat`` logger (the library's log lines go
to it), the errors, and the conversions between Python's strings and C's."""
import logging
import os
from typing import Union

from . import _capi as C

PathLike = Union[str, bytes, os.PathLike]
Seconds = Union[float, str, None]  # seconds, or text the command takes ("1:30", "500ms")

logger = logging.getLogger("vidfeat")
_LEVELS = {C.LOG_ERROR: logging.ERROR, C.LOG_WARNING: logging.WARNING, C.LOG_INFO: logging.INFO,
           C.LOG_DEBUG: logging.DEBUG}


def _log_line(user, level, tag, msg):
    try:
        text = msg.decode("utf-8", "replace") if msg else ""
        logger.log(_LEVELS.get(level, logging.WARNING), "%s", text)
    except Exception:  # a handler's failure must not reach the C thread
        pass


_log_callback = C.LOG_FN(_log_line)  # kept alive as long as the module
C.vf_set_log_callback(_log_callback, None, C.LOG_DEBUG)


# ---- errors -----------------------------------------------------------------------------

class Error(Exception):
    """A vidfeat failure. ``status`` is the library's code (a negative vf_status), ``message``
    vidfeat's one line, ``exit_status`` what the command exits with for the same failure."""
    exit_status = 1

    def __init__(self, message, status=C.ERR_INTERNAL):
        super().__init__(message)
        self.message = message
        self.status = status


class InputError(Error):
    """An input file could not be read, decoded or extracted (the command's exit 1)."""
    exit_status = 1


class UsageError(Error, ValueError):
    """An option or argument is wrong; nothing was done (exit 2)."""
    exit_status = 2


class StartError(Error):
    """The work could not start: the model, the database or the device (exit 3)."""
    exit_status = 3


def _error(status, message, default=StartError):
    if status == C.ERR_INVALID:
        kind = UsageError
    elif status in (C.ERR_DECODE, C.ERR_DENIED):
        kind = InputError
    else:
        kind = default
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    return kind(text or C.vf_status_str(status).decode(), status)


def _file_error(r):
    """A failed file as the command says it: "PATH: why"."""
    return _error(r.code, "%s: %s" % (r.path, r.error), InputError)


def _text(b):
    """A C string: str (os.fsdecode's, so a non-UTF-8 file name round-trips), or None."""
    return None if b is None else os.fsdecode(b)


def _bytes(s, what="a path"):
    """s (str, bytes or a path) as the bytes C reads, or None: TypeError for another type (an
    int taken as a char * crashed), UsageError (a ValueError) for a NUL, which C would take for
    the end (a path cut short there is another file)."""
    if s is None:
        return None
    if not isinstance(s, (str, bytes, os.PathLike)):
        raise TypeError("%s must be a str, bytes or path, not %s" % (what, type(s).__name__))
    b = os.fsencode(s)
    if b"\0" in b:
        raise UsageError("%s holds a NUL character: %r" % (what, s), C.ERR_INVALID)
    return b
