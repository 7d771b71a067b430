"""What the command-line tests share: the skip status, failing with one line, and reading the
vectors of a vidfeat database back. Imported by the test scripts beside it (their own directory
is first on sys.path)."""
import os
import sqlite3
import sys

SKIP = 77  # ctest's SKIP_RETURN_CODE


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def features(db, done_only=False):
    """{(file name, frame_index): (pts, t, float32 vector)} of the stored rows (of finished
    extractions only with done_only)."""
    import numpy as np  # only the tests that compare vectors need numpy
    con = sqlite3.connect(db)
    out = {}
    for path, index, pts, t, blob in con.execute(
            "SELECT v.path, f.frame_index, f.pts, f.t, f.vec FROM features f JOIN extractions e "
            "ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id" +
            (" WHERE e.status = 'done'" if done_only else "")):
        out[(os.path.basename(path), index)] = (pts, t, np.frombuffer(blob, np.float32))
    con.close()
    return out
