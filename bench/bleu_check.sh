#!/usr/bin/env bash
# tapegrad's corpus BLEU (build/bleu) beside sacreBLEU on the same files: the Multi30k validation
# references against four systems made from real text — the references with every 4th word
# dropped, with words 2-3 of each line swapped and lower-cased, the previous line's reference
# (fluent but wrong), and the German source (almost no overlap).
#   bench/bleu_check.sh [build/bleu] [multi30k folder, default ../shared/data/multi30k]
# Needs sacrebleu from PyPI (pip install sacrebleu==2.6.0).
set -euo pipefail
BLEU=${1:-build/bleu}
DATA=${2:-../shared/data/multi30k}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
gzip -dc "$DATA/val.en.gz" >"$TMP/ref"
gzip -dc "$DATA/val.de.gz" >"$TMP/de"
awk '{o=""; for (i = 1; i <= NF; i++) if (i % 4) o = o (o == "" ? "" : " ") $i; print o}' "$TMP/ref" >"$TMP/drop"
awk '{if (NF > 3) {t = $2; $2 = $3; $3 = t}; print tolower($0)}' "$TMP/ref" >"$TMP/swap"
awk '{a[NR] = $0} END {print a[NR]; for (i = 1; i < NR; i++) print a[i]}' "$TMP/ref" >"$TMP/shift"
echo "| system | sacreBLEU $(python3 -c 'import sacrebleu; print(sacrebleu.__version__)') | tapegrad | difference |"
echo "|---|---|---|---|"
for sys in drop swap shift de; do
  theirs=$(python3 -m sacrebleu "$TMP/ref" -i "$TMP/$sys" -b -w 4)
  ours=$("$BLEU" --ref "$TMP/ref" --hyp "$TMP/$sys" --width 4 | sed -E 's/^BLEU = ([0-9.]+) .*/\1/')
  echo "| $sys | $theirs | $ours | $(python3 -c "import sys; print(f'{abs(float(sys.argv[1]) - float(sys.argv[2])):.4f}')" "$theirs" "$ours") |"
done
