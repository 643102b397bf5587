package hostnet

import (
	"context"
	"fmt"
	"os/exec"
)

// darwinNetstat is macOS's netstat(1), by absolute path.
const darwinNetstat = "/usr/sbin/netstat"

func readRoutes(ctx context.Context) ([]HostRoute, error) {
	out, err := exec.CommandContext(ctx, darwinNetstat, "-rn", "-f", "inet").Output()
	if err != nil {
		return nil, fmt.Errorf("reading the routing table (%s -rn -f inet): %w", darwinNetstat, err)
	}
	return parseNetstat(string(out))
}
