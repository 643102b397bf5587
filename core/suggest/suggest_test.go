package suggest

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"cpus", "cpu", 1}, {"zöne", "zone", 1},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	long := strings.Repeat("a", 10000)
	if got := Distance(long, long+"b"); got != 0 {
		t.Errorf("long inputs are not bounded: %d", got)
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"cpus", "memory", "disk", "clusters", "maxParallel"}
	for in, want := range map[string]string{
		"cpu": "cpus", "Memroy": "memory", "clusterz": "clusters", "maxparallel": "maxParallel", "x": "", "network": "",
	} {
		if got := Closest(in, keys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}
