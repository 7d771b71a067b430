#!/usr/bin/python3
"""The stall watchdog and sources that are not files. A source that trickles bytes but never
yields a frame (a FIFO fed one byte every 50 ms) and one that sends nothing at all (a FIFO whose
writer stays silent: FFmpeg's own file I/O would sit in read(2) forever) are abandoned after
--stall-timeout with one line, and the run goes on; Ctrl-C stops a run waiting on the silent
FIFO within a second; a real clip streamed through a FIFO (MPEG-TS) is read whole.

Ctrl-C must give vidfeat's own exit (status 130, "interrupted") within a second, never death by
the signal; the watchdog must give up after 1.5 s, not sooner and not much later.

usage: test_stall.py VIDFEAT MODELS_DIR SAMPLES_DIR
       test_stall.py --long-pass VIDFEAT SHARED_DIR   (Ctrl-C in a long forward pass; 77
                                                       without ../shared's MobileNetV2)
       --sanitized (anywhere): a sanitizer build; Ctrl-C's answer may take 3 s, not 1
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


def hold_open(path, data, release):
    """Open the FIFO for writing, write data, keep it open until release is set."""
    def writer():
        with open(path, "wb", buffering=0) as f:
            try:
                if data:
                    f.write(data)
                release.wait(60)
            except BrokenPipeError:
                pass
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    return t


def near_timeout(seconds):
    """The watchdog of --stall-timeout 1.5 gave up on the file after 1.5 s, not sooner, and not
    much later (it polls; 0.75 s of slack for a loaded sanitizer build)."""
    return 1.5 <= seconds <= 2.25


def ctrl_c(cmd, after):
    """Run cmd, send it SIGINT `after` seconds in; (exit status, stderr, seconds it took to stop
    after the signal), or None when it still ran 30 s later (then killed)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None
    return p.returncode, err, time.time() - t0


# How long an answer to Ctrl-C may take: a second; three in a sanitizer build (--sanitized),
# where each layer of the reference backend's pass runs several times slower
BOUND = [1.0]


def interrupted(rc, err, took):
    """vidfeat's own answer to Ctrl-C - exit status 130 with its 'interrupted' line - within a
    second; dying of the signal (a negative status here) is not one."""
    return rc == 130 and "vidfeat: interrupted" in err and took < BOUND[0]


def long_pass(exe, shared, tmp):
    """Ctrl-C during a long forward pass: MobileNetV2 at batch 32 on the reference backend,
    whose pass takes about 10 s here (3.3 images/s), interrupted 3 s in. The backends check
    the cancel flag between layers, so the run must stop within a second although the pass has
    seconds to go; no batch can have finished, so no vector is stored and nothing is done. (On
    oneDNN the same pass takes 0.3 s, which would let a backend that ignores the flag pass.)"""
    model = os.path.join(shared, "models", "mobilenet_v2_1.0_224.onnx")
    clip = os.path.join(shared, "videos", "vp8_720p_bigbuckbunny_30s.webm")
    if not (os.path.exists(model) and os.path.exists(clip)):
        print("skipped: %s or %s missing" % (model, clip))
        return 77
    db = os.path.join(tmp, "long.db")
    got = ctrl_c([exe, "--backend", "ref", "--model", model, "--batch", "32", "-o", db, clip], 3.0)
    if got is None:
        print("FAIL Ctrl-C during a forward pass: still running 30 s later")
        return 1
    rc, err, took = got
    import sqlite3
    con = sqlite3.connect(db)
    stored = con.execute("SELECT count(*) FROM features").fetchone()[0]
    status = con.execute("SELECT status FROM extractions").fetchall()
    con.close()
    if not interrupted(rc, err, took) or stored != 0 or ("done",) in status:
        print("FAIL Ctrl-C during a forward pass: exit %d after %.2f s, %d vectors stored, "
              "extraction %s (want exit 130 within 1 s, none stored, not done): %s"
              % (rc, took, stored, status, err))
        return 1
    print("ok Ctrl-C during a MobileNetV2 batch-32 forward pass: stopped in %.2f s, nothing "
          "stored, the file not done" % took)
    return 0


def silent_and_streamed(exe, models, clip, tmp):
    model = os.path.join(models, "tiny_cnn.onnx")
    release = threading.Event()
    try:
        # a writer that never writes: abandoned by the watchdog, the next file done
        silent = os.path.join(tmp, "silent.ts")
        os.mkfifo(silent)
        hold_open(silent, b"", release)
        t0 = time.time()
        r = subprocess.run([exe, "--model", model, "-o", os.path.join(tmp, "q.db"),
                            "--stall-timeout", "1.5", "--json", silent, clip],
                           capture_output=True, text=True, timeout=60)
        took = time.time() - t0
        files = {os.path.basename(f["path"]): f for f in json.loads(r.stdout)["files"]}
        if not (r.returncode == 1 and files["silent.ts"]["status"] == "failed" and
                files["silent.ts"]["error"] == "stalled: nothing could be read for 1.5 s" and
                near_timeout(files["silent.ts"]["seconds"]) and
                files["testsrc_64x48.mp4"]["frames"] == 20 and took < 20):
            print("FAIL silent source: rc %d after %.1f s\n%s\n%s"
                  % (r.returncode, took, r.stderr, r.stdout))
            return 1
        print("ok silent source abandoned after %.1f s: %s" % (took, r.stderr.strip()))

        # the same source without a watchdog: Ctrl-C still stops the run within a second
        got = ctrl_c([exe, "--model", model, "-o", os.path.join(tmp, "i.db"), "--stall-timeout",
                      "0", silent], 1.0)
        if got is None:
            print("FAIL Ctrl-C did not stop a run waiting on a silent FIFO")
            return 1
        rc, err, took = got
        if not interrupted(rc, err, took):
            print("FAIL Ctrl-C on a silent source: exit %d after %.2f s (want vidfeat's own "
                  "exit 130, 'interrupted', within 1 s): %s" % (rc, took, err))
            return 1
        print("ok Ctrl-C while waiting on a silent source: stopped in %.2f s (exit %d)"
              % (took, rc))
        release.set()

        # a real clip through a FIFO: every frame (nothing else may read the pipe's bytes)
        ts = os.path.join(tmp, "clip.ts")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", clip, "-c", "copy", "-f", "mpegts",
                        ts], check=True)
        fifo = os.path.join(tmp, "streamed.ts")
        os.mkfifo(fifo)
        release2 = threading.Event()
        with open(ts, "rb") as f:
            data = f.read()
        w = hold_open(fifo, data, release2)
        threading.Timer(0.5, release2.set).start()  # then close: end of stream
        r = subprocess.run([exe, "--model", model, "-o", os.path.join(tmp, "f.db"), "--json",
                            fifo], capture_output=True, text=True, timeout=60)
        w.join(5)
        files = json.loads(r.stdout)["files"] if r.stdout else []
        if r.returncode != 0 or not files or files[0]["frames"] != 20:
            print("FAIL streamed clip: rc %d\n%s\n%s" % (r.returncode, r.stderr, r.stdout))
            return 1
        print("ok a clip streamed through a FIFO: all %d frames" % files[0]["frames"])
        return 0
    finally:
        release.set()


def main():
    if "--sanitized" in sys.argv:
        sys.argv.remove("--sanitized")
        BOUND[0] = 3.0
    if sys.argv[1] == "--long-pass":
        tmp = tempfile.mkdtemp(prefix="vidfeat_pass_")
        try:
            return long_pass(sys.argv[2], sys.argv[3], tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    exe, models, samples = sys.argv[1:4]
    if not shutil.which("ffmpeg"):
        print("skipped: no ffmpeg CLI to make the streamed clip")
        return 77
    tmp = tempfile.mkdtemp(prefix="vidfeat_stall_")
    stop = threading.Event()
    try:
        fifo = os.path.join(tmp, "slow.ts")
        os.mkfifo(fifo)

        def trickle():
            with open(fifo, "wb", buffering=0) as f:
                try:
                    f.write(b"\x47" + b"\x00" * 187)  # one TS packet, then almost nothing
                    while not stop.is_set():
                        f.write(b"\x00")
                        time.sleep(0.05)
                except BrokenPipeError:
                    pass

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        clip = os.path.join(samples, "testsrc_64x48.mp4")
        t0 = time.time()
        r = subprocess.run([exe, "--model", os.path.join(models, "tiny_cnn.onnx"), "-o",
                            os.path.join(tmp, "s.db"), "--stall-timeout", "1.5", "--json", fifo,
                            clip], capture_output=True, text=True, timeout=60)
        took = time.time() - t0
        stop.set()
        s = json.loads(r.stdout)
        files = {os.path.basename(f["path"]): f for f in s["files"]}
        ok = (r.returncode == 1 and files["slow.ts"]["status"] == "failed" and
              files["slow.ts"]["error"] == "stalled: nothing could be read for 1.5 s" and
              near_timeout(files["slow.ts"]["seconds"]) and
              files["testsrc_64x48.mp4"]["frames"] == 20 and took < 20 and
              len(r.stderr.strip().splitlines()) == 1)
        if not ok:
            print("FAIL: rc %d after %.1f s\n%s\n%s" % (r.returncode, took, r.stderr, r.stdout))
            return 1
        print("ok stalled source abandoned after %.1f s: %s" % (took, r.stderr.strip()))
        if silent_and_streamed(exe, models, clip, tmp) != 0:
            return 1
    finally:
        stop.set()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
