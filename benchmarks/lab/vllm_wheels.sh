#!/usr/bin/env bash
# vLLM 0.23.0's wheels for the GPU machine (Python 3.12, torch 2.11.0+cu130 and transformers 5.17 already there, no
# network), made here and carried in pieces: bash benchmarks/lab/vllm_wheels.sh OUT_DIR
# pip resolves vLLM's requirements for that Python and platform, with torch, torchaudio, torchvision, transformers and
# flashinfer-cubin stood in by empty wheels so the machine's own stay; then the kernels vLLM imports only where it
# uses them (flashinfer, tilelang, cutlass-dsl, triton's forks, numba, the CUDA toolchain's wheels) are left out:
# 391 MB in 141 wheels instead of 1.4 GB. On the machine, benchmarks/lab/install_missing_wheels.py installs those
# it lacks. OUT_DIR gets vw.tar in 42 MiB pieces (vw.00, vw.01, ...) and vw.tar.sha256.
set -euo pipefail
out=$1 work=$(mktemp -d)
mkdir -p "$out" "$work/fake" "$work/vw"
python3 - "$work/fake" <<'EOF'
import sys, zipfile
for name, version in [("torch", "2.11.0"), ("torchaudio", "2.11.0"), ("torchvision", "0.26.0"),
                      ("transformers", "5.17.0"), ("flashinfer-cubin", "0.6.12")]:
    dist, tag = f"{name.replace('-', '_')}-{version}", "cp312-cp312-manylinux_2_35_x86_64"
    with zipfile.ZipFile(f"{sys.argv[1]}/{dist}-{tag}.whl", "w") as z:
        z.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
        z.writestr(f"{dist}.dist-info/RECORD", "")
EOF
platforms=""
for t in 2_35 2_34 2_31 2_28 2_27 2_24 2_17 2_12 2_5; do platforms="$platforms --platform manylinux_${t}_x86_64"; done
platforms="$platforms --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64"
pip install --dry-run --ignore-installed --report "$work/report.json" --python-version 3.12 $platforms \
  --only-binary=:all: --target "$work/none" --find-links "$work/fake" vllm==0.23.0 torch==2.11.0 transformers==5.17.0
python3 - "$work/report.json" "$work/vw" <<'EOF'
import json, re, shutil, sys, urllib.parse, urllib.request
skip = re.compile(r"^(triton|tokenspeed|nvidia-cutlass|nvidia-nvvm|nvidia-cuda|nvidia-nvjitlink|cuda-|tilelang|"
                  r"z3-solver|flashinfer|torch-c-dlpack|quack-kernels|humming-kernels|fastsafetensors|opencv|"
                  r"numba|llvmlite|numpy|pillow|nvidia-ml-py)")
for item in json.load(open(sys.argv[1]))["install"]:
    name, url = item["metadata"]["name"].lower().replace("_", "-"), item["download_info"]["url"]
    if name in {"torch", "torchaudio", "torchvision", "transformers"} or skip.match(name):
        continue
    target = f"{sys.argv[2]}/{urllib.parse.unquote(url.rsplit('/', 1)[1])}"
    if url.startswith("file://"):
        shutil.copy(urllib.parse.unquote(url[len("file://"):]), target)
    else:
        urllib.request.urlretrieve(url, target)
EOF
tar cf "$out/vw.tar" -C "$work" vw
(cd "$out" && sha256sum vw.tar >vw.tar.sha256 && split -b 42M -d vw.tar vw. && rm vw.tar)
rm -rf "$work"
ls -la "$out"
