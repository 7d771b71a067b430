#!/usr/bin/python3
"""The vidfeat command as people type it and as batch systems read it, on clips ffmpeg makes
here (no ../shared needed):

  unknown command   `vidfeat infos x.db`: exit 2, "did you mean 'info'?", no database made;
                    `--modle`, `similar --txet=`: "did you mean '--model'?" ('--text')
  help              `vidfeat` alone: a short usage and the commands; export, embed and similar
                    --help in their own words, similar's own options before the shared ones
  models            `vidfeat models`: a header, sorted by name
  missing input     one line, exit 1, the model not loaded and no database made
  times             --start/--duration in FFmpeg's forms (1.5, 0:01.5, 500ms) give the same
                    rows; --start -1 and a non-time are usage errors saying why
  sampling          --fps with --every, --keyframes with --fps or --every: usage errors
  window past end   --start beyond the file: done, 0 frames, one warning line, the note in
                    --json and in the database
  broken in a walk  a directory holding a copy cut before its index (also renamed .bin) and a
                    sound-only .wav: one failed line each, counted; notes and subtitles passed
                    over, named with -v
  escapes           a file named with a newline, ESC and BEL: extract, info, similar and
                    matches print it escaped (ls -b), no line forged
  links             a directory with `again -> .`, `sub/up -> ..` and a link to a file, named
                    twice with the file itself: the walk ends, the file is extracted once
  text files        .nfo and .txt files FFmpeg reads as text art: named, one failed line "not a
                    video or image file"; in a directory, passed over; a photo still done
  logs              on a pipe a line per file (done, skipped, failed) and a summary; -q only
                    failures; --progress json one JSON object a line on stdout; none
  ETA               on a terminal (a pty) the bar counts to --max-frames, not the file's frames
  exit 130          SIGINT mid-run
  times only grow   a frame whose timestamp goes back (its own faulty, FFmpeg's guess equal to
                    the previous frame's) gets the previous time plus a frame: t increases

usage: test_cli_manners.py VIDFEAT MODELS_DIR
"""
import json
import os
import pty
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from vfcheck import SKIP, check, ff


def run(exe, *args, cwd=None):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def rows(db):
    con = sqlite3.connect(db)
    out = con.execute("SELECT f.frame_index, f.t, f.vec FROM features f JOIN extractions e ON"
                      " e.id = f.extraction_id ORDER BY f.frame_index").fetchall()
    con.close()
    return out


def main():
    exe, models = sys.argv[1:3]
    if not shutil.which("ffmpeg"):
        print("skip: ffmpeg is not installed")
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_manners_")
    try:
        clip = os.path.join(tmp, "clip.mp4")  # 3 s at 10 frames/s
        ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "3", "-c:v", "libx264",
           "-g", "5", "-threads", "1", clip)
        base = ["--model", model, "--batch", "4"]

        # a mistyped command
        r = run(exe, "infos", "x.db", cwd=tmp)
        check(r.returncode == 2 and r.stderr ==
              "vidfeat: unknown command 'infos' (did you mean 'info'?)\n",
              "infos: %d %r" % (r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(tmp, "vidfeat.db")), "infos made a database")
        r = run(exe, "zzzz", cwd=tmp)
        check(r.returncode == 2 and "unknown command 'zzzz' (see vidfeat --help)" in r.stderr,
              r.stderr)
        print("ok unknown command: exit 2, the nearest command named, nothing made")

        # a mistyped option: the nearest of the command's own options named
        for args, line in ((["--modle", model, clip], "vidfeat: extract: unknown option '--modle'"
                            " (did you mean '--model'?)\n"),
                           (["similar", "x.db", "--txet=cat"], "vidfeat: similar: unknown option"
                            " '--txet=cat' (did you mean '--text'?)\n"),
                           (["--qqqqqq", clip], "vidfeat: extract: unknown option '--qqqqqq'"
                            " (see vidfeat extract --help)\n")):
            r = run(exe, *args, cwd=tmp)
            check(r.returncode == 2 and r.stderr == line, "%s: %d %r" % (args, r.returncode,
                                                                         r.stderr))
        check(not os.path.exists(os.path.join(tmp, "vidfeat.db")), "an unknown option made a db")
        print("ok unknown option: exit 2, the nearest option named")

        # help: short without arguments; each command's own options first, in its own words
        r = run(exe, cwd=tmp)
        lines = r.stderr.splitlines()
        check(r.returncode == 2 and len(lines) <= 20 and any(x.split()[:1] == ["similar"]
                                                             for x in lines), r.stderr)
        out = {cmd: run(exe, cmd, "--help").stdout for cmd in ("export", "embed", "similar")}
        check("embed" not in out["export"] and "DB_npy" not in out["embed"],
              "help in another command's words: %r" % out)
        sim = out["similar"].splitlines()
        at = {x.split()[0]: i for i, x in enumerate(sim) if x.strip().startswith("--")}
        check(at["--image"] < at["--fps"] and at["--index"] < at["--models-dir"] and
              "options shared with extract:" in sim, out["similar"])
        print("ok help: %d lines without arguments; export, embed and similar in their own words"
              % len(lines))

        # models: a header, sorted by name
        r = run(exe, "models", "--models-dir", models)
        names = [x.split()[0] for x in r.stdout.splitlines()[1:] if not x.startswith(" ")]
        check(r.returncode == 0 and r.stdout.split()[:3] == ["name", "size", "layers"] and
              names == sorted(names) and len(names) > 3, r.stdout)
        print("ok models: a header, %d models sorted by name" % len(names))

        # a missing input: one line, exit 1, no model loaded, no database made
        r = run(exe, "--model", os.path.join(tmp, "no_model.onnx"), "no_such.mp4", cwd=tmp)
        check(r.returncode == 1 and r.stderr == "vidfeat: no_such.mp4: No such file or "
              "directory\n" and not os.path.exists(os.path.join(tmp, "vidfeat.db")),
              "missing input: %d %r" % (r.returncode, r.stderr))
        print("ok missing input: one line, exit 1, nothing loaded or made")

        # times in FFmpeg's forms
        got = []
        for start, dur in (("1.5", "0.5"), ("0:01.5", "500ms"), ("00:00:01.500", "0:00.5")):
            db = os.path.join(tmp, "t%d.db" % len(got))
            r = run(exe, *base, "-o", db, "--start", start, "--duration", dur, clip)
            check(r.returncode == 0, "--start %s --duration %s: %s" % (start, dur, r.stderr))
            got.append(rows(db))
        check(got[0] == got[1] == got[2] and [i for i, _, _ in got[0]] == [15, 16, 17, 18, 19],
              "time forms: %r" % [[(i, t) for i, t, _ in g] for g in got])
        for bad, why in (("-1", "--start: must be >= 0, not '-1'"),
                         ("soon", "--start: expected a time (90, 1:30, 01:02:03.5), not 'soon'")):
            r = run(exe, *base, "-o", os.path.join(tmp, "bad.db"), "--start", bad, clip)
            check(r.returncode == 2 and r.stderr == "vidfeat: %s\n" % why,
                  "--start %s: %d %r" % (bad, r.returncode, r.stderr))
        print("ok times: 1.5 = 0:01.5 = 00:00:01.500 (and 500ms), negative and words refused")

        # sampling options that would silently override each other
        for combo in (["--fps", "1", "--every", "2"], ["--keyframes", "--fps", "1"],
                      ["--every", "3", "--keyframes"]):
            r = run(exe, *base, "-o", os.path.join(tmp, "bad.db"), *combo, clip)
            check(r.returncode == 2 and "give one of them" in r.stderr,
                  "%s: %d %r" % (combo, r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(tmp, "bad.db")), "a usage error made a database")
        print("ok sampling conflicts are usage errors")

        # a window past the end
        db = os.path.join(tmp, "late.db")
        r = run(exe, *base, "-o", db, "--start", "1:00", "--json", clip)
        doc = json.loads(r.stdout)
        f = doc["files"][0]
        note = "no frame at or after --start 60 s (the last is at 2.900 s)"
        check(r.returncode == 0 and f["status"] == "done" and f["frames"] == 0 and
              f["note"] == note and r.stderr == "vidfeat: %s: warning: %s\n" % (clip, note),
              "window past the end: %d %r %r" % (r.returncode, r.stdout, r.stderr))
        con = sqlite3.connect(db)
        check(con.execute("SELECT status, frames, error FROM extractions").fetchall() ==
              [("done", 0, note)], "window past the end: the database")
        con.close()
        print("ok a window past the end: done, 0 frames, one warning line, the note stored")

        # text files FFmpeg would read as text art; a photo
        tree = os.path.join(tmp, "tree")
        os.makedirs(tree)
        with open(os.path.join(tree, "info.nfo"), "w") as fh:
            fh.write("Release notes\r\n\r\nNothing to see here.\r\n")
        with open(os.path.join(tree, "labels.txt"), "w") as fh:
            fh.write("".join("class %d\n" % i for i in range(1000)))
        photo = os.path.join(tree, "photo.png")
        ff("-f", "lavfi", "-i", "testsrc=size=64x48", "-frames:v", "1", photo)
        db = os.path.join(tmp, "text.db")
        texts = [os.path.join(tree, n) for n in ("info.nfo", "labels.txt")]
        r = run(exe, *base, "-o", db, "--json", *texts, photo)
        doc = json.loads(r.stdout)
        status = {os.path.basename(f["path"]): (f["status"], f["frames"]) for f in doc["files"]}
        check(r.returncode == 1 and status == {"info.nfo": ("failed", 0),
                                               "labels.txt": ("failed", 0),
                                               "photo.png": ("done", 1)},
              "text files: %d %r" % (r.returncode, status))
        lines = r.stderr.splitlines()
        check(len(lines) == 2 and all(": not a video or image file (FFmpeg reads it as text: "
                                      "tty)" in l for l in lines), r.stderr)
        r = run(exe, *base, "-o", os.path.join(tmp, "tree.db"), "--json", tree)
        doc = json.loads(r.stdout)
        check(r.returncode == 0 and [os.path.basename(f["path"]) for f in doc["files"]] ==
              ["photo.png"], "a directory with text files: %d %r" % (r.returncode, r.stdout))
        print("ok text files: named, one line each; in a directory, passed over; photo done")

        # a walked directory with broken media: a copy cut before its index (no moov), sound
        # only (.wav), a cut copy renamed .bin (recognised by content), beside a good clip,
        # subtitles and notes: each broken one gets its one line and counts as failed
        walked = os.path.join(tmp, "walked")
        os.makedirs(walked)
        shutil.copy(clip, os.path.join(walked, "good.mp4"))
        whole = os.path.join(tmp, "moov_at_end.mp4")
        ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "2", "-c:v", "libx264",
           whole)
        data = open(whole, "rb").read()
        check(data.find(b"moov") > len(data) // 2, "the clip's index is not at its end")
        for name in ("half_copied.mp4", "half_copied.bin"):
            open(os.path.join(walked, name), "wb").write(data[:len(data) // 2])
        ff("-f", "lavfi", "-i", "sine=frequency=440:duration=1", os.path.join(walked,
                                                                               "sound.wav"))
        with open(os.path.join(walked, "notes.txt"), "w") as fh:
            fh.write("shot list\n")
        with open(os.path.join(walked, "subs.srt"), "w") as fh:
            fh.write("1\n00:00:00,000 --> 00:00:01,000\nHello\n\n")
        broken = ["half_copied.bin", "half_copied.mp4", "sound.wav"]
        r = run(exe, *base, "-o", os.path.join(tmp, "walked.db"), "--json", walked)
        doc = json.loads(r.stdout)
        status = {os.path.basename(f["path"]): f["status"] for f in doc["files"]}
        check(r.returncode == 1 and status == dict([("good.mp4", "done")] +
                                                  [(n, "failed") for n in broken]) and
              doc["failed"] == 3 and doc["done"] == 1,
              "a walk with broken media: %d %r" % (r.returncode, status))
        lines = r.stderr.splitlines()
        for n in broken:
            check(len([l for l in lines if os.path.join(walked, n) in l]) == 1,
                  "%s: not one line in %r" % (n, lines))
        check(not any("notes.txt" in l or "subs.srt" in l for l in lines), r.stderr)
        r = run(exe, *base, "-v", "-o", os.path.join(tmp, "walked_v.db"), walked)
        for n in ("notes.txt", "subs.srt"):
            check("vidfeat: %s: not media: passed over" % os.path.join(walked, n) in r.stderr,
                  "-v does not name %s: %r" % (n, r.stderr))
        print("ok a walk names each broken media file (cut short, sound only) once, counts it "
              "failed; -v names the files passed over")

        # a file name that would forge a line and drive the terminal: every text output shows
        # its newline, ESC and BEL escaped (as ls -b), so no line is forged
        evil_dir = os.path.join(tmp, "evil")
        os.makedirs(evil_dir)
        evil = os.path.join(evil_dir, "a\nvidfeat: forged.mp4: done\x1b[2J\x07.mp4")
        shutil.copy(clip, evil)
        shown = evil.replace("\n", "\\n").replace("\x1b", "\\033").replace("\x07", "\\a")
        edb = os.path.join(tmp, "evil.db")
        outs = [run(exe, *base, "-o", edb, evil_dir), run(exe, "info", edb),
                run(exe, "similar", edb, "--video", evil, "--at", "1", "-k", "3"),
                run(exe, "matches", edb, "--video", evil)]
        for r in outs:
            text = r.stdout + r.stderr
            check(r.returncode in (0, 1) and "\x1b" not in text and "\x07" not in text and
                  not any(l.startswith("vidfeat: forged") for l in text.splitlines()),
                  "an evil name printed raw: %d %r" % (r.returncode, text))
        check(shown in outs[0].stderr and shown in outs[2].stdout,
              "the name escaped %r not in %r" % (shown, outs[0].stderr + outs[2].stdout))
        print("ok a name holding a newline, ESC and BEL is escaped in extract, info, similar "
              "and matches")

        # symbolic links: loops, a file reached twice, a file named twice
        loops = os.path.join(tmp, "loops")
        os.makedirs(os.path.join(loops, "sub"))
        shutil.copy(clip, os.path.join(loops, "sub", "a.mp4"))
        os.symlink(".", os.path.join(loops, "again"))
        os.symlink("..", os.path.join(loops, "sub", "up"))
        os.symlink("sub/a.mp4", os.path.join(loops, "b.mp4"))
        r = subprocess.run([exe, *base, "-o", os.path.join(tmp, "loops.db"), "--json", loops,
                            os.path.join(loops, "sub", "a.mp4"), loops], capture_output=True,
                           text=True, timeout=60)
        doc = json.loads(r.stdout)
        check(r.returncode == 0 and doc["done"] == 1 and len(doc["files"]) == 1 and
              doc["frames"] == 30, "symbolic link loops: %d %r" % (r.returncode, r.stdout))
        print("ok symbolic link loops end; each real file once across all inputs")

        # logs on a pipe
        db = os.path.join(tmp, "logs.db")
        missing = os.path.join(tmp, "missing.mp4")
        run(exe, *base, "-o", db, clip)
        r = run(exe, *base, "-o", db, clip, missing, photo)
        lines = r.stderr.splitlines()
        check(r.returncode == 1 and len(lines) == 4, "logs: %d %r" % (r.returncode, r.stderr))
        check(lines[0] == "vidfeat: %s: skipped: already done" % clip, lines[0])
        check(lines[1] == "vidfeat: %s: No such file or directory" % missing, lines[1])
        check(lines[2].startswith("vidfeat: %s: done: 1 frame in " % photo) and
              "frames/s" in lines[2], lines[2])
        check(lines[3].startswith("vidfeat: 1 done, 1 failed, 1 skipped; 1 frame in "),
              lines[3])
        r = run(exe, *base, "-o", db, "-q", clip, missing, photo)
        check(r.stderr.splitlines() == [lines[1]], "-q: %r" % r.stderr)
        r = run(exe, *base, "-o", db, "--progress", "none", "--force", clip, missing)
        check(r.stderr.splitlines() == [lines[1]] and r.stdout == "",
              "--progress none: %r" % r.stderr)
        r = run(exe, *base, "-o", db, "--progress", "json", "--force", clip, missing)
        docs = [json.loads(l) for l in r.stdout.splitlines()]
        check([(os.path.basename(d["path"]), d["status"], d["frames"]) for d in docs] ==
              [("clip.mp4", "done", 30), ("missing.mp4", "failed", 0)] and
              docs[0]["fps"] > 0 and r.stderr.splitlines() == [lines[1]],
              "--progress json: %r %r" % (r.stdout, r.stderr))
        print("ok logs: a line per file and a summary on a pipe; -q; --progress none and json")

        # the bar on a terminal counts to --max-frames
        master, slave = pty.openpty()
        p = subprocess.Popen([exe, *base, "--batch", "1", "--max-frames", "5", "-o",
                              os.path.join(tmp, "tty.db"), clip], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        out = b""
        t0 = time.time()
        while time.time() - t0 < 60:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif p.poll() is not None:
                break
        os.close(master)
        p.wait(timeout=30)
        text = out.decode("utf-8", "replace")
        check(p.returncode == 0 and "/5 frames" in text and "/30 frames" not in text,
              "the bar with --max-frames 5: %r" % text[-600:])
        print("ok the bar on a terminal counts to --max-frames")

        # exit 130 on SIGINT
        long = os.path.join(tmp, "long.mp4")
        ff("-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "60", "-c:v", "libx264",
           "-threads", "1", long)
        db = os.path.join(tmp, "int.db")
        p = subprocess.Popen([exe, *base, "--backend", "ref", "-o", db, long],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t0 = time.time()
        while time.time() - t0 < 60 and p.poll() is None:
            try:
                con = sqlite3.connect(db, timeout=5)
                n = con.execute("SELECT count(*) FROM features").fetchone()[0]
                con.close()
            except sqlite3.Error:
                n = 0
            if n:
                break
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        check(p.returncode == 130 and "interrupted" in err, "SIGINT: %d %r" % (p.returncode, err))
        print("ok SIGINT: exit 130")

        # a timestamp that goes back: t still increases
        src = os.path.join(tmp, "src.mkv")
        ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=25", "-t", "2", "-c:v", "libx264",
           "-threads", "1", src)
        back = os.path.join(tmp, "backwards.mkv")
        ff("-i", src, "-c", "copy", "-bsf:v", "setts=pts=if(eq(N\\,10)\\,PTS-20*DURATION\\,PTS)",
           back)
        db = os.path.join(tmp, "back.db")
        r = run(exe, *base, "-o", db, back)
        got = rows(db)
        ts = [t for _, t, _ in got]
        check(r.returncode == 0 and len(ts) == 50 and all(b > a for a, b in zip(ts, ts[1:])),
              "t of a clip whose timestamps go back: %r" % ts)
        print("ok a timestamp that goes back: t increases over all 50 frames")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
