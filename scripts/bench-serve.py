#!/usr/bin/python3
"""vidfeat serve under load: the numbers behind docs/serve.md's "Under load" table. Prints them
with the CPU's name; nothing is asserted.

    scripts/bench-serve.py [--build DIR] [--vectors 1000000] [--dim 512] [--clients 50]
                           [--seconds 20] [--dir DIR] [--only KIND,...]

1. An SQLite archive of N synthetic DIM-d vectors (100 frames a file, around 1,000 scenes:
   vfbench.write_archive), plus ten 60 s 1280x720 H.264 clips made by ffmpeg recorded under the
   same model (one vector every 0.5 s), and `vidfeat index` over them (the kind it chooses).
2. `vidfeat serve` on it, loaded by wrk (Debian's `wrk`: a C client, so that the clients cost
   little of the machine) with CLIENTS connections for SECONDS each time:
   - "more like this" alone (/api/similar: a random stored frame, 24 hits, through the index);
   - thumbnails alone, cold (/api/thumb: a random clip at a random millisecond, so nearly every
     one is decoded: a seek to the key frame before it, frames decoded up to it, JPEG);
   - thumbnails alone, warm (the 24 of one page of results, asked again and again: the cache);
   - the issue's mix: half the connections "more like this", half cold thumbnails, while a
     worker extracts clips into the same database again and again (the tiny CNN, --force);
   - the same mix as people use a page: each connection waits 0.5-1.5 s (1 s on average)
     after each answer before asking again (wrk's delay()), the worker writing meanwhile.
   The loads without pauses keep every connection waiting for an answer all the time: they
   measure the machine at its limit, where a request's latency is mostly its place in line.
   Each search load is preceded by 5 s of the same load, not counted (the index loaded, the
   pages of the archive read once), the warm thumbnails by one request for each of them.
3. Per request kind: requests/s, latency p50, p90, p99, max (wrk's), errors; the worker's runs.

--dir DIR keeps the archive, its clips and index in DIR and reuses them when a run before made
them there (a million vectors take minutes to write and index); --only runs some of the loads
(similar, thumb_cold, thumb_warm, mixed, people).
"""
import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import vfbench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIPS, CLIP_S = 10, 60


def add_clips(vidfeat, db, tmp, dim):
    """Ten real clips recorded under the bench model row (random vectors every 0.5 s)."""
    import numpy as np
    clip = os.path.join(tmp, "clip0.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
                    "testsrc2=s=1280x720:r=25,trim=duration=%d" % CLIP_S, "-c:v", "libx264",
                    "-preset", "veryfast", "-g", "50", "-pix_fmt", "yuv420p", clip], check=True)
    paths = [clip]
    for i in range(1, CLIPS):
        paths.append(os.path.join(tmp, "clip%d.mp4" % i))
        shutil.copy(clip, paths[-1])
    con = sqlite3.connect(db)
    model_id = con.execute("SELECT id FROM models WHERE name = 'bench'").fetchone()[0]
    rng = np.random.default_rng(5)
    for p in paths:
        vfbench.add_file(con, model_id, p, rng.standard_normal((CLIP_S * 2, dim)).astype("<f4"),
                         2.0)
    con.commit()
    con.close()
    return paths


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--vectors", type=int, default=1000000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--dir")
    ap.add_argument("--only", default="similar,thumb_cold,thumb_warm,mixed,people")
    a = ap.parse_args()
    vidfeat = os.path.join(a.build, "src", "cli", "vidfeat")
    if not shutil.which("wrk"):
        sys.exit("bench-serve: needs wrk (apt-get install wrk)")
    print("# %s, %d cores; %s vectors of %d; %d connections for %d s each" % (
        vfbench.cpu_name(), os.cpu_count(), "{:,}".format(a.vectors), a.dim, a.clients,
        a.seconds), flush=True)
    with tempfile.TemporaryDirectory(prefix="vidfeat_bench_serve_") as scratch:
        tmp = a.dir or scratch
        os.makedirs(tmp, exist_ok=True)
        db = os.path.join(tmp, "archive.db")
        made = os.path.join(tmp, "made.json")  # what a run before left here
        want = {"vectors": a.vectors, "dim": a.dim}
        before = json.load(open(made)) if a.dir and os.path.exists(made) else {}
        if before.get("for") == want:
            clips = before["clips"]
            print("# archive of a run before reused (%s)" % tmp, flush=True)
        else:
            for name in os.listdir(tmp):
                if name.startswith("archive.db") or name.startswith("clip"):
                    os.unlink(os.path.join(tmp, name))
            t0 = time.time()
            vfbench.write_archive(vidfeat, db, a.vectors, a.dim,
                                  {"name": "bench", "file_sha256": "none", "layer": "pool",
                                   "preprocessing": "bench"}, 11)
            clips = add_clips(vidfeat, db, tmp, a.dim)
            r = subprocess.run([vidfeat, "index", db, "--model", "bench", "--json"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("vidfeat index: " + r.stderr)
            kind = json.loads(r.stdout)["kind"]
            print("# archive written and indexed (%s) in %.0f s" % (kind, time.time() - t0),
                  flush=True)
            with open(made, "w") as f:
                json.dump({"for": want, "clips": clips}, f)

        srv = subprocess.Popen([vidfeat, "serve", db, "--model", "bench", "--port", "0",
                                "--root", "/"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        url = srv.stdout.readline().strip().rstrip("/")
        files = a.vectors // 100
        scripts = write_lua(tmp, files, clips)
        print("| load | request | connections | requests/s | p50 ms | p90 ms | p99 ms | max ms |"
              " errors |")
        print("|---|---|---|---|---|---|---|---|---|")
        half = [("similar", a.clients // 2), ("thumb_cold", a.clients - a.clients // 2)]
        for name, load, runs in (("similar", "alone", [("similar", a.clients)]),
                                 ("thumb_cold", "alone", [("thumb_cold", a.clients)]),
                                 ("thumb_warm", "alone", [("thumb_warm", a.clients)]),
                                 ("mixed", "mixed, a worker writing", half),
                                 ("people", "people (1 s pauses), a worker writing",
                                  [(kind + "_paused", n) for kind, n in half])):
            if name not in a.only.split(","):
                continue
            if name == "thumb_warm":
                for path in warm_thumbs(clips):  # each made once
                    urllib.request.urlopen(url + path).read()
            if any(kind.startswith("similar") for kind, _ in runs):
                subprocess.run(["wrk", "-t1", "-c%d" % a.clients, "-d5s", "-s", scripts["similar"],
                                url], stdout=subprocess.DEVNULL, check=True)
            worker = Worker(vidfeat, db, a.seconds) if "worker" in load else None
            procs = [(kind, n, subprocess.Popen(
                ["wrk", "-t1", "-c%d" % n, "-d%ds" % a.seconds, "--timeout", "30s", "--latency",
                 "-s", scripts[kind], url], stdout=subprocess.PIPE, text=True))
                for kind, n in runs]
            for kind, n, p in procs:
                out = p.communicate()[0]
                r = parse_wrk(out)
                print("| %s | %s | %d | %.1f | %s | %s | %s | %s | %d |" % (
                    load, LABELS[kind.replace("_paused", "")], n, r["rps"], r["50%"], r["90%"], r["99%"], r["max"],
                    r["errors"]), flush=True)
            if worker:
                runs_done = worker.join()
                print("# the worker meanwhile: %d runs, exit statuses %s" % (
                    len(runs_done), sorted(set(runs_done))))
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)


LABELS = {"similar": "more like this (index)", "thumb_cold": "thumbnail, cold (720p H.264)",
          "thumb_warm": "thumbnail, warm (cached)"}


def warm_thumbs(clips):
    """The warm load's requests: the 24 thumbnails of one page of results."""
    return ["/api/thumb?" + urllib.parse.urlencode({"path": clips[i % len(clips)],
                                                   "t": "%.3f" % (2.5 * i)}) for i in range(24)]


def write_lua(tmp, files, clips):
    """wrk scripts, one per request kind: each request a random one of its kind."""
    quoted = ", ".join('"%s"' % urllib.parse.quote(c) for c in clips)
    bodies = {
        "similar": 'local f = math.random(0, %d)\n'
                   '  local t = math.random(0, 99) / 25\n'
                   '  return wrk.format("GET", string.format('
                   '"/api/similar?path=/archive/bench/f%%07d.mp4&t=%%g&k=24", f, t))' % (files - 1),
        "thumb_cold": 'local c = clips[math.random(1, #clips)]\n'
                      '  local t = math.random(0, %d) / 1000\n'  # within the last frame's time
                      '  return wrk.format("GET", string.format("/api/thumb?path=%%s&t=%%.3f", c, t))'
                      % (CLIP_S * 1000 - 100),
        "thumb_warm": 'return wrk.format("GET", warm[math.random(1, #warm)])',
    }
    warm = ", ".join('"%s"' % u for u in warm_thumbs(clips))
    pause = "delay = function()\n  return math.random(500, 1500)\nend\n"
    out = {}
    for kind, body in list(bodies.items()) + [(k + "_paused", bodies[k])
                                              for k in ("similar", "thumb_cold")]:
        out[kind] = os.path.join(tmp, kind + ".lua")
        with open(out[kind], "w") as f:
            f.write("clips = {%s}\nwarm = {%s}\nmath.randomseed(%d)\n"
                    "request = function()\n  %s\nend\n%s"
                    % (quoted, warm, len(kind), body, pause if kind.endswith("_paused") else ""))
    return out


def ms(text):
    """wrk's '12.34ms', '1.20s', '850.00us' in milliseconds, as text."""
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3), ("m", 6e4)):
        if text.endswith(unit):
            return "%.1f" % (float(text[:-len(unit)]) * f)
    return text


def parse_wrk(out):
    r = {"rps": 0.0, "errors": 0, "max": "-"}
    for line in out.splitlines():
        w = line.split()
        if len(w) == 2 and w[0] in ("50%", "75%", "90%", "99%"):
            r[w[0]] = ms(w[1])
        elif w[:1] == ["Latency"] and len(w) >= 4:
            r["max"] = ms(w[3])
        elif line.startswith("Requests/sec:"):
            r["rps"] = float(w[1])
        elif line.strip().startswith("Non-2xx"):
            r["errors"] += int(w[-1])
        elif line.strip().startswith("Socket errors"):
            r["errors"] += sum(int(x.strip(",")) for x in w[3::2])
    return r


class Worker:
    """A worker extracting a clip into the database again and again for `seconds`."""

    def __init__(self, vidfeat, db, seconds):
        self.runs = []
        self.stop = time.time() + seconds
        self.t = threading.Thread(target=self.loop, args=(vidfeat, db))
        self.t.start()

    def loop(self, vidfeat, db):
        sample = os.path.join(ROOT, "samples", "one_gop_12s.mp4")
        while time.time() < self.stop:
            w = subprocess.run([vidfeat, "--model", os.path.join(ROOT, "models", "tiny_cnn.onnx"),
                                "--force", "-q", "-o", db, sample], capture_output=True)
            self.runs.append(w.returncode)

    def join(self):
        self.t.join()
        return self.runs


if __name__ == "__main__":
    main()
