package nemesis

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestCoordPartitions is the coordination run: a 3-node cluster in
// network namespaces, the coordination SDK's workload (12 sessions, a
// third each in the two client groups' namespaces and the root namespace)
// beside the tickets one, and each coordination fault (CoordFaults) once in
// a seeded order, each held 2-6 s. It fails on any violation from the
// clients' view: a semaphore over its limit, two leaders of the election,
// an order id going backwards, a call returning more than 100 ms after its
// context ended, a session its client gave up still on the server past its
// bound. TICKETING_NEMESIS_SEED=S repeats a run's schedule.
//
// By default it is one short run (CI). TICKETING_NEMESIS_COORD_RUNS=N
// makes it N runs of 120 s of faults each (TICKETING_NEMESIS_COORD_DURATION
// sets another length); give go test a -timeout of 4 minutes a run.
func TestCoordPartitions(t *testing.T) {
	v := os.Getenv("TICKETING_NEMESIS_COORD_RUNS")
	if v == "" {
		runCoord(t, 0)
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("TICKETING_NEMESIS_COORD_RUNS=%q: want a positive number of runs", v)
	}
	d := 120 * time.Second
	if s := os.Getenv("TICKETING_NEMESIS_COORD_DURATION"); s != "" {
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("TICKETING_NEMESIS_COORD_DURATION=%q: %v", s, err)
		}
	}
	for i := 0; i < n; i++ {
		t.Run(strconv.Itoa(i+1), func(t *testing.T) { runCoord(t, d) })
	}
}

func runCoord(t *testing.T, d time.Duration) {
	if err := CheckPrivileges(); err != nil {
		t.Fatalf("%v", err)
	}
	var seed uint64
	if s := os.Getenv("TICKETING_NEMESIS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TICKETING_NEMESIS_SEED=%q: want a number", s)
		}
		seed = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+4*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "ticketing-nemesis-coord-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("data directories, server logs and coordination.txt kept in %s", dir)
		}
	})
	rep, err := Run(ctx, Config{Nodes: 3, Seed: seed, Duration: d, Hold: 4 * time.Second, Dir: dir, Log: testWriter{t},
		Kinds: CoordFaults, Coord: &CoordConfig{}})
	if err != nil {
		t.Fatalf("the run could not be carried out: %v", err)
	}
	t.Logf("\n%s", rep)
	kinds := map[FaultKind]bool{}
	for _, ev := range rep.Schedule {
		kinds[ev.Kind] = true
	}
	for _, k := range CoordFaults {
		if !kinds[k] {
			t.Errorf("fault kind %s was not injected", k)
		}
	}
	if rep.Failed() {
		t.Fatalf("the run found violations or anomalies (see the report above); repeat with TICKETING_NEMESIS_SEED=%d", rep.Seed)
	}
	c := rep.Coord
	if c.Holds[coordLimit1] == 0 || c.Holds[coordLimit3] == 0 || c.Terms == 0 {
		t.Fatalf("the coordination workload did not run: %d holds of %s, %d of %s, %d election terms", c.Holds[coordLimit1], coordLimit1, c.Holds[coordLimit3], coordLimit3, c.Terms)
	}
	if c.Expiries == 0 {
		t.Fatal("no session was given up: the expiry bound was not exercised")
	}
}
