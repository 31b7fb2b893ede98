#!/usr/bin/env bash
# Runs tapegrad's tg_bench and the PyTorch peer (bench/torch_ops.py) at 1 and 2 threads and
# prints a markdown table: ratio = PyTorch time / tapegrad time (> 1: tapegrad is faster).
#
#   bench/compare_ops.sh [path/to/tg_bench]        (default build/tg_bench; builds nothing)
#
# Environment: MIN_TIME (seconds per case, default 0.2), THREADS (default "1 2"),
# TORCH_PYTHON (default /usr/bin/python3, the interpreter that has torch).
set -euo pipefail

BENCH=${1:-build/tg_bench}
MIN_TIME=${MIN_TIME:-0.2}
THREADS=${THREADS:-"1 2"}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ ! -x $BENCH ]]; then
  echo "error: tg_bench binary '$BENCH' not found or not executable (build the tg_bench target)" >&2
  exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "# tapegrad vs PyTorch, float32 CPU ops"
echo
echo "- command: \`$0 $*\` (MIN_TIME=$MIN_TIME THREADS=\"$THREADS\" TORCH_PYTHON=$TORCH_PYTHON)"
echo "- CPU: $cpu ($(nproc) logical CPUs online)"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- torch: $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
echo "- tapegrad: \`TG_NUM_THREADS=N $BENCH --benchmark_format=json --benchmark_min_time=$MIN_TIME\`"
echo "- PyTorch: \`OMP_WAIT_POLICY=passive $TORCH_PYTHON $HERE/torch_ops.py --threads N --min-time $MIN_TIME\`"
echo

for t in $THREADS; do
  echo "running tg_bench with TG_NUM_THREADS=$t ..." >&2
  TG_NUM_THREADS=$t "$BENCH" --benchmark_format=json --benchmark_min_time="$MIN_TIME" \
    >"$TMP/tg_$t.json" 2>"$TMP/tg_$t.err" || { cat "$TMP/tg_$t.err" >&2; exit 1; }
  echo "running torch_ops.py with --threads $t ..." >&2
  OMP_WAIT_POLICY=passive "$TORCH_PYTHON" "$HERE/torch_ops.py" --threads "$t" --min-time "$MIN_TIME" \
    >"$TMP/torch_$t.tsv" 2>"$TMP/torch_$t.err" || { cat "$TMP/torch_$t.err" >&2; exit 1; }
  if [[ $t -gt 1 ]]; then  # also with OpenMP's default (spinning) wait policy, for the record
    echo "running torch_ops.py with --threads $t, default OMP_WAIT_POLICY ..." >&2
    env -u OMP_WAIT_POLICY "$TORCH_PYTHON" "$HERE/torch_ops.py" --threads "$t" --min-time "$MIN_TIME" \
      >"$TMP/torchspin_$t.tsv" 2>"$TMP/torchspin_$t.err" || { cat "$TMP/torchspin_$t.err" >&2; exit 1; }
  fi
done

LIBTORCH="$(dirname "$BENCH")/libtorch_overhead"
if [[ -x $LIBTORCH ]]; then
  echo "running $LIBTORCH (libtorch C++, one thread) ..." >&2
  "$LIBTORCH" --benchmark_format=json --benchmark_min_time="$MIN_TIME" >"$TMP/libtorch.json" 2>/dev/null
fi

python3 - "$TMP" $THREADS <<'EOF'
import json, os, sys

tmp, threads = sys.argv[1], sys.argv[2:]
UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

def fmt_time(s):
    if s is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"

rows, order = {}, []
for t in threads:
    with open(os.path.join(tmp, f"tg_{t}.json")) as f:
        data = json.load(f)
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b["name"]
        if name.endswith("/real_time"):
            name = name[: -len("/real_time")]
        if name not in order:
            order.append(name)
        rows[(name, t)] = [b["real_time"] * UNIT[b.get("time_unit", "ns")], None, None]
    for kind, col in (("torch", 1), ("torchspin", 2)):
        path = os.path.join(tmp, f"{kind}_{t}.tsv")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                parts = line.strip().split("\t")
                if len(parts) != 2:
                    continue
                name, sec = parts[0], float(parts[1])
                if name not in order:
                    order.append(name)
                rows.setdefault((name, t), [None, None, None])[col] = sec

print("| case | threads | tapegrad | PyTorch (passive) | ratio | PyTorch (OMP default spin) |")
print("|---|---:|---:|---:|---:|---:|")
slow = []
for name in order:
    for t in threads:
        tg, pt, spin = rows.get((name, t), [None, None, None])
        if tg and pt:
            r = pt / tg
            ratio = f"{r:.2f}"
            if r < 0.5:
                ratio = f"**{ratio}**"
                slow.append(f"{name} @{t}")
        else:
            ratio = "n/a"
        print(f"| {name} | {t} | {fmt_time(tg)} | {fmt_time(pt)} | {ratio} | {fmt_time(spin) if spin else '-'} |")
print()
print("ratio = PyTorch (passive) time / tapegrad time; > 1: tapegrad faster. Bold: tapegrad more than 2x slower than PyTorch.")
print("Per-op overhead cases: the PyTorch times include the Python interpreter's per-statement cost.")
if slow:
    print()
    print("tapegrad < 0.5x PyTorch: " + ", ".join(slow))

lt = os.path.join(tmp, "libtorch.json")
if os.path.exists(lt):
    with open(lt) as f:
        data = json.load(f)
    print()
    print("Per-op overhead against libtorch in C++ (Debian libtorch-dev 1.13, no Python), one thread:")
    print()
    print("| case | tapegrad | libtorch C++ | ratio |")
    print("|---|---:|---:|---:|")
    for b in data["benchmarks"]:
        name = b["name"].replace("/real_time", "")
        sec = b["real_time"] * UNIT[b.get("time_unit", "ns")]
        tg = rows.get((name, threads[0]), [None])[0]
        if tg:
            print(f"| {name} | {fmt_time(tg)} | {fmt_time(sec)} | {sec / tg:.2f} |")
EOF
