package fleet

import (
	"fmt"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bcollard/marina/core/slot"
)

// Settings are the settings of one cluster that a Fleet manifest's entry
// and `marina cluster create`'s flags both give. CheckSettings holds the one
// set of rules for them: a value a manifest may not hold is refused on the
// command line too, with the same words.
type Settings struct {
	// Num pins the slot; nil means not given (the lowest free slot). A
	// given 0 is refused, not taken as "not given".
	Num *int
	// NodeVersion is the kindest/node tag, e.g. v1.37.0; "" means not given.
	NodeVersion string
	// Workers are worker nodes besides the control plane; nil means not given.
	Workers *int
	// Region and Zone become the topology labels; "" means not given.
	Region, Zone string
	// Wait bounds kind's wait for the control plane; nil means not given
	// (a manifest has no wait).
	Wait *time.Duration
}

// The settings' names as a manifest writes them: the Path of the problems
// CheckSettings returns, for the caller to turn into a key path or a flag.
const (
	SettingNum         = "num"
	SettingNodeVersion = "nodeVersion"
	SettingWorkers     = "workers"
	SettingRegion      = "region"
	SettingZone        = "zone"
	SettingWait        = "wait"
)

// CheckSettings returns a Problem for each given setting of s that is not
// valid, in the order of Settings' fields: its Path is the setting's name
// (SettingNum, ...), it has no line; nil when every setting is valid.
//
// The rules: num 1..99 (slot.Min..slot.Max); nodeVersion v<semver>;
// workers 0..MaxWorkers; region and zone Kubernetes label values; wait more
// than 0.
func CheckSettings(s Settings) []Problem {
	var ps []Problem
	add := func(setting, format string, args ...any) {
		ps = append(ps, Problem{Path: setting, Message: fmt.Sprintf(format, args...)})
	}
	if s.Num != nil && (*s.Num < slot.Min || *s.Num > slot.Max) {
		add(SettingNum, "must be between %d and %d, got %d; pin a slot in that range, or leave it out for the lowest free one", slot.Min, slot.Max, *s.Num)
	}
	if v := s.NodeVersion; v != "" {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err != nil || !strings.HasPrefix(v, "v") {
			add(SettingNodeVersion, "%s must look like v1.37.0 (a kindest/node tag)", excerpt(v))
		}
	}
	if s.Workers != nil && (*s.Workers < 0 || *s.Workers > MaxWorkers) {
		add(SettingWorkers, "must be between 0 and %d, got %d (worker nodes besides the control plane)", MaxWorkers, *s.Workers)
	}
	for _, f := range []struct{ setting, val string }{{SettingRegion, s.Region}, {SettingZone, s.Zone}} {
		if f.val == "" {
			continue
		}
		if errs := validation.IsValidLabelValue(f.val); len(errs) > 0 {
			add(f.setting, "%s cannot be a node label value (%s); use letters, digits, '-', '_' or '.', e.g. us-east1", excerpt(f.val), strings.Join(errs, "; "))
		}
	}
	if s.Wait != nil && *s.Wait <= 0 {
		add(SettingWait, "must be more than 0, got %s; give a duration such as 5m", *s.Wait)
	}
	return ps
}

// CheckMaxParallel is the rule of spec.maxParallel and --max-parallel: ""
// when n is valid, else what is wrong with it.
func CheckMaxParallel(n int) string {
	if n < 0 {
		return fmt.Sprintf("must be 0 (the default, %d at once) or more, got %d", DefaultMaxParallel, n)
	}
	return ""
}

// excerpt quotes a value for a message, cut to a readable length: a problem
// never echoes a huge value whole.
func excerpt(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
}
