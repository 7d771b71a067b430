#!/usr/bin/python3
"""vidfeat serve's page in a real browser (Debian's chromium, headless, through chromium-driver
and python3-selenium), on clips made here with ffmpeg and CLIP ViT-B/32 as
scripts/export-clip.py writes it (seeded random weights: the order of the hits is the API's,
whatever they mean):

- words typed -> the grid's thumbnails are the API's hits, in its order, each loaded;
- an uploaded image -> a grid of its neighbours;
- a click on a thumbnail -> the video plays in the page within 0.5 s of the hit's time; a
  file the browser cannot play (MPEG-4 part 2 in AVI) -> a strip of thumbnails around it;
- "more like this" -> the clicked frame first, then the API's hits for it;
- a file named <img src=x onerror="window.pwned=1">.webm shows as that text; no script runs;
- a file whose name is not UTF-8 (caf\xe9.webm, Latin-1): its thumbnails load and it plays (the
  page sends its name's bytes back as they came, not U+FFFD);
- URLs outside the archive answer 404 (fetched by the page);
- the reuse view shows the API's matches, each with thumbnails of both sides; the archive view
  shows the status's counts and the file that failed, with why;
- off loopback the page asks the token: without it 401, with /?token= the page works (cookie).
Screenshots of each view are written to $VIDFEAT_SCREENSHOTS when set (docs/serve.md).
Without CLIP's vocabulary (../shared) the words are not searched and the test says so and
skips after the rest.

usage: test_serve_browser.py VIDFEAT SOURCE_DIR BUILD_MODELS_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

from serveproc import Server
from vfcheck import SKIP, check, export_clip, ff

VOCAB = "bpe_simple_vocab_16e6.txt.gz"
HOSTILE = '<img src=x onerror="window.pwned=1">.webm'


def need():
    """What this machine lacks for the test, or None."""
    for tool in ("ffmpeg", "chromium", "chromedriver"):
        if not shutil.which(tool):
            return "no %s" % tool
    try:
        import selenium  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--mute-audio",
              "--autoplay-policy=no-user-gesture-required", "--window-size=1280,900"):
        o.add_argument(a)
    o.binary_location = shutil.which("chromium")
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=o)


def wait(d, cond, what, seconds=30):
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(d, seconds, poll_frequency=0.05).until(lambda _: cond())
    except Exception:
        shot = os.path.join(tempfile.gettempdir(), "vidfeat_serve_browser_fail.png")
        d.save_screenshot(shot)
        check(False, "%s (not within %d s; screenshot %s; message: %r)" % (
            what, seconds, shot, d.find_element("id", "message").text))


# A name's byte that is not UTF-8 is a lone surrogate in the page (U+DC80 + the byte), which the
# WebDriver cannot carry: both sides compare names with such a character written as \xNN.
ESCAPED = "s => s.replace(/[\\uDC80-\\uDCFF]/g, ch => '\\\\x' + " \
          "(ch.charCodeAt(0) - 0xDC00).toString(16))"


def shown(name):
    return "".join("\\x%x" % (ord(ch) - 0xDC00) if 0xDC80 <= ord(ch) <= 0xDCFF else ch
                   for ch in name)


def cards(d):
    return d.execute_script(
        "const esc = " + ESCAPED + ";"
        "return [...document.querySelectorAll('#results .card')].map(c => "
        "[esc(c.dataset.path), Number(c.dataset.t), c.querySelector('img').complete && "
        "c.querySelector('img').naturalWidth > 0, esc(c.querySelector('.name').textContent)])")


def api(s, path):
    st, _, body = s.get(path)
    check(st == 200, "%s: %d %s" % (path, st, body[:300]))
    return json.loads(body)


def shot(d, name):
    out = os.environ.get("VIDFEAT_SCREENSHOTS")
    if out:
        os.makedirs(out, exist_ok=True)
        d.save_screenshot(os.path.join(out, "serve-%s.png" % name))


def clear_grid(d):
    """Empty the grid, so that only the next search's cards fill it."""
    d.execute_script("document.getElementById('results').replaceChildren()")


def check_grid(d, want, what):
    """The grid shows want's (path, t) in order, every thumbnail loaded."""
    wait(d, lambda: len(cards(d)) == len(want) and all(c[2] for c in cards(d)),
         "%s: %d cards with their thumbnails" % (what, len(want)))
    got = [(c[0], c[1]) for c in cards(d)]
    want = [(shown(p), t) for p, t in want]
    check(got == want, "%s: the grid %s\nthe API's %s" % (what, got[:5], want[:5]))


def play(d, path, t):
    """Click path's card at t; the video must play within 0.5 s of t."""
    d.execute_script(
        "const esc = " + ESCAPED + ";"
        "const c = [...document.querySelectorAll('#results .card')].find(c => "
        "esc(c.dataset.path) === arguments[0] && Number(c.dataset.t) === arguments[1]);"
        "c.querySelector('img').click();", shown(path), t)
    state = "return [document.getElementById('video').currentTime, " \
            "document.getElementById('video').paused, document.getElementById('video').hidden]"
    wait(d, lambda: (lambda v: not v[1] and not v[2] and v[0] > 0)(d.execute_script(state)),
         "the video of %s plays" % path)
    now = d.execute_script(state)[0]
    check(abs(now - t) <= 0.5, "the video plays at %.3f s, the hit is at %.3f s" % (now, t))
    return now


def main():
    exe, src, build_models = sys.argv[1:4]
    lack = need()
    if lack:
        print("skip: %s (the browser test needs ffmpeg, chromium, chromium-driver, selenium and "
              "PyTorch)" % lack)
        return SKIP
    tmp = tempfile.mkdtemp(prefix="vidfeat_browser_")
    skipped = []
    d = None
    try:
        models = os.path.join(tmp, "models")
        os.makedirs(models)
        export_clip(src, models)
        words = os.path.exists(os.path.join(build_models, VOCAB))
        if words:
            shutil.copy(os.path.join(build_models, VOCAB), models)
        else:
            skipped.append("search by words (CLIP's vocabulary is not here: ../shared)")
        root = os.path.join(tmp, "archive")
        os.makedirs(root)
        sea = os.path.join(root, "sea.webm")
        ff("-f", "lavfi", "-i", "testsrc2=s=320x240:r=10,trim=duration=4", "-c:v", "libvpx-vp9",
           "-deadline", "realtime", "-cpu-used", "8", "-b:v", "400k", sea)
        hostile = os.path.join(root, HOSTILE)
        shutil.copy(sea, hostile)
        latin = os.fsdecode(os.path.join(os.fsencode(root), b"caf\xe9.webm"))
        ff("-f", "lavfi", "-i", "testsrc=s=320x240:r=10,trim=duration=2", "-c:v", "libvpx-vp9",
           "-deadline", "realtime", "-cpu-used", "8", "-b:v", "400k", latin)
        old = os.path.join(root, "old.avi")
        ff("-f", "lavfi", "-i", "mandelbrot=s=320x240:r=10,trim=duration=3", "-c:v", "mpeg4",
           old)
        broken = os.path.join(root, "broken.mp4")  # the start of sea.webm: a failed file
        with open(broken, "wb") as f:
            f.write(open(sea, "rb").read()[:600])
        db = os.path.join(tmp, "archive.db")
        r = subprocess.run([exe, "--models-dir", models, "--model", "clip_vit_b32", "--fps", "2",
                            "-q", "-o", db, sea, hostile, latin, old, broken], capture_output=True,
                           text=True, timeout=600)
        check(r.returncode == 1 and "broken.mp4" in r.stderr, "the run: %d %s" % (
            r.returncode, r.stderr))
        png = os.path.join(tmp, "query.png")
        ff("-ss", "1.5", "-i", sea, "-frames:v", "1", png)

        d = browser()
        with Server(exe, db, "--root", root, "--models-dir", models) as s:
            d.get(s.url + "/")
            wait(d, lambda: d.find_element("id", "q").is_displayed(), "the page")
            if words:
                text = "a colourful test pattern"
                d.find_element("id", "q").send_keys(text + "\n")
                want = [(h["path"], h["t"]) for h in api(s, "/api/search?" + urllib.parse.urlencode(
                    {"text": text, "k": 24}))["neighbours"]]
                check_grid(d, want, "words")
                shot(d, "search")
                print("ok words typed: %d thumbnails in the API's order" % len(want))
            # an uploaded image (the grid emptied first: the words' grid must not pass for it)
            clear_grid(d)
            d.find_element("id", "upload").send_keys(png)
            st, _, body = s.get("/api/similar?k=24", data=open(png, "rb").read(), method="POST")
            check(st == 200, "upload: %d" % st)
            want = [(h["path"], h["t"]) for h in json.loads(body)["neighbours"]]
            check_grid(d, want, "an uploaded image")
            if not words:
                shot(d, "search")
            print("ok an uploaded image: %d thumbnails in the API's order" % len(want))
            # the hostile name: text, no script
            names = [c[3] for c in cards(d) if c[0] == hostile]
            check(names and all(n == hostile for n in names), "the hostile name shows as %r" %
                  names[:1])
            check(d.execute_script("return window.pwned === undefined && "
                                   "!document.querySelector('img[src=\"x\"]')"),
                  "the hostile name ran as HTML")
            print("ok a file named %s shows as text, runs nothing" % HOSTILE)
            # a click plays the video from t
            t_sea = max(c[1] for c in cards(d) if c[0] == sea)
            now = play(d, sea, t_sea)
            shot(d, "player")
            print("ok a click plays %s at %.3f s (the hit: %.3f s)" % (os.path.basename(sea), now,
                                                                    t_sea))
            from selenium.webdriver.common.keys import Keys
            d.find_element("tag name", "body").send_keys(Keys.ESCAPE)
            wait(d, lambda: d.execute_script("return document.getElementById('player').hidden"),
                 "Escape closing the player")
            print("ok Escape closes the player")
            # a file the browser cannot play: a strip of thumbnails
            t_old = [c[1] for c in cards(d) if c[0] == old]
            check(t_old, "old.avi among the hits: %s" % cards(d))
            d.execute_script(
                "const c = [...document.querySelectorAll('#results .card')].find(c => "
                "c.dataset.path === arguments[0]); c.querySelector('img').click();", old)
            wait(d, lambda: d.execute_script(
                "const s = document.getElementById('strip'); return !s.hidden && "
                "s.querySelectorAll('img').length > 0 && [...s.querySelectorAll('img')].every("
                "i => i.complete && i.naturalWidth > 0)"), "old.avi's strip of thumbnails")
            print("ok a file the browser cannot play shows a strip of thumbnails")
            d.find_element("id", "player-close").click()
            # more like this: the clicked frame first, then the API's hits
            path, t = cards(d)[1][0], cards(d)[1][1]
            d.execute_script(  # the grid emptied first, then the button of the card it held
                "const b = document.querySelectorAll('#results .card')[1].querySelector('.more');"
                "document.getElementById('results').replaceChildren(); b.click();")
            doc = api(s, "/api/similar?" + urllib.parse.urlencode({"path": path, "t": t, "k": 24}))
            want = [(doc["query"]["path"], doc["query"]["t"])] + [
                (h["path"], h["t"]) for h in doc["neighbours"]]
            check(want[0] == (path, t), "the query is the clicked frame: %s" % (want[0],))
            check_grid(d, want, "more like this")
            asked = d.execute_script(
                "const c = document.querySelector('#results .card');"
                "return [c.classList.contains('query'), c.textContent, !!c.querySelector('.more'),"
                "document.querySelectorAll('#results .card .more').length];")
            check(asked[0] and "the frame asked" in asked[1] and "1.000" not in asked[1] and
                  not asked[2] and asked[3] == len(want) - 1,
                  "the asked frame's card reads as the query, not a match: %s" % (asked,))
            print("ok more like this: the clicked frame first (said so, no score, no button), "
                  "then the API's %d hits" % (len(want) - 1))
            # a name that is not UTF-8: more like its frame (asked as the page asks, its name
            # as the JSON gave it), its cards' thumbnails load and it plays
            clear_grid(d)
            d.execute_script(
                "moreLike(arguments[0].replace(/\\\\x([0-9a-f]{2})/g, (m, h) => "
                "String.fromCharCode(0xDC00 + parseInt(h, 16))), 1);", shown(latin))
            doc = api(s, "/api/similar?path=%s&t=1&k=24" % urllib.parse.quote(os.fsencode(latin)))
            want = [(doc["query"]["path"], doc["query"]["t"])] + [
                (h["path"], h["t"]) for h in doc["neighbours"]]
            check_grid(d, want, "more like a frame of caf\\xe9.webm")
            play(d, latin, want[0][1])
            d.find_element("tag name", "body").send_keys(Keys.ESCAPE)
            wait(d, lambda: d.execute_script("return document.getElementById('player').hidden"),
                 "the player closes")
            print("ok a file named caf\\xe9.webm (Latin-1): its thumbnails load, it plays")
            # URLs outside the archive, asked by the page
            codes = d.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "Promise.all(arguments[0].map(u => fetch(u).then(r => r.status)))"
                ".then(done);",
                ["/api/video?path=/etc/passwd", "/api/video?path=..%2F..%2Fetc%2Fpasswd",
                 "/api/thumb?path=%2Fetc%2Fhostname&t=0", "/api/", "/archive.db",
                 "/api/video?path=" + urllib.parse.quote(db)])
            check(codes == [404] * 6, "outside the archive: %s" % codes)
            print("ok URLs outside the archive answer 404 in the browser")
            # reused footage
            d.find_element("id", "tab-matches").click()
            before = d.find_element("id", "matches-info").text
            check("Nothing searched yet" in before, "the reuse view before a search: %r" % before)
            d.find_element("id", "find-matches").click()
            doc = api(s, "/api/matches")
            wait(d, lambda: "reused pieces" in d.find_element("id", "matches-info").text,
                 "the reuse view")
            n = len(doc["matches"])
            check(n >= 1, "the copy of sea.webm is found: %s" % doc)
            wait(d, lambda: d.execute_script(
                "const m = document.querySelectorAll('#matches .match'); return m.length === "
                "arguments[0] && [...document.querySelectorAll('#matches img')].every(i => "
                "i.complete && i.naturalWidth > 0)", n), "%d matches with thumbnails" % n)
            # each side's bar to its own file's scale: start and end over the file's extent
            bars = d.execute_script(
                "return [...document.querySelectorAll('#matches .timeline span')].map(b => "
                "[parseFloat(b.style.left), parseFloat(b.style.width)]);")
            for k, m in enumerate(doc["matches"]):
                for j, (start, end, length) in enumerate(((m["a_start"], m["a_end"], m["a_length"]),
                                                          (m["b_start"], m["b_end"], m["b_length"]))):
                    left, width = bars[2 * k + j]
                    check(length >= end and abs(left - 100 * start / length) < 0.5 and
                          abs(width - max(1, 100 * (end - start) / length)) < 0.5,
                          "match %d side %d: the bar %s is not %s over %.2f s" % (
                              k, j, (left, width), (start, end), length))
            shot(d, "matches")
            print("ok the reuse view: %d matches, thumbnails of both sides, each bar to its "
                  "file's length" % n)
            # the archive's progress
            d.find_element("id", "tab-status").click()
            status = api(s, "/api/status")
            done = status["summary"]["done"]
            check(done == 4 and [f["path"] for f in status["failed"]] == [broken],
                  "status: %s" % status)
            wait(d, lambda: d.execute_script(
                "const e = document.querySelector('#st-done b'); return e && e.textContent")
                == str(done), "the archive view's count of done files")
            wait(d, lambda: broken in d.find_element("id", "status").text and
                 status["failed"][0]["error"] in d.find_element("id", "status").text,
                 "the failed file and why")
            shot(d, "status")
            print("ok the archive view: %d files done, the failed one and why" % done)
        # the token, off loopback
        with Server(exe, db, "--root", root, "--models-dir", models, "--bind", "0.0.0.0") as s:
            d.get(s.url + "/")
            check("asks a token" in d.find_element("tag name", "body").text,
                  "without the token: %r" % d.find_element("tag name", "body").text[:200])
            d.get(s.url + "/?token=" + s.token)
            wait(d, lambda: d.find_element("id", "q").is_displayed(), "the page with the token")
            d.find_element("id", "tab-status").click()
            wait(d, lambda: d.execute_script(
                "const e = document.querySelector('#st-done b'); return e && e.textContent"),
                "the API through the cookie")
            print("ok off loopback: 401 without the token, the page works with it")
    finally:
        if d is not None:
            d.quit()
        shutil.rmtree(tmp, ignore_errors=True)
    if skipped:
        print("skip: not checked: %s" % "; ".join(skipped))
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
