package pluginstore

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// TestEnforceRunsNothingUntrusted: under pluginTrust.policy enforce, an
// unsigned or untrusted artifact is refused before its binary is launched
// (Describe runs the binary); a signed one is described and installed.
func TestEnforceRunsNothingUntrusted(t *testing.T) {
	pub, priv, err := pluginsign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := pluginsign.ParsePrivateKey(priv)
	dist := packagedDist(t) // acme 1.2.0, unsigned
	archive := filepath.Join(dist, "marina-plugin-acme_1.2.0_"+host.OS+"_"+host.Arch+".tar.gz")

	var launched atomic.Int32
	describe := func(ctx context.Context, path string) (*sdk.Description, error) {
		launched.Add(1)
		return describeReal(ctx, path)
	}
	dir := t.TempDir()
	s := Open(filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins.lock"), describe)
	s.Trust = Trust{Enforce: true, Keys: []pluginsign.TrustedKey{{Name: "team", PublicKey: pub}}}

	_, err = s.Install(testCtx(t), archive, InstallOptions{})
	wantErr(t, err, ErrUntrusted, "acme 1.2.0 from", "is unsigned")
	if n := launched.Load(); n != 0 {
		t.Fatalf("the unsigned binary was launched %d times before it was refused", n)
	}
	assertNoLeftovers(t, s.Root())

	sum := sha(t, archive)
	sig := pluginsign.Sign(key, "sha256:"+sum)
	if err := os.WriteFile(archive+SignatureSuffix, sig.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	inst := mustInstall(t, s, archive, InstallOptions{})
	if launched.Load() != 1 || s.TrustOf(inst).Status != pluginsign.Signed {
		t.Fatalf("signed install: launched %d, trust %s", launched.Load(), s.TrustOf(inst))
	}
	if err := s.Verify(inst); err != nil {
		t.Fatalf("Verify of a signed install under enforce: %v", err)
	}
	// Trust is decided when asked: without the key, the same install is refused at launch.
	s.Trust.Keys = nil
	wantErr(t, s.Verify(inst), ErrUntrusted, "is untrusted")
}
