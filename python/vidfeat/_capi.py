"""The C library through ctypes: libvidfeat.so found, its structures and functions declared.

Private to the package: everything here mirrors include/vidfeat.h (the structures field by
field, in order; a field appended there is appended here). The layout is checked when the
library loads: vf_config_default()'s values must read back as the header documents them.

Calls into the library release the GIL (ctypes does so for every CDLL call); callbacks the
library makes from its own threads take it for the time they run.
"""
import ctypes
import ctypes.util
import os

from . import _paths

c_char_p = ctypes.c_char_p
c_int = ctypes.c_int
c_int64 = ctypes.c_int64
c_double = ctypes.c_double
c_float = ctypes.c_float
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
POINTER = ctypes.POINTER
Structure = ctypes.Structure

# vf_status (values are stable in the header)
OK = 0
EOF = 1
ERR_INVALID = -1
ERR_NOMEM = -2
ERR_IO = -3
ERR_DECODE = -4
ERR_MODEL = -5
ERR_UNSUPPORTED = -6
ERR_BACKEND = -7
ERR_NO_DEVICE = -8
ERR_NOT_BUILT = -9
ERR_STORE = -10
ERR_CANCELLED = -11
ERR_INTERNAL = -12
ERR_LEASE = -13
ERR_DENIED = -14

LOG_ERROR, LOG_WARNING, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3


class TextInfo(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("path", c_char_p),
        ("vocab", c_char_p),
        ("backend", c_char_p),
        ("precision", c_int),
        ("batch_size", c_int),
        ("context", c_int),
        ("vocab_size", c_int),
        ("dim", c_int),
        ("weights", c_int),
    ]


class Config(Structure):
    _fields_ = [
        ("model", c_char_p),
        ("models_dir", c_char_p),
        ("layer", c_char_p),
        ("backend", c_char_p),
        ("precision", c_int),
        ("batch_size", c_int),
        ("n_threads", c_int),
        ("input_size", c_int),
        ("mean", c_float * 3),
        ("std", c_float * 3),
        ("db_path", c_char_p),
        ("sample_fps", c_double),
        ("every", c_int),
        ("keyframes", c_int),
        ("start", c_double),
        ("duration", c_double),
        ("max_frames", c_int64),
        ("force", c_int),
        ("store_f16", c_int),
        ("queue_depth", c_int),
        ("decode_threads", c_int),
        ("stall_timeout", c_double),
        ("no_overlap", c_int),
        ("int8_scales", c_char_p),
        ("calibration_frames", c_int64),
        ("recalibrate", c_int),
        ("hwdec", c_char_p),
        ("convert_threads", c_int),
        ("decoders", c_int),
        ("root", c_char_p),
        ("lease_s", c_double),
        ("max_attempts", c_int),
        ("follow_links_outside", c_int),
        ("max_pixels", c_int64),
        ("max_streams", c_int),
        ("window", c_int),
        ("window_stride", c_int),
        ("max_duration", c_double),
        ("shots", c_int),
        ("shot_threshold", c_double),
        ("shot_min_frames", c_int),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("path", c_char_p),
        ("layer", c_char_p),
        ("tensor", c_char_p),
        ("backend", c_char_p),
        ("precision", c_int),
        ("batch_size", c_int),
        ("input_size", c_int),
        ("feature_dim", c_int),
        ("pooled", c_int),
        ("channel_order", c_int),
        ("resize", c_int),
        ("resize_short", c_int),
        ("mean", c_float * 3),
        ("std", c_float * 3),
        ("device", c_char_p),
        ("int8_scales", c_char_p),
        ("calibration_frames", c_int64),
        ("weights", c_int),
        ("text_tower", c_char_p),
        ("frames", c_int),
        ("resize_to", c_int * 2),
        ("audio_frames", c_int),
        ("audio_bands", c_int),
        ("sample_rate", c_int),
        ("precision_why", c_char_p),
    ]


class FileResult(Structure):
    _fields_ = [
        ("path", c_char_p),
        ("status", c_int),
        ("skipped", c_int),
        ("error", c_char_p),
        ("note", c_char_p),
        ("frames", c_int64),
        ("seconds", c_double),
        ("decode_fps", c_double),
        ("convert_fps", c_double),
        ("infer_fps", c_double),
        ("store_fps", c_double),
        ("width", c_int),
        ("height", c_int),
        ("rotation", c_int),
        ("codec", c_char_p),
        ("hwdec", c_char_p),
    ]


class BatchView(Structure):
    _fields_ = [
        ("file", c_int),
        ("path", c_char_p),
        ("n", c_int),
        ("dim", c_int),
        ("features", POINTER(c_float)),
        ("frame_index", POINTER(c_int64)),
        ("pts", POINTER(c_int64)),
        ("t", POINTER(c_double)),
        ("t_end", POINTER(c_double)),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_char_p, c_int64, c_int64)
FILE_DONE_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, POINTER(FileResult))
BATCH_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(BatchView))


class RunHooks(Structure):
    _fields_ = [
        ("user", c_void_p),
        ("progress", PROGRESS_FN),
        ("file_done", FILE_DONE_FN),
        ("batch", BATCH_FN),
    ]


class DbSummary(Structure):
    _fields_ = [
        ("database", c_char_p),
        ("engine", c_char_p),
        ("schema", c_int),
        ("videos", c_int64),
        ("models", c_int64),
        ("done", c_int64),
        ("failed", c_int64),
        ("running", c_int64),
        ("vectors", c_int64),
        ("pending", c_int64),
    ]


class DbExtraction(Structure):
    _fields_ = [
        ("path", c_char_p),
        ("status", c_char_p),
        ("model", c_char_p),
        ("layer", c_char_p),
        ("dtype", c_char_p),
        ("sampling", c_char_p),
        ("error", c_char_p),
        ("dim", c_int),
        ("frames", c_int64),
        ("infer_fps", c_double),
        ("weights", c_char_p),
    ]


class DbBenchRun(Structure):
    _fields_ = [
        ("started_at", c_char_p),
        ("host", c_char_p),
        ("device", c_char_p),
        ("precision", c_char_p),
        ("mode", c_char_p),
        ("model", c_char_p),
        ("device_name", c_char_p),
        ("batch_size", c_int),
        ("end_to_end_fps", c_double),
        ("infer_fps", c_double),
    ]


SUMMARY_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(DbSummary))
EXTRACTION_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(DbExtraction))
BENCH_RUN_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(DbBenchRun))


class DbVisitor(Structure):
    _fields_ = [
        ("user", c_void_p),
        ("summary", SUMMARY_FN),
        ("extraction", EXTRACTION_FN),
        ("run", BENCH_RUN_FN),
    ]


class SimilarStats(Structure):
    _fields_ = [
        ("search", ctypes.c_char * 160),
        ("index", ctypes.c_char * 4096),
        ("search_ms", c_double),
        ("candidates", c_int64),
        ("embed_ms", c_double),
        ("weights", ctypes.c_char * 32),
    ]


class SimilarQuery(Structure):
    _fields_ = [
        ("image", c_char_p),
        ("video", c_char_p),
        ("at", c_double),
        ("k", c_int),
        ("exact", c_int),
        ("probe", c_int),
        ("index", c_char_p),
        ("stats", POINTER(SimilarStats)),
        ("texts", POINTER(c_char_p)),
        ("n_texts", c_int),
        ("sound", c_int),
    ]


class Neighbour(Structure):
    _fields_ = [
        ("path", c_char_p),
        ("frame_index", c_int64),
        ("pts", c_int64),
        ("t", c_double),
        ("similarity", c_double),
        ("stored", c_int),
        ("query", c_int),
    ]


NEIGHBOUR_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(Neighbour))


class DbModel(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("layer", c_char_p),
        ("file_sha256", c_char_p),
        ("preprocessing", c_char_p),
        ("dim", c_int),
        ("f16", c_int),
        ("vectors", c_int64),
        ("frames", c_int),
    ]


class DbShot(Structure):
    _fields_ = [
        ("first_frame", c_int64),
        ("last_frame", c_int64),
        ("start", c_double),
        ("end", c_double),
    ]


class DbVector(Structure):
    _fields_ = [
        ("path", c_char_p),
        ("sampling", c_char_p),
        ("frames", c_int64),
        ("frame_index", c_int64),
        ("pts", c_int64),
        ("t", c_double),
        ("vec", POINTER(c_float)),
        ("t_end", c_double),
        ("shots", POINTER(DbShot)),
        ("n_shots", c_int),
    ]


MODEL_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(DbModel))
VECTOR_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(DbVector))


class DbIndexInfo(Structure):
    _fields_ = [
        ("path", c_char_p),
        ("model", c_char_p),
        ("layer", c_char_p),
        ("kind", c_char_p),
        ("built_at", c_char_p),
        ("host", c_char_p),
        ("vectors", c_int64),
        ("files", c_int64),
        ("present", c_int),
        ("problem", c_char_p),
        ("lacks_vectors", c_int64),
        ("lacks_files", c_int64),
        ("gone_vectors", c_int64),
        ("gone_files", c_int64),
    ]


INDEX_INFO_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(DbIndexInfo))

SAY_FN = ctypes.CFUNCTYPE(None, c_void_p, c_char_p)


class BenchRecord(Structure):
    """vf_bench_record"""
    _fields_ = [("device", c_char_p), ("device_name", c_char_p), ("backend", c_char_p),
                ("model", c_char_p), ("layer", c_char_p), ("precision", c_char_p),
                ("mode", c_char_p), ("input", c_char_p), ("batch_size", c_int),
                ("threads", c_int), ("frames", c_int64), ("end_to_end_fps", c_double),
                ("decode_fps", c_double), ("convert_fps", c_double), ("infer_fps", c_double),
                ("store_fps", c_double), ("peak_rss_mb", c_double)]


class InputsOpts(Structure):
    """vf_inputs_opts"""
    _fields_ = [("root", c_char_p), ("follow_links_outside", c_int), ("files_from", c_char_p),
                ("nul_separated", c_int), ("shard_k", c_int), ("shard_n", c_int),
                ("verbose", c_int), ("say", SAY_FN), ("user", c_void_p)]

class MatchStats(Structure):
    _fields_ = [
        ("search", ctypes.c_char * 160),
        ("index", ctypes.c_char * 4096),
        ("frames", c_int64),
        ("flat", c_int64),
        ("flat_known", c_int),
        ("pairs", c_int64),
        ("search_ms", c_double),
        ("align_ms", c_double),
        ("weights", ctypes.c_char * 32),
    ]


class MatchQuery(Structure):
    _fields_ = [
        ("video", c_char_p),
        ("min_duration", c_double),
        ("min_similarity", c_double),
        ("exact", c_int),
        ("probe", c_int),
        ("index", c_char_p),
        ("stats", POINTER(MatchStats)),
    ]


class Match(Structure):
    _fields_ = [
        ("a", c_char_p),
        ("b", c_char_p),
        ("a_start", c_double),
        ("a_end", c_double),
        ("b_start", c_double),
        ("b_end", c_double),
        ("score", c_double),
        ("speed", c_double),
        ("frames", c_int64),
        ("a_length", c_double),
        ("b_length", c_double),
    ]


MATCH_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(Match))

LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_char_p)


def _candidates():
    """Where libvidfeat.so may be, most specific first."""
    env = os.environ.get("VIDFEAT_LIBRARY")
    if env:
        yield env  # only this one when it is set
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if _paths.LIBRARY:
        # relative to this package where it was installed or configured with the build tree
        yield os.path.normpath(os.path.join(here, _paths.LIBRARY))
    found = ctypes.util.find_library("vidfeat")
    if found:
        yield found


def _load():
    # The network's threads wait passively at each step, as the command's do (src/cli/main.c):
    # OpenMP reads the policy when it is first loaded, which for most programs is now (one that
    # loaded it before, through another library, keeps what it had). A policy set stays.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(str(e))
    raise ImportError("vidfeat: libvidfeat.so not found (%s); build the project or set "
                      "VIDFEAT_LIBRARY to the library's path" % ("; ".join(errors) or "nowhere"))


lib, library_path = _load()


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


ERRBUF = c_char_p  # a ctypes.create_string_buffer passed where the header has char *errbuf

vf_config_default = _fn("vf_config_default", Config)
vf_extractor_create = _fn("vf_extractor_create", c_int, POINTER(Config), POINTER(c_void_p))
vf_extractor_info = _fn("vf_extractor_info", c_int, c_void_p, POINTER(ModelInfo))
vf_extractor_infer = _fn("vf_extractor_infer", c_int, c_void_p, c_void_p, c_int, c_void_p)
vf_extractor_infer_rgb = _fn("vf_extractor_infer_rgb", c_int, c_void_p, c_void_p, c_int, c_int,
                             c_int, c_void_p)
vf_extractor_errmsg = _fn("vf_extractor_errmsg", c_char_p, c_void_p)
vf_extractor_free = _fn("vf_extractor_free", None, POINTER(c_void_p))
vf_pipeline_create = _fn("vf_pipeline_create", c_int, POINTER(Config), POINTER(c_void_p))
vf_pipeline_run = _fn("vf_pipeline_run", c_int, c_void_p, POINTER(c_char_p), c_int,
                      POINTER(RunHooks))
vf_pipeline_cancel = _fn("vf_pipeline_cancel", None, c_void_p)
vf_pipeline_info = _fn("vf_pipeline_info", c_int, c_void_p, POINTER(ModelInfo))
vf_pipeline_errmsg = _fn("vf_pipeline_errmsg", c_char_p, c_void_p)
vf_pipeline_free = _fn("vf_pipeline_free", None, POINTER(c_void_p))
vf_db_inspect = _fn("vf_db_inspect", c_int, c_char_p, POINTER(DbVisitor), ERRBUF, c_size_t)
vf_db_indexes = _fn("vf_db_indexes", c_int, c_char_p, INDEX_INFO_FN, c_void_p, ERRBUF, c_size_t)
vf_db_similar = _fn("vf_db_similar", c_int, c_char_p, POINTER(Config), POINTER(SimilarQuery),
                    NEIGHBOUR_FN, c_void_p, POINTER(Neighbour), ERRBUF, c_size_t)
vf_db_read_vectors = _fn("vf_db_read_vectors", c_int, c_char_p, POINTER(Config), MODEL_FN,
                         VECTOR_FN, c_void_p, ERRBUF, c_size_t)
vf_db_matches = _fn("vf_db_matches", c_int, c_char_p, POINTER(Config), POINTER(MatchQuery),
                    MATCH_FN, c_void_p, ERRBUF, c_size_t)
vf_text_encoder_create = _fn("vf_text_encoder_create", c_int, POINTER(Config), POINTER(c_void_p))
vf_text_encoder_info = _fn("vf_text_encoder_info", c_int, c_void_p, POINTER(TextInfo))
vf_text_tokenize = _fn("vf_text_tokenize", c_int, c_void_p, c_char_p, c_void_p, POINTER(c_int),
                       POINTER(c_int))
vf_text_encode = _fn("vf_text_encode", c_int, c_void_p, POINTER(c_char_p), c_int, c_void_p)
vf_text_encode_ids = _fn("vf_text_encode_ids", c_int, c_void_p, c_void_p, c_int, c_void_p)
vf_text_encoder_errmsg = _fn("vf_text_encoder_errmsg", c_char_p, c_void_p)
vf_text_encoder_free = _fn("vf_text_encoder_free", None, POINTER(c_void_p))
vf_text_check = _fn("vf_text_check", c_int, c_char_p, ERRBUF, c_size_t)
vf_probe_media = _fn("vf_probe_media", c_int, c_char_p)
vf_inputs_collect = _fn("vf_inputs_collect", c_int, POINTER(c_char_p), c_int,
                        POINTER(InputsOpts), POINTER(POINTER(c_char_p)), POINTER(c_int),
                        POINTER(c_int))
vf_inputs_free = _fn("vf_inputs_free", None, POINTER(c_char_p), c_int)
vf_db_add_bench = _fn("vf_db_add_bench", c_int, c_char_p, POINTER(BenchRecord), ERRBUF,
                      c_size_t)
vf_input_name = _fn("vf_input_name", c_int, c_char_p, c_char_p, c_char_p, c_size_t, ERRBUF,
                    c_size_t)
vf_parse_time = _fn("vf_parse_time", c_int, c_char_p, POINTER(c_double))
vf_status_str = _fn("vf_status_str", c_char_p, c_int)
vf_version = _fn("vf_version", c_char_p)
vf_precision_parse = _fn("vf_precision_parse", c_int, c_char_p, POINTER(c_int))
vf_precision_str = _fn("vf_precision_str", c_char_p, c_int)
vf_weights_str = _fn("vf_weights_str", c_char_p, c_int)
vf_set_log_callback = _fn("vf_set_log_callback", None, LOG_FN, c_void_p, c_int)

# vf_doc_kind: the records whose JSON text vf_doc_json gives
DOC_NEIGHBOUR, DOC_MATCH, DOC_SUMMARY, DOC_EXTRACTION, DOC_BENCH_RUN, DOC_INDEX, DOC_MATCHES = \
    range(7)
vf_doc_json = _fn("vf_doc_json", c_void_p, c_int, c_void_p, c_int)
vf_doc_similar_json = _fn("vf_doc_similar_json", c_void_p, POINTER(Neighbour), c_char_p,
                          POINTER(SimilarStats))
vf_doc_free = _fn("vf_doc_free", None, c_void_p)


def doc_text(text):
    """The text a vf_doc_* call made (a c_void_p result), as bytes, freed; None for NULL."""
    if not text:
        return None
    try:
        return ctypes.string_at(text)
    finally:
        vf_doc_free(text)


def _check_layout():
    """The header's documented defaults, read through our structure: a field out of place
    (a header changed without this file) shows here instead of as wrong options later."""
    c = vf_config_default()
    if (c.model != b"inception_v3" or c.backend != b"auto" or c.batch_size != 32
            or c.stall_timeout != 60.0 or c.lease_s != 60.0 or c.max_attempts != 3
            or c.follow_links_outside != 0):
        raise ImportError("vidfeat: %s does not match this package's declarations of "
                          "vidfeat.h (another version?)" % library_path)


_check_layout()
