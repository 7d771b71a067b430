#!/usr/bin/env bash
# Fail if any C source differs from what .clang-format says.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files 'include/*.h' 'src/*.c' 'src/*.cpp' 'src/*.h' 'src/*.cu' 'tests/*.c' 'tests/*.h' |
    xargs clang-format --dry-run -Werror
