#!/usr/bin/env python3
"""Tables for bench/RESULTS.md from bench/dist_peers.sh's JSON lines: the measured steps, and a
projection to 8, 64 and 256 nodes from a ring all-reduce cost model.

    python3 bench/dist_projection.py /tmp/dist.jsonl

Cost model (ring all-reduce of G gradient bytes over N nodes in k buckets):
    T_comm(N) = 2 (N - 1) / N * G / bandwidth  +  2 (N - 1) * k * latency
Latency and bandwidth are fitted to the measured all-reduce sweep (2 processes, where the ring
moves G bytes each way): latency = the median time of messages up to 2 KB; bandwidth from a
least-squares line through 128 KB - 8 MB. The networks: the loopback fits, and two assumptions
stated in the table: 25 Gb/s Ethernet with TCP (3.125 GB/s, 20 us a message) and 100 Gb/s with
RDMA (12.5 GB/s, 3 us).

Weak scaling: every node runs the configuration's whole batch in T_node, so the global batch grows
with N. Two kinds of node: this VM's 2 cores (T_node = the one-process, one-thread step divided by
the measured two-process speed-up) and a 32-core node assumed 16x faster than one core (half the
linear speed-up): the faster a node computes, the sooner communication shows. Buckets start during backward,
which is about 60% of a step here (f = 0.6; the two-process runs hid 97-99% of the
communication behind it), so a step takes
    T(N) = T1 + max(T_comm(N) - f T1, T_last)     T_last: the last bucket's own all-reduce
and it is communication-bound once T_comm(N) > f T1 (the backward can no longer hide it).
"""
import json
import statistics
import sys


def load(path):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    return [r for r in rows if not r.get("sweep")], [r for r in rows if r.get("sweep")]


def fit(sweep):
    small = [r["us"] for r in sweep if r["bytes"] <= 2048]
    lat = statistics.median(small) * 1e-6
    pts = [(r["bytes"], r["us"] * 1e-6) for r in sweep if 131072 <= r["bytes"] <= 8 << 20]
    n = len(pts)
    mx = sum(b for b, _ in pts) / n
    my = sum(t for _, t in pts) / n
    slope = sum((b - mx) * (t - my) for b, t in pts) / sum((b - mx) ** 2 for b, _ in pts)
    return lat, 1.0 / slope


def main():
    steps, sweep = load(sys.argv[1])
    print("### Measured: one thread per process, global batch fixed\n")
    print("| config | tapegrad 1 proc | tapegrad 2 procs | speed-up | PyTorch 1 proc | PyTorch DDP 2 procs | speed-up | "
          "tapegrad vs PyTorch (2 procs) | gradient MB | buckets | comm. hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    configs = sorted({r["config"] for r in steps})
    t1s = {}
    for c in configs:
        tg1 = next(r for r in steps if r["impl"] == "tapegrad" and r["config"] == c and r["ranks"] == 1)
        tg2 = next(r for r in steps if r["impl"] == "tapegrad" and r["config"] == c and r["ranks"] == 2)
        t1s[c] = (tg1["ms_per_step"], tg2["grad_bytes"], tg2["buckets"], tg1["ms_per_step"] / tg2["ms_per_step"])
        torch = {}
        for pol in ("passive", "active"):
            for n in (1, 2):
                rs = [r for r in steps if r["impl"].startswith("pytorch") and r["config"] == c and r["ranks"] == n
                      and r.get("omp_wait_policy") == pol]
                if rs:
                    torch[(pol, n)] = rs[0]["ms_per_step"]
        p1, p2 = torch.get(("passive", 1)), torch.get(("passive", 2))
        a1, a2 = torch.get(("active", 1)), torch.get(("active", 2))
        hidden = 1 - tg2["wait_ms"] / tg2["wait_ms_no_overlap"] if tg2["wait_ms_no_overlap"] > 0 else float("nan")
        print(f"| {c} | {tg1['ms_per_step']:.1f} ms | {tg2['ms_per_step']:.1f} ms | {tg1['ms_per_step'] / tg2['ms_per_step']:.2f}x | "
              f"{p1:.1f} ms ({a1:.1f}) | {p2:.1f} ms ({a2:.1f}) | {p1 / p2:.2f}x | {p2 / tg2['ms_per_step']:.2f}x | "
              f"{tg2['grad_bytes'] / 1e6:.1f} | {tg2['buckets']} | {100 * hidden:.0f}% ({tg2['wait_ms']:.2f} of "
              f"{tg2['wait_ms_no_overlap']:.2f} ms waited) |")
    print("\nPyTorch: OMP_WAIT_POLICY=passive, in parentheses the default (active).\n")

    nets = []
    for transport in ("shared memory", "tcp loopback"):
        s = [r for r in sweep if r.get("transport") == transport]
        if s:
            lat, bw = fit(s)
            nets.append((f"measured {transport}", lat, bw))
    nets += [("25 Gb/s TCP (assumed)", 20e-6, 3.125e9), ("100 Gb/s RDMA (assumed)", 3e-6, 12.5e9)]
    print("### All-reduce fits (2 processes on this machine)\n")
    for name, lat, bw in nets[:2]:
        print(f"- {name}: latency {lat * 1e6:.1f} us, bandwidth {bw / 1e9:.2f} GB/s")
    print("\n### Projection (weak scaling, f = 0.6)\n")
    print("| config | node | network | T_comm 8 / 64 / 256 nodes | step 8 / 64 / 256 | efficiency 8 / 64 / 256 | "
          "communication-bound from |")
    print("|---|---|---|---|---|---|---|")
    f = 0.6
    for c in configs:
        t1, g, k, speedup = t1s[c]
        for node, tn in ((f"2 cores ({speedup:.2f}x one)", t1 / speedup / 1e3), ("32 cores (16x one, assumed)", t1 / 16 / 1e3)):
            for name, lat, bw in nets[1:]:
                def comm(n):
                    return 2 * (n - 1) / n * g / bw + 2 * (n - 1) * k * lat

                def step(n):
                    last = 2 * (n - 1) / n * (g / k) / bw + 2 * (n - 1) * lat
                    return tn + max(comm(n) - f * tn, last)
                bound = next((n for n in range(2, 1 << 20) if comm(n) > f * tn), None)
                ns = (8, 64, 256)
                print(f"| {c} | {node} | {name} | " + " / ".join(f"{comm(n) * 1e3:.1f}" for n in ns) + " ms | "
                      + " / ".join(f"{step(n) * 1e3:.0f}" for n in ns) + " ms | "
                      + " / ".join(f"{100 * tn / step(n):.0f}%" for n in ns) + " | "
                      + (f"{bound} nodes" if bound else "never") + " |")


if __name__ == "__main__":
    main()
