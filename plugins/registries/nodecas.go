package registries

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/container"
)

// kindClusterLabel is the label kind puts on every node container, with
// the cluster's name.
const kindClusterLabel = "io.x-k8s.kind.cluster"

// nodeCAs is what the lab's clusters' nodes trust of the company's CAs,
// against trust.extraCAs now: the clusters whose nodes carry another list
// (Stale), and those created when the list was empty (Missing), sorted.
type nodeCAs struct {
	Stale, Missing []string
}

// checkNodeCAs reads extraCAsPath in every kind node on the lab's network
// (running or not; container.Client.ReadFile) and compares it with want (Env.ExtraCAs). A node
// carries the list its cluster was created with: the file is mounted
// read-only from the Docker host and containerd reads it when it starts,
// so a changed list reaches a cluster only when it is re-created.
func checkNodeCAs(ctx context.Context, c *container.Client, network, want string) (nodeCAs, error) {
	var out nodeCAs
	f := client.Filters{}.Add("label", kindClusterLabel).Add("network", network)
	res, err := c.API().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return out, fmt.Errorf("list the lab's kind nodes: %w", err)
	}
	stale, missing := map[string]bool{}, map[string]bool{}
	for _, n := range res.Items {
		cluster := n.Labels[kindClusterLabel]
		// A node file holds at most 1 MiB (core/kind's MaxNodeFileSize).
		have, found, err := c.ReadFile(ctx, n.ID, extraCAsPath, 1<<20)
		if err != nil {
			return out, fmt.Errorf("cluster %s: %w", cluster, err)
		}
		switch {
		case !found && want != "":
			missing[cluster] = true
		case found && string(have.Content) != want:
			stale[cluster] = true
		}
	}
	for k := range stale {
		out.Stale = append(out.Stale, k)
	}
	for k := range missing {
		if !stale[k] {
			out.Missing = append(out.Missing, k)
		}
	}
	slices.Sort(out.Stale)
	slices.Sort(out.Missing)
	return out, nil
}

// warnings says which clusters do not trust what trust.extraCAs lists, and
// the fix.
func (n nodeCAs) warnings() []sdk.Diagnostic {
	var out []sdk.Diagnostic
	const fix = "Their nodes got the list when the cluster was created (containerd reads it when it starts; the file is the cluster's, read-only), so image pulls through a TLS-intercepting proxy may fail there. Re-create each to give it the current list: marina cluster delete NAME && marina cluster create NAME."
	if len(n.Stale) > 0 {
		out = append(out, sdk.Diagnostic{
			Severity: sdk.SeverityWarning,
			Summary:  fmt.Sprintf("cluster(s) %s trust other company CAs than trust.extraCAs lists now", strings.Join(n.Stale, ", ")),
			Detail:   fix,
		})
	}
	if len(n.Missing) > 0 {
		out = append(out, sdk.Diagnostic{
			Severity: sdk.SeverityWarning,
			Summary:  fmt.Sprintf("cluster(s) %s were created before trust.extraCAs listed company CAs: their nodes do not trust them", strings.Join(n.Missing, ", ")),
			Detail:   fix,
		})
	}
	return out
}
