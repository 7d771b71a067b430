#!/usr/bin/python3
"""The stall watchdog: a source that trickles bytes but never yields a frame (a FIFO fed one
byte every 50 ms) is abandoned after --stall-timeout with one line, and the run goes on.

usage: test_stall.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


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
    finally:
        stop.set()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
