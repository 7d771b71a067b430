#!/usr/bin/python3
"""Hostile inputs, generated from the real clips in ../shared/videos with the ffmpeg CLI and
byte surgery (nothing is committed): every input is processed or fails with exactly one line
naming it, and the run goes on with the others.

usage: test_hostile.py VIDFEAT MODEL SHARED_DIR        (exits 77 without ../shared or ffmpeg)
The matrix of cases and outcomes is kept in tests/README.md.
"""
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import check, extractions, ff, ffprobe_times


def probe_count(path):
    """Frames the ffprobe CLI decodes (the truth to compare with)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
                          "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path],
                         capture_output=True, text=True).stdout
    return int(out.strip().strip(",").split(",")[0])


def make_inputs(v, d):
    """name -> (path, expected): ('done', frame count), ('partial', a regular expression the
    whole note of a done file must match, its group the frames kept) or ('failed', a regular
    expression the whole message must match; a group in it is the number of frames decoded
    before the failure, whose rows must be kept)"""
    bbb = os.path.join(v, "h264_720p_bigbuckbunny.mp4")  # moov at the end
    cases = {}

    def add(name, expect):
        cases[name] = (os.path.join(d, name), expect)

    ff("-i", bbb, "-c", "copy", "-movflags", "+faststart", os.path.join(d, "fast.mp4"))
    data = open(os.path.join(d, "fast.mp4"), "rb").read()
    open(os.path.join(d, "mdat_cut.mp4"), "wb").write(data[: len(data) // 2])
    # cut in the middle of the media data: done with the frames before the cut, as ffmpeg
    add("mdat_cut.mp4", ("partial", r"partial: (\d+) of 132 frames the index promises"))
    raw = open(bbb, "rb").read()
    open(os.path.join(d, "moov_missing.mp4"), "wb").write(raw[: len(raw) * 4 // 5])
    add("moov_missing.mp4", ("failed", "not a media file FFmpeg can read"))
    mkv = bytearray(open(os.path.join(v, "h264_640x480_asl_again.mkv"), "rb").read())
    rnd = random.Random(3)
    for _ in range(40):  # scattered corrupt bytes in the middle of the stream
        mkv[rnd.randrange(len(mkv) // 4, len(mkv))] = rnd.randrange(256)
    open(os.path.join(d, "corrupt_bytes.mkv"), "wb").write(bytes(mkv))
    add("corrupt_bytes.mkv", ("done", 77))  # FFmpeg conceals the damage
    open(os.path.join(d, "garbage.mp4"), "wb").write(bytes(rnd.randrange(256) for _ in range(4096)))
    add("garbage.mp4", ("failed", "not a media file FFmpeg can read"))
    open(os.path.join(d, "empty.mov"), "wb").close()
    add("empty.mov", ("failed", "empty file"))
    ff("-i", bbb, "-vn", "-c:a", "copy", os.path.join(d, "audio_only.m4a"))
    add("audio_only.m4a", ("failed", re.escape("no video stream (1 stream, none of them video)")))
    ff("-f", "lavfi", "-i", "sine=duration=1", "-f", "lavfi", "-i",
       "testsrc=size=64x64:rate=1:duration=1", "-map", "0", "-map", "1", "-c:a", "libmp3lame",
       "-c:v", "mjpeg", "-disposition:v", "attached_pic", os.path.join(d, "cover_art.mp3"))
    add("cover_art.mp3", ("failed", re.escape("no video stream (2 streams, none of them video)")))
    srt = os.path.join(d, "s.srt")
    open(srt, "w").write("1\n00:00:00,000 --> 00:00:01,000\nhello\n")
    ff("-i", srt, os.path.join(d, "subtitles_only.mkv"))
    os.remove(srt)
    add("subtitles_only.mkv", ("failed", re.escape("no video stream (1 stream, none of them video)")))
    ff("-i", bbb, "-i", os.path.join(v, "vp9_480p_bigbuckbunny_1s.webm"), "-map", "0:v",
       "-map", "1:v", "-c", "copy", os.path.join(d, "two_video_streams.mkv"))
    add("two_video_streams.mkv", ("done", 132))
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=10:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv420p10le", os.path.join(d, "ten_bit.mp4"))
    add("ten_bit.mp4", ("done", 10))
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=10:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv422p", os.path.join(d, "yuv422.mp4"))
    add("yuv422.mp4", ("done", 10))
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=25:duration=1", "-c:v", "mpeg2video",
       "-flags", "+ildct+ilme", "-top", "1", os.path.join(d, "interlaced.mpg"))
    add("interlaced.mpg", ("done", 25))
    for name, size in (("a.ts", "64x48"), ("b.ts", "96x80")):
        ff("-f", "lavfi", "-i", "testsrc=size=%s:rate=10:duration=1" % size, "-c:v",
           "mpeg2video", os.path.join(d, name))
    with open(os.path.join(d, "resolution_change.ts"), "wb") as out:
        for name in ("a.ts", "b.ts"):
            out.write(open(os.path.join(d, name), "rb").read())
            os.remove(os.path.join(d, name))
    add("resolution_change.ts", ("done", probe_count(os.path.join(d, "resolution_change.ts"))))
    # huge declared dimensions: a real clip's frames as Y4M, the header claiming 60000x60000
    ff("-i", os.path.join(v, "vp9_480p_bigbuckbunny_1s.webm"), "-frames:v", "3", "-s", "64x48",
       "-pix_fmt", "yuv420p", os.path.join(d, "small.y4m"))
    y4m = open(os.path.join(d, "small.y4m"), "rb").read()
    os.remove(os.path.join(d, "small.y4m"))
    eol = y4m.index(b"\n")
    header = y4m[:eol].replace(b"W64 ", b"W60000 ").replace(b"H48 ", b"H60000 ")
    open(os.path.join(d, "huge_dims.y4m"), "wb").write(header + y4m[eol:])
    add("huge_dims.y4m", ("failed", "Picture size 60000x60000 is invalid"))
    # no timestamps at all: a raw H.264 elementary stream (FFmpeg derives them from the rate)
    ff("-i", bbb, "-an", "-c:v", "copy", "-bsf:v", "h264_mp4toannexb",
       os.path.join(d, "no_timestamps.h264"))
    add("no_timestamps.h264", ("done", 132))
    # a timestamp jumping backwards mid-stream (frame 10 placed 20 frames earlier)
    ff("-i", os.path.join(v, "h264_640x480_asl_again.mkv"), "-c", "copy", "-bsf:v",
       "setts=pts=if(eq(N\\,10)\\,PTS-20*DURATION\\,PTS)",
       os.path.join(d, "backwards_pts.mkv"))
    add("backwards_pts.mkv", ("done", probe_count(os.path.join(d, "backwards_pts.mkv"))))
    # a codec FFmpeg does not know: an MPEG-4 AVI whose FourCC is changed to a made-up one
    ff("-i", bbb, "-t", "1", "-an", "-c:v", "mpeg4", os.path.join(d, "fourcc.avi"))
    avi = open(os.path.join(d, "fourcc.avi"), "rb").read()
    os.remove(os.path.join(d, "fourcc.avi"))
    check(avi.count(b"FMP4") > 0, "no FourCC to replace in the AVI")
    open(os.path.join(d, "unknown_codec.avi"), "wb").write(avi.replace(b"FMP4", b"ZQ9X"))
    add("unknown_codec.avi", ("failed", re.escape("unsupported video codec (FourCC 'ZQ9X')")))
    odd = os.path.join(d, "name with spaces \xe9\udcff.mp4".encode("utf-8", "surrogateescape")
                       .decode("utf-8", "surrogateescape"))
    shutil.copy(os.path.join(v, "hevc_640x360_aac.mp4"), odd)
    cases["odd name"] = (odd, ("done", 27))
    cases["missing"] = (os.path.join(d, "does_not_exist.mp4"), ("failed", "No such file or directory"))
    os.remove(os.path.join(d, "fast.mp4"))
    return cases


def unreadable(exe, model, v, tmp):
    """A file the user may not read: one line (permission denied), the next file done. Root
    reads anything, so as root the command runs as an unprivileged user (setpriv) in a
    directory of its own."""
    box = os.path.join(tmp, "box")
    os.makedirs(box)
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would keep the other user out
    os.chmod(box, 0o777)
    private = os.path.join(box, "unreadable.mp4")
    shutil.copy(os.path.join(v, "hevc_640x360_aac.mp4"), private)
    os.chmod(private, 0)
    ok_clip = os.path.join(box, "readable.mp4")
    shutil.copy(os.path.join(v, "hevc_640x360_aac.mp4"), ok_clip)
    os.chmod(ok_clip, 0o644)
    cmd = [exe, "--model", model, "-o", os.path.join(box, "u.db"), "--json", private, ok_clip]
    if os.geteuid() == 0:
        check(shutil.which("setpriv"), "unreadable file: as root, and no setpriv (util-linux) to "
              "run the command as another user")
        for src in (exe, model):
            shutil.copy(src, box)
        cmd[0] = os.path.join(box, os.path.basename(exe))
        cmd[2] = os.path.join(box, os.path.basename(model))
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    files = {os.path.basename(f["path"]): f for f in json.loads(r.stdout or "{}").get("files", [])}
    check(r.returncode == 1 and len(lines) == 1 and "unreadable.mp4: Permission denied" in lines[0]
          and files.get("readable.mp4", {}).get("frames") == 27,
          "unreadable file: %d %r %r" % (r.returncode, r.stderr, r.stdout))
    print("ok unreadable file: %s" % r.stderr.strip())


def main():
    exe, model, shared = sys.argv[1:4]
    v = os.path.join(shared, "videos")
    if not os.path.isdir(v) or not shutil.which("ffmpeg"):
        print("skipped: %s or ffmpeg missing" % v)
        return 77
    tmp = tempfile.mkdtemp(prefix="vidfeat_hostile_")
    try:
        d = os.path.join(tmp, "in")
        os.makedirs(d)
        cases = make_inputs(v, d)
        os.makedirs(os.path.join(tmp, "no_media"))
        open(os.path.join(tmp, "no_media", "notes.txt"), "w").write("nothing to see")
        db = os.path.join(tmp, "h.db")
        paths = [p for p, _ in cases.values()] + [os.path.join(tmp, "no_media")]
        r = subprocess.run([exe, "--model", model, "--batch", "8", "-o", db, "--json", *paths],
                           capture_output=True)
        check(r.returncode == 1, "exit status %d (want 1)" % r.returncode)
        err = r.stderr.decode("utf-8", "surrogateescape")
        summary = json.loads(r.stdout.decode("utf-8", "surrogateescape"))
        by_path = {f["path"]: f for f in summary["files"]}
        lines = [l for l in err.splitlines() if l.strip()]
        failed = [f for f in summary["files"] if f["status"] == "failed"]
        noted = [f for f in summary["files"] if f["note"]]
        check(len(lines) == len(failed) + len(noted) + 1, "one stderr line per failure and per"
              " note (+1 for the empty directory): %d lines, %d failures, %d notes\n%s" %
              (len(lines), len(failed), len(noted), err))
        check(any("no_media: no media files" in l for l in lines), "empty directory not reported")
        stored = extractions(db)
        for name, (path, (want, arg)) in sorted(cases.items()):
            f = by_path.get(path)
            check(f is not None, "%s: no result" % name)
            kept = f["frames"]  # rows that must be in the database
            if want == "done":
                check(f["status"] == "done" and f["frames"] == arg and f["error"] == "",
                      "%s: %s with %d frames (want done, %d): %s" %
                      (name, f["status"], f["frames"], arg, f["error"]))
            elif want == "partial":
                m = re.fullmatch(arg, f["note"])
                check(f["status"] == "done" and m is not None and kept == int(m.group(1)),
                      "%s: %s, %d frames, note '%s' (want done, '%s')" %
                      (name, f["status"], kept, f["note"], arg))
                line = "vidfeat: %s: warning: %s" % (path, f["note"])
                check([l for l in lines if path in l] == [line],
                      "%s: not exactly the one line %r in %r" % (name, line, lines))
            else:
                m = re.fullmatch(arg, f["error"])
                check(f["status"] == "failed" and m is not None,
                      "%s: %s '%s' (want failed, '%s')" % (name, f["status"], f["error"], arg))
                check(kept == (int(m.group(1)) if m.groups() else 0),
                      "%s: %d frames reported with '%s'" % (name, kept, f["error"]))
                line = "vidfeat: %s: %s" % (path, f["error"])
                check([l for l in lines if path in l] == [line],
                      "%s: not exactly the one line %r in %r" % (name, line, lines))
            # the database says the same, holding the rows decoded before any failure, each
            # with the frame's own pts and t (ffprobe's, frame by frame)
            if path not in stored:  # failed before decoding began
                check(f["status"] == "failed" and kept == 0,
                      "%s: %s with %d frames and no extraction in the database"
                      % (name, f["status"], kept))
            else:
                status, error, frames, rows = stored[path]
                check(status == f["status"] and frames == kept and len(rows) == kept and
                      (error or "") == (f["error"] or f["note"]),
                      "%s: the database has %s, %d/%d rows, %r"
                      % (name, status, frames, len(rows), error))
                if kept:
                    probe, _ = ffprobe_times(path)
                    check(len(probe) >= kept, "%s: ffprobe decodes %d frames, vidfeat kept %d"
                          % (name, len(probe), kept))
                    for k, ((index, pts, t), (ppts, pt)) in enumerate(zip(rows, probe)):
                        check(index == k and pts == ppts and abs(t - pt) <= 1e-6,
                              "%s: row %d is (%d, %s, %.6f), ffprobe's frame (%d, %d, %.6f)"
                              % (name, k, index, pts, t, k, ppts, pt))
            print("ok %-22s %-6s %4d frames, rows kept with ffprobe's pts %s"
                  % (name, f["status"], f["frames"], f["error"] or f["note"]))
        con = sqlite3.connect(db)
        check(con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity")
        bad = con.execute("SELECT count(*) FROM extractions e WHERE status = 'done' AND frames "
                          "!= (SELECT count(*) FROM features WHERE extraction_id = e.id)")
        check(bad.fetchone()[0] == 0, "done extraction with frames missing")
        con.close()
        unreadable(exe, model, v, tmp)
        print("hostile inputs: all processed or failed with one line; database consistent")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
