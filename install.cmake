# install.sh hands this to llama-cpp-python's CMake build (CMAKE_PROJECT_INCLUDE_BEFORE), which
# reads it before each project(). llama-cpp-python 0.3.36 forces llama.cpp's common library on
# (LLAMA_BUILD_COMMON, a cache entry: -DLLAMA_BUILD_COMMON=OFF cannot turn it off), yet its Python
# package never loads it: 53 of the 178 files compiled (with its HTTP library), for a library
# that lands unused in site-packages/lib. A plain variable shadows the forced entry, so llama.cpp
# skips common and the tools that need it. Checked against llama-cpp-python 0.3.36, the version
# pyproject.toml pins: look again when the pin moves.
set(LLAMA_BUILD_COMMON OFF)
