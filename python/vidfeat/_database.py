"""Reading a database (Database: info, frames, similar, matches; its documents are the C
library's, the command's --json ones) and recording a benchmark's result in one."""
import ctypes
import json
import os
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from . import _capi as C
from ._common import InputError, PathLike, StartError, UsageError, _bytes, _error, _text
from ._extract import Features
from ._options import _Options, _count, _seconds
from ._text import _text_bytes


def _record(kind, record, rank=0):
    """A record a callback gives, as the JSON text the command's --json writes for it (the C
    library's builder): bytes, or None when out of memory (raised after the call: a callback
    cannot raise through C)."""
    return C.doc_text(C.vf_doc_json(kind, ctypes.cast(record, ctypes.c_void_p), rank))


def _loads(text):
    if text is None:
        raise MemoryError("vidfeat: out of memory")
    return json.loads(text)

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


class Database:
    """A vidfeat database (an SQLite file, or a PostgreSQL URI), read-only: vidfeat.open()."""

    def __init__(self, target):
        self.target = target
        self._b = _bytes(target, "the database")
        if "://" not in os.fsdecode(target) and not os.path.exists(target):
            raise StartError("%s: no such database" % os.fsdecode(target), C.ERR_STORE)

    def __repr__(self):
        return "<vidfeat.Database %s>" % os.fsdecode(self.target)

    def info(self, summary: bool = False) -> Dict[str, Any]:
        """What the database holds: the ``vidfeat info --json`` document, as a dict."""
        doc = {}
        ext, runs = [], []

        def on_summary(u, r):
            doc["summary"] = _record(C.DOC_SUMMARY, r)

        def on_extraction(u, r):
            ext.append(_record(C.DOC_EXTRACTION, r))

        def on_run(u, r):
            runs.append(_record(C.DOC_BENCH_RUN, r))

        v = C.DbVisitor()
        cbs = [C.SUMMARY_FN(on_summary), C.EXTRACTION_FN(on_extraction), C.BENCH_RUN_FN(on_run)]
        v.summary = cbs[0]
        if not summary:
            v.extraction, v.run = cbs[1], cbs[2]
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_inspect(self._b, ctypes.byref(v), err, len(err))
        if rc < 0:
            raise _error(rc, err.value)
        indexes = []
        cb = C.INDEX_INFO_FN(lambda u, r: indexes.append(_record(C.DOC_INDEX, r)))
        rc = C.vf_db_indexes(self._b, cb, None, err, len(err))
        if rc < 0:
            raise _error(rc, err.value)
        doc["summary"] = _loads(doc.get("summary"))
        if not summary:
            doc["extractions"] = [_loads(t) for t in ext]
            doc["benchmark_runs"] = [_loads(t) for t in runs]
        doc["indexes"] = [_loads(t) for t in indexes]
        return doc

    def frames(self, model: Optional[str] = None, layer: Optional[str] = None,
               path: Optional[PathLike] = None) -> Features:
        """The stored vectors of one model and layer (the database's, or the one model/layer
        choose when it holds several), done files only, as a Features whose ``path`` and
        ``sampling`` are arrays too (one entry per vector; file names as os.fsdecode gives
        them). ``path``: one file's only. Files in byte order, each by frame index: the rows
        ``vidfeat export`` writes. ``shots``: a dict from each file (as ``path`` has it) whose
        shots ``--shots`` found to a float64 array [n, 4] of first frame, last frame, start and
        end seconds (docs/shots.md)."""
        opts = _Options(model=model, layer=layer)
        want = _bytes(path) if path is not None else None
        st = {"dim": 0, "n": 0, "model": None, "layer": None, "windows": False}
        cols = {}
        names, samplings = [], []
        shots = {}

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
            if v.n_shots and v.path not in shots:
                shots[v.path] = np.array([(s.first_frame, s.last_frame, s.start, s.end)
                                          for s in v.shots[:v.n_shots]], dtype=np.float64)
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
        f.shots = {decoded.setdefault(b, os.fsdecode(b)): a for b, a in shots.items()}
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
        cb = C.NEIGHBOUR_FN(lambda u, n: hits.append(_record(C.DOC_NEIGHBOUR, n, len(hits) + 1)))
        src = C.Neighbour()
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_similar(self._b, ctypes.byref(opts.config), ctypes.byref(q), cb, None,
                             ctypes.byref(src), err, len(err))
        if rc < 0:
            query = image if image is not None else video
            bad_query = rc == C.ERR_DECODE or (rc == C.ERR_IO and not os.access(query, os.R_OK))
            raise _error(rc, err.value, InputError if bad_query else StartError)
        doc = _loads(C.doc_text(C.vf_doc_similar_json(ctypes.byref(src), None,
                                                      ctypes.byref(stats))))
        doc["neighbours"] = [_loads(t) for t in hits]
        return doc

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
            h = hits[n.contents.query]
            h.append(_record(C.DOC_NEIGHBOUR, n, len(h) + 1))

        cb = C.NEIGHBOUR_FN(on_hit)
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_similar(self._b, ctypes.byref(opts.config), ctypes.byref(q), cb, None,
                             None, err, len(err))
        if rc < 0:
            raise _error(rc, err.value, UsageError if rc == C.ERR_INVALID else StartError)
        docs = []
        for i in range(len(texts)):
            d = _loads(C.doc_text(C.vf_doc_similar_json(None, encoded[i], ctypes.byref(stats[i]))))
            d["neighbours"] = [_loads(t) for t in hits[i]]
            docs.append(d)
        return docs[0] if isinstance(text, (str, bytes)) else docs

    def matches(self, video: Optional[PathLike] = None, min_duration: float = 0,
                min_similarity: float = 0, k: int = 0, exact: bool = False, probe: int = 0,
                index: Optional[PathLike] = None, model: Optional[str] = None,
                layer: Optional[str] = None, models_dir: Optional[PathLike] = None,
                device: str = "cpu", precision: str = "f32",
                fps: Optional[float] = None) -> Dict[str, Any]:
        """Reused footage: pairs of files where one shows footage of the other (all of the
        database's files, or ``video``'s footage elsewhere), as the ``vidfeat matches --json``
        document (``matches``: a, a_start, a_end, b, b_start, b_end, score, speed, frames,
        a_length, b_length;
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
            if not limit or len(found) < limit:
                found.append(_record(C.DOC_MATCH, m))

        cb = C.MATCH_FN(on_match)
        err = ctypes.create_string_buffer(1024)
        rc = C.vf_db_matches(self._b, ctypes.byref(opts.config), ctypes.byref(q), cb, None, err,
                             len(err))
        if rc < 0:
            bad_query = video is not None and (
                rc == C.ERR_DECODE or (rc == C.ERR_IO and not os.access(video, os.R_OK)))
            raise _error(rc, err.value, InputError if bad_query else StartError)
        doc = _loads(_record(C.DOC_MATCHES, ctypes.pointer(stats)))
        doc["matches"] = [_loads(t) for t in found]
        return doc


def open(target: PathLike) -> Database:
    """Open a database (a path, or a postgresql:// URI) to read: a Database."""
    return Database(target)
