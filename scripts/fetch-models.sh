#!/usr/bin/env bash
# Download a known model's official ONNX file from the address in its manifest, resuming a
# download that was cut off (NAME.onnx.part), and keep it only when its size and sha256 are the
# manifest's: then vidfeat calls it official. A file that does not match is deleted and the
# script says so (exit 1); a manifest without a sha256 gets the file and the digest printed.
# With --vocab, a CLIP model's tokenizer vocabulary instead (the manifest's text.vocab, checked
# by text.vocab_sha256) and its licence beside it (text.vocab_licence).
#
# usage: scripts/fetch-models.sh [--vocab] NAME... [--dir DIR] [--manifests DIR]
#   DIR: where the file goes (default models/); --manifests: where NAME.json is (default models/)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=models
manifests=models
vocab=0
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) dir=$2; shift 2 ;;
    --manifests) manifests=$2; shift 2 ;;
    --vocab) vocab=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) names+=("$1"); shift ;;
    esac
done
[ ${#names[@]} -gt 0 ] || { echo "usage: $0 [--vocab] NAME... [--dir DIR] [--manifests DIR]" >&2; exit 2; }
mkdir -p "$dir"
status=0
for name in "${names[@]}"; do
    manifest=$manifests/$name.json
    if [ ! -f "$manifest" ]; then
        echo "fetch-models: $name: no $manifest" >&2; status=1; continue
    fi
    # file url sha256 size [licence licence-url licence-sha256], then on a line of its own what
    # to do without a download: the model's, or its vocabulary's
    { read -r file url sha size lic lic_url lic_sha; IFS= read -r instead; } < <(/usr/bin/env python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))
dest = sys.argv[3]
if sys.argv[2] == "1":
    t = m.get("text") or {}
    print(t.get("vocab") or "-", t.get("vocab_url") or "-", t.get("vocab_sha256") or "-", "-",
          t.get("vocab_licence") or "-", t.get("vocab_licence_url") or "-",
          t.get("vocab_licence_sha256") or "-")
    print("copy %s (CLIP'"'"'s byte-pair vocabulary, from openai/CLIP'"'"'s repository, MIT licence) "
          "into %s" % (t.get("vocab") or "the vocabulary", dest))
else:
    print(m["file"], m.get("url") or "-", m.get("sha256") or "-", m.get("size") or "-",
          "-", "-", "-")
    made = m.get("export") or ""
    where = m.get("source") or m.get("description") or m["name"]
    print(("make it with: " + made) if made else
          "it is %s: copy your %s into %s (or a --models-dir)" % (where, m["file"], dest))' "$manifest" "$vocab" "$dir")
    if [ "$vocab" = 1 ] && [ "$file" = "-" ]; then
        echo "fetch-models: $name: the manifest names no tokenizer vocabulary (not a CLIP" \
             "model)" >&2; status=1; continue
    fi
    if [ "$url" = "-" ]; then
        echo "fetch-models: $name: no address serves $file; $instead" >&2; status=1; continue
    fi
    out=$dir/$file
    if [ -f "$out" ] && [ "$sha" != "-" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sha" ]; then
        echo "fetch-models: $name: $out is already the official file"; continue
    fi
    part=$out.part
    # a part as long as the file or longer cannot be resumed: start again
    if [ -f "$part" ] && [ "$size" != "-" ] && [ "$(stat -c %s "$part")" -ge "$size" ]; then
        rm -f "$part"
    fi
    if [ -s "$part" ]; then
        echo "fetch-models: $name: resuming $part at $(stat -c %s "$part") bytes"
    fi
    echo "fetch-models: $name: $url -> $out"
    progress=(--no-progress-meter)
    [ -t 2 ] && progress=(--progress-bar)
    if ! curl -fL --retry 3 "${progress[@]}" -C - -o "$part" "$url"; then
        echo "fetch-models: $name: the download failed (run again to resume $part); or" \
             "$instead" >&2
        status=1; continue
    fi
    got_size=$(stat -c %s "$part")
    if [ "$size" != "-" ] && [ "$got_size" != "$size" ]; then
        rm -f "$part"
        echo "fetch-models: $name: $got_size bytes, the manifest says $size: deleted" >&2
        status=1; continue
    fi
    got=$(sha256sum "$part" | cut -d' ' -f1)
    if [ "$sha" != "-" ] && [ "$got" != "$sha" ]; then
        rm -f "$part"
        echo "fetch-models: $name: sha256 $got is not the manifest's $sha: deleted" >&2
        status=1; continue
    fi
    mv "$part" "$out"
    if [ "$lic" != "-" ] && [ "$lic_url" != "-" ]; then # the licence the vocabulary ships with
        if curl -fsSL --retry 3 -o "$dir/$lic.part" "$lic_url" &&
            { [ "$lic_sha" = "-" ] ||
                [ "$(sha256sum "$dir/$lic.part" | cut -d' ' -f1)" = "$lic_sha" ]; }; then
            mv "$dir/$lic.part" "$dir/$lic"
        else
            rm -f "$dir/$lic.part"
            echo "fetch-models: $name: its licence $lic_url could not be fetched" >&2
            status=1
        fi
    fi
    if [ "$sha" = "-" ]; then
        echo "fetch-models: $name: sha256 $got, $got_size bytes (not in the manifest: add them)"
    else
        echo "fetch-models: $name: $out: the official file ($got_size bytes, sha256 matches)"
    fi
done
exit $status
