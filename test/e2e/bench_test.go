package e2e

// Benchmarks of issue 7, run by `make bench` (never asserted: reported):
//
//   - BenchmarkServiceToName: from a LoadBalancer Service's creation to its
//     name answering the VIP at the test lab's DNS server (.255.53): MetalLB's
//     controller assigns the VIP, ExternalDNS writes the record to etcd,
//     CoreDNS serves it. Median of benchServices Services. Goal: under 2 s.
//   - BenchmarkCreateOverhead: what `marina cluster create` costs beyond the
//     stand-in's own start (the kind step): slot allocation, the plugins'
//     hooks, kubeconfig export and merge — for one cluster, and per cluster
//     for a fleet of five created with maxParallel 1 and with maxParallel 5
//     (with the fleet's wall-clock times and their ratio).
//
// Run: go test -run '^$' -bench . ./test/e2e (a few minutes; one lab).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bcollard/marina/sdk/dockertest"
)

// benchServices is how many Services BenchmarkServiceToName times.
const benchServices = 7

func BenchmarkServiceToName(b *testing.B) {
	l := startLab(b) // each benchmark brings up (and destroys) its own lab
	const name = "bench"
	if _, ok := l.clusters(b)[name]; !ok {
		l.createCluster(b, name)
	}
	cs := l.clientset(b, name)
	var times, vips []time.Duration
	for b.Loop() {
		times, vips = times[:0], vips[:0]
		for i := range benchServices {
			svc := fmt.Sprintf("svc%d-%d", i, time.Now().UnixNano()%1e6)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			start := time.Now()
			_, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: svc},
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeLoadBalancer,
					Selector: map[string]string{"app": svc},
					Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
				},
			}, metav1.CreateOptions{})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			fqdn := svc + ".default." + name + "." + zone
			var vipAt time.Duration
			dockertest.WaitFor(b, nameTimeout, 20*time.Millisecond, fqdn+" to resolve", func() error {
				if vipAt == 0 {
					sctx, scancel := context.WithTimeout(context.Background(), time.Second)
					s, err := cs.CoreV1().Services("default").Get(sctx, svc, metav1.GetOptions{})
					scancel()
					if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
						vipAt = time.Since(start)
					}
				}
				qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
				defer qcancel()
				got, err := dockertest.QueryA(qctx, dnsServer, fqdn)
				if err != nil {
					return err
				}
				if len(got) == 0 {
					return fmt.Errorf("no address")
				}
				return nil
			})
			times = append(times, time.Since(start))
			vips = append(vips, vipAt)
		}
	}
	slices.Sort(times)
	median := times[len(times)/2]
	b.ReportMetric(median.Seconds(), "s/name(median)")
	b.ReportMetric(times[len(times)-1].Seconds(), "s/name(max)")
	verdict := "met"
	if median >= 2*time.Second {
		verdict = "NOT met"
	}
	b.Logf("Service -> name at %s: median %s, min %s, max %s over %d Services; goal < 2s: %s",
		dnsServer, median.Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), len(times), verdict)
	slices.Sort(vips)
	b.ReportMetric(vips[len(vips)/2].Seconds(), "s/vip(median)")
	b.Logf("of which Service -> VIP (MetalLB's controller): median %s", vips[len(vips)/2].Round(time.Millisecond))
}

// stepLine is a plain progress line of a finished step:
// "<time> [cluster create] 3/7 Create cluster dev (kind): done in 3.2s".
var stepLine = regexp.MustCompile(`\] \d+/\d+ (.+): done in (\S+)$`)

// stepTimes sums the durations of the finished steps in marina's plain
// progress output: the kind steps (the stand-in's start) and the others.
func stepTimes(b testing.TB, out string) (kind, rest time.Duration) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := stepLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			b.Fatalf("step duration %q in %q: %v", m[2], sc.Text(), err)
		}
		if strings.HasSuffix(m[1], "(kind)") {
			kind += d
		} else {
			rest += d
		}
	}
	return kind, rest
}

func BenchmarkCreateOverhead(b *testing.B) {
	l := startLab(b) // each benchmark brings up (and destroys) its own lab
	for b.Loop() {
		// One cluster, every plugin (the harness's kubelet stand-in starts
		// MetalLB's controller and ExternalDNS, whose readiness the
		// PostCluster hooks wait for), then one without those two.
		const one = "e2e-overhead"
		all := l.createCluster(b, one)
		kindAll, restAll := stepTimes(b, all.out)
		l.run(b, deleteTimeout, "cluster", "delete", one, "--progress", "plain")
		r := l.exec(createTimeout, "cluster", "create", one, "--progress", "plain", "--no-plugin", "metallb", "--no-plugin", "externaldns")
		if r.err != nil {
			b.Fatalf("%s", r)
		}
		kindOne, restOne := stepTimes(b, r.out)
		l.run(b, deleteTimeout, "cluster", "delete", one, "--progress", "plain")

		fleetWall := map[int]time.Duration{}
		fleetRest := map[int]time.Duration{}
		for _, par := range []int{1, 5} {
			manifest := filepath.Join(l.home, fmt.Sprintf("fleet-%d.yaml", par))
			var names []string
			for i := range 5 {
				names = append(names, fmt.Sprintf("e2e-f%d-%d", par, i))
			}
			// MetalLB and ExternalDNS are left out here: their PostCluster
			// waits on controllers this harness runs (per cluster), whose
			// start would be counted as marina's.
			doc := fmt.Sprintf("apiVersion: marina.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: bench%d\nspec:\n  maxParallel: %d\n  defaults:\n    plugins:\n      metallb: {enabled: false}\n      externaldns: {enabled: false}\n  clusters: [%s]\n",
				par, par, strings.Join(names, ", "))
			if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
				b.Fatal(err)
			}
			begin := time.Now()
			r := l.exec(createTimeout*2, "fleet", "create", "-f", manifest)
			fleetWall[par] = time.Since(begin)
			if r.err != nil {
				b.Fatalf("%s", r)
			}
			_, rest := stepTimes(b, r.out+"\n"+r.stderr)
			fleetRest[par] = rest / 5
			l.run(b, deleteTimeout*2, "fleet", "delete", "bench"+strconv.Itoa(par), "--yes")
		}
		b.ReportMetric(restAll.Seconds(), "s/create-overhead(1,all-plugins)")
		b.ReportMetric(restOne.Seconds(), "s/create-overhead(1)")
		b.ReportMetric(fleetRest[1].Seconds(), "s/create-overhead(fleet,par1)")
		b.ReportMetric(fleetRest[5].Seconds(), "s/create-overhead(fleet,par5)")
		b.ReportMetric(fleetWall[1].Seconds()/fleetWall[5].Seconds(), "x/fleet-speedup(par5vs1)")
		b.Logf("cluster create, every plugin: marina's steps %s (incl. waiting for MetalLB's and ExternalDNS's pods, started by the harness), the stand-in's start %s",
			restAll.Round(time.Millisecond), kindAll.Round(time.Millisecond))
		b.Logf("cluster create without MetalLB/ExternalDNS: marina's steps %s, the stand-in's start (kind step) %s",
			restOne.Round(time.Millisecond), kindOne.Round(time.Millisecond))
		b.Logf("fleet of 5, maxParallel 1: %s wall, marina's steps %s per cluster", fleetWall[1].Round(time.Millisecond), fleetRest[1].Round(time.Millisecond))
		b.Logf("fleet of 5, maxParallel 5: %s wall, marina's steps %s per cluster (2 cores: the stand-ins' API servers compete for them)", fleetWall[5].Round(time.Millisecond), fleetRest[5].Round(time.Millisecond))
	}
}
