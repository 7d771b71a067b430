#!/usr/bin/env python3
"""References for test_audio: files with sound made by the ffmpeg CLI, and what their soundtrack
must give an audio model - every channel averaged (pan on float samples, each channel weighted
1/channels), resampled by the CLI's aresample (libswresample with its defaults, as vidfeat uses
it), as raw float32 - with the first sample's time from ffprobe's first audio frame (its
pts_time less the file's start_time).

Files: 5.1 at 48 kHz (each channel a different tone), mono at 8 kHz, stereo 44.1 kHz AAC in MP4
beside a video, the same starting 0.7 s after the video, one whose sound stops before its
video, Opus in WebM, a Matroska file whose timestamps jump 0.5 s ahead after its first second
(the gap filled with silence: the CLI's aresample told async=1, min_hard_comp=0.02, as
vidfeat keeps samples to timestamps), and a video without sound (refused: "no audio
stream"); one whose timestamps jump 100 s ahead every frame is refused while read (the silence
filling gaps is bounded). Sound at 1 kHz in frames of 16,384 samples (each resampled into
several of vidfeat's chunks) against the CLI; one at 1 Hz is refused ("at 1 Hz"); and 18 minutes
at 1 kHz in frames of a million samples is read in bounded memory ("bounded": the reader's peak
grows by less than 64 MB, where resampling a frame whole took 67 MB and more).

usage: audio_refs.py OUTDIR   (writes OUTDIR/cases.tsv: file, rate, reference, start or "-",
the refusal expected or "-"; exit 77 without ffmpeg)
"""
import json
import os
import shutil
import subprocess
import sys
import wave

RATES = [16000, 32000]



def ff(*args):
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True)


def make(out):
    """The test files; (path, channels) each."""
    p = lambda n: os.path.join(out, n)
    six = "aevalsrc=exprs='%s':sample_rate=48000:channel_layout=5.1" % "|".join(
        "0.%d*sin(2*PI*%d*t)" % (k + 2, 220 * (k + 1)) for k in range(6))
    ff("-f", "lavfi", "-i", six, "-t", "2.3", "-c:a", "pcm_s16le", p("six_48k.wav"))
    ff("-f", "lavfi", "-i", "aevalsrc=exprs='0.7*sin(2*PI*(100*t+600*t*t))':sample_rate=8000",
       "-t", "1.7", "-c:a", "pcm_f32le", p("mono_8k.wav"))
    video = "testsrc=size=64x48:rate=25"
    stereo = ("aevalsrc=exprs='0.5*sin(2*PI*440*t)|0.4*sin(2*PI*660*t)':sample_rate=44100:"
              "channel_layout=stereo")
    ff("-f", "lavfi", "-i", video, "-f", "lavfi", "-i", stereo, "-t", "2", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "96k", p("av_44k.mp4"))
    ff("-f", "lavfi", "-i", video, "-itsoffset", "0.7", "-f", "lavfi", "-i", stereo, "-t", "2.5",
       "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac",
       p("late_start.mp4"))
    ff("-f", "lavfi", "-i", video, "-f", "lavfi", "-i", stereo, "-map", "0:v", "-map", "1:a",
       "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-t:v", "3", "-t:a", "1.2",
       p("short_audio.mkv"))
    ff("-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.3:seed=3:sample_rate=48000", "-t",
       "1.4", "-ac", "2", "-c:a", "libopus", p("opus.webm"))
    ff("-f", "lavfi", "-i", "sine=frequency=440:sample_rate=22050:duration=2", "-af",
       "asetpts='if(gte(T,1),PTS+0.5/TB,PTS)'", "-c:a", "pcm_s16le", p("gap.mkv"))
    ff("-f", "lavfi", "-i", video, "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p",
       p("silent_video.mp4"))
    ff("-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=3", "-af",
       "asetpts='PTS+N/1024*100/TB'", "-c:a", "pcm_s16le", p("jumpy.mkv"))
    ff("-f", "lavfi", "-i", "sine=frequency=110:sample_rate=1000:duration=40", "-af",
       "asetnsamples=n=16384", "-c:a", "pcm_s16le", p("low_1k.mkv"))
    ff("-f", "lavfi", "-i", "sine=frequency=110:sample_rate=1000:duration=1100", "-af",
       "asetnsamples=n=1048576", "-c:a", "pcm_s16le", p("big_frames_1k.mkv"))
    with wave.open(p("one_hz.wav"), "wb") as w:  # the CLI will not write a rate this low
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(1)
        w.writeframes(bytes(65536))
    names = ["six_48k.wav", "mono_8k.wav", "av_44k.mp4", "late_start.mp4", "short_audio.mkv",
             "opus.webm", "gap.mkv", "low_1k.mkv"]
    return [p(n) for n in names], p("silent_video.mp4")


def probe(path):
    """(channels, first audio frame's time less the file's start time)."""
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
                        "stream=channels:format=start_time:frame=pts_time", "-of", "json", path],
                       check=True, capture_output=True, text=True)
    j = json.loads(r.stdout)
    start = float(j.get("format", {}).get("start_time", 0) or 0)
    return j["streams"][0]["channels"], float(j["frames"][0]["pts_time"]) - start


def reference(path, channels, rate, dst):
    mix = "+".join("%.17g*c%d" % (1.0 / channels, k) for k in range(channels))
    # float first: pan on s16 input would round its sums to 16 bits
    graph = "aformat=sample_fmts=flt,pan=mono|c0=%s,aresample=%d" % (mix, rate)
    if os.path.basename(path).startswith("gap"):  # kept to its timestamps, as vidfeat keeps it
        graph += ":async=1:min_hard_comp=0.02"
    ff("-i", path, "-map", "0:a:0", "-af", graph, "-f", "f32le", "-c:a", "pcm_f32le", dst)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not shutil.which("ffmpeg") or not shutil.which("ffprobe"):
        print("audio_refs: the ffmpeg CLI is not installed")
        return 77
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files, silent = make(out)
    rows = []
    for path in files:
        channels, start = probe(path)
        for rate in RATES:
            ref = "%s.%d.f32" % (path, rate)
            reference(path, channels, rate, ref)
            rows.append((path, rate, ref, "%.9f" % start, "-"))
    rows.append((silent, 16000, "-", "-", "no audio stream"))
    rows.append((os.path.join(out, "jumpy.mkv"), 16000, "-", "-", "jump ahead"))
    rows.append((os.path.join(out, "one_hz.wav"), 16000, "-", "-", "at 1 Hz"))
    rows.append((os.path.join(out, "big_frames_1k.mkv"), 16000, "-", "-", "bounded"))
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        for r in rows:
            f.write("\t".join(str(v) for v in r) + "\n")
    print("audio_refs: %d cases in %s" % (len(rows), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
