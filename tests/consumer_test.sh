#!/usr/bin/env bash
# tapegrad used by a project of a user's own, outside this tree, the three ways the README shows:
#   1. find_package(tapegrad) against an install prefix (cmake --install of BUILD_DIR),
#   2. pkg-config, with one compiler line,
#   3. add_subdirectory(tapegrad): a Debug, shared (libtapegrad.so), baseline x86-64, MPI-less build of the
#      library whose unit tests run there too.
# Each builds consumer/main.cc (a custom op, gradchecked, in the user's own model, trained by the
# library's loop; it exits non-zero unless the loss falls) and runs it. docs/install.md shows
# those files, and the consumer's own compile lines must carry no -march and no
# -Werror. Usage: tests/consumer_test.sh BUILD_DIR   (a built top-level tapegrad)
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:?usage: tests/consumer_test.sh BUILD_DIR}" && pwd)
JOBS=$(nproc 2>/dev/null || echo 2)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tapegrad-consumer.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { echo "== consumer: $*"; }
fail() { echo "FAIL: consumer: $*"; exit 1; }

# docs/install.md shows these files (tests/docs_test.sh checks that its blocks equal them).
step "docs/install.md shows the consumer's files"
for path in consumer/main.cc consumer/find_package/CMakeLists.txt consumer/add_subdirectory/CMakeLists.txt; do
  grep -qx "<!-- file: $path -->" "$SRC/docs/install.md" || fail "docs/install.md has no $path block"
done

# A user's compile line for main.cc must not inherit tapegrad's tuning or warning flags.
check_own_flags() {  # compile_commands.json main.cc
  local line
  line=$(grep '"command"' "$1" | grep -F "$2" || true)
  [ -n "$line" ] || fail "no compile command for $2 in $1"
  if grep -qE -- '-march|-Werror|-Wall|-Wextra' <<<"$line"; then fail "main.cc's compile line carries tapegrad's flags: $line"; fi
  echo "ok: main.cc compiled without -march, -Werror or tapegrad's warnings"
}

step "install"
cmake --install "$BUILD" --prefix "$WORK/prefix" > "$WORK/install.log"
PREFIX=$WORK/prefix
[ -f "$PREFIX/include/tapegrad/tapegrad.h" ] || fail "no include/tapegrad/tapegrad.h in the install"
ls "$PREFIX"/lib*/libtapegrad.* > /dev/null || fail "no libtapegrad in the install"
if ls "$PREFIX"/lib*/libtg_* > /dev/null 2>&1; then fail "the install has more than one library"; fi
cmp -s "$SRC/LICENSE" "$PREFIX/share/licenses/tapegrad/LICENSE" || fail "the install has no share/licenses/tapegrad/LICENSE"
grep -qx 'license=MIT' "$PREFIX"/lib*/pkgconfig/tapegrad.pc || fail "tapegrad.pc names no licence"
grep -q 'set(tapegrad_LICENSE "MIT")' "$PREFIX"/lib*/cmake/tapegrad/tapegradConfig.cmake || fail "tapegradConfig.cmake names no licence"
if grep -rqF "$SRC" "$PREFIX"/lib*/cmake/tapegrad "$PREFIX"/lib*/pkgconfig; then fail "the installed package refers to the source tree"; fi
# Every installed header compiles on its own, and none pulls in Abseil, xsimd, SentencePiece or
# nlohmann-json (those stay inside the library).
# (two at a time: 72 headers, ~55 s one by one)
export PREFIX
(cd "$PREFIX/include" && find tapegrad -name '*.h' | sort) | xargs -P"$JOBS" -I{} bash -c \
  'echo "#include <$1>" | g++ -std=c++20 -fsyntax-only -I"$PREFIX/include" -x c++ - || { echo "FAIL: consumer: $1 does not compile on its own"; exit 255; }' _ {} ||
  fail "an installed header does not compile on its own (above)"
deps=$(echo '#include <tapegrad/tapegrad.h>' | g++ -std=c++20 -M -I"$PREFIX/include" -x c++ - | tr ' ' '\n' | grep -E 'absl|xsimd|sentencepiece|nlohmann' || true)
[ -z "$deps" ] || fail "the installed headers include: $deps"
echo "ok: $(find "$PREFIX/include/tapegrad" -name '*.h' | wc -l) headers, each self-contained; no Abseil, xsimd, SentencePiece or nlohmann-json"

step "find_package against $PREFIX"
mkdir -p "$WORK/fp"
cp "$SRC/consumer/main.cc" "$SRC/consumer/find_package/CMakeLists.txt" "$WORK/fp/"
cmake -S "$WORK/fp" -B "$WORK/fp/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$WORK/fp.log" || { cat "$WORK/fp.log"; fail "find_package configure"; }
cmake --build "$WORK/fp/build" -j"$JOBS" > "$WORK/fp-build.log" || { cat "$WORK/fp-build.log"; fail "find_package build"; }
check_own_flags "$WORK/fp/build/compile_commands.json" "$WORK/fp/main.cc"
"$WORK/fp/build/my_model" || fail "find_package: my_model"

step "pkg-config, one compiler line"
mkdir -p "$WORK/pc"
cp "$SRC/consumer/main.cc" "$WORK/pc/"
export PKG_CONFIG_PATH="$(dirname "$(ls -d "$PREFIX"/lib*/pkgconfig/tapegrad.pc)")"
echo "tapegrad.pc: arch=$(pkg-config --variable=arch tapegrad), cuda=$(pkg-config --variable=cuda tapegrad), version $(pkg-config --modversion tapegrad)"
# The README's line (a static libtapegrad.a needs --static for Abseil and SentencePiece):
(cd "$WORK/pc" && g++ -std=c++20 -O2 main.cc -o my_model $(pkg-config --cflags --libs --static tapegrad)) ||
  fail "pkg-config build"
"$WORK/pc/my_model" || fail "pkg-config: my_model"

step "add_subdirectory: Debug, BUILD_SHARED_LIBS=ON, TG_ARCH=baseline, TG_MPI=OFF (single-process), TG_CUDA=OFF (CPU-only), with tapegrad's unit tests"
mkdir -p "$WORK/as"
cp "$SRC/consumer/main.cc" "$SRC/consumer/add_subdirectory/CMakeLists.txt" "$WORK/as/"
ln -s "$SRC" "$WORK/as/tapegrad"
cmake -S "$WORK/as" -B "$WORK/as/build" -DCMAKE_BUILD_TYPE=Debug -DBUILD_SHARED_LIBS=ON -DTG_ARCH=baseline \
  -DTG_BUILD_TESTS=ON -DTG_WERROR=ON -DTG_MPI=OFF -DTG_CUDA=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$WORK/as.log" ||
  { cat "$WORK/as.log"; fail "add_subdirectory configure"; }
cmake --build "$WORK/as/build" -j"$JOBS" > "$WORK/as-build.log" || { tail -40 "$WORK/as-build.log"; fail "add_subdirectory build"; }
check_own_flags "$WORK/as/build/compile_commands.json" "$WORK/as/main.cc"
so=$(ls "$WORK"/as/build/tapegrad/libtapegrad.so.*.*.* 2>/dev/null | head -1)
[ -n "$so" ] || fail "no versioned libtapegrad.so"
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
echo "ok: $(basename "$so"), SONAME $soname"
# grep reads all of ldd's output (grep -q would quit at the match and, under pipefail, a SIGPIPE in ldd
# fails the pipeline now and then)
ldd "$WORK/as/build/my_model" | grep "$soname" > /dev/null || fail "my_model does not load $soname"
"$WORK/as/build/my_model" || fail "add_subdirectory: my_model"
# The unit tests of that Debug, shared, baseline build (the long convergence run, the 6-layer
# MiniLM's comparison with Hugging Face, 100 s unoptimized, and the docs' code, compiled and not
# run, stay in the release build).
ctest --test-dir "$WORK/as/build/tapegrad" --output-on-failure -j"$JOBS" --timeout 600 \
  -E '^(Train\.EncoderDecoderLearnsToReverseDigits|MiniLM\.EmbeddingsEqualHuggingFaces|docs_snippets)$' || fail "unit tests in the add_subdirectory build"
echo "== consumer: all three ways build, run and train"
