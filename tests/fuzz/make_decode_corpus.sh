#!/usr/bin/env bash
# Make the seed clips of fuzz_decode's corpus (tests/fuzz/corpus_decode/) with the ffmpeg CLI:
# three frames of 32x24 test pattern in as many containers and codecs as Debian's FFmpeg writes,
# a few KB each, and a few with sound. The build runs it (samples/CMakeLists.txt); the clips are not committed.
# Crashers the fuzzer finds are committed beside them by hand (scripts/fuzz.sh).
set -euo pipefail
mkdir -p "$(dirname "$0")/corpus_decode"
cd "$(dirname "$0")/corpus_decode"
src=(-f lavfi -i testsrc=size=32x24:rate=5:duration=0.6)
ff() { ffmpeg -nostdin -v error -y "${src[@]}" "$@"; }
ff -c:v libvpx-vp9 -b:v 20k vp9.webm
ff -c:v mpeg4 mpeg4.avi
ff -c:v mpeg2video -f mpegts mpeg2.ts
ff -pix_fmt yuv420p raw.y4m
ff -c:v mjpeg mjpeg.mov
ff -c:v libx264 -pix_fmt yuv444p10le h264_10bit.mkv
ff -c:v libx265 -x265-params log-level=error hevc.mp4
ff -c:v libaom-av1 -cpu-used 8 av1.ivf
ff -c:v png -f image2 -frames:v 1 frame.png
ff -c:v ffv1 -pix_fmt gbrp rgb_ffv1.nut
# with sound, for the audio path: AAC in MP4 beside the pictures, 5.1 PCM, Opus, MP3
snd=(-f lavfi -i "sine=frequency=440:sample_rate=22050:duration=0.6")
ff "${snd[@]}" -c:v libx264 -c:a aac -b:a 32k -shortest av_aac.mp4
ffmpeg -nostdin -v error -y -f lavfi -i "sine=frequency=300:sample_rate=8000:duration=0.5" \
    -af "pan=5.1|c0=c0|c1=c0|c2=c0|c3=c0|c4=c0|c5=c0" -c:a pcm_s16le surround.wav
ffmpeg -nostdin -v error -y "${snd[@]}" -c:a libopus -b:a 16k opus.webm
ffmpeg -nostdin -v error -y "${snd[@]}" -c:a libmp3lame -b:a 32k tone.mp3
