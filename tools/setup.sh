# Shared by tools/run and tools/test (sourced, not executed): make sure the Debian packages are present,
# then configure once and build incrementally with every core. Quiet and fast when nothing changed.

causal_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
causal_build="${CAUSAL_BUILD_DIR:-$causal_root/build}"

# Packages the product needs; tools/test adds the test-only ones.
causal_packages=(g++ cmake ninja-build libtorch-dev libopenblas0-pthread libcli11-dev nlohmann-json3-dev
  libspdlog-dev libgloo-dev catch2 libsentencepiece-dev)

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

# build_causal [CMAKE OPTIONS...]: configures $CAUSAL_BUILD_DIR (default build/) once, then builds it.
build_causal() {
  local build="${CAUSAL_BUILD_DIR:-$causal_build}"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    local generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S "$causal_root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  fi
  local jobs
  jobs="$(nproc)"
  # The build prints only when it has work to do (or fails).
  cmake --build "$build" --parallel "$jobs" | grep -v "^ninja: no work to do" || true
  test "${PIPESTATUS[0]}" -eq 0
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
