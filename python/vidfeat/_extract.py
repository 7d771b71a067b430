"""Extracting: Features and FileResult, the pipeline over files (Extractor, extract, frames),
the inputs a run takes and run() into a database."""
import ctypes
import os
import queue
import threading
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi as C
from ._common import (Error, InputError, PathLike, UsageError, _bytes, _error, _file_error,
                      _text, logger)
from ._options import _Options, with_options

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
        # _h and the run in progress (its finished Event, or None), under _lock: one run at a
        # time (a second is refused, not queued: two on one pipeline hung), and close() waits
        # for a run it cancels before freeing what the run uses
        self._lock = threading.Lock()
        self._running = None
        self._closing = False
        self._callbacks = set()  # the threads callbacks run on: close() there cannot wait
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
        """Free the pipeline; a run in progress (on any thread) is cancelled and waited for
        first. From one of the run's own callbacks, the pipeline is freed when the run ends."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the lock
            return
        with lock:
            self._closing = True
            running = self._running
            h = self._h
        if running is not None:
            C.vf_pipeline_cancel(h)
            if threading.get_ident() in self._callbacks:
                return  # run() frees it as it returns
            _wait_through_interrupts(running)
        self._free()

    def _free(self):
        with self._lock:
            if self._running is None and self._h is not None and self._h.value:
                C.vf_pipeline_free(ctypes.byref(self._h))
                self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def run(self, paths, on_batch=None, on_file=None, on_progress=None):
        """vf_pipeline_run over paths (bytes) on a worker thread. Callbacks run on the
        pipeline's store thread; one that raises cancels the run and the exception is raised
        here. Returns the status; KeyboardInterrupt cancels and is raised again."""
        finished = threading.Event()
        with self._lock:
            if self._h is None or self._closing:
                raise Error("the extractor is closed", C.ERR_INVALID)
            if self._running is not None:
                raise Error("this extractor is running a file already: one run at a time (an "
                            "Extractor a thread, or finish the other first)", C.ERR_INVALID)
            self._running = finished
            h = self._h
        failure = []

        def guard(fn, cancel):
            """fn made safe to call from C: cancel (None for a callback without a result) is
            returned to stop the run, after an exception or when fn returns true."""
            def call(*args):
                self._callbacks.add(threading.get_ident())
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

        def work():
            try:  # the message read before the run counts as over (close() may free then)
                rc = C.vf_pipeline_run(h, arr, len(paths), ctypes.byref(hooks))
                status.append((rc, C.vf_pipeline_errmsg(h)))
            finally:
                with self._lock:
                    self._running = None
                closing = self._closing
                finished.set()
                if closing:
                    self._free()

        # Waited for through an Event, not Thread.join: a join that Ctrl-C interrupts can take
        # the thread for finished while it still runs (Python 3.11's bpo-45274 handling), and
        # the pipeline must not be freed under it.
        try:
            threading.Thread(target=work, name="vidfeat-run", daemon=True).start()
        except BaseException:
            with self._lock:
                self._running = None
            raise
        try:
            while not finished.wait(0.05):
                pass
        except BaseException:  # Ctrl-C (or any exception here): stop the run, then go
            C.vf_pipeline_cancel(h)
            _wait_through_interrupts(finished)
            raise
        if failure:
            raise failure[0]
        if not status:  # the worker died before it could say
            raise Error("the run ended without a status", C.ERR_INTERNAL)
        if self._closing and status[0][0] == C.ERR_CANCELLED:
            raise Error("the extractor was closed during the run", C.ERR_CANCELLED)
        return status[0]

    def cancel(self):
        with self._lock:
            if self._h is not None and self._running is not None:
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
            "precision_why": _text(info.precision_why),
            "batch_size": info.batch_size, "input_size": info.input_size,
            "feature_dim": info.feature_dim, "pooled": bool(info.pooled),
            "device": _text(info.device), "frames": info.frames,
            "weights": C.vf_weights_str(info.weights).decode()}


def _one_file(path):
    if isinstance(path, (list, tuple)):
        raise UsageError("one file expected (vidfeat.run takes several)", C.ERR_INVALID)
    return _bytes(path)


class Extractor:
    """A model opened once, for many files and for arrays of images.

    Extractor(model="inception_v3", **options): the options are the command's, by keyword
    (docs/commands.md; _options.py lists them once): ``layer``, ``fps`` at most that many
    frames a second, ``every`` every Nth frame, ``keyframes`` key frames only, ``start`` /
    ``duration`` seconds (or "1:30"), ``batch``, ``precision``, ``device`` "cpu", "ref" (the
    plain-C oracle) or "cuda", ``threads`` 0 for all cores, ``models_dir``, and any other of
    vf_config's fields by its name. Close it (or use ``with``) to free the model at once.
    """

    @with_options
    def __init__(self, model: str = "inception_v3", **options: Any) -> None:
        self._opts = _Options(model, **options)
        self._p = _Pipeline(self._opts)
        self._ex = None  # the vf_extractor for arrays, made on first use
        self._ex_lock = threading.Lock()  # one call at a time, and close() after it
        self.model, self.layer, self.dim = self._p.model, self._p.layer, self._p.dim
        self.window = self._p.window
        self.info = self._p.info

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Free the model (and its memory) now; a run in progress on another thread (extract,
        frames) is cancelled and waited for, and then raises vidfeat.Error."""
        p, self._p = getattr(self, "_p", None), None
        if p is not None:
            p.close()
        lock = getattr(self, "_ex_lock", None)
        if lock is None:
            return
        with lock:
            self._closed = True
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
            while not stop.is_set() and not p._closing:  # close() elsewhere: stop waiting
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
                if p._closing:  # nobody may be reading: end the generator with the news
                    item = Error("the extractor was closed during the run", C.ERR_CANCELLED)
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
        a = np.ascontiguousarray(a)
        with self._ex_lock:
            if getattr(self, "_closed", False):
                raise Error("the extractor is closed", C.ERR_INVALID)
            if a.shape[0] == 0:
                return out
            return self._infer(a, out)

    def _infer(self, a, out):
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


@with_options
def extract(path: PathLike, model: str = "inception_v3", **options: Any) -> Features:
    """Extract one file's feature vectors: a Features with ``t``, ``frame_index``, ``pts`` and
    ``vectors`` (numpy), the same rows the command stores for the same options. Options as
    Extractor's. For many files, open an Extractor once."""
    with Extractor(model, **options) as ex:
        return ex.extract(path)


@with_options
def frames(path: PathLike, model: str = "inception_v3", **options: Any) -> Iterator[Features]:
    """As extract, one Features per batch as it is computed (a generator)."""
    with Extractor(model, **options) as ex:
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
    args = (ctypes.c_char_p * max(len(paths), 1))(*[_bytes(p) for p in paths])
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


def input_name(path: PathLike, root: Optional[PathLike] = None) -> str:
    """The name a database records the file at ``path`` under: relative to ``root`` when given
    (machines mounting an archive at different places record its files alike), else its
    absolute path. UsageError for a path outside root."""
    buf, err = ctypes.create_string_buffer(8192), ctypes.create_string_buffer(512)
    rc = C.vf_input_name(_bytes(path), _bytes(root) if root is not None else None, buf,
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
        status, msg = pipe.run([_bytes(f) for f in files],
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
