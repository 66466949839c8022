#!/usr/bin/env bash
# The CUDA build of llama-cpp-python that benchmarks/lab/gpu_setup.sh makes, packed to travel back to a later lease:
# its wheel (/root/wheel, 277 MB) holds each shared library three times (libx.so, .so.0, .so.0.x.y, which the
# build tree had as links); this keeps one file and links, xz-compressed (42 MB for 0.3.36, sm_90). gpu_setup.sh
# unpacks it into /root/site instead of building when /root/llama_cuda_sm90.tar.xz exists.
# Bring the wheel back in pieces of at most 16 MiB (split -b 15M; a call returns at most 8 files and 64 MiB), join
# them here, then: pack_llama_build.sh WHEEL OUT.tar.xz
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: pack_llama_build.sh WHEEL OUT.tar.xz" >&2; exit 2; fi
wheel=$(realpath "$1") out=$(realpath -m "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$wheel" "$tmp"
cd "$tmp/llama_cpp/lib"
for f in *.so.*; do
  ln -sf "${f%%.so*}.so" "$f"
done
cd "$tmp"
tar cf - llama_cpp llama_cpp_python-*.dist-info | xz -T0 -6 >"$out"
ls -l "$out"
