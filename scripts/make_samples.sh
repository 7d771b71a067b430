#!/usr/bin/env bash
# Make the tiny clips in samples/ with the ffmpeg CLI (see samples/README.md). Not committed:
# the build runs this (samples/CMakeLists.txt); single-threaded x264, so the bytes are the same
# on every run. Written into a temporary directory first and moved into place at the end, so an
# interrupted run leaves no half-made clip that looks done.
set -euo pipefail
out="$(cd "$(dirname "$0")/../samples" && pwd)"
tmp=$(mktemp -d "$out/.make_samples.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# 2 s of FFmpeg's test pattern, 64x48, 10 fps, H.264, a key frame every 5 frames, no B-frames.
ffmpeg -v error -y -f lavfi -i testsrc=size=64x48:rate=10:duration=2 -c:v libx264 -threads 1 \
    -g 5 -keyint_min 5 -sc_threshold 0 -bf 0 -pix_fmt yuv420p -movflags +faststart \
    -metadata comment="vidfeat test clip" testsrc_64x48.mp4
# The same clip with its second half cut off (the moov atom is at the front, so it opens).
size=$(stat -c %s testsrc_64x48.mp4)
head -c $((size / 2)) testsrc_64x48.mp4 > truncated.mp4
# A clip rotated by metadata only: a display matrix (rotation=90, i.e. players turn it 90 degrees
# counter-clockwise). FFmpeg 5.1 writes the matrix when remuxing with the rotate tag.
ffmpeg -v error -y -f lavfi -i testsrc=size=64x48:rate=10:duration=1 -c:v libx264 -threads 1 \
    -bf 0 -pix_fmt yuv420p unrotated.tmp.mp4
ffmpeg -v error -y -i unrotated.tmp.mp4 -c copy -metadata:s:v:0 rotate=90 rotated90_64x48.mp4
rm -f unrotated.tmp.mp4
# 12 s at 2 fps with a single key frame: seeking cannot move forward (sparse sampling must not
# loop, and must still find every wanted frame).
ffmpeg -v error -y -f lavfi -i testsrc=size=32x24:rate=2:duration=12 -c:v libx264 -threads 1 \
    -g 1000 -keyint_min 1000 -sc_threshold 0 -bf 0 -pix_fmt yuv420p one_gop_12s.mp4
# Audio only: a one-second tone.
ffmpeg -v error -y -f lavfi -i sine=frequency=440:duration=1 -c:a aac audio_only.m4a
mv -f testsrc_64x48.mp4 truncated.mp4 rotated90_64x48.mp4 one_gop_12s.mp4 audio_only.m4a "$out"/
