package externaldns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Bounds of the etcd conversation in PreClusterDelete.
const (
	etcdDialTimeout = 5 * time.Second
	etcdOpTimeout   = 10 * time.Second
	// cleanupPasses bounds the re-reads when a selected key changes between
	// the read and its deletion.
	cleanupPasses = 3
)

// cleanupStats says what removeOwned did.
type cleanupStats struct {
	// Deleted are the keys removed.
	Deleted []doomed
	// Scanned is how many keys were under the prefix (last pass).
	Scanned int
}

// removeOwned deletes every key under EtcdPrefix at endpoint that owner's
// ExternalDNS wrote (see ownedBy) and nothing else. Each deletion is
// conditional on the key being unchanged since it was read, so a record
// rewritten meanwhile is judged again rather than removed blindly.
func removeOwned(ctx context.Context, endpoint, owner string, log *slog.Logger) (*cleanupStats, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: etcdDialTimeout,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd at %s: %w", endpoint, err)
	}
	defer cli.Close()

	stats := &cleanupStats{}
	for pass := 1; pass <= cleanupPasses; pass++ {
		kvs, err := list(ctx, cli, EtcdPrefix)
		if err != nil {
			return stats, fmt.Errorf("reading %s from etcd at %s: %w", EtcdPrefix, endpoint, err)
		}
		stats.Scanned = len(kvs)
		targets := ownedBy(EtcdPrefix, kvs, owner)
		changed := 0
		for _, d := range targets {
			ok, err := deleteIfUnchanged(ctx, cli, d.kv)
			if err != nil {
				return stats, fmt.Errorf("deleting %s from etcd at %s: %w", d.Key, endpoint, err)
			}
			if !ok {
				changed++
				continue
			}
			log.Debug("deleted DNS record", "key", d.Key, "name", d.Name, "reason", d.Reason)
			stats.Deleted = append(stats.Deleted, d)
		}
		if changed == 0 {
			return stats, nil
		}
		log.Debug("records changed while being deleted; reading again", "changed", changed, "pass", pass)
	}
	return stats, fmt.Errorf("records of owner %q in etcd at %s kept changing while being deleted (%d passes): "+
		"is an ExternalDNS with --txt-owner-id=%s still running?", owner, endpoint, cleanupPasses, owner)
}

// opContext bounds one etcd call by etcdOpTimeout, and ends it while a
// quarter of the hook's remaining time is left, so that a hung etcd yields
// this plugin's explanation rather than the host's bare deadline error.
func opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := etcdOpTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)*3/4)
	}
	return context.WithTimeout(ctx, d)
}

// list returns every key under prefix with its value and revision.
func list(ctx context.Context, cli *clientv3.Client, prefix string) ([]kv, error) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]kv, 0, len(resp.Kvs))
	for _, k := range resp.Kvs {
		out = append(out, kv{Key: string(k.Key), Value: k.Value, ModRevision: k.ModRevision})
	}
	return out, nil
}

// deleteIfUnchanged deletes exactly e.Key if it still has e.ModRevision; it
// reports false when the key changed (or vanished) since it was read.
func deleteIfUnchanged(ctx context.Context, cli *clientv3.Client, e kv) (bool, error) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(e.Key), "=", e.ModRevision)).
		Then(clientv3.OpDelete(e.Key)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// StaleRecordsError is returned by PreClusterDelete when the DNS records of
// the deleted cluster could not be removed from the local DNS etcd.
type StaleRecordsError struct {
	// Cluster is the cluster (ExternalDNS owner id) whose records remain.
	Cluster string
	// Endpoint is the etcd that could not be cleaned.
	Endpoint string
	// Err is the cause.
	Err error
}

// Error names what is stale, why, and how to clean it up.
func (e *StaleRecordsError) Error() string {
	return fmt.Sprintf("DNS records of cluster %[1]s are still in the local DNS etcd at %[2]s "+
		"(keys under %[3]s whose value has \"owner\":\"%[1]s\" or whose TXT text has external-dns/owner=%[1]s, "+
		"and the names those TXT records own); they will answer for a cluster that no longer exists: %[4]v. "+
		"Fix: start the local DNS (`marina up`) and run `marina cluster delete %[1]s` again; "+
		"or list them with `etcdctl --endpoints %[2]s get --prefix %[3]s` and remove each with `etcdctl del <key>`",
		e.Cluster, e.Endpoint, EtcdPrefix, e.Err)
}

// Unwrap returns the cause.
func (e *StaleRecordsError) Unwrap() error { return e.Err }

var errNoEndpoint = errors.New("no etcd endpoint: the localdns plugin published no etcdEndpoint and Env.DNSEtcdIP is empty; enable the localdns plugin (plugins.localdns.enabled: true)")
