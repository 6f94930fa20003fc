package main

import (
	"strings"
	"testing"
)

func TestRenderPairsAndTargets(t *testing.T) {
	lines := []string{
		`{"system":"ticketing","workload":"uncontended","nodes":1,"clients":128,"duration_s":10,"ops":200000,"ops_per_sec":20000,"errors":0,"latency_ms":{"p50":5,"p90":9,"p99":20,"max":40},"acquire_latency_ms":{"p50":2,"p90":4,"p99":9,"max":30},"server_rss_bytes":1,"notes":"x; brokers=1; server_cpu_s=5 server_cpu_cores=0.5 bench_cpu_s=4 bench_cpu_cores=0.4 other_cpu_cores=0.10"}`,
		`{"system":"etcd","workload":"uncontended","nodes":1,"clients":128,"duration_s":10,"ops":8000,"ops_per_sec":800,"errors":0,"latency_ms":{"p50":90,"p90":200,"p99":900,"max":1000},"acquire_latency_ms":{"p50":40,"p90":100,"p99":500,"max":900},"server_rss_bytes":1,"notes":"sessions=1/worker clientv3_clients=1; other_cpu_cores=0.20"}`,
		`{"system":"ticketing","workload":"uncontended","nodes":1,"clients":128,"ops_per_sec":10000,"notes":"brokers=16"}`,
		`{"system":"disk","workload":"fsync","nodes":0,"clients":1,"latency_ms":{"p50":0.3},"notes":""}`,
		`{"system":"disk","workload":"fsync","nodes":0,"clients":1,"latency_ms":{"p50":0.2},"notes":""}`,
		`{"system":"disk","workload":"fsync","nodes":0,"clients":1,"latency_ms":{"p50":0.25},"notes":""}`,
		`{"system":"ticketing","workload":"uncontended","nodes":1,"clients":1,"latency_ms":{"p50":0.9},"acquire_latency_ms":{"p50":0.45},"notes":"brokers=1"}`,
		`{"system":"etcd","workload":"uncontended","nodes":1,"clients":1,"latency_ms":{"p50":2},"acquire_latency_ms":{"p50":1},"notes":"clientv3_clients=1"}`,
		`{"system":"ticketing","workload":"hold","nodes":1,"clients":8,"ops_per_sec":1,"server_rss_bytes":500000000,"notes":"n=1000000 held=1000000 rss_per_held_lock_bytes=450 restart_s=6.1; sample"}`,
		`{"system":"etcd","workload":"hold","nodes":1,"clients":8,"ops_per_sec":1,"server_rss_bytes":150000000,"notes":"n=50000 held=50000 rss_per_held_lock_bytes=2700"}`,
		`{"system":"ticketing","workload":"contended","nodes":1,"clients":16,"ops_per_sec":2000,"acquire_latency_ms":{"p50":6,"p99":25},"notes":""}`,
	}
	var rs []*result
	for _, l := range lines {
		r, err := parse(l)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	out := render("t", rs)
	for _, want := range []string{
		"| 1 | uncontended, 128 clients, 1 conn(s) | pairs/s (/s) | 1 | 20000 | 800.0 | 25.0x | ≥8x etcd | yes | 0.10/0.20 |",
		"| 1 | uncontended, 128 clients, 16 conn(s) | pairs/s (/s) | 1 | 10000 | – | – |  |  | –/– |",
		"| server CPU per op (µs) | 1 | 25.00 |",
		"| generator CPU per op (µs) | 1 | 20.00 |",
		"| generator CPU (cores) | 1 | 0.400 |",
		"p50 0.250 ms (median of the floor runs)",
		"| 1 | single client, uncontended | pair p50 (ms) | 1 | 0.900 | 2.00 | 0.45x | ≤0.45x etcd | yes |",
		"| 1 | single client, uncontended | acquire p50 (ms) | 1 | 0.450 | 1.00 | 0.45x | ≤ 2x fsync floor (0.250 ms) | yes |",
		"| pair p99 (ms) | 1 | 20.00 | 900.0 | 0.02x | < etcd p50 (90.0 ms) | yes |",
		"| RSS per held ticket (B) | 1 | 450.0 | 2700 | 0.17x |",
		"| restart (s) | 1 | 6.10 | – | – | < 10 s | yes |",
		"| RSS at N, per server (MiB) | 1 | 476.8 | 143.1 | 3.33x | 1M held: < 1 GiB | yes |",
		"| 1 | contended, 16 clients, 0 conn(s) | acquire p99 (ms) | 1 | 25.00 | – | – | < 15 ms | **no** |",
		"Ticketing held 1000000 tickets, etcd 50000 locks",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestRenderRedisBesideEtcd(t *testing.T) {
	lines := []string{
		`{"system":"ticketing","workload":"uncontended","nodes":1,"clients":1,"ops":1000,"latency_ms":{"p50":0.5},"acquire_latency_ms":{"p50":0.25},"notes":"brokers=1 other_cpu_cores=0.01"}`,
		`{"system":"etcd","workload":"uncontended","nodes":1,"clients":1,"latency_ms":{"p50":1},"acquire_latency_ms":{"p50":0.5},"notes":"clientv3_clients=1 other_cpu_cores=0.02"}`,
		`{"system":"redis","workload":"uncontended","nodes":1,"clients":1,"latency_ms":{"p50":0.4},"acquire_latency_ms":{"p50":0.2},"notes":"redis_clients=1 pool=1 other_cpu_cores=0.03"}`,
		`{"system":"ticketing","workload":"uncontended","nodes":3,"clients":1,"latency_ms":{"p50":1.2},"notes":"brokers=1"}`,
		`{"system":"etcd","workload":"uncontended","nodes":3,"clients":1,"latency_ms":{"p50":2.4},"notes":"clientv3_clients=1"}`,
	}
	var rs []*result
	for _, l := range lines {
		r, err := parse(l)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	out := render("t", rs)
	for _, want := range []string{
		"| target | met | Redis | Ticketing/Redis |",
		"| 1 | single client, uncontended | pair p50 (ms) | 0.500 | 1.00 | 0.50x | ≤0.45x etcd | **no** | 0.400 | 1.25x |",
		"| 1 | single client, uncontended | pair p50, against Redis (ms) | 1 | 0.500 | 1.00 | 0.50x | ≤ Redis pair p50 (0.400 ms) | **no** | 0.01/0.02 | 0.400 | 1.25x | 0.03 |",
		"| 3 | single client, uncontended | pair p50 (ms) | 1.20 | 2.40 | 0.50x | ≤0.55x etcd | yes | – | – |",
		"appendfsync always",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// Without Redis results the tables keep their columns.
	if out := render("t", rs[:2]); strings.Contains(out, "Ticketing/Redis") {
		t.Errorf("Redis columns without Redis results:\n%s", out)
	}
}
