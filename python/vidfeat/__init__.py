"""vidfeat: video frames to feature vectors, from Python, at the command's speed.

A thin layer over libvidfeat (ctypes, no compiled extension): the same pipeline as the
``vidfeat`` command (decoding, conversion and the network overlapped on their own threads), its
results as numpy arrays.

    >>> import vidfeat
    >>> f = vidfeat.extract("clip.mp4", model="mobilenet_v2_1.0_224", fps=1)
    >>> f.t.shape, f.vectors.shape            # seconds (float64), frames x dim (float32)
    >>> for batch in vidfeat.frames("long.mkv", fps=2):   # as they are computed
    ...     consume(batch.t, batch.vectors)
    >>> with vidfeat.Extractor("mobilenet_v2_1.0_224") as ex:
    ...     a = ex.extract("a.mp4"); v = ex(images)   # images: uint8 N x H x W x 3
    >>> db = vidfeat.open("archive.db"); rows = db.frames(); db.info(); db.similar(image="x.jpg")
    >>> db.similar(text="a red car at night")             # a CLIP model's vectors
    >>> with vidfeat.TextEncoder("clip_vit_b32") as te:   # CLIP's text tower, in C
    ...     ids = te.tokenize("a dog"); e = te(["a dog", "two cats"])   # 2 x 512 float32
    >>> vidfeat.run(["/media/archive"], db="archive.db", fps=1, progress=print)

While the C library works the GIL is released (other Python threads keep running). Ctrl-C
stops a call within about a second and raises KeyboardInterrupt (what a run wrote to its
database is kept, as with the command). Failures raise vidfeat.Error: InputError (an input
file failed: the command's exit status 1), UsageError (bad options: 2), StartError (the model,
the database or the device: 3), each with vidfeat's own one-line message. The library's
warnings go to the ``vidfeat`` logger of the logging module.
"""
import ctypes
import logging
import os
import queue
import stat
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi as C

__all__ = ["extract", "frames", "Extractor", "Features", "open", "Database", "run", "inputs",
           "input_name", "record_bench",
           "TextEncoder", "embed_text",
           "PathLike",
           "FileResult", "Error", "InputError", "UsageError", "StartError", "__version__"]

__version__ = C.vf_version().decode()
library_path = C.library_path  # the libvidfeat.so this package runs

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


def _bytes(s):
    return None if s is None else os.fsencode(s)


# ---- options ----------------------------------------------------------------------------

_DEVICES = {"cpu": b"cpu", "auto": b"auto", "ref": b"ref", "cuda": b"cuda", "gpu": b"cuda"}


class _Options:
    """A vf_config and the bytes its pointers point into (kept alive with it)."""

    def __init__(self, model=None, layer=None, fps=None, every=None, keyframes=False,
                 start=None, duration=None, batch=32, precision="f32", device="cpu",
                 threads=0, models_dir=None, db=None, **more):
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
            raise UsageError("precision %r: expected f32, bf16, int8, f16 or tf32" % precision,
                             C.ERR_INVALID)
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
        for name, value in more.items():  # the command's other options, by vf_config's names
            if name not in dict(C.Config._fields_):
                raise UsageError("unknown option %r" % name, C.ERR_INVALID)
            if isinstance(value, (str, bytes, os.PathLike)):
                value = self._str(value)
            elif isinstance(value, bool):
                value = int(value)
            setattr(c, name, value)
        self.config = c

    def _str(self, s):
        if s is None:
            return None
        b = os.fsencode(s)
        self._keep.append(b)
        return b


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


# ---- results ----------------------------------------------------------------------------

class Features:
    """The vectors of one file (or one batch of it), with their frames' times.

    Attributes: ``t`` (float64 seconds from the start of the file's timeline), ``frame_index``
    (int64, presentation order), ``pts`` (int64, the stream's time base), ``vectors`` (float32,
    frames x dim), ``path``, ``model``, ``layer``; a clip model's vectors are windows of frames:
    ``t``, ``frame_index`` and ``pts`` are each window's first frame's and ``t_end`` (float64)
    its last frame's time (None for an image model); after a whole extraction also ``rates`` (the
    stages' frames/s: decode, convert, infer, store), ``seconds``, ``note`` (why a done file was
    not whole, or ""), ``width``, ``height``, ``codec``.
    """

    def __init__(self, path, model, layer, t, frame_index, pts, vectors, result=None,
                 t_end=None):
        self.path = path
        self.t_end = t_end
        self.model = model
        self.layer = layer
        self.t = t
        self.frame_index = frame_index
        self.pts = pts
        self.vectors = vectors
        self.rates = {}
        self.seconds = None
        self.note = ""
        self.width = self.height = None
        self.codec = None
        if result is not None:
            self.rates = dict(result.rates)
            self.seconds = result.seconds
            self.note = result.note
            self.width, self.height, self.codec = result.width, result.height, result.codec

    def __len__(self):
        return len(self.t)

    def __repr__(self):
        return "<vidfeat.Features %s: %d frames x %d (%s %s)>" % (
            self.path, len(self.t), self.vectors.shape[1] if self.vectors.ndim == 2 else 0,
            self.model, self.layer)


class FileResult:
    """What became of one input: ``status`` "done", "skipped" (done before) or "failed";
    ``error`` (why it failed), ``note`` (why a done file was not whole), ``frames``,
    ``seconds``, ``rates`` (frames/s per stage), ``width``, ``height``, ``codec``."""

    def __init__(self, r):
        self.path = _text(r.path)
        self.status = "skipped" if r.skipped else "done" if r.status >= 0 else "failed"
        self.code = r.status
        self.error = _text(r.error) or ""
        self.note = _text(r.note) or ""
        self.frames = r.frames
        self.seconds = r.seconds
        self.rates = {"decode": r.decode_fps, "convert": r.convert_fps, "infer": r.infer_fps,
                      "store": r.store_fps}
        self.width, self.height = r.width, r.height
        self.codec = _text(r.codec) or ""

    def __repr__(self):
        return "<vidfeat.FileResult %s: %s, %d frames%s>" % (
            self.path, self.status, self.frames, ": " + self.error if self.error else "")


def _batch_arrays(b):
    """Copies of a vf_batch_view's arrays (they are the pipeline's only during the call)."""
    n, dim = b.n, b.dim
    vec = np.ctypeslib.as_array(b.features, shape=(n * dim,)).reshape(n, dim).copy()
    fi = np.ctypeslib.as_array(b.frame_index, shape=(n,)).copy()
    pts = np.ctypeslib.as_array(b.pts, shape=(n,)).copy()
    t = np.ctypeslib.as_array(b.t, shape=(n,)).copy()
    t_end = np.ctypeslib.as_array(b.t_end, shape=(n,)).copy() if b.t_end else None
    return t, fi, pts, vec, t_end


# ---- the pipeline -----------------------------------------------------------------------

class _Pipeline:
    """A vf_pipeline: the model opened once; runs on a worker thread while the calling thread
    waits where Ctrl-C can reach it."""

    def __init__(self, opts):
        self._opts = opts  # its bytes outlive the pipeline
        h = ctypes.c_void_p()
        rc = C.vf_pipeline_create(ctypes.byref(opts.config), ctypes.byref(h))
        if rc < 0:
            msg = C.vf_pipeline_errmsg(h) if h.value else b""
            C.vf_pipeline_free(ctypes.byref(h))
            raise _error(rc, msg)
        self._h = h
        info = C.ModelInfo()
        C.vf_pipeline_info(h, ctypes.byref(info))
        self.model = _text(info.name)
        self.layer = _text(info.layer)
        self.dim = info.feature_dim
        self.window = info.frames  # a clip model's frames per window, 0 for an image model
        self.info = _model_info(info)

    def close(self):
        if getattr(self, "_h", None) is not None and self._h.value:
            C.vf_pipeline_free(ctypes.byref(self._h))
        self._h = None

    def __del__(self):
        self.close()

    def run(self, paths, on_batch=None, on_file=None, on_progress=None):
        """vf_pipeline_run over paths (bytes) on a worker thread. Callbacks run on the
        pipeline's store thread; one that raises cancels the run and the exception is raised
        here. Returns the status; KeyboardInterrupt cancels and is raised again."""
        if self._h is None:
            raise Error("the extractor is closed", C.ERR_INVALID)
        failure = []

        def guard(fn, cancel):
            """fn made safe to call from C: cancel (None for a callback without a result) is
            returned to stop the run, after an exception or when fn returns true."""
            def call(*args):
                if failure:
                    return cancel
                try:
                    stop = fn(*args)
                except BaseException as e:  # carried to the calling thread
                    failure.append(e)
                    return cancel
                return None if cancel is None else (1 if stop else 0)
            return call

        hooks = C.RunHooks()
        keep = []
        if on_batch:
            keep.append(C.BATCH_FN(guard(lambda u, b: on_batch(b.contents), 1)))
            hooks.batch = keep[-1]
        if on_file:
            keep.append(C.FILE_DONE_FN(guard(lambda u, i, r: on_file(i, r.contents), None)))
            hooks.file_done = keep[-1]
        if on_progress:
            keep.append(C.PROGRESS_FN(guard(lambda u, i, p, done, total:
                                            on_progress(i, _text(p), done, total), 1)))
            hooks.progress = keep[-1]
        arr = (ctypes.c_char_p * max(1, len(paths)))(*paths)
        status = []
        finished = threading.Event()

        def work():
            try:
                status.append(C.vf_pipeline_run(self._h, arr, len(paths), ctypes.byref(hooks)))
            finally:
                finished.set()

        # Waited for through an Event, not Thread.join: a join that Ctrl-C interrupts can take
        # the thread for finished while it still runs (Python 3.11's bpo-45274 handling), and
        # the pipeline must not be freed under it.
        threading.Thread(target=work, name="vidfeat-run", daemon=True).start()
        try:
            while not finished.wait(0.05):
                pass
        except BaseException:  # Ctrl-C (or any exception here): stop the run, then go
            C.vf_pipeline_cancel(self._h)
            _wait_through_interrupts(finished)
            raise
        if failure:
            raise failure[0]
        return status[0], C.vf_pipeline_errmsg(self._h)

    def cancel(self):
        if self._h is not None:
            C.vf_pipeline_cancel(self._h)


def _wait_through_interrupts(event):
    """Wait until event is set, a further Ctrl-C notwithstanding (the run stops within a
    network layer once cancelled; what it uses must outlive it)."""
    while True:
        try:
            if event.wait(0.05):
                return
        except KeyboardInterrupt:
            continue


def _model_info(info):
    return {"name": _text(info.name), "path": _text(info.path), "layer": _text(info.layer),
            "tensor": _text(info.tensor), "backend": _text(info.backend),
            "precision": C.vf_precision_str(info.precision).decode(),
            "batch_size": info.batch_size, "input_size": info.input_size,
            "feature_dim": info.feature_dim, "pooled": bool(info.pooled),
            "device": _text(info.device), "frames": info.frames,
            "weights": C.vf_weights_str(info.weights).decode()}


def _one_file(path):
    if isinstance(path, (list, tuple)):
        raise UsageError("one file expected (vidfeat.run takes several)", C.ERR_INVALID)
    return os.fsencode(path)


class Extractor:
    """A model opened once, for many files and for arrays of images.

    Extractor(model="inception_v3", layer=None, fps=None, every=None, keyframes=False,
    start=None, duration=None, batch=32, precision="f32", device="cpu", threads=0,
    models_dir=None): the options are the command's (docs/commands.md): ``fps`` at most that
    many frames a second, ``every`` every Nth frame, ``keyframes`` key frames only, ``start`` /
    ``duration`` seconds (or "1:30"), ``device`` "cpu", "ref" (the plain-C oracle) or "cuda",
    ``threads`` 0 for all cores. Close it (or use ``with``) to free the model at once.
    """

    def __init__(self, model: str = "inception_v3", layer: Optional[str] = None,
                 fps: Optional[float] = None, every: Optional[int] = None,
                 keyframes: bool = False, start: Seconds = None, duration: Seconds = None,
                 batch: int = 32, precision: str = "f32", device: str = "cpu", threads: int = 0,
                 models_dir: Optional[PathLike] = None, **options: Any) -> None:
        self._opts = _Options(model, layer, fps, every, keyframes, start, duration, batch,
                              precision, device, threads, models_dir, **options)
        self._p = _Pipeline(self._opts)
        self._ex = None  # the vf_extractor for arrays, made on first use
        self.model, self.layer, self.dim = self._p.model, self._p.layer, self._p.dim
        self.window = self._p.window
        self.info = self._p.info

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Free the model (and its memory) now."""
        if self._p is not None:
            self._p.close()
            self._p = None
        if self._ex is not None and self._ex.value:
            C.vf_extractor_free(ctypes.byref(self._ex))
        self._ex = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _pipeline(self):
        if self._p is None:
            raise Error("the extractor is closed", C.ERR_INVALID)
        return self._p

    def extract(self, path: PathLike) -> "Features":
        """The file's vectors, all at once: a Features. InputError when it cannot be read."""
        p = self._pipeline()
        parts, result = [], []
        status, msg = p.run([_one_file(path)], on_batch=lambda b: parts.append(_batch_arrays(b)),
                            on_file=lambda i, r: result.append(FileResult(r)))
        if status < 0 and not result:
            raise _error(status, msg)
        r = result[0]
        if r.status == "failed":
            raise _file_error(r)
        return self._join(os.fsdecode(path), parts, r)

    def _join(self, path, parts, r=None):
        t_end = None
        if parts:
            t, fi, pts, vec = (np.concatenate(a) for a in list(zip(*parts))[:4])
            if parts[0][4] is not None:
                t_end = np.concatenate([p[4] for p in parts])
        else:
            t, fi, pts = np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
            vec = np.zeros((0, self.dim), np.float32)
            t_end = np.zeros(0) if self.window else None
        return Features(path, self.model, self.layer, t, fi, pts, vec, r, t_end=t_end)

    def frames(self, path: PathLike) -> Iterator["Features"]:
        """The file's vectors batch by batch as the network computes them (a generator of
        Features); memory does not grow with the video. Leaving the loop early stops the
        extraction."""
        p = self._pipeline()
        q = queue.Queue(maxsize=2)
        stop = threading.Event()
        done = object()
        result = []
        name = os.fsdecode(path)

        def on_batch(b):
            a = _batch_arrays(b)
            item = Features(name, self.model, self.layer, *a[:4], t_end=a[4])
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return 0
                except queue.Full:
                    continue
            return 1  # the consumer left: cancel

        finished = threading.Event()

        def work():
            try:
                out = p.run([_one_file(path)], on_batch=on_batch,
                            on_file=lambda i, r: result.append(FileResult(r)))
                q_put(out)
            except BaseException as e:
                q_put(e)
            finally:
                finished.set()

        def q_put(item):
            while not stop.is_set():
                try:
                    q.put((done, item), timeout=0.1)
                    return
                except queue.Full:
                    continue

        threading.Thread(target=work, name="vidfeat-frames", daemon=True).start()
        try:
            while True:
                try:
                    item = q.get(timeout=0.1)
                except queue.Empty:
                    continue
                if isinstance(item, tuple) and item and item[0] is done:
                    end = item[1]
                    if isinstance(end, BaseException):
                        raise end
                    status, msg = end
                    if status < 0 and not result:
                        raise _error(status, msg)
                    if result and result[0].status == "failed":
                        raise _file_error(result[0])
                    return
                yield item
        finally:
            stop.set()
            if not finished.is_set():
                p.cancel()
                _wait_through_interrupts(finished)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        """Vectors of images: a uint8 array N x H x W x 3 (RGB; or one H x W x 3), converted
        as the pipeline converts a decoded picture (the model's resize or crop, mean, std).
        Returns float32 N x dim; a clip model's (``window`` T > 0) takes N a multiple of T,
        each T pictures one window, and returns N / T x dim."""
        a = np.asarray(images)
        if a.ndim == 3:
            a = a[None]
        if a.ndim != 4 or a.shape[3] != 3 or a.dtype != np.uint8:
            raise UsageError("images must be uint8 N x H x W x 3 (RGB), not %s %s"
                             % (a.dtype, a.shape), C.ERR_INVALID)
        per = self.window or 1  # pictures per vector
        if a.shape[0] % per:
            raise UsageError("%d pictures: the model takes windows of %d" % (a.shape[0], per),
                             C.ERR_INVALID)
        out = np.empty((a.shape[0] // per, self.dim), np.float32)
        if a.shape[0] == 0:
            return out
        a = np.ascontiguousarray(a)
        if self._ex is None:
            h = ctypes.c_void_p()
            rc = C.vf_extractor_create(ctypes.byref(self._opts.config), ctypes.byref(h))
            if rc < 0:
                msg = C.vf_extractor_errmsg(h) if h.value else b""
                C.vf_extractor_free(ctypes.byref(h))
                raise _error(rc, msg)
            self._ex = h
        rc = C.vf_extractor_infer_rgb(self._ex, a.ctypes.data, a.shape[0], a.shape[1],
                                      a.shape[2], out.ctypes.data)
        if rc < 0:
            raise _error(rc, C.vf_extractor_errmsg(self._ex), InputError)
        return out


def extract(path: PathLike, model: str = "inception_v3", layer: Optional[str] = None,
            fps: Optional[float] = None, every: Optional[int] = None, keyframes: bool = False,
            start: Seconds = None, duration: Seconds = None, batch: int = 32,
            precision: str = "f32", device: str = "cpu", threads: int = 0,
            models_dir: Optional[PathLike] = None, **options: Any) -> Features:
    """Extract one file's feature vectors: a Features with ``t``, ``frame_index``, ``pts`` and
    ``vectors`` (numpy), the same rows the command stores for the same options. Options as
    Extractor's. For many files, open an Extractor once."""
    with Extractor(model, layer, fps, every, keyframes, start, duration, batch, precision,
                   device, threads, models_dir, **options) as ex:
        return ex.extract(path)


def frames(path: PathLike, model: str = "inception_v3", layer: Optional[str] = None,
           fps: Optional[float] = None, every: Optional[int] = None, keyframes: bool = False,
           start: Seconds = None, duration: Seconds = None, batch: int = 32,
           precision: str = "f32", device: str = "cpu", threads: int = 0,
           models_dir: Optional[PathLike] = None, **options: Any) -> Iterator[Features]:
    """As extract, one Features per batch as it is computed (a generator)."""
    with Extractor(model, layer, fps, every, keyframes, start, duration, batch, precision,
                   device, threads, models_dir, **options) as ex:
        yield from ex.frames(path)


# ---- archives ---------------------------------------------------------------------------

def _inputs(paths, root, files_from, shard, follow_links_outside, verbose):
    """vf_inputs_collect: the files, and the lines said about the inputs not taken."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    said = []
    say = C.SAY_FN(lambda user, line: said.append(_text(line)))
    k, n = shard if shard else (0, 0)
    if n and not 0 <= k < n:
        raise UsageError("shard: k of n, 0 <= k < n (got %r)" % (shard,), C.ERR_INVALID)
    o = C.InputsOpts(root=_bytes(root) if root is not None else None,
                     follow_links_outside=int(bool(follow_links_outside)),
                     files_from=_bytes(files_from) if files_from is not None else None,
                     shard_k=k, shard_n=n, verbose=int(bool(verbose)), say=say)
    args = (ctypes.c_char_p * max(len(paths), 1))(*[os.fsencode(p) for p in paths])
    out, count, failed = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_int(), ctypes.c_int()
    rc = C.vf_inputs_collect(args, len(paths), ctypes.byref(o), ctypes.byref(out),
                             ctypes.byref(count), ctypes.byref(failed))
    if rc < 0:
        raise _error(rc, "out of memory")
    try:
        files = [os.fsdecode(out[i]) for i in range(count.value)]
    finally:
        C.vf_inputs_free(out, count.value)
    return files, said


def inputs(paths: Union[PathLike, Sequence[PathLike]], root: Optional[PathLike] = None,
           files_from: Optional[PathLike] = None, shard: Optional[Tuple[int, int]] = None,
           follow_links_outside: bool = False, check: bool = True) -> List[str]:
    """The files a run of ``paths`` takes, as the command takes them (one C function for both):
    a file as it is, a directory walked for media in name order (each real directory and file
    once; media that will not give frames kept, for the run to fail; other files passed over),
    then the paths listed in ``files_from`` ("-": standard input), then shard ``k`` of ``n``
    (``shard=(k, n)``, by recorded name). With ``root``, nothing outside it is walked or probed.
    An input that cannot be taken (a directory without media, an unreadable list) is logged to
    the ``vidfeat`` logger; with ``check``, InputError names the first once the others are
    listed."""
    files, said = _inputs(paths, root, files_from, shard, follow_links_outside, False)
    for line in said:
        logger.warning("%s", line)
    if check and said:
        e = InputError(said[0] + ("" if len(said) == 1 else " (and %d more)" % (len(said) - 1)),
                       C.ERR_IO)
        e.files = files
        raise e
    return files


def record_bench(db: PathLike, model: str, precision: str, mode: str = "infer_only",
                 device: str = "cpu", **fields: Any) -> None:
    """Append a benchmark result to a database's runs, as ``vidfeat bench -o DB`` records its
    rows (with the time, this host and vidfeat's version), for ``info`` and the benchmark tables
    to read: ``fields`` are vf_bench_record's (``device_name``, ``backend``, ``layer``,
    ``input``, ``batch_size``, ``threads``, ``frames``, ``end_to_end_fps``, ``decode_fps``,
    ``convert_fps``, ``infer_fps``, ``store_fps``, ``peak_rss_mb``; a rate not given is not
    measured)."""
    names = {f for f, _ in C.BenchRecord._fields_}
    unknown = set(fields) - names
    if unknown:
        raise UsageError("record_bench: unknown fields %s" % ", ".join(sorted(unknown)),
                         C.ERR_INVALID)
    values = dict(fields, model=model, precision=precision, mode=mode, device=device)
    r = C.BenchRecord(**{k: (_bytes(v) if isinstance(v, (str, bytes, os.PathLike)) else v)
                         for k, v in values.items()})
    err = ctypes.create_string_buffer(512)
    rc = C.vf_db_add_bench(_bytes(db), ctypes.byref(r), err, len(err))
    if rc < 0:
        raise _error(rc, err.value)


def input_name(path: PathLike, root: Optional[PathLike] = None) -> str:
    """The name a database records the file at ``path`` under: relative to ``root`` when given
    (machines mounting an archive at different places record its files alike), else its
    absolute path. UsageError for a path outside root."""
    buf, err = ctypes.create_string_buffer(8192), ctypes.create_string_buffer(512)
    rc = C.vf_input_name(os.fsencode(path), _bytes(root) if root is not None else None, buf,
                         len(buf), err, len(err))
    if rc < 0:
        raise _error(rc, _text(err.value), default=UsageError)
    return os.fsdecode(buf.value)


def run(paths: Union[PathLike, Sequence[PathLike]], db: PathLike = "vidfeat.db",
        progress: Optional[Callable[[str, int, int], Any]] = None, check: bool = True,
        **options: Any) -> List[FileResult]:
    """Extract files and directories into a database, as ``vidfeat -o DB PATHS...`` does:
    the inputs taken as the command takes them (inputs(): ``files_from`` and ``shard`` too),
    files already done are skipped, each file's vectors are marked done only when whole,
    several processes (leases, ``root``) share the work. ``options`` are Extractor's and
    vf_config's (``force``, ``store_f16``, ``root``, ...). ``progress(path, frames_done,
    frames_expected)`` is called after each batch. Returns a FileResult per file; with
    ``check``, InputError (carrying ``results``) when some failed."""
    root = options.get("root")
    files, said = _inputs(paths, root, options.pop("files_from", None),
                          options.pop("shard", None), options.get("follow_links_outside"), False)
    for line in said:  # inputs not taken (a directory without media, ...): the others run
        logger.warning("%s", line)
    opts = _Options(db=db, **dict({"model": "inception_v3"}, **options))
    pipe = _Pipeline(opts)
    results = []
    try:
        on_progress = None
        if progress:
            def on_progress(i, path, done, total):
                progress(path, done, total)
        status, msg = pipe.run([os.fsencode(f) for f in files],
                               on_file=lambda i, r: results.append((i, FileResult(r))),
                               on_progress=on_progress)
    finally:
        pipe.close()
    results = [r for i, r in sorted(results, key=lambda x: x[0])]  # in the order given
    if status < 0 and status != C.ERR_CANCELLED:
        raise _error(status, msg)
    failed = [r for r in results if r.status == "failed"]
    if check and (failed or said):
        e = _file_error(failed[0]) if failed else InputError(said[0], C.ERR_IO)
        more = len(failed) + len(said) - 1
        if more:
            e = InputError("%s (and %d more inputs failed)" % (e.message, more), e.status)
        e.results = results
        raise e
    return results


class Database:
    """A vidfeat database (an SQLite file, or a PostgreSQL URI), read-only: vidfeat.open()."""

    def __init__(self, target):
        self.target = target
        self._b = os.fsencode(target)
        if "://" not in os.fsdecode(target) and not os.path.exists(target):
            raise StartError("%s: no such database" % os.fsdecode(target), C.ERR_STORE)

    def __repr__(self):
        return "<vidfeat.Database %s>" % os.fsdecode(self.target)

    def info(self, summary: bool = False) -> Dict[str, Any]:
        """What the database holds: the ``vidfeat info --json`` document, as a dict."""
        doc = {}
        ext, runs = [], []

        def on_summary(u, s):
            s = s.contents
            doc["summary"] = {"database": _text(s.database), "engine": _text(s.engine),
                              "schema": s.schema, "videos": s.videos, "models": s.models,
                              "done": s.done, "failed": s.failed, "running": s.running,
                              "vectors": s.vectors, "pending": s.pending}

        def on_extraction(u, e):
            e = e.contents
            failed = e.status == b"failed"
            ext.append({"path": _text(e.path), "status": _text(e.status), "frames": e.frames,
                        "infer_fps": round(e.infer_fps, 2), "model": _text(e.model),
                        "layer": _text(e.layer), "dim": e.dim, "dtype": _text(e.dtype),
                        "sampling": _text(e.sampling), "weights": _text(e.weights),
                        "error": _text(e.error) if failed else None,
                        "note": None if failed else _text(e.error)})

        def on_run(u, r):
            r = r.contents
            runs.append({"started_at": _text(r.started_at), "host": _text(r.host),
                         "device": _text(r.device), "device_name": _text(r.device_name),
                         "precision": _text(r.precision), "batch": r.batch_size,
                         "mode": _text(r.mode), "model": _text(r.model),
                         "end_to_end_fps": round(r.end_to_end_fps, 2),
                         "infer_fps": round(r.infer_fps, 2)})

        v = C.DbVisitor()
        cbs = [C.SUMMARY_FN(on_summary), C.EXTRACTION_FN(on_extraction), C.BENCH_RUN_FN(on_run)]
        v.summary = cbs[0]
        if not summary:
            v.extraction, v.run = cbs[1], cbs[2]
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_inspect(self._b, ctypes.byref(v), err, len(err))
        if rc < 0:
            raise _error(rc, err.value)
        if not summary:
            doc["extractions"] = ext
            doc["benchmark_runs"] = runs
        indexes = []

        def on_index(u, ix):
            ix = ix.contents
            indexes.append({"path": _text(ix.path), "model": _text(ix.model),
                            "layer": _text(ix.layer), "kind": _text(ix.kind),
                            "vectors": ix.vectors, "files": ix.files,
                            "built_at": _text(ix.built_at), "host": _text(ix.host),
                            "present": bool(ix.present), "problem": _text(ix.problem),
                            "lacks_vectors": ix.lacks_vectors, "lacks_files": ix.lacks_files,
                            "gone_vectors": ix.gone_vectors, "gone_files": ix.gone_files})

        cb = C.INDEX_INFO_FN(on_index)
        rc = C.vf_db_indexes(self._b, cb, None, err, len(err))
        if rc < 0:
            raise _error(rc, err.value)
        doc["indexes"] = indexes
        return doc

    def frames(self, model: Optional[str] = None, layer: Optional[str] = None,
               path: Optional[PathLike] = None) -> Features:
        """The stored vectors of one model and layer (the database's, or the one model/layer
        choose when it holds several), done files only, as a Features whose ``path`` and
        ``sampling`` are arrays too (one entry per vector; file names as os.fsdecode gives
        them). ``path``: one file's only. Files in byte order, each by frame index: the rows
        ``vidfeat export`` writes."""
        opts = _Options(model=model, layer=layer)
        want = os.fsencode(path) if path is not None else None
        st = {"dim": 0, "n": 0, "model": None, "layer": None, "windows": False}
        cols = {}
        names, samplings = [], []

        def grow(need):
            cap = len(cols["t"]) if cols else 0
            if need <= cap:
                return
            cap = max(need, 2 * cap, 1024)
            for k, dt in (("t", np.float64), ("fi", np.int64), ("pts", np.int64),
                          ("t_end", np.float64)):
                a = np.empty(cap, dt)
                if k in cols:
                    a[:st["n"]] = cols[k][:st["n"]]
                cols[k] = a
            v = np.empty((cap, st["dim"]), np.float32)
            if "vec" in cols:
                v[:st["n"]] = cols["vec"][:st["n"]]
            cols["vec"] = v

        def on_model(u, m):
            m = m.contents
            st["dim"], st["model"], st["layer"] = m.dim, _text(m.name), _text(m.layer)
            st["windows"] = m.frames > 0
            grow(min(m.vectors, 1 << 20) if want is None else 0)
            return 0

        def on_vector(u, v):
            v = v.contents
            if want is not None and v.path != want:
                return 0
            n = st["n"]
            grow(n + 1)
            cols["t"][n] = v.t
            cols["fi"][n] = v.frame_index
            cols["pts"][n] = v.pts
            cols["t_end"][n] = v.t_end
            row = cols["vec"][n]
            ctypes.memmove(row.ctypes.data, v.vec, row.nbytes)
            names.append(v.path)
            samplings.append(v.sampling)
            st["n"] = n + 1
            return 0

        cb_m, cb_v = C.MODEL_FN(on_model), C.VECTOR_FN(on_vector)
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_read_vectors(self._b, ctypes.byref(opts.config), cb_m, cb_v, None, err,
                                  len(err))
        if rc < 0:
            raise _error(rc, err.value)
        n = st["n"]
        if not cols:
            grow(1)
        f = Features(None, st["model"], st["layer"], cols["t"][:n].copy(),
                     cols["fi"][:n].copy(), cols["pts"][:n].copy(), cols["vec"][:n].copy(),
                     t_end=cols["t_end"][:n].copy() if st["windows"] else None)
        decoded = {}
        f.path = np.array([decoded.setdefault(b, os.fsdecode(b)) for b in names], dtype=object)
        f.sampling = np.array([decoded.setdefault(b, os.fsdecode(b)) for b in samplings],
                              dtype=object)
        return f

    def similar(self, image: Optional[PathLike] = None, video: Optional[PathLike] = None,
                at: Union[float, str, None] = None, k: int = 10, exact: bool = False,
                probe: int = 0, index: Optional[PathLike] = None, model: Optional[str] = None,
                layer: Optional[str] = None, models_dir: Optional[PathLike] = None,
                device: str = "cpu", precision: str = "f32",
                fps: Optional[float] = None,
                text: Union[str, Sequence[str], None] = None,
                audio_at: Union[float, str, None] = None) -> Any:
        """The stored frames most like a query frame (``image``, or ``video`` at ``at``
        seconds), best first: the ``vidfeat similar --json`` document as a dict
        (``neighbours``, ``query``, ``search``, ``search_ms``, ``index``, ``candidates``,
        ``weights``: the stored vectors' model weights as recorded, "random weights" when they
        were made for tests and their similarities mean nothing - also logged as a warning).
        ``video`` without ``at``: where that clip's footage is, as matches(video=...).
        ``text``: words (a CLIP model's vectors): the document of ``similar --text`` (``query``
        {"text"}, ``embed_ms``); several texts, a list of them. ``audio_at`` (instead of ``at``):
        the sound of ``video`` at that time, among the database's vectors of sound (an audio
        model's, chosen without ``model`` where it holds one), as ``similar --audio-at``."""
        if text is not None:
            if image is not None or video is not None:
                raise UsageError("similar: give text, image or video, not several",
                                 C.ERR_INVALID)
            return self._similar_texts(text, k, exact, probe, index, model, layer, models_dir,
                                       device, precision)
        if (image is None) == (video is None):
            raise UsageError("similar: give image=FILE, or video=FILE (and at=SECONDS)",
                             C.ERR_INVALID)
        if audio_at is not None:
            if at is not None or video is None:
                raise UsageError("similar: audio_at is a time into video's sound (not with at)",
                                 C.ERR_INVALID)
            at = audio_at
        if video is not None and at is None:  # a whole clip: where its footage is
            return self.matches(video=video, k=k, exact=exact, probe=probe, index=index,
                                model=model, layer=layer, models_dir=models_dir, device=device,
                                precision=precision, fps=fps)
        opts = _Options(model=model, layer=layer, models_dir=models_dir, device=device,
                        precision=precision)
        stats = C.SimilarStats()
        q = C.SimilarQuery()
        q.image, q.video = _bytes(image), _bytes(video)
        q.at = _seconds("at", at) if at is not None else 0.0
        q.sound = 1 if audio_at is not None else 0
        q.k = _count("k", k, 1, 100000)
        q.exact = 1 if exact else 0
        q.probe = _count("probe", probe, 0, 1 << 30)
        q.index = _bytes(index)
        q.stats = ctypes.pointer(stats)
        hits = []

        def on_hit(u, n):
            n = n.contents
            hits.append({"rank": len(hits) + 1, "similarity": round(n.similarity, 6),
                         "t": round(n.t, 6), "frame_index": n.frame_index, "pts": n.pts,
                         "path": _text(n.path)})

        cb = C.NEIGHBOUR_FN(on_hit)
        src = C.Neighbour()
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_similar(self._b, ctypes.byref(opts.config), ctypes.byref(q), cb, None,
                             ctypes.byref(src), err, len(err))
        if rc < 0:
            query = image if image is not None else video
            bad_query = rc == C.ERR_DECODE or (rc == C.ERR_IO and not os.access(query, os.R_OK))
            raise _error(rc, err.value, InputError if bad_query else StartError)
        return {"neighbours": hits,
                "query": {"stored": bool(src.stored), "t": round(src.t, 6),
                          "frame_index": src.frame_index, "path": _text(src.path)},
                "search": stats.search.decode(), "search_ms": round(stats.search_ms, 3),
                "index": stats.index.decode() or None, "candidates": stats.candidates,
                "weights": stats.weights.decode() or None}


    def _similar_texts(self, text, k, exact, probe, index, model, layer, models_dir, device,
                       precision):
        texts = [text] if isinstance(text, (str, bytes)) else list(text)
        if not texts:
            raise UsageError("similar: no text", C.ERR_INVALID)
        encoded = [_text_bytes(t, query=True) for t in texts]
        opts = _Options(model=model, layer=layer, models_dir=models_dir, device=device,
                        precision=precision)
        stats = (C.SimilarStats * len(texts))()
        arr = (ctypes.c_char_p * len(texts))(*encoded)
        q = C.SimilarQuery()
        q.k = _count("k", k, 1, 100000)
        q.exact = 1 if exact else 0
        q.probe = _count("probe", probe, 0, 1 << 30)
        q.index = _bytes(index)
        q.stats = ctypes.cast(stats, ctypes.POINTER(C.SimilarStats))
        q.texts = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
        q.n_texts = len(texts)
        hits = [[] for _ in texts]

        def on_hit(u, n):
            n = n.contents
            h = hits[n.query]
            h.append({"rank": len(h) + 1, "similarity": round(n.similarity, 6),
                      "t": round(n.t, 6), "frame_index": n.frame_index, "pts": n.pts,
                      "path": _text(n.path)})

        cb = C.NEIGHBOUR_FN(on_hit)
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_similar(self._b, ctypes.byref(opts.config), ctypes.byref(q), cb, None,
                             None, err, len(err))
        if rc < 0:
            raise _error(rc, err.value, UsageError if rc == C.ERR_INVALID else StartError)
        docs = [{"neighbours": hits[i], "query": {"text": os.fsdecode(encoded[i])},
                 "embed_ms": round(stats[i].embed_ms, 3), "search": stats[i].search.decode(),
                 "search_ms": round(stats[i].search_ms, 3),
                 "index": stats[i].index.decode() or None, "candidates": stats[i].candidates,
                 "weights": stats[i].weights.decode() or None}
                for i in range(len(texts))]
        return docs[0] if isinstance(text, (str, bytes)) else docs

    def matches(self, video: Optional[PathLike] = None, min_duration: float = 0,
                min_similarity: float = 0, k: int = 0, exact: bool = False, probe: int = 0,
                index: Optional[PathLike] = None, model: Optional[str] = None,
                layer: Optional[str] = None, models_dir: Optional[PathLike] = None,
                device: str = "cpu", precision: str = "f32",
                fps: Optional[float] = None) -> Dict[str, Any]:
        """Reused footage: pairs of files where one shows footage of the other (all of the
        database's files, or ``video``'s footage elsewhere), as the ``vidfeat matches --json``
        document (``matches``: a, a_start, a_end, b, b_start, b_end, score, speed, frames;
        ``search``, ``search_ms``, ``align_ms``, ``index``, ``frames``, ``flat``,
        ``flat_known``, ``pairs``, ``weights`` as similar's). ``min_duration`` seconds (0: 2), ``min_similarity`` (0:
        0.8), ``k`` at most that many matches (0: all); a clip not in the database is sampled
        at ``fps`` (default every frame) with the database's model."""
        opts = _Options(model=model, layer=layer, models_dir=models_dir, device=device,
                        precision=precision, fps=fps)
        stats = C.MatchStats()
        q = C.MatchQuery()
        q.video = _bytes(video)
        q.min_duration = _seconds("min_duration", min_duration)
        if not 0 <= min_similarity <= 1:
            raise UsageError("min_similarity must be from 0 to 1", C.ERR_INVALID)
        q.min_similarity = float(min_similarity)
        q.exact = 1 if exact else 0
        q.probe = _count("probe", probe, 0, 1 << 30)
        q.index = _bytes(index)
        q.stats = ctypes.pointer(stats)
        limit = _count("k", k, 0, 1 << 30)
        found = []

        def on_match(u, m):
            m = m.contents
            if limit and len(found) >= limit:
                return
            found.append({"a": _text(m.a), "a_start": round(m.a_start, 3),
                          "a_end": round(m.a_end, 3), "b": _text(m.b),
                          "b_start": round(m.b_start, 3), "b_end": round(m.b_end, 3),
                          "score": round(m.score, 6), "speed": round(m.speed, 3),
                          "frames": m.frames})

        cb = C.MATCH_FN(on_match)
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_matches(self._b, ctypes.byref(opts.config), ctypes.byref(q), cb, None, err,
                             len(err))
        if rc < 0:
            bad_query = video is not None and (
                rc == C.ERR_DECODE or (rc == C.ERR_IO and not os.access(video, os.R_OK)))
            raise _error(rc, err.value, InputError if bad_query else StartError)
        return {"matches": found, "search": stats.search.decode(),
                "search_ms": round(stats.search_ms, 3), "align_ms": round(stats.align_ms, 3),
                "index": stats.index.decode() or None, "frames": stats.frames,
                "flat": stats.flat, "flat_known": bool(stats.flat_known), "pairs": stats.pairs,
                "weights": stats.weights.decode() or None}


class TextEncoder:
    """A CLIP model's text side: its tokenizer (the ids OpenAI's reference gives) and its
    text tower, embedding texts into the space of the image tower's ``embed`` vectors.

    TextEncoder(model="clip_vit_b32", batch=32, precision="f32", device="cpu", threads=0,
    models_dir=None): ``model`` names a CLIP model (its manifest names the text tower and the
    vocabulary). ``encoder(texts)`` gives len(texts) x dim float32 (as the tower gives them,
    not normalised); ``tokenize(text)`` the context's ids (int64, zeros after the end token).
    """

    def __init__(self, model: str = "clip_vit_b32", batch: int = 32, precision: str = "f32",
                 device: str = "cpu", threads: int = 0,
                 models_dir: Optional[PathLike] = None) -> None:
        self._opts = _Options(model=model, batch=batch, precision=precision, device=device,
                              threads=threads, models_dir=models_dir)
        self._te = ctypes.c_void_p()
        rc = C.vf_text_encoder_create(ctypes.byref(self._opts.config), ctypes.byref(self._te))
        if rc < 0:
            msg = C.vf_text_encoder_errmsg(self._te) if self._te.value else b"out of memory"
            self.close()
            raise _error(rc, msg)
        info = C.TextInfo()
        C.vf_text_encoder_info(self._te, ctypes.byref(info))
        self.model, self.path = _text(info.name), _text(info.path)
        self.vocab = _text(info.vocab)
        self.dim, self.context, self.vocab_size = info.dim, info.context, info.vocab_size

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Free the text tower (and its memory) now."""
        if getattr(self, "_te", None) is not None and self._te.value:
            C.vf_text_encoder_free(ctypes.byref(self._te))
        self._te = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if self._te is None or not self._te.value:
            raise Error("the text encoder is closed", C.ERR_INVALID)
        return self._te

    def _fail(self, rc):
        raise _error(rc, C.vf_text_encoder_errmsg(self._te))

    def tokenize(self, text: str) -> np.ndarray:
        """The context's token ids of one text (int64; zeros after the end token)."""
        te = self._handle()
        ids = np.zeros(self.context, np.int64)
        n, cut = ctypes.c_int(), ctypes.c_int()
        rc = C.vf_text_tokenize(te, _text_bytes(text), ids.ctypes.data, ctypes.byref(n),
                                ctypes.byref(cut))
        if rc < 0:
            self._fail(rc)
        return ids

    def __call__(self, texts: Union[str, Sequence[str]]) -> np.ndarray:
        """The texts' embeddings: len(texts) x dim float32 (one text: 1 x dim)."""
        te = self._handle()
        if isinstance(texts, (str, bytes)):
            texts = [texts]
        encoded = [_text_bytes(t, query=True) for t in texts]
        out = np.zeros((len(encoded), self.dim), np.float32)
        if not encoded:
            return out
        arr = (ctypes.c_char_p * len(encoded))(*encoded)
        rc = C.vf_text_encode(te, arr, len(encoded), out.ctypes.data)
        if rc < 0:
            self._fail(rc)
        return out


def _text_bytes(text, query=False):
    """A text as the C library takes it: UTF-8 bytes (str), or bytes as given. A query (a text
    to embed or search for) is checked as the command checks it (vf_text_check): UsageError
    when it is not UTF-8, empty or only white space."""
    if isinstance(text, bytes):
        b = text
    elif isinstance(text, str):
        b = text.encode("utf-8", "surrogatepass")
    else:
        raise UsageError("a text must be str, not %s" % type(text).__name__, C.ERR_INVALID)
    if query:
        why = ctypes.create_string_buffer(256)
        if C.vf_text_check(b, why, len(why)) < 0:
            raise UsageError("text %r %s" % (text, _text(why.value)), C.ERR_INVALID)
    return b


def embed_text(texts: Union[str, Sequence[str]], model: str = "clip_vit_b32",
               **options: Any) -> np.ndarray:
    """The texts' embeddings by a CLIP model's text tower (TextEncoder's options)."""
    with TextEncoder(model, **options) as te:
        return te(texts)


def open(target: PathLike) -> Database:
    """Open a database (a path, or a postgresql:// URI) to read: a Database."""
    return Database(target)
