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
# The package by concern: _options (a run's options, written once), _extract (files to
# vectors), _database (reading an archive: its documents are the C library's), _text (CLIP's
# text side); _common (errors, the logger, strings) and _capi (libvidfeat declared) beneath.
from . import _capi as C
from ._common import Error, InputError, PathLike, StartError, UsageError, logger  # noqa: F401
from ._database import Database, open, record_bench
from ._extract import (Extractor, Features, FileResult, extract, frames, input_name, inputs,
                       run)
from ._text import TextEncoder, _text_bytes, embed_text  # noqa: F401

__all__ = ["extract", "frames", "Extractor", "Features", "open", "Database", "run", "inputs",
           "input_name", "record_bench",
           "TextEncoder", "embed_text",
           "PathLike",
           "FileResult", "Error", "InputError", "UsageError", "StartError", "__version__"]

__version__ = C.vf_version().decode()
library_path = C.library_path  # the libvidfeat.so this package runs
