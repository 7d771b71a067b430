"""The Python package (python/vidfeat) against the command it mirrors.

Run by ctest (python_package) with pytest, the build tree's package first on sys.path; the
environment names the rest: VF_TEST_CLI (the vidfeat command), VF_TEST_MODELS (models/, with
tiny_cnn.onnx), VF_TEST_SAMPLES, VF_TEST_SHARED (../shared: optional), VF_TEST_BUILD and
VF_TEST_SOURCE (for the install test; optional).
"""
import ctypes
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import numpy as np
import pytest

import vidfeat

CLI = os.environ["VF_TEST_CLI"]
MODELS = os.environ["VF_TEST_MODELS"]
SAMPLES = os.environ["VF_TEST_SAMPLES"]
SHARED = os.environ.get("VF_TEST_SHARED", "")
TINY = os.path.join(MODELS, "tiny_cnn.onnx")


def cli(*args, ok=True):
    r = subprocess.run([CLI, *args], capture_output=True, timeout=300)
    if ok:
        assert r.returncode == 0, (args, r.stderr.decode())
    return r


def make_clip(path, seconds=3, size="160x120", rate=25, extra=()):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=%s:rate=%d:duration=%g" % (size, rate, seconds), *extra,
                    "-pix_fmt", "yuv420p", path], check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def tmp():
    d = tempfile.mkdtemp(prefix="vf_py_")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def clip(tmp):
    return make_clip(os.path.join(tmp, "clip.mp4"))


def db_rows(db):
    """The command's stored rows in a database of one file: frame_index, pts, t, vector."""
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(DISTINCT path) FROM frames").fetchone()[0] == 1
    rows = con.execute("SELECT frame_index, pts, t, vec FROM frames "
                       "ORDER BY frame_index").fetchall()
    con.close()
    fi = np.array([r[0] for r in rows], np.int64)
    pts = np.array([r[1] for r in rows], np.int64)
    t = np.array([r[2] for r in rows], np.float64)
    vec = np.stack([np.frombuffer(r[3], "<f4") for r in rows]) if rows else np.zeros((0, 0))
    return fi, pts, t, vec


def same_as_cli(tmp, path, **opts):
    """extract() and the command on one file with the same options: equal bit for bit."""
    args = []
    for k, v in opts.items():
        args += {"fps": ["--fps", str(v)], "every": ["--every", str(v)],
                 "start": ["--start", str(v)], "duration": ["--duration", str(v)],
                 "batch": ["--batch", str(v)], "keyframes": ["--keyframes"]}[k]
    db = os.path.join(tmp, "cli_%d.db" % abs(hash((path, tuple(args)))))
    cli("--model", TINY, "-q", "-o", db, *args, path)
    fi, pts, t, vec = db_rows(db)
    f = vidfeat.extract(path, model=TINY, **opts)
    assert len(f) == len(fi) > 0
    assert f.vectors.dtype == np.float32 and f.t.dtype == np.float64
    assert f.frame_index.dtype == np.int64 and f.pts.dtype == np.int64
    assert np.array_equal(f.frame_index, fi)
    assert np.array_equal(f.pts, pts)
    assert np.array_equal(f.t, t)
    assert np.array_equal(f.vectors, vec)  # bit for bit
    return f


def test_extract_equals_cli(tmp, clip):
    f = same_as_cli(tmp, clip)
    assert f.model == "tiny_cnn" and f.layer == "output" and f.path == clip
    assert f.vectors.shape == (75, 10)
    assert set(f.rates) == {"decode", "convert", "infer", "store"}
    assert f.rates["infer"] > 0 and f.width == 160 and f.height == 120 and f.codec == "h264"
    assert f.rates["store"] == 0  # nothing was stored
    same_as_cli(tmp, clip, fps=5, batch=4)
    same_as_cli(tmp, clip, every=7, start=0.5, duration="1.5")
    same_as_cli(tmp, clip, keyframes=True)
    same_as_cli(tmp, os.path.join(SAMPLES, "rotated90_64x48.mp4"))


def test_extract_equals_cli_on_shared_videos(tmp):
    videos = os.path.join(SHARED, "videos")
    if not SHARED or not os.path.isdir(videos):
        pytest.skip("no ../shared/videos")
    names = sorted(n for n in os.listdir(videos) if n != "MANIFEST.tsv" and not n.endswith(".md")
                   and os.path.getsize(os.path.join(videos, n)) > 0)
    assert len(names) >= 5
    for name in names:  # every codec and container there, 2 s of each
        same_as_cli(tmp, os.path.join(videos, name), duration=2)


def test_inputs_are_the_commands(tmp, clip, caplog):
    """vidfeat.inputs() takes a directory as the command does (one C function): media in name
    order, empty files kept, other files and hidden names passed over, each real file once
    through links; the shards partition it; input_name() is the recorded name."""
    d = os.path.join(tmp, "inputs")
    for sub in ("a", "b", "empty"):
        os.makedirs(os.path.join(d, sub))
    shutil.copy(clip, os.path.join(d, "a", "z.mp4"))
    shutil.copy(clip, os.path.join(d, "b", "clip.mp4"))
    open(os.path.join(d, "a", "broken.mp4"), "wb").close()
    with open(os.path.join(d, "a", "notes.txt"), "w") as f:
        f.write("not a video\n")
    shutil.copy(clip, os.path.join(d, "a", ".hidden.mp4"))
    os.symlink("..", os.path.join(d, "b", "up"))  # a loop: each directory once
    files = vidfeat.inputs([os.path.join(d, "a"), os.path.join(d, "b")])
    want = [os.path.join(d, "a", "broken.mp4"), os.path.join(d, "a", "z.mp4"),
            os.path.join(d, "b", "clip.mp4")]
    assert files == want, files
    # the command queues the same files under the same names
    q = os.path.join(tmp, "inputs_queue.db")
    cli("enqueue", "-o", q, os.path.join(d, "a"), os.path.join(d, "b"))
    con = sqlite3.connect(q)
    queued = sorted(r[0] for r in con.execute("SELECT path FROM queue"))
    con.close()
    assert queued == sorted(vidfeat.input_name(f) for f in files)
    halves = [vidfeat.inputs([d], shard=(k, 2), check=False) for k in (0, 1)]
    assert not set(halves[0]) & set(halves[1])
    assert sorted(halves[0] + halves[1]) == sorted(vidfeat.inputs([d], check=False))
    assert vidfeat.input_name(want[1], root=d) == "a/z.mp4"
    with pytest.raises(vidfeat.UsageError):
        vidfeat.input_name("/etc/hostname", root=d)
    with pytest.raises(vidfeat.InputError, match="no media files in this directory"):
        vidfeat.inputs([os.path.join(d, "empty")])
    with caplog.at_level(logging.WARNING, logger="vidfeat"):
        assert vidfeat.inputs([os.path.join(d, "empty"), want[1]], check=False) == [want[1]]
    assert any("no media files" in r.getMessage() for r in caplog.records)


def test_record_bench_as_the_command(tmp):
    """A benchmark recorded from Python reads back as the command's rows do (info --json)."""
    db = os.path.join(tmp, "bench_runs.db")
    vidfeat.record_bench(db, model="mobilenet_v2", precision="bf16", batch_size=32, threads=2,
                         frames=640, infer_fps=123.5, device_name="a CPU", backend="dnnl")
    cli("bench", "--infer-only", "--runs", "1", "--images", "2", "--batch", "1", "--model", TINY,
        "-o", db)
    runs = json.loads(cli("info", "--json", db).stdout)["benchmark_runs"]
    assert len(runs) == 2, runs
    mine = [r for r in runs if r["model"] == "mobilenet_v2"][0]
    assert (mine["precision"], mine["batch"], mine["mode"], mine["infer_fps"],
            mine["device"], mine["device_name"]) == ("bf16", 32, "infer_only", 123.5, "cpu",
                                                      "a CPU")
    con = sqlite3.connect(db)  # a rate not given is not measured: null, read back as 0
    assert con.execute("SELECT end_to_end_fps IS NULL, infer_fps FROM runs WHERE model ="
                       " 'mobilenet_v2'").fetchone() == (1, 123.5)
    con.close()
    assert vidfeat.open(db).info()["benchmark_runs"] == runs
    with pytest.raises(vidfeat.UsageError):
        vidfeat.record_bench(db, model="m", precision="f32", speed=1)


def test_query_texts_are_checked_as_the_command_checks_them():
    """A text to embed or search for is refused by the library's own check, in the command's
    words: not UTF-8, empty, only white space (the same C function for both)."""
    from vidfeat import _capi as C
    for bad, why in ((b"", b"is empty"), (b" \t\u3000".decode("unicode_escape").encode(),
                                            b"only white space"), (b"caf\xe9", b"not UTF-8")):
        err = ctypes.create_string_buffer(256)
        assert C.vf_text_check(bad, err, len(err)) == C.ERR_INVALID and why in err.value, bad
        with pytest.raises(vidfeat.UsageError):
            vidfeat._text_bytes(bad, query=True)
    assert C.vf_text_check("a red car".encode(), None, 0) == 0


def test_frames_batches_concatenate_to_extract(clip):
    whole = vidfeat.extract(clip, model=TINY, batch=8)
    parts = list(vidfeat.frames(clip, model=TINY, batch=8))
    assert len(parts) == 10 and all(len(p) <= 8 for p in parts)
    for a in ("t", "frame_index", "pts", "vectors"):
        assert np.array_equal(np.concatenate([getattr(p, a) for p in parts]), getattr(whole, a))


def test_frames_stops_when_left(tmp):
    long = make_clip(os.path.join(tmp, "long.mp4"), seconds=60, size="64x48")
    before = threading.active_count()
    t0 = time.monotonic()
    gen = vidfeat.frames(long, model=TINY, batch=4)
    first = next(gen)
    gen.close()  # the extraction is cancelled, its threads gone
    assert len(first) == 4
    assert time.monotonic() - t0 < 10
    assert threading.active_count() == before
    with vidfeat.Extractor(TINY, batch=4) as ex:  # and a loop left by break
        for n, _ in enumerate(ex.frames(long)):
            if n == 2:
                break
        assert len(ex.extract(clip_of(tmp))) == 75  # the extractor is still usable


def clip_of(tmp):
    return os.path.join(tmp, "clip.mp4")


def test_precision_auto_says_what_it_chose(tmp, clip):
    """auto settles on f32 or bf16 before it runs, says why, and the database records it."""
    with vidfeat.Extractor(TINY, batch=2, precision="auto") as ex:
        assert ex.info["precision"] in ("f32", "bf16")
        assert ex.info["precision_why"].startswith(ex.info["precision"])
        chose = ex.info["precision"]
    with vidfeat.Extractor(TINY, batch=2) as ex:
        assert ex.info["precision"] == "f32" and ex.info["precision_why"] is None
    db = os.path.join(tmp, "auto.db")
    cli("--model", TINY, "--batch", "2", "--precision", "auto", "-q", "-o", db, clip)
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT precision FROM extractions").fetchall() == [(chose,)]


def test_extractor_images_equal_the_command_on_a_png(tmp):
    png = os.path.join(tmp, "odd.png")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=96x64:rate=1", "-vf", "scale=97:61", "-frames:v", "1",
                    "-pix_fmt", "rgb24", png], check=True)
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", png, "-f", "rawvideo", "-pix_fmt",
                          "rgb24", "-"], check=True, capture_output=True).stdout
    img = np.frombuffer(raw, np.uint8).reshape(61, 97, 3)
    db = os.path.join(tmp, "png.db")
    cli("--model", TINY, "-q", "-o", db, png)
    vec = db_rows(db)[3]
    with vidfeat.Extractor(TINY, batch=2) as ex:
        one = ex(img)
        many = ex(np.stack([img] * 5))  # more than a batch
        assert one.shape == (1, 10) and many.shape == (5, 10)
        # the command's vector (to 1e-5: its batch of 32 and these of 2 round differently)
        tol = 1e-5 * float(np.abs(vec).max())
        assert np.allclose(one, vec, rtol=0, atol=tol)
        assert all(np.allclose(row, vec[0], rtol=0, atol=tol) for row in many)
        assert ex(np.zeros((0, 8, 8, 3), np.uint8)).shape == (0, 10)
        with pytest.raises(vidfeat.UsageError):
            ex(np.zeros((2, 8, 8), np.uint8))
        with pytest.raises(vidfeat.UsageError):
            ex(np.zeros((1, 8, 8, 3), np.float32))


def test_database_reads_equal_export(tmp, clip):
    db = os.path.join(tmp, "run.db")
    # a Latin-1 name, not UTF-8: str by os.fsdecode, the real bytes by os.fsencode
    other = make_clip(os.path.join(tmp, os.fsdecode(b"caf\xe9.mp4")), seconds=1, size="64x48")
    seen = []
    results = vidfeat.run([clip, other], db=db, model=TINY, fps=5,
                          progress=lambda p, done, total: seen.append((p, done)))
    assert [r.status for r in results] == ["done", "done"]
    assert seen and all(p in (clip, other) for p, _ in seen)
    again = vidfeat.run([clip, other], db=db, model=TINY, fps=5)  # resumed: nothing to do
    assert [r.status for r in again] == ["skipped", "skipped"]
    rows = vidfeat.open(db).frames()
    out = os.path.join(tmp, "npy")
    cli("export", db, "--format", "npy", "-o", out, "-q")
    index = json.load(open(os.path.join(out, "index.json")))
    at = 0
    for entry in index:  # files in the export's order, which is the database's
        vec = np.load(os.path.join(out, entry["name"] + ".npy"))
        t = np.load(os.path.join(out, entry["name"] + "_t.npy"))
        n = entry["frames"]
        assert np.array_equal(rows.vectors[at:at + n], vec)
        assert np.array_equal(rows.t[at:at + n], t)
        assert set(rows.path[at:at + n]) == {entry["path"]}
        at += n
    assert at == len(rows) and rows.model == "tiny_cnn"
    one = vidfeat.open(db).frames(path=other)
    assert len(one) == 5 and set(one.path) == {other}
    assert os.fsencode(one.path[0]).endswith(b"/caf\xe9.mp4")


def test_database_info_and_similar_as_the_command(tmp, clip):
    db = os.path.join(tmp, "info.db")
    vidfeat.run([clip], db=db, model=TINY, fps=5)
    d = vidfeat.open(db)
    assert d.info() == json.loads(cli("info", db, "--json").stdout)
    assert d.info(summary=True) == json.loads(cli("info", db, "--json", "--summary").stdout)
    got = d.similar(video=clip, at=1.0, k=5)
    want = json.loads(cli("similar", db, "--video", clip, "--at", "1", "-k", "5",
                          "--json").stdout)
    for doc in (got, want):
        doc.pop("search_ms")
    assert got == want
    copy = os.path.join(tmp, "copy.mkv")  # the clip again, re-encoded: reused footage
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", clip, "-c:v", "libx264", "-crf", "30",
                    copy], check=True)
    vidfeat.run([copy], db=db, model=TINY, fps=5)
    for got, args in ((d.matches(k=10, exact=True), ["matches", db, "--exact"]),
                      (d.similar(video=copy, k=10), ["similar", db, "--video", copy])):
        want = json.loads(cli(*args, "-k", "10", "--json").stdout)
        for doc in (got, want):
            doc.pop("search_ms")
            doc.pop("align_ms")
        assert got == want
    with pytest.raises(vidfeat.UsageError):
        d.similar()
    with pytest.raises(vidfeat.StartError) as e:
        vidfeat.open(os.path.join(tmp, "none.db"))
    assert "none.db" in str(e.value) and e.value.exit_status == 3


def test_errors_carry_the_message_and_kind(tmp, clip):
    missing = os.path.join(tmp, "missing.mp4")
    with pytest.raises(vidfeat.InputError) as e:
        vidfeat.extract(missing, model=TINY)
    assert e.value.exit_status == 1
    assert e.value.message == "%s: No such file or directory" % missing  # the command's line
    empty = os.path.join(tmp, "empty.mp4")
    open(empty, "wb").close()
    with pytest.raises(vidfeat.InputError):
        vidfeat.extract(empty, model=TINY)
    with pytest.raises(vidfeat.UsageError) as e:
        vidfeat.extract(clip, model=TINY, batch=0)
    assert e.value.exit_status == 2
    with pytest.raises(vidfeat.UsageError):
        vidfeat.extract(clip, model=TINY, precision="f64")
    with pytest.raises(vidfeat.UsageError):
        vidfeat.extract(clip, model=TINY, start="soon")
    with pytest.raises(vidfeat.StartError) as e:
        vidfeat.extract(clip, model="no_such_model")
    assert "no_such_model" in e.value.message and e.value.exit_status == 3
    assert issubclass(vidfeat.InputError, vidfeat.Error)
    # a run goes on past a bad file, then says so
    db = os.path.join(tmp, "errs.db")
    with pytest.raises(vidfeat.InputError) as e:
        vidfeat.run([missing, clip], db=db, model=TINY, fps=2)
    assert [r.status for r in e.value.results] == ["failed", "done"]
    assert [r.status for r in vidfeat.run([missing, clip], db=db, model=TINY, fps=2,
                                          check=False)] == ["failed", "skipped"]


def test_warnings_go_to_logging(tmp, caplog):
    d = os.path.join(tmp, "models_other")
    os.makedirs(d, exist_ok=True)
    shutil.copy(TINY, os.path.join(d, "tiny_cnn.onnx"))
    json.dump({"vidfeat_manifest": 1, "name": "other", "description": "test",
               "file": "tiny_cnn.onnx", "sha256": "0" * 64, "size": 1,
               "input": {"size": 32, "channel_order": "RGB", "resize": "stretch",
                         "mean": [0, 0, 0], "std": [1, 1, 1]},
               "layers": [{"name": "output", "tensor": "output", "dim": 10}]},
              open(os.path.join(d, "other.json"), "w"))
    with caplog.at_level(logging.WARNING, logger="vidfeat"):
        with vidfeat.Extractor("other", models_dir=d):
            pass
    assert any("not the official other file" in r.getMessage() for r in caplog.records)


def test_other_threads_run_during_an_extraction(tmp):
    long = make_clip(os.path.join(tmp, "threads.mp4"), seconds=20, size="320x240")
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    t0 = time.monotonic()
    f = vidfeat.extract(long, model=TINY, device="ref")
    spent = time.monotonic() - t0
    stop.set()
    t.join()
    assert len(f) == 500
    # a thread starved by a held GIL would tick a few times; a free one ~ every ms or two
    assert ticks[0] > 50 * spent, (ticks[0], spent)


def test_ctrl_c_stops_within_a_second(tmp):
    long = make_clip(os.path.join(tmp, "ctrlc.mp4"), seconds=120, size="320x240")
    code = textwrap.dedent("""
        import sys, time, vidfeat
        print("go", flush=True)
        try:
            vidfeat.extract(sys.argv[1], model=sys.argv[2], device="ref")
        except KeyboardInterrupt:
            print("interrupted %.3f" % time.monotonic(), flush=True)
            sys.exit(0)
        print("finished", flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", code, long, TINY], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "go"
        time.sleep(1.5)  # the model loaded, the extraction under way
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and out.startswith("interrupted"), (out, err)
    assert float(out.split()[1]) - sent < 1.0, (out, sent)


def test_installed_package_finds_its_library_after_the_prefix_moves(tmp):
    build = os.environ.get("VF_TEST_BUILD")
    if not build:
        pytest.skip("VF_TEST_BUILD not set")
    prefix = os.path.join(tmp, "prefix")
    subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True,
                   capture_output=True, timeout=600)
    moved = os.path.join(tmp, "moved")
    os.rename(prefix, moved)
    pkgs = [os.path.join(r, "..") for r, dirs, files in os.walk(moved)
            if r.endswith(os.path.join("dist-packages", "vidfeat")) and "_paths.py" in files]
    assert len(pkgs) == 1, pkgs
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIDFEAT_LIBRARY", "VIDFEAT_MODELS", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = os.path.normpath(pkgs[0])
    code = ("import vidfeat, sys; print(vidfeat.library_path); "
            "print(len(vidfeat.extract(sys.argv[1], model=sys.argv[2])))")
    r = subprocess.run([sys.executable, "-c", code, clip_of(tmp), TINY], cwd="/",
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lib, n = r.stdout.split()
    assert lib.startswith(moved) and n == "75"
    # the moved command finds the moved manifests (no VIDFEAT_MODELS), from any directory
    r = subprocess.run([os.path.join(moved, "bin", "vidfeat"), "models", "--json"], cwd="/",
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    manifests = [m["manifest"] for m in json.loads(r.stdout)]
    assert any(m.startswith(moved) for m in manifests), manifests


# The package's ctypes declarations against the header, field by field: a field appended to a
# structure in vidfeat.h and not here would have the library write past the package's memory.
LAYOUT = {"Config": "vf_config", "ModelInfo": "vf_model_info", "TextInfo": "vf_text_info",
          "FileResult": "vf_file_result", "BatchView": "vf_batch_view",
          "RunHooks": "vf_run_hooks", "DbSummary": "vf_db_summary",
          "DbExtraction": "vf_db_extraction", "DbBenchRun": "vf_db_bench_run",
          "DbVisitor": "vf_db_visitor", "SimilarStats": "vf_similar_stats",
          "SimilarQuery": "vf_similar_query", "Neighbour": "vf_neighbour",
          "DbModel": "vf_db_model", "DbVector": "vf_db_vector", "DbIndexInfo": "vf_db_index_info",
          "MatchStats": "vf_match_stats", "MatchQuery": "vf_match_query", "Match": "vf_match",
          "InputsOpts": "vf_inputs_opts", "BenchRecord": "vf_bench_record"}


def test_structures_match_the_header(tmp):
    from vidfeat import _capi as C
    include = os.path.join(os.environ.get("VF_TEST_SOURCE", ""), "include")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not os.path.exists(os.path.join(include, "vidfeat.h")):
        pytest.skip("no C compiler or no vidfeat.h (VF_TEST_SOURCE)")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "vidfeat.h"',
             "int main(void) {"]
    for py, c in LAYOUT.items():
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (py, c))
        for field, _ in getattr(C, py)._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (py, field, c, field))
    lines.append("return 0; }")
    src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([cc, "-I", include, src, "-o", exe], check=True, timeout=120)
    got = dict(line.split() for line in subprocess.run(
        [exe], capture_output=True, text=True, check=True).stdout.splitlines())
    for py in LAYOUT:
        s = getattr(C, py)
        assert int(got[py]) == ctypes.sizeof(s), (py, "size", got[py], ctypes.sizeof(s))
        for field, _ in s._fields_:
            assert int(got[py + "." + field]) == getattr(s, field).offset, (py, field)


@pytest.fixture(scope="module")
def clip_models(tmp):
    """CLIP ViT-B/32's pair (random weights) beside its manifest, and a database of a clip
    extracted with its image tower; skipped without PyTorch or CLIP's vocabulary."""
    build = os.environ.get("VF_TEST_BUILD", "")
    source = os.environ.get("VF_TEST_SOURCE", "")
    if not os.path.exists(os.path.join(build, "models", "bpe_simple_vocab_16e6.txt.gz")):
        pytest.skip("the build has no CLIP vocabulary")
    models = os.path.join(tmp, "clip_models")
    r = subprocess.run(["/usr/bin/python3", os.path.join(source, "scripts", "export-clip.py"),
                        "--out", models], capture_output=True, timeout=900)
    if r.returncode != 0:
        pytest.skip("export-clip.py: %s" % r.stderr.decode()[-300:])
    shutil.copy(os.path.join(source, "models", "clip_vit_b32.json"), models)
    db = os.path.join(tmp, "clip.db")
    cli("--models-dir", models, "--model", "clip_vit_b32", "--fps", "5", "-q", "-o", db,
        make_clip(os.path.join(tmp, "clip_text.mp4"), seconds=2))
    return models, db


def test_text_encoder_equals_the_command(clip_models):
    models, db = clip_models
    texts = ["a photo of a dog", "Caf\u00e9 &amp; cr\u00e8me", "\U0001f436 on a sofa"]
    r = cli("embed", "--models-dir", models, *[a for t in texts for a in ("--text", t)],
            "--json")
    doc = json.loads(r.stdout)
    with vidfeat.TextEncoder("clip_vit_b32", models_dir=models) as te:
        assert (te.dim, te.context, te.vocab_size) == (512, 77, 49408)
        got = te(texts)
        for t, e in zip(texts, doc["embeddings"]):
            ids = te.tokenize(t)
            assert list(ids[:len(e["ids"])]) == e["ids"] and not ids[len(e["ids"]):].any()
        with pytest.raises(vidfeat.UsageError, match="UTF-8"):
            te.tokenize(b"caf\xe9")
    want = np.array([e["embedding"] for e in doc["embeddings"]], np.float32)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert np.array_equal(vidfeat.embed_text(texts, models_dir=models), got)


def test_similar_text_equals_the_command(clip_models, caplog):
    models, db = clip_models
    texts = ["a photo of a dog", "a red car at night"]
    r = cli("similar", db, "--models-dir", models, "-k", "4", "--json",
            *[a for t in texts for a in ("--text", t)])
    want = [json.loads(line) for line in r.stdout.decode().splitlines()]
    # the pair has random weights: said on stderr and in each document, and by Python
    said = [x for x in r.stderr.decode().splitlines() if "mean nothing" in x]
    assert len(said) == 1 and db in said[0] and "random weights" in said[0], r.stderr
    assert all(w["weights"] == "random weights" for w in want)
    d = vidfeat.open(db)
    with caplog.at_level(logging.WARNING, logger="vidfeat"):
        docs = d.similar(text=texts, k=4, models_dir=models)
    assert any("mean nothing" in x.getMessage() for x in caplog.records)
    assert all(x["weights"] == "random weights" for x in docs)
    one = d.similar(text=texts[0], k=4, models_dir=models)
    assert [x["neighbours"] for x in docs] == [w["neighbours"] for w in want]
    assert one["neighbours"] == want[0]["neighbours"] and one["query"] == {"text": texts[0]}
    with pytest.raises(vidfeat.UsageError, match="no words"):
        d.similar(text="&nbsp;", models_dir=models)


def test_close_during_a_run_cancels_and_waits(tmp):
    """close() while frames() is being read, or from another thread during extract(): the run
    is cancelled and waited for (it crashed, freeing the pipeline under the run), and what was
    running says so with vidfeat.Error."""
    long_clip = make_clip(os.path.join(tmp, "long.mp4"), seconds=20, size="320x240")
    ex = vidfeat.Extractor(TINY, batch=4)
    it = ex.frames(long_clip)
    next(it)
    ex.close()
    with pytest.raises(vidfeat.Error):
        for _ in it:
            pass
    for _ in range(3):
        ex = vidfeat.Extractor(TINY, batch=4)
        got = []

        def run():
            try:
                got.append(ex.extract(long_clip))
            except vidfeat.Error as e:
                got.append(e)

        th = threading.Thread(target=run)
        th.start()
        time.sleep(0.2)
        ex.close()
        th.join(60)
        assert not th.is_alive() and len(got) == 1
    with pytest.raises(vidfeat.Error):
        ex.extract(long_clip)
    with pytest.raises(vidfeat.Error):  # arrays too, once closed
        ex(np.zeros((1, 32, 32, 3), np.uint8))


def test_one_run_at_a_time(tmp):
    """Two runs on one Extractor (two generators read in turn, extract from two threads) are
    refused with vidfeat.Error, where they hung; one after the other is fine."""
    long_clip = make_clip(os.path.join(tmp, "long2.mp4"), seconds=10, size="320x240")
    with vidfeat.Extractor(TINY, batch=4) as ex:
        with pytest.raises(vidfeat.Error, match="one run at a time"):
            for pair in zip(ex.frames(long_clip), ex.frames(long_clip)):
                pass
        outcomes = []

        def run():
            try:
                outcomes.append(ex.extract(long_clip).vectors.shape[0])
            except vidfeat.Error as e:
                outcomes.append(str(e))

        threads = [threading.Thread(target=run) for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert len(outcomes) == 2 and any(isinstance(o, int) for o in outcomes), outcomes
        assert all(isinstance(o, int) or "one run at a time" in o for o in outcomes), outcomes
        assert ex.extract(long_clip).vectors.shape[0] > 0  # and again, after


def test_options_of_the_wrong_kind(clip):
    """An option of the wrong type is TypeError (an int taken as a char * crashed), a number a
    field cannot hold is a UsageError (2**32 + 8 was 8), a NUL in a path a ValueError (the path
    was cut there: another file)."""
    with pytest.raises(TypeError):
        vidfeat.extract(clip, model=TINY, hwdec=12345)
    with pytest.raises(TypeError):
        vidfeat.extract(clip, model=TINY, decoders="two")
    with pytest.raises(vidfeat.UsageError):
        vidfeat.extract(clip, model=TINY, batch_size=2 ** 32 + 8)
    with pytest.raises(vidfeat.UsageError):
        vidfeat.extract(clip, model=TINY, batch=2 ** 32 + 8)
    with pytest.raises(ValueError):
        vidfeat.extract(clip + "\0/etc/passwd", model=TINY)
    with pytest.raises(ValueError):
        vidfeat.Extractor(TINY + "\0x")
    with pytest.raises(TypeError):
        vidfeat.extract(12345, model=TINY)
