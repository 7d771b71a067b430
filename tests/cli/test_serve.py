#!/usr/bin/python3
"""vidfeat serve's API and its doors (docs/serve.md), over HTTP from here, on clips made with
ffmpeg and the tiny CNN (no ../shared needed); the page itself in a browser is
test_serve_browser.py's.

- the API's documents are the command's --json ones: similar --video --at, matches, info's
  summary (timings aside);
- a thumbnail is a JPEG of the frame at t (within a few levels of ffmpeg's frame there, farther
  from another), at most 320 pixels a side; the same one again comes from the cache;
- a video is served whole and by byte ranges (206 with Content-Range, a suffix range, 416 past
  the end), exactly the file's bytes;
- nothing else is served: a file the database does not hold, one it holds outside --root, one
  reached through a link out of it, relative paths climbing out (plain and percent-encoded),
  /etc/passwd, directories, unknown URLs: 404; a missing path 400; DELETE 405; every reply
  carries the Content-Security-Policy (no inline script) and nosniff;
- an uploaded image finds its frame (its neighbourhood first); a body over the bound is 413; a
  file that is not a picture is one line, 400; a body to another URL is 413 and a fifth upload
  at once 503, unread; nothing is left in the upload directory;
- the token: off loopback (--bind 0.0.0.0) a request without it is 401, with the bearer header
  or the cookie that /?token= sets (HttpOnly, SameSite=Strict) it is answered; a wrong one 401;
  --token-file's token is used and not printed; --no-auth asks none; loopback asks none;
- a run writing the same database meanwhile: 8 clients asking at once are all answered, the run
  finishes, and the status then counts its file;
- a file queued and not started counts as pending (the status and info);
- SIGTERM stops it (exit 0); a missing database exits 3; bad options exit 2.

usage: test_serve.py VIDFEAT MODEL_ONNX
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from serveproc import Server, wait_until
from vfcheck import SKIP, check, ff

try:
    import numpy as np
except ImportError:
    np = None


def run(exe, *args, timeout=300, cwd=None):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def q(**kw):
    return "?" + urllib.parse.urlencode(kw)


def without(doc, *keys):
    return {k: v for k, v in doc.items() if k not in keys}


def rgb(path, w, h, t=None):
    """A picture (or a video's frame at t) as w x h RGB bytes, by ffmpeg."""
    args = ["ffmpeg", "-v", "error"] + (["-ss", str(t)] if t is not None else []) + [
        "-i", path, "-frames:v", "1", "-vf", "scale=%d:%d" % (w, h), "-f", "rawvideo",
        "-pix_fmt", "rgb24", "-"]
    return np.frombuffer(subprocess.run(args, capture_output=True, check=True).stdout,
                         dtype=np.uint8).astype(np.float64)


def check_docs(exe, s, db, a, model):
    # similar --video --at: the same document but for the time it took
    st, _, body = s.get("/api/similar" + q(path=a, t=1.0, k=5))
    check(st == 200, "similar: %d %s" % (st, body[:300]))
    api = json.loads(body)
    r = run(exe, "similar", db, "--model", model, "--video", a, "--at", "1", "--top", "5",
            "--json")
    check(r.returncode == 0, r.stderr)
    cli = json.loads(r.stdout)
    check(without(api, "search_ms") == without(cli, "search_ms"),
          "similar: the API's %s\nthe command's %s" % (api, cli))
    # matches
    st, _, body = s.get("/api/matches")
    check(st == 200, "matches: %d %s" % (st, body[:300]))
    api = json.loads(body)
    r = run(exe, "matches", db, "--model", model, "--json")
    check(r.returncode == 0, r.stderr)
    cli = json.loads(r.stdout)
    check(without(api, "search_ms", "align_ms") == without(cli, "search_ms", "align_ms"),
          "matches: the API's %s\nthe command's %s" % (api, cli))
    # the status's summary is info's
    st, _, body = s.get("/api/status")
    check(st == 200, "status: %d" % st)
    api = json.loads(body)
    r = run(exe, "info", db, "--json", "--summary")
    cli = json.loads(r.stdout)
    check(api["summary"] == cli["summary"] and api["indexes"] == cli["indexes"],
          "status: %s\ninfo: %s" % (api, cli))
    check(set(api) == {"summary", "failed", "running", "indexes", "model", "layer"}, sorted(api))
    print("ok the API's documents are the command's --json ones (similar, matches, info)")


def check_thumbs(s, a, tmp):
    st, h, jpg = s.get("/api/thumb" + q(path=a, t=1.5))
    check(st == 200 and h["Content-Type"] == "image/jpeg" and jpg[:3] == b"\xff\xd8\xff",
          "thumbnail: %d %s" % (st, h["Content-Type"]))
    path = os.path.join(tmp, "thumb.jpg")
    with open(path, "wb") as f:
        f.write(jpg)
    r = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of",
                        "csv=p=0", path], capture_output=True, text=True)
    w, hgt = map(int, r.stdout.strip().split(","))
    check(max(w, hgt) <= 320 and (w, hgt) == (320, 240), "thumbnail size %dx%d" % (w, hgt))
    st2, _, again = s.get("/api/thumb" + q(path=a, t=1.5))
    check(st2 == 200 and again == jpg, "the same thumbnail again")
    if np is not None:
        mine = rgb(path, w, hgt)
        there = rgb(a, w, hgt, t=1.5)
        other = rgb(a, w, hgt, t=4.0)
        near, far = np.abs(mine - there).mean(), np.abs(mine - other).mean()
        check(near < 6.0 and far > 3 * near,
              "thumbnail at 1.5 s: %.2f levels from ffmpeg's frame there, %.2f from 4.0 s"
              % (near, far))
        print("ok thumbnail: %dx%d JPEG, %.2f levels from the frame at t (%.2f from another)"
              % (w, hgt, near, far))
    st, _, _ = s.get("/api/thumb" + q(path=a, t="x"))
    check(st == 400, "a bad time: %d" % st)


def check_video(s, a):
    data = open(a, "rb").read()
    st, h, body = s.get("/api/video" + q(path=a))
    check(st == 200 and body == data and h["Accept-Ranges"] == "bytes" and
          h["Content-Type"] == "video/mp4", "the whole video: %d %d bytes" % (st, len(body)))
    st, h, body = s.get("/api/video" + q(path=a), headers={"Range": "bytes=100-199"})
    check(st == 206 and body == data[100:200] and
          h["Content-Range"] == "bytes 100-199/%d" % len(data), "a range: %d %s" % (
              st, h["Content-Range"]))
    st, h, body = s.get("/api/video" + q(path=a), headers={"Range": "bytes=-50"})
    check(st == 206 and body == data[-50:], "a suffix range: %d" % st)
    st, h, body = s.get("/api/video" + q(path=a), headers={"Range": "bytes=%d-" % len(data)})
    check(st == 416 and h["Content-Range"] == "bytes */%d" % len(data), "past the end: %d" % st)
    for bad, want in (("bytes=abc", 200), ("bytes=5-2", 200), ("bytes=0-0,5-6", 200),
                      ("items=0-5", 200), ("bytes=-0", 416), ("bytes=99999999999999999999-", 200)):
        st, h, body = s.get("/api/video" + q(path=a), headers={"Range": bad})
        check(st == want and (st != 200 or body == data), "Range %s: %d" % (bad, st))
    print("ok video: whole, ranges (206), past the end (416), malformed ranges the whole file")


def check_doors(s, root, outside, link, unrecorded):
    bad = [
        "/api/video" + q(path="/etc/passwd"),
        "/api/video" + q(path=unrecorded),
        "/api/video" + q(path=outside),
        "/api/video" + q(path=link),
        "/api/video" + q(path="../outside/c.mp4"),
        "/api/video?path=%2e%2e%2foutside%2fc.mp4",
        "/api/video" + q(path=root),
        "/api/thumb" + q(path=outside, t=1),
        "/api/similar" + q(path=unrecorded, t=1),
        "/api/matches" + q(path=unrecorded),
        "/api/", "/api", "/web/index.html", "/index.html", "/app.js/..", "/..%2f..%2fetc%2fpasswd",
        "/" + root.lstrip("/"), "/etc/passwd",
    ]
    for url in bad:
        st, h, body = s.get(url)
        check(st == 404, "%s answered %d: %s" % (url, st, body[:200]))
        check(b"root:" not in body, "%s leaked a file" % url)
    st, h, _ = s.get("/api/video")
    check(st == 400, "no path: %d" % st)
    st, h, _ = s.get("/api/status", method="DELETE")
    check(st == 405, "DELETE: %d" % st)
    for url in ("/", "/app.js", "/api/status", "/nothing"):
        st, h, _ = s.get(url)
        csp = h["Content-Security-Policy"] or ""
        check("script-src 'self'" in csp and "unsafe-inline" not in csp and
              h["X-Content-Type-Options"] == "nosniff", "%s: headers %s" % (url, dict(h)))
    print("ok %d URLs outside the archive answer 404; every reply has the CSP" % len(bad))


def check_upload(s, a, tmp, upload_dirs):
    png = os.path.join(tmp, "frame.png")
    ff("-ss", "1.0", "-i", a, "-frames:v", "1", png)
    st, _, body = s.get("/api/similar" + q(k=3), data=open(png, "rb").read(), method="POST")
    check(st == 200, "upload: %d %s" % (st, body[:300]))
    doc = json.loads(body)
    hits = doc["neighbours"]
    check(doc["query"]["path"] == "upload" and doc["query"]["stored"] is False, doc["query"])
    # the tiny CNN's random features tell neighbouring frames apart only barely
    check(len(hits) == 3 and all(abs(x["t"] - 1.0) < 0.1 + 1e-6 for x in hits),
          "the frame's neighbourhood first: %s" % hits)
    st = s.announce("/api/similar", 33 << 20)
    check(st == 413, "a body over the bound: %d" % st)
    st = s.announce("/api/status", 1000)
    check(st == 413, "a body to another URL: %d" % st)
    held = [s.start_body("/api/similar", 1 << 20) for _ in range(4)]  # four uploads under way
    time.sleep(0.3)
    st = s.announce("/api/similar", 1 << 20)
    for conn in held:
        conn.close()
    check(st == 503, "a fifth upload at once: %d" % st)
    check(wait_until(lambda: s.get("/api/similar?k=1", data=open(png, "rb").read(),
                                   method="POST")[0] == 200, 10),
          "uploads answered again once the four are gone")
    st, _, body = s.get("/api/similar", data=b"not a picture at all\n" * 50, method="POST")
    check(st == 400 and "error" in json.loads(body), "not a picture: %d %s" % (st, body))
    check(len(json.loads(body)["error"].splitlines()) == 1, body)
    for d in upload_dirs():
        check(not os.listdir(d), "uploads left in %s: %s" % (d, os.listdir(d)))
    print("ok upload: the frame found, 413 over the bound or to another URL, 503 for a fifth at "
          "once, 400 for a non-picture, nothing kept")


def check_tokens(exe, db, root, a, tmp):
    with Server(exe, db, "--root", root, "--bind", "0.0.0.0") as s:
        check(s.token and len(s.token) >= 32, "a token printed: %s" % s.printed)
        st, _, _ = s.get("/api/status")
        check(st == 401, "no token off loopback: %d" % st)
        st, _, _ = s.get("/")
        check(st == 401, "the page without the token: %d" % st)
        st, _, _ = s.get("/api/status", headers={"Authorization": "Bearer " + "0" * 32})
        check(st == 401, "a wrong token: %d" % st)
        st, _, _ = s.get("/api/status", headers={"Authorization": "Bearer " + s.token})
        check(st == 200, "the bearer token: %d" % st)
        st, h, _ = s.get("/?token=" + s.token)
        cookie = h["Set-Cookie"] or ""
        check(st == 303 and h["Location"] == "/" and "HttpOnly" in cookie and
              "SameSite=Strict" in cookie, "/?token=: %d %s" % (st, cookie))
        st, _, _ = s.get("/api/video" + q(path=a), headers={"Cookie": cookie.split(";")[0]})
        check(st == 200, "the cookie: %d" % st)
        st, _, _ = s.get("/?token=wrong")
        check(st == 401, "a wrong ?token=: %d" % st)
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write("a-token-of-my-own-0123456789\n")
    with Server(exe, db, "--root", root, "--bind", "0.0.0.0", "--token-file", token_file) as s:
        check(s.token is None and "a-token" not in s.printed, "printed: %s" % s.printed)
        st, _, _ = s.get("/api/status")
        check(st == 401, "--token-file, none given: %d" % st)
        st, _, _ = s.get("/api/status",
                         headers={"Authorization": "Bearer a-token-of-my-own-0123456789"})
        check(st == 200, "--token-file's token: %d" % st)
    with Server(exe, db, "--root", root, "--bind", "0.0.0.0", "--no-auth") as s:
        st, _, _ = s.get("/api/status")
        check(s.token is None and st == 200, "--no-auth: %d" % st)
    print("ok tokens: 401 without, bearer and cookie admitted, --token-file, --no-auth")


def check_writer(exe, s, db, root, model):
    longer = os.path.join(root, "longer.mp4")
    ff("-f", "lavfi", "-i", "testsrc2=s=320x240:r=25,trim=duration=20", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", longer)
    before = json.loads(s.get("/api/status")[2])["summary"]["done"]
    writer = subprocess.Popen([exe, "--model", model, "-q", "-o", db, "--batch", "4", longer],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    codes, lock = [], threading.Lock()

    def client(i):
        while writer.poll() is None or len(codes) < 16:
            url = "/api/status" if i % 2 else "/api/similar" + q(path=os.path.join(root, "a.mp4"),
                                                                  t=0.5, k=5)
            st = s.get(url)[0]
            with lock:
                codes.append(st)
            if len(codes) > 2000:
                break
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    out, err = writer.communicate(timeout=300)
    for t in threads:
        t.join(timeout=120)
    check(writer.returncode == 0, "the run beside the server: %s" % err)
    check(codes and all(c == 200 for c in codes), "answers while a run writes: %s" % (
        sorted(set(codes))))
    after = json.loads(s.get("/api/status")[2])["summary"]["done"]
    check(after == before + 1, "status counts the run's file: %d -> %d" % (before, after))
    print("ok %d requests from 8 clients answered while a run wrote the database" % len(codes))


def main():
    exe, model = sys.argv[1:3]
    if not shutil.which("ffmpeg"):
        print("skip: the ffmpeg CLI makes the clips")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="vidfeat_serve_")
    tmpdir = os.path.join(tmp, "tmpdir")  # the server's TMPDIR: where its uploads go
    os.makedirs(tmpdir)
    env = dict(os.environ, TMPDIR=tmpdir)
    try:
        root = os.path.join(tmp, "archive")
        outside_dir = os.path.join(tmp, "outside")
        os.makedirs(root)
        os.makedirs(outside_dir)
        a = os.path.join(root, "a.mp4")
        ff("-f", "lavfi", "-i", "mandelbrot=s=320x240:r=10,trim=duration=6", "-c:v", "libx264",
           "-pix_fmt", "yuv420p", a)
        hostile = os.path.join(root, "<img src=x onerror=alert(1)>.mkv")
        ff("-i", a, "-c", "copy", hostile)
        outside = os.path.join(outside_dir, "c.mp4")
        ff("-i", a, "-t", "2", "-c", "copy", outside)
        link = os.path.join(root, "link.mp4")
        os.symlink(outside, link)
        unrecorded = os.path.join(root, "unrecorded.mp4")
        shutil.copy(a, unrecorded)
        db = os.path.join(tmp, "s.db")
        r = run(exe, "--model", model, "-q", "-o", db, a, hostile, outside)
        check(r.returncode == 0, r.stderr)
        r = run(exe, "--model", model, "-q", "-o", db, "link.mp4", cwd=root)
        check(r.returncode == 0, "the link: %s" % r.stderr)

        with Server(exe, db, "--root", root, "--model", model, env=env) as s:
            check(s.token is None, "loopback asks no token: %s" % s.printed)
            check_docs(exe, s, db, a, model)
            check_thumbs(s, a, tmp)
            check_video(s, a)
            check_doors(s, root, outside, link, unrecorded)
            check_upload(s, a, tmp, lambda: [os.path.join(tmpdir, d) for d in os.listdir(tmpdir)])
            check_writer(exe, s, db, root, model)
            code, err = s.stop()
            check(code == 0, "SIGTERM: exit %d %s" % (code, err))
            check(not os.listdir(tmpdir), "the upload directory is removed: %s" % os.listdir(tmpdir))
        print("ok SIGTERM stops it (exit 0), its upload directory removed")
        check_tokens(exe, db, root, a, tmp)
        # a queued file no worker has started is pending, on the page as in info
        r = run(exe, "enqueue", "-o", db, unrecorded)
        check(r.returncode == 0, r.stderr)
        with Server(exe, db, "--root", root) as s:
            summary = json.loads(s.get("/api/status")[2])["summary"]
            check(summary["pending"] == 1, "pending: %s" % summary)
        r = run(exe, "info", db, "--summary")
        check("; 1 queued, not started" in r.stdout, r.stdout)
        print("ok a queued file not started is pending (status, info)")

        r = run(exe, "serve", os.path.join(tmp, "missing.db"))
        check(r.returncode == 3 and len(r.stderr.splitlines()) == 1, "missing: %d %s" % (
            r.returncode, r.stderr))
        for bad in (["--port", "70000"], ["--bind", "nowhere"], ["--fps", "1"],
                    ["--root", os.path.join(tmp, "none")]):
            r = run(exe, "serve", db, *bad)
            check(r.returncode == 2 and len(r.stderr.splitlines()) == 1,
                  "%s: exit %d %s" % (bad, r.returncode, r.stderr))
        r = run(exe, "serve", db, "--no-auth", "--token-file", os.path.join(tmp, "token"))
        check(r.returncode == 2, "--no-auth with --token-file: %d" % r.returncode)
        print("ok a missing database exits 3, bad options 2, each one line")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
