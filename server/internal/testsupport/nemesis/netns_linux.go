package nemesis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNotRoot: the harness creates network namespaces, which needs root.
var ErrNotRoot = errors.New("nemesis: must run as root (it creates network namespaces, veth pairs and a bridge with ip(8)); run the tests as root, as CI does")

// ErrNoIP: iproute2's ip or tc command is missing.
var ErrNoIP = errors.New("nemesis: the ip or tc command (iproute2) is not on PATH; install it with `apt-get install -y iproute2` (test.sh does)")

// Net is the test network: a bridge in the root namespace holding
// 10.77.S.1/24, and one namespace per node joined to it by a veth pair, the
// node's end holding 10.77.S.(10+i)/24. The subnet S is chosen so that no
// address of it is in use on this machine. The namespaces have no default
// route: nothing in them can reach anything outside the subnet.
type Net struct {
	id     string // short unique run id, used in every name
	subnet int    // S in 10.77.S.0/24
	bridge string
	// nodes are the servers' namespaces (0..servers-1), then the client
	// groups' (ClientGroups of them).
	nodes   []nsNode
	servers int

	mu      sync.Mutex
	routes  map[int]map[string]bool // node index -> blackholed addresses
	limited map[int]bool            // node index -> tbf on its eth0
}

type nsNode struct {
	ns   string // namespace name
	veth string // root-side veth name
	addr string // the node's address in the namespace
}

// CheckPrivileges returns ErrNotRoot or ErrNoIP when the harness cannot run.
func CheckPrivileges() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	for _, cmd := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return ErrNoIP
		}
	}
	return nil
}

func ipCmd(args ...string) error {
	cmd := exec.Command("ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// freeSubnet picks S in 10.77.S.0/24 with no address of it configured in the
// root namespace (another run of the harness, or anything else).
func freeSubnet(seed int) (int, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ip -4 addr show: %v: %s", err, out)
	}
	for i := 0; i < 250; i++ {
		s := (seed+i)%250 + 1
		if !bytes.Contains(out, []byte(fmt.Sprintf(" 10.77.%d.", s))) {
			return s, nil
		}
	}
	return 0, errors.New("nemesis: every subnet 10.77.1-250.0/24 is in use; remove stale harness bridges (ip link show type bridge, names tjb*)")
}

// NewNet creates the bridge, n server namespaces and ClientGroups client
// namespaces. On error, whatever was created
// is removed again.
func NewNet(n int) (*Net, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	pid := os.Getpid()
	s, err := freeSubnet(pid)
	if err != nil {
		return nil, err
	}
	// A run id that no namespace or link of another run (or a leftover of
	// a killed one) uses.
	id := ""
	for try := 0; try < 20 && id == ""; try++ {
		c := fmt.Sprintf("%04x", rand.N(0x10000))
		_, nsErr := os.Stat("/run/netns/tj" + c + "-n1")
		_, linkErr := net.InterfaceByName("tjb" + c)
		if errors.Is(nsErr, os.ErrNotExist) && linkErr != nil {
			id = c
		}
	}
	if id == "" {
		return nil, errors.New("nemesis: no free run id for the namespaces (ip netns list shows tj*-nN namespaces of earlier runs; remove them with ip netns del)")
	}
	nt := &Net{id: id, subnet: s, bridge: "tjb" + id, servers: n, routes: map[int]map[string]bool{}, limited: map[int]bool{}}
	ok := false
	defer func() {
		if !ok {
			_ = nt.Close()
		}
	}()
	if err := ipCmd("link", "add", nt.bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ipCmd("addr", "add", nt.BridgeAddr()+"/24", "dev", nt.bridge); err != nil {
		return nil, err
	}
	if err := ipCmd("link", "set", nt.bridge, "up"); err != nil {
		return nil, err
	}
	for i := 0; i < n+ClientGroups; i++ {
		nd := nsNode{ns: fmt.Sprintf("tj%s-n%d", id, i+1), veth: fmt.Sprintf("tj%sv%d", id, i+1), addr: fmt.Sprintf("10.77.%d.%d", s, 11+i)}
		if g := i - n; g >= 0 {
			nd = nsNode{ns: fmt.Sprintf("tj%s-c%d", id, g+1), veth: fmt.Sprintf("tj%sc%d", id, g+1), addr: fmt.Sprintf("10.77.%d.%d", s, 101+g)}
		}
		nt.nodes = append(nt.nodes, nd)
		steps := [][]string{
			{"netns", "add", nd.ns},
			{"link", "add", nd.veth, "type", "veth", "peer", "name", "eth0", "netns", nd.ns},
			{"link", "set", nd.veth, "master", nt.bridge},
			{"link", "set", nd.veth, "up"},
			{"-n", nd.ns, "link", "set", "lo", "up"},
			{"-n", nd.ns, "addr", "add", nd.addr + "/24", "dev", "eth0"},
			{"-n", nd.ns, "link", "set", "eth0", "up"},
		}
		for _, st := range steps {
			if err := ipCmd(st...); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	return nt, nil
}

// Close removes the namespaces (and with them the veth pairs) and the bridge.
func (nt *Net) Close() error {
	var errs []error
	for _, nd := range nt.nodes {
		if err := ipCmd("netns", "del", nd.ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ipCmd("link", "del", nt.bridge); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// BridgeAddr is the root namespace's address on the bridge (where clients
// connect from).
func (nt *Net) BridgeAddr() string { return fmt.Sprintf("10.77.%d.1", nt.subnet) }

// Addr is node i's address (0-based).
func (nt *Net) Addr(i int) string { return nt.nodes[i].addr }

// ClientGroups is how many client namespaces NewNet creates besides the
// servers': the workers are spread over them, so that a partition can leave
// some clients with one side and the rest with the other.
const ClientGroups = 2

// ClientNode is the index (for Drop and Addr) of client group g's namespace.
func (nt *Net) ClientNode(g int) int { return nt.servers + g }

// NS is node i's namespace name.
func (nt *Net) NS(i int) string { return nt.nodes[i].ns }

// Drop makes node i discard every packet it sends to addr (a blackhole route
// in its namespace): one direction of a partition.
func (nt *Net) Drop(i int, addr string) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.routes[i] == nil {
		nt.routes[i] = map[string]bool{}
	}
	if nt.routes[i][addr] {
		return nil
	}
	if err := ipCmd("-n", nt.nodes[i].ns, "route", "add", "blackhole", addr+"/32"); err != nil {
		return err
	}
	nt.routes[i][addr] = true
	return nil
}

// Limit shapes everything node i sends to rate (a tc tbf queue on its veth
// end; "256kbit", as tc writes rates), with bursts of burst and packets
// dropped after waiting latency in the queue.
func (nt *Net) Limit(i int, rate, burst, latency string) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.limited[i] {
		return nil
	}
	if err := tcCmd("-n", nt.nodes[i].ns, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate, "burst", burst, "latency", latency); err != nil {
		return err
	}
	nt.limited[i] = true
	return nil
}

func tcCmd(args ...string) error {
	cmd := exec.Command("tc", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// HealAll removes every blackhole route and bandwidth limit.
func (nt *Net) HealAll() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var errs []error
	for i := range nt.limited {
		if err := tcCmd("-n", nt.nodes[i].ns, "qdisc", "del", "dev", "eth0", "root"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(nt.limited, i)
	}
	for i, m := range nt.routes {
		for addr := range m {
			if err := ipCmd("-n", nt.nodes[i].ns, "route", "del", "blackhole", addr+"/32"); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(m, addr)
		}
	}
	return errors.Join(errs...)
}

// InNS runs f on an OS thread switched into namespace ns. Sockets created by
// f (net.Listen, net.Dial) belong to that namespace for their whole life,
// whichever thread uses them afterwards. f runs on a goroutine of its own: if
// the thread cannot be switched back, it stays locked and Go discards it when
// the goroutine ends, so no other goroutine ever runs in the wrong namespace.
func InNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer func() { _ = orig.Close() }()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("namespace %s: %w", ns, err)
			return
		}
		defer func() { _ = target.Close() }()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := setns(orig); err != nil {
			// Leave the thread locked: it ends with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("setns back from %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// ListenIn listens on addr inside namespace ns.
func ListenIn(ns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := InNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// DialerIn returns a dial function that connects from inside namespace ns.
func DialerIn(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := InNS(ns, func() error {
			var err error
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}
