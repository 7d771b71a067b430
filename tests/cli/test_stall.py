#!/usr/bin/python3
"""The stall watchdog and sources that are not files. A source that trickles bytes but never
yields a frame (a FIFO fed one byte every 50 ms) and one that sends nothing at all (a FIFO whose
writer stays silent: FFmpeg's own file I/O would sit in read(2) forever) are abandoned after
--stall-timeout with one line, and the run goes on; Ctrl-C stops a run waiting on the silent
FIFO within a second; a real clip streamed through a FIFO (MPEG-TS) is read whole.

usage: test_stall.py VIDFEAT MODELS_DIR SAMPLES_DIR
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
                "stalled" in files["silent.ts"]["error"] and
                files["testsrc_64x48.mp4"]["frames"] == 20 and took < 20):
            print("FAIL silent source: rc %d after %.1f s\n%s\n%s"
                  % (r.returncode, took, r.stderr, r.stdout))
            return 1
        print("ok silent source abandoned after %.1f s: %s" % (took, r.stderr.strip()))

        # the same source without a watchdog: Ctrl-C still stops the run within a second
        p = subprocess.Popen([exe, "--model", model, "-o", os.path.join(tmp, "i.db"),
                              "--stall-timeout", "0", silent], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        t0 = time.time()
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            print("FAIL Ctrl-C did not stop a run waiting on a silent FIFO")
            return 1
        took = time.time() - t0
        if p.returncode == 0 or took > 1.5:
            print("FAIL Ctrl-C on a silent source: rc %d after %.1f s: %s"
                  % (p.returncode, took, err))
            return 1
        print("ok Ctrl-C while waiting on a silent source: stopped in %.2f s (exit %d)"
              % (took, p.returncode))
        release.set()

        # a real clip through a FIFO: every frame (nothing else may read the pipe's bytes)
        ts = os.path.join(tmp, "clip.ts")
        if not shutil.which("ffmpeg"):
            print("ok streamed clip: no ffmpeg CLI here (skipped)")
            return 0
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
    exe, models, samples = sys.argv[1:4]
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
              "stalled" in files["slow.ts"]["error"] and files["testsrc_64x48.mp4"]["frames"] == 20
              and took < 20 and len(r.stderr.strip().splitlines()) == 1)
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
