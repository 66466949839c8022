#!/usr/bin/env bash
# Installs EdgeReason with pip into the active Python and shows llama.cpp's compile as it goes:
# pip builds llama-cpp-python from source (minutes on a laptop) and, left to itself, shows a bare
# spinner meanwhile. Usage: ./install.sh [pip install arguments], by default `-e .` (docs/cli.md#install).
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if [ $# -eq 0 ]; then
    set -- -e .
fi
# llama-cpp-python's build reads CMAKE_ARGS; the user's own (a CUDA build) come first and stay.
# Two parts EdgeReason never loads are left out, 104 of the 178 files compiled: libmtmd, the
# image and audio library (-DLLAVA_BUILD=OFF), and llama.cpp's common library (install.cmake).
printf -v skip_common '%q' "$PWD/install.cmake"
export CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE_BEFORE=$skip_common"
log=$(mktemp "${TMPDIR:-/tmp}/edgereason-install.XXXXXX")

# pip -v streams the build's output; keep pip's own lines (they start in the first column) and
# turn ninja's `[n/m] <compiler command>` lines into one line at every 5% (a log gets no \r).
show_progress() {
    local line shown=-1 step steps percent
    while IFS= read -r line; do
        if [[ $line =~ ^\ *\[([0-9]+)/([0-9]+)\]\  ]]; then
            step=${BASH_REMATCH[1]} steps=${BASH_REMATCH[2]}
            percent=$((100 * step / steps))
            if ((percent / 5 > shown)); then
                shown=$((percent / 5))
                printf '  compiling llama.cpp: %d/%d (%d%%), %d s since the start\n' \
                    "$step" "$steps" "$percent" "$SECONDS"
            fi
        elif [[ ($line && $line != " "*) || $line == "  Building wheel for "* ]]; then
            printf '%s\n' "$line"
        fi
    done
}

status=0
"$python" -m pip install -v "$@" 2>&1 | tee "$log" | show_progress || status=$?
if [ "$status" -ne 0 ]; then
    tail -n 30 "$log" >&2
    echo "install.sh: pip stopped (exit $status); its last lines are above, all of them in $log" >&2
    if ! command -v "${CXX:-c++}" >/dev/null; then
        echo "install.sh: no C++ compiler (${CXX:-c++}) found: llama.cpp is compiled here;" \
            "install one (Debian/Ubuntu: apt install build-essential; macOS: xcode-select" \
            "--install) and run ./install.sh again" >&2
    fi
    exit "$status"
fi
rm -f "$log"
echo "install.sh: done in ${SECONDS} s"
