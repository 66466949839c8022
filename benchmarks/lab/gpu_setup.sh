#!/bin/bash
# On a GPU machine of the device tool, from the repository root, detached (setsid) so that the build goes on while
# the next calls move the model pieces: copy the tree to /root/proj, build llama-cpp-python with CUDA for Hopper
# and the README's two CMake flags, install the project. /root/build.log ends with SETUP_DONE.
# Carries (made here first, see ../shared/docs/device.md): .device/build (slim_llama_sdist.sh), .device/whl
# (wheelhouse.sh). Then: export PYTHONPATH=/root/site; cd /root/proj
# Model pieces travel one a call beside the tracked tree within the 64 MiB limit. The tree is 37 MB, 19 MB of it
# benchmarks/results, which the machine does not need: move that folder aside while the setup call (with 34 MB of
# build and wheels) and the piece calls run, and cut the pieces at 42M (`split -b 42M`: 26 calls for the 1.5B, not
# 47 at 24M); check with `git ls-files -z | xargs -0 du -cb`. Copy results off (tar into $OUT) in every waiting
# call: a machine given back mid-run takes everything with it. It is given back 30 s after a call ends with none
# running (status: idle_release_s), detached work and all: wait inside calls (sleep, then poll), back to back.
# Issue a lease's calls (pieces, the start, the polls) together, not a few at a time: two machines of one lease
# went back between groups of calls (2026-12-04), the pieces and the setup with them.
# The build costs 4.5 minutes of each lease. A build an earlier lease brought back (benchmarks/lab/pack_llama_build.sh:
# 42 MB, too much beside the setup's carries) skips it (the setup then takes under 30 s): move it to /root in a call
# of its own before this one.
exec > /root/build.log 2>&1
set -x
rm -rf /root/proj && mkdir -p /root/proj && cp -r . /root/proj && cd /root/proj && echo COPIED
mkdir -p /root/b /root/wheel /root/site
if [ -f /root/llama_cuda_sm90.tar.xz ]; then
  tar xJf /root/llama_cuda_sm90.tar.xz -C /root/site
else
  (cd /root/b && tar xzf /root/proj/.device/build/llama_slim.tar.gz)
  cd /root/b/llama_cpp_python-*/
  export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
-DCMAKE_CUDA_RUNTIME_LIBRARY=Shared -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--exclude-libs,ALL"
  export CMAKE_BUILD_PARALLEL_LEVEL=16
  python3 -m pip wheel -q --no-deps --no-build-isolation -w /root/wheel .
  python3 -m pip install -q --no-index --no-deps --target /root/site /root/wheel/*.whl
fi
python3 -m pip install -q --no-index --no-deps --target /root/site /root/proj/.device/build/diskcache-*.whl
cd /root/proj
export PYTHONPATH=/root/site
python3 -m pip install -q --no-index --find-links .device/whl textual psutil "math-verify[antlr4_13_2]" matplotlib gguf safetensors
python3 -m pip install -q --no-deps --no-build-isolation -e .
python3 -c "import llama_cpp.llama_cpp as L; print('gpu offload:', L.llama_supports_gpu_offload())"
echo SETUP_DONE
