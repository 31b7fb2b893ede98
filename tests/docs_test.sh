#!/usr/bin/env bash
# Every C++ block in README.md and docs/*.md is real code. The line just before each ```cpp block
# says which kind it is (a block of another language is checked only when it names a file):
#   <!-- file: PATH -->         the block is PATH of this repository, to the letter (PATH itself is
#                               built and run by the tests: consumer/, examples/);
#   <!-- fragment: REASON -->   a piece that cannot compile alone (a method body, a snippet of a
#                               file), with the reason;
#   anything else               the block is a whole translation unit: it is compiled here, on its
#                               own, against the public headers (<tapegrad/tapegrad.h>).
# Usage: tests/docs_test.sh CXX INCLUDE_DIR   (the build's compiler and its include/ folder)
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CXX=${1:?usage: tests/docs_test.sh CXX INCLUDE_DIR}
INCLUDE=${2:?usage: tests/docs_test.sh CXX INCLUDE_DIR}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tapegrad-docs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

shopt -s nullglob
failed=0 files=0 fragments=0 compiled=0
for page in "$SRC/README.md" "$SRC"/docs/*.md; do
  rel=${page#"$SRC"/}
  # Split the page: each fenced block becomes WORK/N.block, with WORK/N.kind holding
  # "LINE<TAB>LANGUAGE<TAB>the line before it".
  rm -f "$WORK"/*.block "$WORK"/*.kind
  awk -v out="$WORK" '
    /^```/ && !inblock { n++; inblock = 1; lang = substr($0, 4); gsub(/[ \t]/, "", lang)
                         printf "%d\t%s\t%s\n", NR, lang, prev > (out "/" n ".kind"); printf "" > (out "/" n ".block"); next }
    /^```[ \t]*$/ && inblock { inblock = 0; prev = $0; next }
    inblock { print > (out "/" n ".block") }
    { prev = $0 }' "$page"
  for kind in "$WORK"/*.kind; do
    n=$(basename "$kind" .kind)
    block="$WORK/$n.block"
    line=$(cut -f1 "$kind")
    lang=$(cut -f2 "$kind")
    marker=$(cut -f3- "$kind")
    where="$rel:$line"
    if [[ "$marker" =~ ^\<!--\ file:\ ([^ ]+)\ --\>$ ]]; then
      path=${BASH_REMATCH[1]}
      if [ ! -f "$SRC/$path" ]; then
        echo "FAIL: $where: the block says it is $path, which does not exist"; failed=1
      elif ! diff -u "$SRC/$path" "$block" > "$WORK/diff"; then
        cat "$WORK/diff"; echo "FAIL: $where: the block differs from $path"; failed=1
      else
        files=$((files + 1))
      fi
    elif [[ ! "$lang" =~ ^(cpp|c\+\+|cc|cxx)$ ]]; then
      continue
    elif [[ "$marker" =~ ^\<!--\ fragment:\ (.+)\ --\>$ ]]; then
      fragments=$((fragments + 1))
    elif "$CXX" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$INCLUDE" -x c++ "$block" > "$WORK/err" 2>&1; then
      compiled=$((compiled + 1))
    else
      head -20 "$WORK/err"
      echo "FAIL: $where: this C++ block does not compile on its own; fix it, or mark it on the line before with <!-- fragment: REASON --> or <!-- file: PATH -->"
      failed=1
    fi
  done
done
# Every link to a file of the repository leads to one.
links=0
for page in "$SRC/README.md" "$SRC"/docs/*.md "$SRC/CHANGES.md"; do
  rel=${page#"$SRC"/}
  while IFS= read -r target; do
    target=${target%%#*}
    [ -z "$target" ] && continue
    links=$((links + 1))
    if [ ! -e "$(dirname "$page")/$target" ]; then echo "FAIL: $rel links to $target, which does not exist"; failed=1; fi
  done < <(awk '/^```/ {f = !f; next} !f' "$page" | sed 's/`[^`]*`//g' | grep -o '](\([^)]*\))' |
           sed 's/^](//; s/)$//' | grep -v -E '^(https?:|mailto:|#)' || true)  # outside code
done
echo "docs: $compiled C++ blocks compiled, $files equal to their files, $fragments fragments; $links links lead to files"
exit $failed
