#!/usr/bin/env bash
# Download a known model's ONNX file from the official address in its manifest and check its
# sha256 (when the manifest has one; otherwise print it so it can be recorded).
#
# usage: scripts/fetch-models.sh NAME... [--dir DIR]    (default DIR: models/)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=models
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) names+=("$1"); shift ;;
    esac
done
[ ${#names[@]} -gt 0 ] || { echo "usage: $0 NAME... [--dir DIR]" >&2; exit 2; }
mkdir -p "$dir"
status=0
for name in "${names[@]}"; do
    manifest=models/$name.json
    if [ ! -f "$manifest" ]; then
        echo "fetch-models: $name: no $manifest" >&2; status=1; continue
    fi
    read -r file url sha < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))
print(m["file"], m.get("url") or "-", m.get("sha256") or "-")' "$manifest")
    if [ "$url" = "-" ]; then
        echo "fetch-models: $name: the manifest has no download address" >&2; status=1; continue
    fi
    out=$dir/$file
    echo "fetch-models: $name: $url -> $out"
    if ! curl -fL --retry 3 -o "$out.part" "$url"; then
        rm -f "$out.part"
        echo "fetch-models: $name: download failed; scripts/export-torchvision.py $name makes" \
             "the same architecture where PyTorch is installed" >&2
        status=1; continue
    fi
    got=$(sha256sum "$out.part" | cut -d' ' -f1)
    if [ "$sha" != "-" ] && [ "$got" != "$sha" ]; then
        rm -f "$out.part"
        echo "fetch-models: $name: sha256 $got does not match the manifest's $sha" >&2
        status=1; continue
    fi
    mv "$out.part" "$out"
    [ "$sha" = "-" ] && echo "fetch-models: $name: sha256 $got (not in the manifest: add it)"
done
exit $status
