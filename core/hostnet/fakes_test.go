package hostnet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// call is one recorded command.
type call struct {
	argv  []string
	stdin []byte
	// out is what Privileged.Out held when the command ran.
	out string
}

// fakeRunner records argv and answers from canned outputs keyed by the
// shell-quoted argv; unknown commands succeed with no output unless strict.
type fakeRunner struct {
	mu      sync.Mutex
	calls   []call
	replies map[string]reply
	// handle, when set, answers instead of replies.
	handle func(argv []string, stdin []byte) ([]byte, error)
	// out is the Privileged.Out buffer, snapshotted at every call.
	out *bytes.Buffer
}

type reply struct {
	out    string
	stderr string
	fail   bool
}

func (f *fakeRunner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{argv: slices.Clone(argv), stdin: stdin}
	if f.out != nil {
		c.out = f.out.String()
	}
	f.calls = append(f.calls, c)
	if f.handle != nil {
		return f.handle(argv, stdin)
	}
	r, ok := f.replies[QuoteArgv(argv)]
	if !ok {
		return nil, nil
	}
	if r.fail {
		return []byte(r.out), &CommandError{Argv: argv, Stderr: r.stderr, Err: fmt.Errorf("exit status 1")}
	}
	return []byte(r.out), nil
}

// argvs returns the recorded commands, shell-quoted.
func (f *fakeRunner) argvs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	for _, c := range f.calls {
		s = append(s, QuoteArgv(c.argv))
	}
	return s
}

// fakeGuest emulates, in memory, the guest commands EnsureGuestNetwork
// runs: iptables (-C, -I, -D, -A, -S, -N with tables and chains, the way
// iptables 1.8 answers), ip -o -4 addr show, sysctl, cat, install, mv and
// systemctl.
type fakeGuest struct {
	chains    map[string]*fakeChain // "table/chain"
	iface     string
	addr      string // e.g. 192.168.64.3/24; "" = no address
	ipForward string
	files     map[string]fakeFile
	enabled   bool
	reloads   int
	calls     [][]string
}

type fakeChain struct {
	builtin bool
	rules   []string
}

type fakeFile struct {
	mode    string
	content []byte
}

// newFakeGuest is a VM after Docker started with the bridge: Docker's
// MASQUERADE in nat POSTROUTING and an empty DOCKER-USER chain.
func newFakeGuest(addr string) *fakeGuest {
	return &fakeGuest{
		chains: map[string]*fakeChain{
			"nat/POSTROUTING":    {builtin: true, rules: []string{dockerMasq}},
			"filter/FORWARD":     {builtin: true, rules: []string{"-j DOCKER-USER", "-j DOCKER-FORWARD"}},
			"filter/DOCKER-USER": {},
		},
		iface:     "lima0",
		addr:      addr,
		ipForward: "0",
		files:     map[string]fakeFile{},
	}
}

const dockerMasq = "-s 172.30.0.0/16 ! -o br-0123456789ab -j MASQUERADE"

// dockerRestart does what dockerd does to nat POSTROUTING when it starts:
// its MASQUERADE rule is inserted first again.
func (g *fakeGuest) dockerRestart() {
	c := g.chains["nat/POSTROUTING"]
	c.rules = slices.DeleteFunc(c.rules, func(r string) bool { return r == dockerMasq })
	c.rules = append([]string{dockerMasq}, c.rules...)
}

func (g *fakeGuest) rules(tc string) []string { return g.chains[tc].rules }

// mutations counts the recorded commands that change something.
func (g *fakeGuest) mutations() []string {
	var m []string
	for _, c := range g.calls {
		s := QuoteArgv(c)
		switch {
		case slices.Contains(c, "-I"), slices.Contains(c, "-D"), slices.Contains(c, "-A"),
			c[0] == "install", c[0] == "mv", c[0] == "sysctl" && slices.Contains(c, "-w"),
			c[0] == "systemctl" && c[1] != "is-enabled":
			m = append(m, s)
		}
	}
	return m
}

func (g *fakeGuest) exec(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	g.calls = append(g.calls, slices.Clone(argv))
	out, stderr, code := g.run(argv, stdin)
	if code != 0 {
		return []byte(out), fmt.Errorf("%s: exit status %d: %s", QuoteArgv(argv), code, stderr)
	}
	return []byte(out), nil
}

func (g *fakeGuest) run(argv []string, stdin []byte) (string, string, int) {
	switch argv[0] {
	case "iptables":
		return g.iptables(argv[1:])
	case "ip":
		if QuoteArgv(argv[:6]) == "ip -o -4 addr show dev" && len(argv) == 7 {
			if argv[6] != g.iface {
				return "", fmt.Sprintf("Device %q does not exist.", argv[6]), 1
			}
			if g.addr == "" {
				return "", "", 0
			}
			return fmt.Sprintf("3: %s    inet %s brd 192.168.64.255 scope global dynamic %s\\       valid_lft 86268sec preferred_lft 86268sec\n", g.iface, g.addr, g.iface), "", 0
		}
	case "sysctl":
		switch QuoteArgv(argv[1:]) {
		case "-n net.ipv4.ip_forward":
			return g.ipForward + "\n", "", 0
		case "-w net.ipv4.ip_forward=1":
			g.ipForward = "1"
			return "net.ipv4.ip_forward = 1\n", "", 0
		}
	case "cat":
		if len(argv) == 3 && argv[1] == "--" {
			f, ok := g.files[argv[2]]
			if !ok {
				return "", "cat: " + argv[2] + ": No such file or directory", 1
			}
			return string(f.content), "", 0
		}
	case "install":
		if len(argv) == 6 && argv[1] == "-D" && argv[2] == "-m" && argv[4] == "/dev/stdin" {
			g.files[argv[5]] = fakeFile{mode: argv[3], content: slices.Clone(stdin)}
			return "", "", 0
		}
	case "mv":
		if len(argv) == 5 && argv[1] == "-f" && argv[2] == "--" {
			f, ok := g.files[argv[3]]
			if !ok {
				return "", "mv: cannot stat '" + argv[3] + "': No such file or directory", 1
			}
			delete(g.files, argv[3])
			g.files[argv[4]] = f
			return "", "", 0
		}
	case "systemctl":
		switch {
		case len(argv) == 2 && argv[1] == "daemon-reload":
			g.reloads++
			return "", "", 0
		case len(argv) == 3 && argv[1] == "is-enabled" && argv[2] == GuestServiceName:
			if g.enabled {
				return "enabled\n", "", 0
			}
			if _, ok := g.files[GuestServicePath]; ok {
				return "disabled\n", "", 1
			}
			return "", "Failed to get unit file state for " + argv[2] + ": No such file or directory", 1
		case len(argv) == 3 && argv[1] == "enable" && argv[2] == GuestServiceName:
			if _, ok := g.files[GuestServicePath]; !ok {
				return "", "Failed to enable unit: Unit file " + argv[2] + " does not exist.", 1
			}
			g.enabled = true
			return "", "Created symlink /etc/systemd/system/multi-user.target.wants/" + argv[2] + " -> " + GuestServicePath + ".", 0
		}
	}
	return "", fmt.Sprintf("fakeGuest: unexpected command %s", QuoteArgv(argv)), 127
}

func (g *fakeGuest) iptables(args []string) (string, string, int) {
	table := "filter"
	for len(args) > 0 {
		switch args[0] {
		case "-w":
			args = args[2:]
			continue
		case "-t":
			table, args = args[1], args[2:]
			continue
		}
		break
	}
	if len(args) < 2 {
		return "", "iptables: bad arguments", 2
	}
	op, chain, rest := args[0], args[1], args[2:]
	c := g.chains[table+"/"+chain]
	noChain := func() (string, string, int) {
		return "", "iptables: No chain/target/match by that name.", 1
	}
	switch op {
	case "-N":
		if c != nil {
			return "", "iptables: Chain already exists.", 1
		}
		g.chains[table+"/"+chain] = &fakeChain{}
		return "", "", 0
	case "-S":
		if c == nil {
			return noChain()
		}
		var b strings.Builder
		if c.builtin {
			fmt.Fprintf(&b, "-P %s ACCEPT\n", chain)
		} else {
			fmt.Fprintf(&b, "-N %s\n", chain)
		}
		for _, r := range c.rules {
			fmt.Fprintf(&b, "-A %s %s\n", chain, r)
		}
		return b.String(), "", 0
	}
	if c == nil {
		return noChain()
	}
	switch op {
	case "-C":
		if slices.Contains(c.rules, strings.Join(rest, " ")) {
			return "", "", 0
		}
		return "", "iptables: Bad rule (does a matching rule exist in that chain?).", 1
	case "-D":
		i := slices.Index(c.rules, strings.Join(rest, " "))
		if i < 0 {
			return "", "iptables: Bad rule (does a matching rule exist in that chain?).", 1
		}
		c.rules = slices.Delete(c.rules, i, i+1)
		return "", "", 0
	case "-A":
		c.rules = append(c.rules, strings.Join(rest, " "))
		return "", "", 0
	case "-I":
		pos := 1
		if len(rest) > 0 && rest[0] != "" && rest[0][0] >= '0' && rest[0][0] <= '9' {
			fmt.Sscan(rest[0], &pos)
			rest = rest[1:]
		}
		if pos < 1 || pos > len(c.rules)+1 {
			return "", "iptables: Index of insertion too big.", 1
		}
		c.rules = slices.Insert(c.rules, pos-1, strings.Join(rest, " "))
		return "", "", 0
	}
	return "", "iptables: unknown option " + op, 2
}

// requireRoot: tests that change network namespaces need root; CI runs as
// root, so there they fail instead of skipping.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the tests as root")
		}
		t.Skip("needs root (network namespaces, real iptables); CI runs as root")
	}
}
