#!/usr/bin/python3
"""Reused footage (docs/search.md "Finding reused footage"): vidfeat matches and similar --video
without --at, on clips made here with ffmpeg.

On real features (the MobileNetV2 in ../shared/models; without it, or without a PostgreSQL server
for the last part, what runs is checked and the test then reports itself skipped, naming what
was not checked), from
../shared's Big Buck Bunny (30 s) and Megamind clips, at 5 frames/s:
- copies of parts of the film: re-encoded at a low bitrate and rescaled to 320x180; cropped to
  90% and brightened; darkened and converted to 12 frames/s; converted to 30 frames/s and
  854x480; six seconds of it inserted between two parts of Megamind (followed by black);
- unrelated material that merely looks alike: Megamind itself against the film (both animated),
  two recordings of people (sign language, a phone) each followed by four seconds of black, and
  a clip that is only black;
- every pair of the film and a copy of it is found (both Megamind parts of the inserted clip
  too), each with its times within 1 s of the truth; every match reported is true (the two
  files show the same moment of the same source, within 1 s); black frames match nothing;
- one clip against the archive: similar --video Q (no --at) for a clip the database does not
  hold (a mirrored, rescaled, contrasted part of the film) answers the film's time range;
  matches --video for a stored copy lists its source;
- an index (vidfeat index --kind hnsw) gives the same matches as the exact search, and says so
  (-v, --json); a damaged index file is one line naming it, exit 3 (--exact still answers);
- PostgreSQL: the same files extracted into a real server give the same matches.
Always (no ../shared needed), with the tiny CNN on clips made here: an identical copy is
matched whole, score 1; usage errors exit 2; a missing database exits 3; a missing query file
is one line naming it, exit 1; a model that cannot be loaded is one warning line saying black
frames count as evidence; --json's fields.

usage: test_matches.py VIDFEAT MODELS_DIR SHARED_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, ff

TOL = 1.0  # seconds: a reported time against the truth

# What each made file shows: (file's start, end, source, source's start); sources are "bbb"
# (the film's time), "mm" (Megamind's), None (black or other). Filled as the clips are made.
SHOWS = {}


def run(exe, *args, timeout=300):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


def source_at(name, t):
    for start, end, src, src_start in SHOWS[name]:
        if start - 1e-6 <= t < end + 1e-6:
            return (src, src_start + (t - start)) if src else None
    return None


def is_true(m):
    """Do a and b show the same moment of one source at the match's middle (and ends)?"""
    a, b = os.path.basename(m["a"]), os.path.basename(m["b"])
    for f in (0.5, 0.1, 0.9):
        ta = m["a_start"] + f * (m["a_end"] - m["a_start"])
        tb = m["b_start"] + f * (m["b_end"] - m["b_start"])
        sa, sb = source_at(a, ta), source_at(b, tb)
        if not sa or not sb or sa[0] != sb[0] or abs(sa[1] - sb[1]) > TOL:
            return False
    return True


def expect(matches, a, a_range, b, b_range):
    """The match of a's a_range in b's b_range is among matches (either way round)."""
    for m in matches:
        for x, xr, y, yr in ((a, a_range, b, b_range), (b, b_range, a, a_range)):
            if (os.path.basename(m["a"]) == x and os.path.basename(m["b"]) == y and
                    abs(m["a_start"] - xr[0]) <= TOL and abs(m["a_end"] - xr[1]) <= TOL and
                    abs(m["b_start"] - yr[0]) <= TOL and abs(m["b_end"] - yr[1]) <= TOL):
                return
    check(False, "not found: %s %s in %s %s; found:\n%s" % (
        a, a_range, b, b_range, "\n".join(line(m) for m in matches)))


def line(m):
    return "  %s %.2f-%.2f | %s %.2f-%.2f | %.3f" % (
        os.path.basename(m["a"]), m["a_start"], m["a_end"], os.path.basename(m["b"]),
        m["b_start"], m["b_end"], m["score"])


def matches_json(exe, *args):
    r = run(exe, "matches", *args, "--json")
    check(r.returncode == 0, "matches %s: %s" % (" ".join(args), r.stderr))
    return json.loads(r.stdout), r.stderr


def make_clips(tmp, videos):
    bbb = os.path.join(videos, "vp8_720p_bigbuckbunny_30s.webm")
    mm_src = os.path.join(videos, "mpeg4asp_megamind.avi")
    out = lambda name: os.path.join(tmp, name)  # noqa: E731
    enc = ["-an", "-c:v", "libx264", "-pix_fmt", "yuv420p"]
    ff("-i", bbb, *enc, "-vf", "scale=640:360", out("film.mp4"))
    SHOWS["film.mp4"] = [(0, 30, "bbb", 0)]
    film = out("film.mp4")
    ff("-ss", "5", "-t", "10", "-i", film, *enc, "-crf", "35", "-vf", "scale=320:180",
       out("low.mp4"))
    SHOWS["low.mp4"] = [(0, 10, "bbb", 5)]
    ff("-ss", "10", "-t", "10", "-i", film, *enc,
       "-vf", "crop=iw*0.9:ih*0.9,eq=brightness=0.15", out("bright.mp4"))
    SHOWS["bright.mp4"] = [(0, 10, "bbb", 10)]
    ff("-ss", "12", "-t", "8", "-i", film, *enc, "-vf", "eq=brightness=-0.15,fps=12",
       out("dark12.mp4"))
    SHOWS["dark12.mp4"] = [(0, 8, "bbb", 12)]
    ff("-ss", "22", "-t", "6", "-i", film, *enc, "-vf", "fps=30,scale=854:480", out("fps30.mp4"))
    SHOWS["fps30.mp4"] = [(0, 6, "bbb", 22)]
    ff("-i", mm_src, *enc, "-vf", "scale=640:360,fps=25", out("mm.mp4"))
    SHOWS["mm.mp4"] = [(0, 11.3, "mm", 0)]
    ff("-f", "lavfi", "-i", "color=black:s=640x360:r=25:d=4", *enc, out("black.mp4"))
    SHOWS["black.mp4"] = [(0, 4, None, 0)]
    ff("-ss", "20", "-t", "6", "-i", film, *enc, "-vf", "fps=25", out("seg.mp4"))
    ff("-i", out("mm.mp4"), "-i", out("seg.mp4"), "-i", out("black.mp4"), "-filter_complex",
       "[0:v]trim=0:5,setpts=PTS-STARTPTS,setsar=1[a];[1:v]setpts=PTS-STARTPTS,setsar=1[b];"
       "[0:v]trim=5:11,setpts=PTS-STARTPTS,setsar=1[c];[2:v]setpts=PTS-STARTPTS,setsar=1[d];"
       "[a][b][c][d]concat=n=4:v=1[o]", "-map", "[o]", *enc, out("insert.mp4"))
    os.remove(out("seg.mp4"))
    SHOWS["insert.mp4"] = [(0, 5, "mm", 0), (5, 11, "bbb", 20), (11, 17, "mm", 5),
                           (17, 21, None, 0)]
    for name, src in (("signs_black.mp4", "h264_640x480_asl_again.mkv"),
                      ("phone_black.mp4", "phone_rotated180_ipad2.mov")):
        ff("-i", os.path.join(videos, src), "-i", out("black.mp4"), "-filter_complex",
           "[0:v]scale=640:360,setsar=1,fps=25[a];[1:v]setsar=1[b];[a][b]concat=n=2:v=1[o]",
           "-map", "[o]", *enc, out(name))
        SHOWS[name] = [(0, 2.6, "own:" + name, 0), (2.6, 7, None, 0)]
    names = ["film.mp4", "low.mp4", "bright.mp4", "dark12.mp4", "fps30.mp4", "mm.mp4",
             "insert.mp4", "signs_black.mp4", "phone_black.mp4", "black.mp4"]
    return [out(n) for n in names]


def check_archive(matches, what):
    for m in matches:
        check(is_true(m), "%s: a match that is not true:\n%s" % (what, line(m)))
        check(os.path.basename(m["a"]) != "black.mp4" and
              os.path.basename(m["b"]) != "black.mp4", "%s: black matched: %s" % (what, line(m)))
    expect(matches, "film.mp4", (5, 15), "low.mp4", (0, 10))
    expect(matches, "film.mp4", (10, 20), "bright.mp4", (0, 10))
    expect(matches, "film.mp4", (12, 20), "dark12.mp4", (0, 8))
    expect(matches, "film.mp4", (22, 28), "fps30.mp4", (0, 6))
    expect(matches, "film.mp4", (20, 26), "insert.mp4", (5, 11))
    expect(matches, "mm.mp4", (0, 5), "insert.mp4", (0, 5))
    expect(matches, "mm.mp4", (5, 11), "insert.mp4", (11, 17))


def real_features(exe, shared, tmp):
    models = os.path.join(shared, "models")
    videos = os.path.join(shared, "videos")
    if not os.path.exists(os.path.join(models, "mobilenet_v2_1.0_224.onnx")) or \
            not os.path.exists(os.path.join(videos, "vp8_720p_bigbuckbunny_30s.webm")):
        print("real-feature part skipped: no ../shared model and clips")
        return ["the real-feature part (no ../shared model and clips)"]
    clips = make_clips(tmp, videos)
    db = os.path.join(tmp, "archive.db")
    net = ["--model", "mobilenet_v2_1.0_224", "--models-dir", models]
    r = run(exe, *net, "--fps", "5", "-q", "-o", db, *clips)
    check(r.returncode == 0, "extract: %s" % r.stderr)

    doc, err = matches_json(exe, db, "--models-dir", models)
    for m in doc["matches"]:
        print(line(m))
    check_archive(doc["matches"], "exact")
    check(doc["search"] == "exact" and doc["index"] is None and doc["flat_known"] is True and
          doc["flat"] >= 3 * 20 and doc["frames"] > 500 and doc["pairs"] >= 7, str(doc)[:300])
    print("ok matches: %d true matches of the film's and Megamind's copies (each transformation,"
          " inserted at an offset), no false one, black frames no evidence" % len(doc["matches"]))
    exact = doc["matches"]

    # one clip against the archive: not in the database (mirrored, rescaled, more contrast)
    query = os.path.join(tmp, "query.mp4")
    ff("-ss", "3", "-t", "6", "-i", clips[0], "-an", "-c:v", "libx264", "-vf",
       "hflip,scale=480:270,eq=contrast=1.2", query)
    SHOWS["query.mp4"] = [(0, 6, "bbb", 3)]
    r = run(exe, "similar", db, "--video", query, "--fps", "5", "--models-dir", models, "--json")
    check(r.returncode == 0, "similar --video: %s" % r.stderr)
    got = json.loads(r.stdout)["matches"]
    check(got and os.path.basename(got[0]["b"]) == "film.mp4" and got[0]["a"] == query,
          "similar --video: %s" % r.stdout[:500])
    expect(got, "query.mp4", (0, 6), "film.mp4", (3, 9))
    for m in got:
        check(is_true(m), "similar --video: not true: %s" % line(m))
    r = run(exe, "similar", db, "--video", query, "--fps", "5", "--models-dir", models)
    check(r.returncode == 0 and "film.mp4" in r.stdout and "score" in r.stdout, r.stdout)
    # a stored copy: its source among the answers, the copy itself not
    doc, _ = matches_json(exe, db, "--video", clips[1], "--models-dir", models)
    check(all(m["a"] == clips[1] and m["b"] != clips[1] for m in doc["matches"]), str(doc)[:400])
    expect(doc["matches"], "low.mp4", (0, 10), "film.mp4", (5, 15))
    print("ok one clip: similar --video (not in the database) finds the film's 3-9 s; matches"
          " --video of a stored copy finds its source")

    # through an index: the same answers
    r = run(exe, "index", db, "--kind", "hnsw")
    check(r.returncode == 0, "index: %s" % r.stderr)
    doc, _ = matches_json(exe, db, "--models-dir", models)
    check(doc["search"].startswith("index HNSW") and doc["index"].endswith(".faiss"), doc["search"])
    check_archive(doc["matches"], "index")
    check(len(doc["matches"]) == len(exact), "index: %d matches, exact %d" % (
        len(doc["matches"]), len(exact)))
    r = run(exe, "matches", db, "--models-dir", models, "-v")
    check(r.returncode == 0 and "search: index HNSW32" in r.stderr, r.stderr)
    index_file = doc["index"]
    with open(index_file, "r+b") as f:
        f.seek(64)
        f.write(b"\xff" * 64)
    r = run(exe, "matches", db, "--models-dir", models)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 3 and len(lines) == 1 and index_file in lines[0], r.stderr)
    doc, _ = matches_json(exe, db, "--models-dir", models, "--exact")
    check(doc["search"] == "exact" and len(doc["matches"]) == len(exact), "--exact after damage")
    print("ok index: the same matches through HNSW; a damaged index file is one line, exit 3;"
          " --exact still answers")

    # the model not here: one warning line, black frames count
    r = run(exe, "matches", db, "--models-dir", tmp, "--json", "--exact")
    warn = [x for x in r.stderr.splitlines() if "count as evidence" in x]
    check(r.returncode == 0 and len(warn) == 1 and json.loads(r.stdout)["flat_known"] is False,
          r.stderr)
    print("ok no model: one warning line, frames that show nothing are counted")
    return postgres(exe, net, clips, exact)


def postgres(exe, net, clips, exact):
    try:
        from pgserver import PgServer, Unavailable
    except ImportError as e:
        print("postgresql part skipped: %s" % e)
        return ["the PostgreSQL part (%s)" % e]
    try:
        server = PgServer()
    except Unavailable as e:
        print("postgresql part skipped: %s" % e)
        return ["the PostgreSQL part (%s)" % e]
    with server as pg:
        uri = pg.uri("vf")
        r = run(exe, *net, "--fps", "5", "-q", "-o", uri, *clips)
        check(r.returncode == 0, "extract into PostgreSQL: %s" % r.stderr)
        doc, _ = matches_json(exe, uri, *net[2:])
        key = lambda m: (os.path.basename(m["a"]), os.path.basename(m["b"]),  # noqa: E731
                         round(m["a_start"]), round(m["b_start"]))
        check(sorted(map(key, doc["matches"])) == sorted(map(key, exact)),
              "PostgreSQL's matches differ:\n%s\nSQLite's:\n%s" % (
                  "\n".join(map(line, doc["matches"])), "\n".join(map(line, exact))))
    print("ok PostgreSQL: the same matches")
    return []


def tiny(exe, models, tmp):
    model = os.path.join(models, "tiny_cnn.onnx")
    a = os.path.join(tmp, "a.mp4")
    ff("-f", "lavfi", "-i", "mandelbrot=s=320x240:r=10,trim=duration=6", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", a)
    copy = os.path.join(tmp, "a_copy.mkv")
    ff("-i", a, "-c", "copy", copy)
    db = os.path.join(tmp, "tiny.db")
    r = run(exe, "--model", model, "-q", "-o", db, a, copy)
    check(r.returncode == 0, r.stderr)
    r = run(exe, "matches", db, "--json")  # tiny_cnn is not a manifest's name: not loadable
    check(r.returncode == 0, r.stderr)
    doc = json.loads(r.stdout)
    warn = [x for x in r.stderr.splitlines() if x]
    check(len(warn) == 1 and "count as evidence" in warn[0] and doc["flat_known"] is False,
          r.stderr)
    check(set(doc) == {"matches", "search", "search_ms", "align_ms", "index", "frames", "flat",
                       "flat_known", "pairs", "weights"}, sorted(doc))
    check(doc["weights"] is None, "tiny_cnn's weights are not known: %r" % doc["weights"])
    m = doc["matches"]
    check(len(m) == 1 and m[0]["a"] == a and m[0]["b"] == copy and m[0]["a_start"] == 0 and
          m[0]["b_start"] == 0 and abs(m[0]["a_end"] - 5.9) < 1e-6 and m[0]["score"] > 0.9999 and
          m[0]["frames"] == 60 and m[0]["speed"] == 1, r.stdout)
    # usage, a missing database, a missing query file
    r = run(exe, "matches")
    check(r.returncode == 2, r.stderr)
    r = run(exe, "matches", db, "--min-similarity", "1.5")
    check(r.returncode == 2 and "min-similarity" in r.stderr, r.stderr)
    r = run(exe, "matches", os.path.join(tmp, "none.db"))
    check(r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1, r.stderr)
    missing = os.path.join(tmp, "missing.mp4")
    r = run(exe, "matches", db, "--video", missing, "--model", model)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and missing in lines[0], r.stderr)
    r = run(exe, "similar", db, "--video", missing, "--model", model)
    check(r.returncode == 1 and missing in r.stderr, r.stderr)
    print("ok tiny CNN: an identical copy matched whole; errors: usage 2, no database 3, a missing"
          " query file 1; no model: one warning line")


def main():
    exe, models, shared = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="vidfeat_matches_")
    try:
        tiny(exe, models, tmp)
        missed = real_features(exe, shared, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if missed:  # what ran passed, but not every check ran: a skip, with what was not checked
        print("SKIP: not checked: %s" % "; ".join(missed))
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
