#!/usr/bin/env python3
"""Prints a table of etcdbench JSON lines (files given, or stdin)."""
import json, re, sys, fileinput

def note(notes, key):
    m = re.search(r'\b' + key + r'=([0-9.]+)', notes)
    return m.group(1) if m else '-'

print(f"{'workload':12} {'n':>2} {'C':>4} {'ops/s':>8} {'err':>4} {'lat p50/p90/p99/max ms':>28} "
      f"{'acq p50/p99 ms':>16} {'rssMiB':>7} {'srvCPU':>6} {'bench':>6} {'other':>6}")
for line in fileinput.input():
    line = line.strip()
    if not line.startswith('{'):
        continue
    r = json.loads(line)
    l, a, n = r['latency_ms'], r['acquire_latency_ms'], r['notes']
    print(f"{r['workload']:12} {r['nodes']:>2} {r['clients']:>4} {r['ops_per_sec']:>8.1f} {r['errors']:>4} "
          f"{l['p50']:>6.1f}/{l['p90']:>6.1f}/{l['p99']:>6.1f}/{l['max']:>6.1f} "
          f"{a['p50']:>7.1f}/{a['p99']:>7.1f} {r['server_rss_bytes']/2**20:>7.1f} "
          f"{note(n, 'server_cpu_cores'):>6} {note(n, 'bench_cpu_cores'):>6} {note(n, 'other_cpu_cores'):>6}")
