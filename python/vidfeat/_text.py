"""A CLIP model's text side from Python: TextEncoder (tokenizer and text tower), embed_text,
and texts as the C library takes them."""
import ctypes
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _capi as C
from ._common import Error, PathLike, UsageError, _error, _text
from ._options import _Options

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
