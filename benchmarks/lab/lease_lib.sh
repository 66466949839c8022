# What the GPU leases' scripts (issue63_lease.sh, issue66_lease.sh) share, sourced after they set `src` (the
# call's checkout), `part` and `out`: the environment, the folders under /root, and the steps they share.
export PYTHONPATH=/root/site PYTHONUNBUFFERED=1 EDGEREASON_HOME=/root/.cache/edgereason
mkdir -p /root/proj /root/site /root/m /root/data /root/out "$out"
keep() { tar czf "$OUT/$part.tgz" -C "$out" . 2>/dev/null; }  # a call brings back 8 files: one tar of them all
refresh() {  # the call's code into /root/proj (the editable install points there)
  cd /root/proj || exit 1
  for d in benchmarks edgereason backends ui tests profiles examples; do rm -rf "$d" && cp -a "$src/$d" .; done
  cp -a "$src/pyproject.toml" .
}
models() {  # the models' pieces, carried one a call into /root/m, joined where the registry looks (a model
  # whose pieces did not come is left out: an empty file would read as a damaged model, not a missing one)
  mkdir -p "$EDGEREASON_HOME/models"
  join_model q15 qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
  join_model s135 SmolLM2-135M-Instruct.Q4_1.gguf
}
join_model() {  # PIECES FILE
  local to=$EDGEREASON_HOME/models/$2
  [ -s "$to" ] || ! compgen -G "/root/m/$1.*" >/dev/null || cat /root/m/"$1".* >"$to"
}
join_llama() {  # the prebuilt llama-cpp-python parts, carried in .device/llama, unpacked into /root/site
  cat "$src"/.device/llama/llama_cuda_sm90.tar.xz.part-* >/root/llama_cuda_sm90.tar.xz
  (cd /root && cp "$src"/.device/llama/*.sha256 . && sha256sum -c llama_cuda_sm90.tar.xz.sha256) || exit 1
  tar xJf /root/llama_cuda_sm90.tar.xz -C /root/site && echo LLAMA_OK
}
install_project() {  # the wheels (.device/whl) and the data (.device/data), then the call's code, editable
  cp -a "$src"/.device/data/. /root/data/
  python3 -m pip install -q --no-index --no-deps --target /root/site "$src"/.device/whl/diskcache-*.whl
  python3 -m pip install -q --no-index --find-links "$src"/.device/whl textual psutil math-verify matplotlib \
    gguf safetensors httpx pytest-asyncio
  refresh
  python3 -m pip install -q --no-deps --no-build-isolation -e /root/proj
  python3 -c "import llama_cpp.llama_cpp as L, torch; print('gpu offload', L.llama_supports_gpu_offload(), \
torch.__version__, torch.cuda.get_device_name())"
}
