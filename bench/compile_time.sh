#!/usr/bin/env bash
# How long a user's file that includes <tapegrad/tapegrad.h> takes to compile: the README's
# consumer/main.cc (umbrella header, a custom op, a small model, a few training steps), the
# umbrella header alone, examples/custom_model.cc, and beside them a file that includes only
# <fmt/format.h>. g++ -std=c++20 -O2 -c, the median of 5 runs each.
# Usage: bench/compile_time.sh [INCLUDE_DIR]   (default build/include: the build tree's
# <tapegrad/tapegrad.h>; an install prefix's include/ works the same)
set -euo pipefail
cd "$(dirname "$0")/.."
INC=${1:-build/include}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '#include <fmt/format.h>\nint main() { fmt::print("{}\\n", 42); }\n' > "$TMP/fmt_only.cc"
printf '#include <tapegrad/tapegrad.h>\nint main() {}\n' > "$TMP/umbrella_only.cc"
median5() {  # wall seconds, then CPU (user + system) seconds: each the median of 5
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f '%e %U %S' g++ -std=c++20 -O2 -I"$INC" -c "$1" -o "$TMP/out.o" 2>&1 | tail -1
  done > "$TMP/times"
  echo "$(awk '{print $1}' "$TMP/times" | sort -n | sed -n 3p) s wall, $(awk '{printf "%.2f\n", $2 + $3}' "$TMP/times" | sort -n | sed -n 3p) s CPU"
}
echo "g++ $(g++ -dumpfullversion), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for f in consumer/main.cc "$TMP/umbrella_only.cc" examples/custom_model.cc "$TMP/fmt_only.cc"; do
  printf '%-20s %s\n' "$(basename "$f")" "$(median5 "$f")"
done
