#!/usr/bin/env bash
# vidfeat against ONNX Runtime 1.30 and PyTorch 1.13 on the same ONNX files, back to back, with
# ratios of medians. Arguments go to scripts/bench-peers.py (see its --help).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/bench-peers.py" "$@"
