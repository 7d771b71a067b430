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
- hosts: a request addressed (Host) to another name than the bind address, localhost or
  --allow-host's is 403 (DNS rebinding), before its body is read; another site's page (Origin)
  may load the page but not call the API;
- links swapped into the archive's names in a loop (a directory, a file) beside 2,000 video
  requests and 400 thumbnails: never a byte or a frame of the outside file;
- the token: off loopback (--bind 0.0.0.0) a request without it is 401, with the bearer header
  or the cookie that /?token= sets (HttpOnly, SameSite=Strict) it is answered; a wrong one 401;
  --token-file's token is used and not printed; --no-auth asks none; loopback asks none;
- a run writing the same database meanwhile: 8 clients asking at once are all answered, the run
  finishes, and the status then counts its file;
- a file queued and not started counts as pending (the status and info);
- SIGTERM stops it (exit 0); a missing database exits 3; bad options exit 2.

usage: test_serve.py VIDFEAT MODEL_ONNX
"""
import http.client
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
        # the server's own paths (its database's, its archive's place) are none of the page's
        check(os.path.dirname(root).encode() not in body, "%s named a path: %s" % (url, body))
    # a name the database does not hold is one indexed look-up, never the stored names resolved
    # in turn (that cost grew with the archive, and its time told which files exist): another
    # name of a stored file (a link beside it) is not found either
    alias = os.path.join(root, "alias-of-a.mp4")
    if not os.path.lexists(alias):
        os.symlink("a.mp4", alias)
    for url in ("/api/video" + q(path=alias), "/api/thumb" + q(path=alias, t=1),
                "/api/similar" + q(path=alias, t=1), "/api/matches" + q(path=alias)):
        st, _, body = s.get(url)
        check(st == 404, "%s (another name of a stored file) answered %d" % (url, st))
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
    # On a loaded machine (a sanitizer build) the server may not yet have seen the connections
    # of the checks before as closed, and closes a connection over the address's limit unanswered:
    # that is not yet an answer, so each question is asked again for a few seconds
    # (a free slot would wait for the body: each try gives up after 3 s without an answer)
    def announced(path, length, want, seconds=8.0):
        t0, st = time.time(), None
        while st != want and time.time() - t0 < seconds:
            try:
                st = s.announce(path, length, timeout=3)
            except (http.client.HTTPException, OSError):
                st = None
                time.sleep(0.1)
        return st

    st = announced("/api/similar", 33 << 20, 413)
    check(st == 413, "a body over the bound: %s" % st)
    st = announced("/api/status", 1000, 413)
    check(st == 413, "a body to another URL: %s" % st)
    picture = open(png, "rb").read()
    for attempt in range(3):  # four uploads under way, then a fifth
        wait_until(lambda: s.get("/api/similar?k=1", data=picture, method="POST")[0] == 200, 15,
                   0.2)
        held = [s.start_body("/api/similar", 1 << 20) for _ in range(4)]
        st = announced("/api/similar", 1 << 20, 503)
        for conn in held:
            conn.close()
        if st == 503:
            break
    check(st == 503, "a fifth upload at once: %s" % st)
    check(wait_until(lambda: s.get("/api/similar?k=1", data=open(png, "rb").read(),
                                   method="POST")[0] == 200, 10),
          "uploads answered again once the four are gone")
    st, _, body = s.get("/api/similar", data=b"not a picture at all\n" * 50, method="POST")
    check(st == 400 and "error" in json.loads(body), "not a picture: %d %s" % (st, body))
    check(len(json.loads(body)["error"].splitlines()) == 1, body)
    # a playlist uploaded as a picture: its references (beside it, or anywhere) are refused as
    # the client's mistake, and the server's private directory is never named
    for ref in ("segment0.ts", "/etc/passwd", "../../secret.ts"):
        playlist = ("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n%s\n#EXT-X-ENDLIST\n"
                    % ref).encode()
        st, _, body = s.get("/api/similar", data=playlist, method="POST")
        msg = json.loads(body).get("error", "") if body[:1] == b"{" else body.decode()
        check(st == 400 and msg and "/" not in msg.replace("/etc/passwd", ""),
              "a playlist upload (%s): %d %s" % (ref, st, body[:300]))
        check(not any(d in msg for d in upload_dirs()), "the upload directory named: %s" % msg)
    for d in upload_dirs():
        check(not os.listdir(d), "uploads left in %s: %s" % (d, os.listdir(d)))
    print("ok upload: the frame found, 413 over the bound or to another URL, 503 for a fifth at "
          "once, 400 for a non-picture, nothing kept")


def check_tokens(exe, db, root, a, tmp):
    with Server(exe, db, "--root", root, "--bind", "0.0.0.0") as s:
        check(s.token and len(s.token) >= 32, "a token printed: %s" % s.printed)
        # --port 0 is any free port: a second server beside this one starts on another
        with Server(exe, db, "--root", root) as other:
            check(other.url.rsplit(":", 1)[1] != s.url.rsplit(":", 1)[1],
                  "two servers with --port 0: %s and %s" % (s.url, other.url))
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
        # a cookie is the host's, not the port's: its name carries the port, so another
        # server's token (another port of this machine) is not sent in its place
        port = s.url.rsplit(":", 1)[1]
        check(cookie.startswith("vidfeat_token_%s=" % port), "the cookie's name: %s" % cookie)
        st, _, _ = s.get("/api/video" + q(path=a), headers={"Cookie": cookie.split(";")[0]})
        check(st == 200, "the cookie: %d" % st)
        st, _, _ = s.get("/api/video" + q(path=a),
                         headers={"Cookie": "vidfeat_token_1=" + s.token})
        check(st == 401, "the token under another port's name: %d" % st)
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


def check_hosts(exe, db, root, a):
    """Only names of the server's own are answered (DNS rebinding: a page whose name an attacker
    points at 127.0.0.1 shares the server's origin, so only the Host header tells it apart), and
    another site's page may load the page but not call the API; both before any body is read."""
    video = "/api/video" + q(path=a)
    with Server(exe, db, "--root", root) as s:
        port = s.url.rsplit(":", 1)[1]
        for url in (video, "/api/status", "/", "/api/thumb" + q(path=a, t=1)):
            for host in ("evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port,
                         "[::1]:" + port, "10.0.0.7:" + port, "localhost:" + port + ":1", ""):
                st, _, body = s.get(url, headers={"Host": host})
                check(st == 403 and not body.startswith(b"\0\0\0"),
                      "%s with Host %r answered %d" % (url, host, st))
        st, _, body = s.get(video, headers={"Host": "evil.example:" + port})
        check(b"--allow-host" in body, "the refusal says what to do: %r" % body)
        for host in ("localhost:" + port, "LOCALHOST:" + port, "127.0.0.1:" + port, "localhost."):
            st, _, _ = s.get(video, headers={"Host": host})
            check(st == 200, "Host %r: %d" % (host, st))
        same = "http://127.0.0.1:" + port
        for origin in ("http://evil.example", "null", "https://127.0.0.1:" + port,
                       "http://localhost:" + port):
            for url in (video, "/api/status", "/api/search" + q(text="x")):
                st, _, _ = s.get(url, headers={"Origin": origin})
                check(st == 403, "%s from Origin %r: %d" % (url, origin, st))
            st, _, _ = s.get("/", headers={"Origin": origin})
            check(st == 200, "the page itself from Origin %r: %d" % (origin, st))
        st, _, _ = s.get(video, headers={"Origin": same})
        check(st == 200, "the same origin: %d" % st)
        host, _ = s.url[len("http://"):].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.putrequest("POST", "/api/similar", skip_host=True)
        c.putheader("Host", "evil.example:" + port)
        c.putheader("Content-Length", str(30 << 20))
        c.endheaders()
        check(c.getresponse().status == 403, "a body to a name not ours is refused unread")
        c.close()
    with Server(exe, db, "--root", root, "--allow-host", "archive.test,Media.Example") as s:
        port = s.url.rsplit(":", 1)[1]
        for host in ("archive.test:" + port, "media.example", "localhost:" + port):
            st, _, _ = s.get(video, headers={"Host": host})
            check(st == 200, "--allow-host: Host %r: %d" % (host, st))
        st, _, _ = s.get(video, headers={"Host": "other.test:" + port})
        check(st == 403, "a name not allowed: %d" % st)
    with Server(exe, db, "--root", root, "--bind", "0.0.0.0") as s:
        port = s.url.rsplit(":", 1)[1]
        # no token: a 30 MiB body is refused at its headers, not read whole first
        t0 = time.time()
        st = s.announce("/api/similar", 30 << 20)
        check(st == 401 and time.time() - t0 < 5, "a body without the token: %d" % st)
        bearer = {"Authorization": "Bearer " + s.token}
        st, _, _ = s.get("/api/status", headers=dict(bearer, Host="192.168.3.4:" + port))
        check(st == 200, "bound to 0.0.0.0, an address of the machine: %d" % st)
        st, _, _ = s.get("/api/status", headers=dict(bearer, Host="evil.example:" + port))
        check(st == 403, "bound to 0.0.0.0, a name: %d" % st)
    print("ok hosts: other names 403 (before a body is read), localhost and the bind address "
          "answered, --allow-host's names too; other sites' pages may not call the API")


SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = libc.renameat2
AT_FDCWD, RENAME_EXCHANGE = -100, 2
pairs = [(a.encode(), b.encode()) for a, b in zip(sys.argv[1::2], sys.argv[2::2])]
sys.stdout.write("swapping\n")
sys.stdout.flush()
while True:
    for a, b in pairs:
        renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
"""


def check_swaps(exe, model, tmp):
    """A directory of the archive and a file in it swapped for links out, over and over
    (renameat2 RENAME_EXCHANGE, as someone who can write inside the archive would), beside 2,000
    video requests and 400 thumbnails: no byte and no frame of the outside file comes back."""
    root = os.path.join(tmp, "swap_root")
    out = os.path.join(tmp, "swap_outside")
    for d in ("d", "f"):
        os.makedirs(os.path.join(root, d))
        os.makedirs(os.path.join(out, d))
    inside = os.path.join(root, "d", "clip.mp4")  # red, recorded; outside: blue, the same length
    outside = os.path.join(out, "d", "clip.mp4")
    for path, colour in ((inside, "red"), (outside, "blue")):
        ff("-f", "lavfi", "-i", "color=c=%s:s=128x96:r=25:d=10" % colour, "-c:v", "libx264",
           "-pix_fmt", "yuv420p", path)
    single = os.path.join(root, "f", "clip.mp4")
    shutil.copy(inside, single)
    shutil.copy(outside, os.path.join(out, "f", "clip.mp4"))
    db = os.path.join(tmp, "swap.db")
    r = run(exe, "--model", model, "-q", "--fps", "1", "-o", db, inside, single)
    check(r.returncode == 0, r.stderr)
    os.symlink(os.path.join(out, "d"), os.path.join(root, "d_link"))  # the directory's twin
    os.symlink(os.path.join(out, "f", "clip.mp4"), os.path.join(root, "f", "link.mp4"))
    good = open(inside, "rb").read()
    bad = open(outside, "rb").read()
    with Server(exe, db, "--root", root) as s:
        st, _, red = s.get("/api/thumb" + q(path=inside, t=0))
        st2, _, red2 = s.get("/api/thumb" + q(path=single, t=0))
        check(st == 200 and st2 == 200 and red == red2, "the red frame: %d %d" % (st, st2))
        swapper = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, os.path.join(root, "d"), os.path.join(root, "d_link"),
             single, os.path.join(root, "f", "link.mp4")],
            stdout=subprocess.PIPE, text=True)
        try:
            check(swapper.stdout.readline().strip() == "swapping", "the swapper started")
            answered = refused = 0
            for i in range(2000):
                st, _, body = s.get("/api/video" + q(path=inside))
                check(st in (200, 404), "video %d: %d" % (i, st))
                check(body != bad and (st != 200 or body == good),
                      "video %d: %d bytes that are not the archive's file" % (i, len(body)))
                answered += st == 200
                refused += st == 404
            frames = 0
            for i in range(400):  # each a time of its own, so each is decoded, not cached
                path = inside if i % 2 else single
                st, _, jpg = s.get("/api/thumb" + q(path=path, t="%.3f" % (0.04 + i * 0.02)))
                check(st in (200, 404), "thumbnail %d: %d %s" % (i, st, jpg[:200]))
                check(st != 200 or jpg == red, "thumbnail %d: a frame that is not red" % i)
                frames += st == 200
        finally:
            swapper.kill()
            swapper.wait()
    check(answered > 0 and frames > 0, "some requests answered: %d, %d" % (answered, frames))
    print("ok links swapped in and out beside 2,000 video requests (%d answered, %d refused) "
          "and 400 thumbnails (%d answered): never a byte or a frame of the outside files"
          % (answered, refused, frames))


def raw(s, data, wait=5.0):
    """Send raw bytes on a new connection; (what came back, whether the server closed it)."""
    import socket
    host, port = s.url[len("http://"):].rsplit(":", 1)
    c = socket.create_connection((host.strip("[]"), int(port)), timeout=wait)
    c.sendall(data)
    got, closed = b"", False
    try:
        while True:
            chunk = c.recv(65536)
            if not chunk:
                closed = True
                break
            got += chunk
    except OSError:  # a timeout: still open
        pass
    c.close()
    return got, closed


def check_framing(s, png):
    """Ambiguous framing (RFC 9112 6.3) is refused and the connection closed; slow bodies lose
    their slot; one address may hold so many connections and no more."""
    port = s.url.rsplit(":", 1)[1]
    head = "POST /api/similar HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n" % port
    for extra in ("Content-Length: 5\r\nContent-Length: 7\r\n",
                  "Content-Length: 5\r\nContent-Length: 5\r\n",
                  "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                  "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"):
        got, closed = raw(s, (head + extra + "\r\n" + "5\r\nhello\r\n0\r\n\r\n" +
                              "GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % port)
                          .encode())
        check(got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1 ") == 1 and closed,
              "framing %r: %r, closed %s" % (extra, got[:120], closed))
    # four uploads that trickle a byte a second hold the four upload slots only until they fall
    # below the rate (a grace of 5 s): then an upload of a picture is answered again
    import socket
    host = s.url[len("http://"):].rsplit(":", 1)[0]
    # the four must first hold the slots: on a loaded machine the connections of the tests
    # before may still count against this address for a moment, so the four are tried again
    slow, busy = [], None
    picture = open(png, "rb").read()
    for attempt in range(3):
        for c in slow:
            c.close()
        slow = []
        # the slots of an attempt before are given back only once the server sees those
        # connections closed: until an upload is answered again, a 503 would be theirs
        wait_until(lambda: s.get("/api/similar?k=1", data=picture, method="POST")[0] == 200, 15,
                   0.2)
        for _ in range(4):
            c = socket.create_connection((host, int(port)), timeout=30)
            c.sendall((head + "Content-Length: 1000\r\n\r\n").encode())
            slow.append(c)
        t0 = time.time()
        busy = None
        while busy != 503 and time.time() - t0 < 4:
            busy = s.get("/api/similar?k=1", data=picture, method="POST")[0]
            time.sleep(0.05)
        if busy == 503:
            # held by these four alone: still refused a moment later (a slot of a connection
            # before them, closed but not yet seen so, would come free now)
            again = []
            for _ in range(3):
                time.sleep(0.5)
                again.append(s.get("/api/similar?k=1", data=picture, method="POST")[0])
            if again == [503] * 3:
                break
            busy = None
        time.sleep(2)
    answered = None
    while time.time() - t0 < 25 and answered is None:
        for c in slow:
            try:
                c.send(b"x")
            except OSError:
                pass
        st = s.get("/api/similar?k=1", data=open(png, "rb").read(), method="POST")[0]
        if st == 200:
            answered = time.time() - t0
        time.sleep(1)
    ended = 0  # told 408, or closed
    for c in slow:
        try:
            c.settimeout(2)
            got = c.recv(100)
            ended += got == b"" or got.startswith(b"HTTP/1.1 408")
        except OSError:
            pass
        c.close()
    check(busy == 503 and answered is not None and ended >= 1,
          "trickling uploads: first %d, answered after %s s, %d ended" % (busy, answered, ended))
    # one address holds at most 32 connections at once
    idle = []
    for _ in range(40):
        idle.append(socket.create_connection((host, int(port)), timeout=5))
    time.sleep(0.5)
    refused = 0
    for c in idle:
        try:
            c.sendall(("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % port).encode())
            c.settimeout(5)
            refused += not c.recv(12).startswith(b"HTTP/1.1 200")
        except OSError:
            refused += 1
    for c in idle:
        c.close()
    check(refused >= 8, "40 connections from one address: %d refused" % refused)
    check(wait_until(lambda: s.get("/api/status")[0] == 200, 10), "answered again after")
    print("ok framing: two lengths or a length with an encoding refused and closed; a trickled "
          "upload loses its slot (another answered after %.0f s); one address, 32 connections"
          % answered)


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
            check_framing(s, os.path.join(tmp, "frame.png"))
            check_writer(exe, s, db, root, model)
            code, err = s.stop()
            check(code == 0, "SIGTERM: exit %d %s" % (code, err))
            check(not os.listdir(tmpdir), "the upload directory is removed: %s" % os.listdir(tmpdir))
        print("ok SIGTERM stops it (exit 0), its upload directory removed")
        check_tokens(exe, db, root, a, tmp)
        check_hosts(exe, db, root, a)
        check_swaps(exe, model, tmp)
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
