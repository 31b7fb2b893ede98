#!/usr/bin/env bash
# Data-parallel training steps, tapegrad beside PyTorch DistributedDataParallel (gloo), on this
# machine, one thread per process: configurations A, B (and C with ALL=1) with 1 and 2 processes,
# the global batch fixed; then all-reduce time by message size over shared memory and over TCP on
# loopback, for bench/dist_projection.py's cost model. JSON lines on stdout.
#   bench/dist_peers.sh [build] [python with torch 2.x]  > /tmp/dist.jsonl
#   python3 bench/dist_projection.py /tmp/dist.jsonl    # the tables of bench/RESULTS.md
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PY=${2:-python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI=(mpirun -np 2 --bind-to core)
configs=(A B)
[ "${ALL:-0}" = 1 ] && configs+=(C)
for c in "${configs[@]}"; do
  steps=30; [ "$c" = C ] && steps=8
  TG_NUM_THREADS=1 "$BUILD/dist_step" --config "$c" --steps "$steps"
  "${MPI[@]}" -x TG_NUM_THREADS=1 "$BUILD/dist_step" --config "$c" --steps "$steps"
  for policy in passive active; do
    for n in 1 2; do
      OMP_WAIT_POLICY=$policy "$PY" bench/torch_ddp_step.py --config "$c" --ranks $n --threads 1 --steps "$steps" |
        sed "s/}\$/, \"omp_wait_policy\": \"$policy\"}/"
    done
  done
done
"${MPI[@]}" "$BUILD/dist_step" --sweep | sed 's/}$/, "transport": "shared memory"}/'
"${MPI[@]}" --mca btl tcp,self "$BUILD/dist_step" --sweep | sed 's/}$/, "transport": "tcp loopback"}/'
