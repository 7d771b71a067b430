#!/usr/bin/python3
"""What an input may read (docs/archives.md "What vidfeat reads"), with files made here:

- an HLS playlist whose segments stay in its directory is done; one segment that is absolute,
  a '../' path, a 'file:' address, a link leading out or a network address fails the playlist
  with one line naming it, and nothing of it is stored (its first segment decoded fine);
- a concat list: an entry outside (absolute: FFmpeg's safe mode; a link leading out) or an entry
  that is itself a playlist fails it; one that keeps to its directory is done;
- a DASH manifest is never read (FFmpeg's demuxer opens its segments beyond these checks):
  segments outside, inside, renamed .mp4, named by a concat list;
- without --root, a playlist's references must stay in its own directory;
- under --root: queue rows that are absolute, have '..' or lead out through a link are refused
  with one line each and recorded failed, never opened (the outside file is a FIFO nobody
  writes: opened, it would stall); links inside the root work; a link out is refused on the
  command line and in a walk unless --follow-links-outside; enqueue refuses such names;
- a device named on the command line fails at once; a FIFO is still read.
With PostgreSQL installed, the queue rows again on a real server.

usage: test_confine.py VIDFEAT MODELS_DIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading

from vfcheck import check, ff, SKIP

OUTSIDE = "refers to a file outside the archive: "


def run(exe, *args, timeout=120):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


def lines(r):
    return [l for l in r.stderr.splitlines() if l.strip()]


def stored(db, path):
    """(status, vectors stored) of path's extraction(s) in an SQLite database."""
    con = sqlite3.connect(db)
    out = con.execute(
        "SELECT e.status, (SELECT count(*) FROM features f WHERE f.extraction_id = e.id)"
        " FROM extractions e JOIN videos v ON v.id = e.video_id WHERE v.path = ?",
        (os.path.abspath(path),)).fetchall()
    con.close()
    return out


def playlist(path, segments):
    with open(path, "w") as f:
        f.write("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:0\n")
        for s in segments:
            f.write("#EXTINF:1.000000,\n%s\n" % s)
        f.write("#EXT-X-ENDLIST\n")


def check_playlists(exe, model, tmp):
    arch, out = os.path.join(tmp, "arch"), os.path.join(tmp, "outside")
    os.makedirs(os.path.join(arch, "sub"))
    os.makedirs(out)
    ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "3", "-c:v", "libx264", "-g", "5",
       "-f", "hls", "-hls_time", "1", "-hls_list_size", "0", os.path.join(arch, "own.m3u8"))
    check(sorted(os.listdir(arch)) == ["own.m3u8", "own0.ts", "own1.ts", "own2.ts", "sub"],
          "segments made: %r" % os.listdir(arch))
    shutil.copy(os.path.join(arch, "own1.ts"), os.path.join(out, "secret.ts"))
    shutil.copy(os.path.join(arch, "own1.ts"), os.path.join(arch, "sub", "seg.ts"))
    os.symlink(os.path.join(out, "secret.ts"), os.path.join(arch, "away.ts"))
    os.symlink("own2.ts", os.path.join(arch, "near.ts"))  # a link that stays inside
    secret = os.path.join(out, "secret.ts")
    db = os.path.join(tmp, "hls.db")
    base = ["--model", model, "-o", db, "--progress", "lines"]

    good = {"sub.m3u8": ["own0.ts", "sub/seg.ts", "near.ts"]}
    bad = {  # name: (the escaping segment, what the line names)
        "absolute.m3u8": (secret, secret),
        "dotdot.m3u8": ("../outside/secret.ts", os.path.join(os.path.relpath(arch), "..",
                                                               "outside", "secret.ts")),
        "fileurl.m3u8": ("file:" + secret, secret),
        "link.m3u8": ("away.ts", os.path.join(os.path.relpath(arch), "away.ts")),
    }
    for name, segs in good.items():
        playlist(os.path.join(arch, name), segs)
    for name, (seg, _) in bad.items():
        playlist(os.path.join(arch, name), ["own0.ts", seg, "own2.ts"])
    playlist(os.path.join(arch, "network.m3u8"), ["own0.ts", "http://127.0.0.1:9/x.ts"])

    for name in ["own.m3u8", *good]:
        path = os.path.relpath(os.path.join(arch, name))
        r = run(exe, *base, path)
        check(r.returncode == 0, "%s: %s" % (name, r.stderr))
        check(stored(db, path) == [("done", 30)], "%s: %r" % (name, stored(db, path)))
    print("ok a playlist whose segments stay in its directory (a link inside too) is done")

    for name, (seg, ref) in bad.items():
        path = os.path.relpath(os.path.join(arch, name))
        r = run(exe, *base, "--batch", "4", path)  # the first segment's batches are stored
        want = "vidfeat: %s: %s%s" % (path, OUTSIDE, ref)
        check(r.returncode == 1 and lines(r)[0] == want,
              "%s: rc %d, %r (want %r)" % (name, r.returncode, lines(r), want))
        check(len(lines(r)) == 2 and "1 failed" in lines(r)[1], "%s: %r" % (name, lines(r)))
        # the first segment decodes before the second is met: its vectors must go too
        check(stored(db, path) == [("failed", 0)], "%s stored: %r" % (name, stored(db, path)))
    print("ok absolute, ../, file: and link-out segments: one line naming them, failed, "
          "nothing stored")

    # a reference met late, after FFmpeg's look ahead (5 s): the first segment's batches are
    # stored by then, and go when the playlist fails
    ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "12", "-c:v", "libx264",
       "-f", "mpegts", os.path.join(arch, "long.ts"))
    with open(os.path.join(arch, "late.m3u8"), "w") as f:
        f.write("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:12\n#EXTINF:12.0,\nlong.ts\n"
                "#EXTINF:1.0,\n%s\n#EXT-X-ENDLIST\n" % secret)
    path = os.path.relpath(os.path.join(arch, "late.m3u8"))
    r = run(exe, *base, "--batch", "4", path)
    check(r.returncode == 1 and lines(r)[0] == "vidfeat: %s: %s%s" % (path, OUTSIDE, secret),
          "late: %r" % lines(r))
    check(stored(db, path) == [("failed", 0)], "late stored: %r" % stored(db, path))
    print("ok a reference met after 12 s of frames: failed, the frames stored before it removed")

    path = os.path.relpath(os.path.join(arch, "network.m3u8"))
    r = run(exe, *base, path)
    check(r.returncode == 1 and lines(r)[0] == "vidfeat: %s: refers to something other than a "
          "file: http://127.0.0.1:9/x.ts" % path, "network: %r" % lines(r))
    print("ok a network address in a playlist is refused")

    # without --root the archive is the playlist's own directory: a sibling directory is out
    sib = os.path.join(tmp, "sibling")
    os.makedirs(sib)
    shutil.copy(os.path.join(arch, "own0.ts"), os.path.join(sib, "s.ts"))
    playlist(os.path.join(arch, "sub", "up.m3u8"), ["seg.ts", "../own2.ts"])
    path = os.path.relpath(os.path.join(arch, "sub", "up.m3u8"))
    r = run(exe, *base, path)
    check(r.returncode == 1 and OUTSIDE in lines(r)[0] and lines(r)[0].endswith("own2.ts"),
          "up: %r" % lines(r))
    # ... and with --root the archive is the root: the same playlist is done
    r = run(exe, *base, "--root", arch, path)
    check(r.returncode == 0, "up under --root: %s" % r.stderr)
    print("ok without --root a playlist keeps to its directory; under --root to the root")

    # concat lists
    def concat(name, entries):
        with open(os.path.join(arch, name), "w") as f:
            f.write("ffconcat version 1.0\n")
            for e in entries:
                f.write("file '%s'\n" % e)
        return os.path.relpath(os.path.join(arch, name))

    path = concat("ok.ffconcat", ["own0.ts", "sub/seg.ts"])
    r = run(exe, *base, path)
    check(r.returncode == 0 and stored(db, path) == [("done", 20)], "concat ok: %s" % r.stderr)
    for entries, want in ((["own0.ts", secret], OUTSIDE + secret),
                          (["own0.ts", "away.ts"], OUTSIDE + "away.ts"),
                          (["own0.ts", "own.m3u8"], "lists a playlist or list of other files, "
                           "which is not read: own.m3u8")):
        path = concat("bad.ffconcat", entries)
        r = run(exe, *base, "--force", path)
        check(r.returncode == 1 and lines(r)[0] == "vidfeat: %s: %s" % (path, want),
              "concat %r: %r" % (entries, lines(r)))
        check(stored(db, path) == [("failed", 0)], "concat %r: %r" % (entries, stored(db, path)))
    print("ok concat lists: entries inside are done; outside, a link out or a playlist refused")

    # DASH manifests: FFmpeg's demuxer opens their segments itself, beyond the checks above, so
    # none is read - one whose BaseURL or template leads outside, one that keeps to its
    # directory, one renamed .mp4, and one named by a concat list
    dash_dir = os.path.join(out, "dash")
    os.makedirs(dash_dir)
    ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "2", "-c:v", "libx264", "-f",
       "dash", os.path.join(dash_dir, "m.mpd"))
    mpd = open(os.path.join(dash_dir, "m.mpd")).read()
    outside_mpd = mpd.replace("<Period", "<BaseURL>file://%s/</BaseURL><Period" % dash_dir)
    relative_mpd = mpd.replace("<Period", "<BaseURL>../outside/dash/</BaseURL><Period")
    for name, text in (("abs.mpd", outside_mpd), ("rel.mpd", relative_mpd),
                       ("renamed.mp4", outside_mpd)):
        open(os.path.join(arch, name), "w").write(text)
    shutil.copy(os.path.join(dash_dir, "m.mpd"), os.path.join(dash_dir, "own.mpd"))
    refused = "not read: FFmpeg's demuxer for it opens the files it lists beyond vidfeat's checks"
    for path in [os.path.relpath(os.path.join(arch, n)) for n in ("abs.mpd", "rel.mpd",
                                                                  "renamed.mp4")] + \
            [os.path.join(dash_dir, "own.mpd")]:
        for root in ([], ["--root", arch]) if path.startswith(os.path.relpath(arch)) else ([],):
            r = run(exe, *base, "--force", *root, path)
            check(r.returncode == 1 and len(lines(r)) == 2 and
                  lines(r)[0].startswith("vidfeat: %s: %s" % (path, refused)) and
                  stored(db, path) in ([("failed", 0)], []),
                  "dash %s %r: %d %r" % (path, root, r.returncode, lines(r)))
    path = concat("dash.ffconcat", ["own0.ts", "abs.mpd"])
    r = run(exe, *base, "--force", path)
    check(r.returncode == 1 and stored(db, path) == [("failed", 0)],
          "concat naming a DASH manifest: %d %r" % (r.returncode, lines(r)))
    print("ok DASH manifests are never read: outside, inside, renamed, or named by a concat list")
    return arch, out


def check_root(exe, model, tmp, arch, out, target, name):
    """Queue rows and links under --root, on the database target (SQLite file or URI)."""
    fifo = os.path.join(out, "fifo-%s.ts" % name)
    os.mkfifo(fifo)  # opened for reading, it would wait for a writer: --stall-timeout 20
    os.symlink(fifo, os.path.join(arch, "fifo-%s.ts" % name))
    base = ["--model", model, "-o", target, "--stall-timeout", "20", "--progress", "lines"]
    r = run(exe, "enqueue", "-o", target, "--root", arch, os.path.join(arch, "own0.ts"))
    check(r.returncode == 0, "enqueue: %s" % r.stderr)
    escaping = ["../outside/fifo-%s.ts" % name, fifo, "fifo-%s.ts" % name]
    if target.startswith("postgresql:"):
        sql = "INSERT INTO queue (path, added_at) VALUES %s" % ", ".join(
            "('%s', now()::text)" % p for p in escaping)
        subprocess.run(["psql", target, "-X", "-q", "-c", sql], check=True, capture_output=True)
    else:
        con = sqlite3.connect(target)
        con.executemany("INSERT INTO queue (path, added_at) VALUES (?, '')",
                        [(p,) for p in escaping])
        con.commit()
        con.close()
    r = run(exe, *base, "--root", arch, "--json")
    check(r.returncode == 1, "queue worker: rc %d %s" % (r.returncode, r.stderr))
    why = {f["path"]: f["error"] for f in json.loads(r.stdout)["files"] if f["status"] == "failed"}
    want = {
        os.path.join(arch, escaping[0]): "names a file outside --root %s (a '..' in it): not read"
        % arch,
        fifo: "names a file outside --root %s (an absolute name): not read" % arch,
        os.path.join(arch, escaping[2]): "leads outside --root %s through a symbolic link: not "
        "read (--follow-links-outside allows it)" % arch,
    }
    check(why == want, "queue refusals:\n%r\nwant\n%r" % (why, want))
    for path, line in want.items():
        check("vidfeat: %s: %s" % (path, line) in lines(r), "no line for %s: %r" % (path, r.stderr))
    print("ok %s: queue rows absolute, with '..' or through a link out: refused, one line each, "
          "never opened" % name)
    return escaping


def main():
    exe, models = sys.argv[1:3]
    if not shutil.which("ffmpeg"):
        print("SKIP: ffmpeg is not installed")
        sys.exit(SKIP)
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_confine_")
    cwd = os.getcwd()
    try:
        os.chdir(tmp)
        arch, out = check_playlists(exe, model, tmp)

        db = os.path.join(tmp, "queue.db")
        check_root(exe, model, tmp, arch, out, db, "sqlite")
        con = sqlite3.connect(db)
        states = dict(con.execute("SELECT path, state FROM leases"))
        con.close()
        check(states == {"own0.ts": "done", "../outside/fifo-sqlite.ts": "failed",
                         os.path.join(out, "fifo-sqlite.ts"): "failed",
                         "fifo-sqlite.ts": "failed"}, "lease states: %r" % states)

        # links on the command line and in a walk under --root
        base = ["--model", model, "-o", os.path.join(tmp, "links.db"), "--progress", "lines"]
        away = os.path.join(arch, "away.ts")
        r = run(exe, *base, "--root", arch, os.path.join(arch, "near.ts"), away)
        check(r.returncode == 1 and lines(r)[0].startswith("vidfeat: %s: done" % os.path.join(
            arch, "near.ts")) and lines(r)[1] == "vidfeat: %s: leads outside --root %s through a"
              " symbolic link: not read (--follow-links-outside allows it)" % (away, arch),
              "links: %r" % lines(r))
        r = run(exe, *base, "--root", arch, "--follow-links-outside", away)
        check(r.returncode == 0, "--follow-links-outside: %s" % r.stderr)
        walk = os.path.join(tmp, "walk")
        os.makedirs(walk)
        shutil.copy(os.path.join(arch, "own0.ts"), os.path.join(walk, "a.ts"))
        os.symlink(out, os.path.join(walk, "elsewhere"))
        r = run(exe, *base, "--root", walk, walk)
        refused = ("vidfeat: %s/elsewhere: leads outside --root %s through a symbolic link: not "
                   "read (--follow-links-outside allows it)" % (walk, walk))
        check(r.returncode == 1 and len(lines(r)) == 3 and refused in lines(r) and any(
            l.startswith("vidfeat: %s/a.ts: done: 10 frames" % walk) for l in lines(r)),
              "walk: %r" % lines(r))
        r = run(exe, "enqueue", "-o", os.path.join(tmp, "q2.db"), "--root", arch, away)
        check(r.returncode == 1 and lines(r)[0] == "vidfeat: %s: leads outside --root %s through"
              " a symbolic link: not queued (--follow-links-outside allows it)" % (away, arch),
              "enqueue link: %r" % lines(r))
        r = run(exe, "enqueue", "-o", os.path.join(tmp, "q2.db"), "--root", arch,
                os.path.join(arch, "sub", "..", "own0.ts"))
        check(r.returncode != 0 and "a '..' in a name under --root" in r.stderr,
              "enqueue ..: %r" % r.stderr)
        print("ok links under --root: inside done, out refused unless --follow-links-outside; "
              "a walk does not enter a link out; enqueue refuses both")

        # a name on the command line is a file's name, never an address
        for name in ("http://127.0.0.1:9/x.mp4", "file:" + os.path.join(out, "secret.ts")):
            r = run(exe, "--model", model, "-o", os.path.join(tmp, "dev.db"), name, timeout=30)
            check(r.returncode == 1 and lines(r)[0] == "vidfeat: %s: No such file or directory"
                  % name, "%s: %r" % (name, lines(r)))
        print("ok names on the command line are files' names: no network, no file: address")

        # a device at once; a FIFO still read
        r = run(exe, "--model", model, "-o", os.path.join(tmp, "dev.db"), "/dev/zero",
                timeout=30)
        check(r.returncode == 1 and lines(r)[0] == "vidfeat: /dev/zero: is a device, not a file "
              "or a pipe: not read", "device: %r" % lines(r))
        pipe = os.path.join(tmp, "pipe.ts")
        os.mkfifo(pipe)

        def feed():
            with open(pipe, "wb") as w, open(os.path.join(arch, "own0.ts"), "rb") as f:
                w.write(f.read())
        t = threading.Thread(target=feed)
        t.start()
        r = run(exe, "--model", model, "-o", os.path.join(tmp, "dev.db"), pipe, timeout=60)
        t.join()
        check(r.returncode == 0, "fifo: %s" % r.stderr)
        print("ok a device named is refused at once; a FIFO is read")

        try:
            from pgserver import PgServer, Unavailable
            server = PgServer()
        except Unavailable as e:
            print("postgresql part skipped: %s" % e)
            return
        with server as pg:
            uri = pg.uri("confine")
            check_root(exe, model, tmp, arch, out, uri, "pg")
            states = dict(
                l.split("|") for l in pg.psql("confine", "SELECT path, state FROM leases").split())
            check(states == {"own0.ts": "done", "../outside/fifo-pg.ts": "failed",
                             os.path.join(out, "fifo-pg.ts"): "failed", "fifo-pg.ts": "failed"},
                  "pg lease states: %r" % states)
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
