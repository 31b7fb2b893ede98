"""What the PyTorch peers share: each thread count runs in a fresh child process (the script
re-invoking itself with --child T), so thread pools and peak memory belong to that count alone,
with OMP/MKL/OpenBLAS limited to T threads and the given OpenMP wait policy."""
import os
import subprocess
import sys


def run_per_thread(script, threads, wait_policy, child_args):
    """Runs `script --child T child_args...` for each T in the comma-separated `threads`; exits 1
    if any child failed."""
    failed = False
    for t in [int(x) for x in threads.split(",") if x.strip()]:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                   OMP_WAIT_POLICY=wait_policy)
        p = subprocess.run([sys.executable, os.path.abspath(script), "--child", str(t)] + child_args, env=env)
        if p.returncode != 0:
            print(f"threads {t}: child failed with status {p.returncode}", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)


def cpu_model():
    """The CPU's model name from /proc/cpuinfo ("?" where there is none), for the JSON lines."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"
