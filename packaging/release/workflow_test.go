package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// workflow is the part of a GitHub Actions workflow the test reads.
type workflow struct {
	Name string `yaml:"name"`
	On   struct {
		Push struct {
			Tags []string `yaml:"tags"`
		} `yaml:"push"`
		PullRequest struct {
			Paths []string `yaml:"paths"`
		} `yaml:"pull_request"`
		WorkflowDispatch any `yaml:"workflow_dispatch"`
	} `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Jobs        map[string]struct {
		Name           string            `yaml:"name"`
		RunsOn         string            `yaml:"runs-on"`
		TimeoutMinutes int               `yaml:"timeout-minutes"`
		Needs          any               `yaml:"needs"`
		If             string            `yaml:"if"`
		Permissions    map[string]string `yaml:"permissions"`
		Steps          []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// makeTargets are the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	return targets
}

// TestReleaseWorkflow checks .github/workflows/release.yml against what it
// runs: the Makefile targets and release commands it names exist, the
// darwin job is on macos-14 and does every release step, actions are pinned
// by commit, and only the tag-only release job may write.
func TestReleaseWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		// KnownFields: a key the test does not model is a reason to
		// extend the test, not to ignore the key.
		t.Fatal(err)
	}
	if !slices.Contains(w.On.Push.Tags, "v*") {
		t.Errorf("not run on v* tags: %q", w.On.Push.Tags)
	}
	// A pull request that changes what the release runs runs it.
	for _, p := range []string{".github/workflows/release.yml", "packaging/**", "core/vm/lima/**", "cmd/marina/**", "cmd/marina-lima/**", "Makefile"} {
		if !slices.Contains(w.On.PullRequest.Paths, p) {
			t.Errorf("a pull request changing %s does not run the workflow", p)
		}
	}
	if w.Permissions["contents"] != "read" || len(w.Permissions) != 1 {
		t.Errorf("workflow permissions %v, want contents: read only", w.Permissions)
	}
	if w.Env["GOTOOLCHAIN"] != "local" {
		t.Errorf("GOTOOLCHAIN %q: the Makefile's local toolchain rule must hold on the runner too", w.Env["GOTOOLCHAIN"])
	}
	darwin, ok := w.Jobs["darwin"]
	if !ok || darwin.RunsOn != "macos-14" {
		t.Fatalf("no darwin job on macos-14: %+v", w.Jobs)
	}
	targets := makeTargets(t)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w.-]+@[0-9a-f]{40}$`)
	makeRE := regexp.MustCompile(`\bmake ([a-z][\w-]*)`)
	releaseRE := regexp.MustCompile(`go run \./packaging/release ([a-z]+)`)
	var runs []string
	for name, job := range w.Jobs {
		for _, s := range job.Steps {
			if s.Uses != "" && !pinned.MatchString(s.Uses) {
				t.Errorf("job %s: %s is not pinned by commit", name, s.Uses)
			}
			for _, m := range makeRE.FindAllStringSubmatch(s.Run, -1) {
				if !targets[m[1]] {
					t.Errorf("job %s runs make %s, which the Makefile does not define", name, m[1])
				}
			}
			for _, m := range releaseRE.FindAllStringSubmatch(s.Run, -1) {
				if !slices.Contains(commands, m[1]) {
					t.Errorf("job %s runs release %s, which packaging/release does not know", name, m[1])
				}
			}
			if name == "darwin" {
				runs = append(runs, s.Run)
			}
		}
		if job.TimeoutMinutes <= 0 {
			t.Errorf("job %s has no timeout", name)
		}
		if name != "release" && len(job.Permissions) > 0 {
			t.Errorf("job %s asks for permissions %v", name, job.Permissions)
		}
	}
	all := strings.Join(runs, "\n")
	for _, want := range []string{
		"make release-darwin", "make release-checksums", "make release-formula", "make vet-darwin",
		"go run ./packaging/release check dist/*.tar.gz",
		// The entitlement is marina-lima's, Lima's host agent on macOS.
		"go run ./packaging/release entitlements dist/build/darwin-arm64/marina-lima dist/build/darwin-amd64/marina-lima\n",
		"for bin in dist/build/darwin-*/marina-lima; do",
		"CGO_ENABLED=1 go build -o \"$RUNNER_TEMP/unsigned/marina-lima\" ./cmd/marina-lima\n",
		"dist/build/darwin-arm64/marina-lima version | grep -F 'vz true'",
		"dist/build/darwin-arm64/marina version",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the darwin job does not run %q", want)
		}
	}
	// The packages only a darwin cgo build compiles are vetted for real:
	// marina's lima driver and the engine, and both commands (marina and
	// marina-lima).
	vetRE := regexp.MustCompile(`(?m)^CGO_ENABLED=1 go vet (.+)$`)
	var vetted []string
	for _, m := range vetRE.FindAllStringSubmatch(all, -1) {
		vetted = append(vetted, strings.Fields(m[1])...)
	}
	for _, p := range []string{"./core/vm/lima/", "./core/vm/lima/limaengine/", "./cmd/marina/", "./cmd/marina-lima/"} {
		if !slices.Contains(vetted, p) {
			t.Errorf("the darwin job does not vet %s with cgo (it vets %q)", p, vetted)
		}
	}
	// What make release-darwin produces is what is uploaded.
	var upload string
	for _, s := range darwin.Steps {
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			upload = s.With["path"]
		}
	}
	for _, want := range []string{"dist/*.tar.gz", "dist/SHA256SUMS", "dist/marina.rb"} {
		if !strings.Contains(upload, want) {
			t.Errorf("the upload lacks %s: %q", want, upload)
		}
	}

	rel, ok := w.Jobs["release"]
	if !ok {
		t.Fatal("no release job")
	}
	if rel.Needs != "darwin" || !strings.Contains(rel.If, "startsWith(github.ref, 'refs/tags/v')") {
		t.Errorf("the release job needs %v and runs if %q; want after darwin, on v* tags only", rel.Needs, rel.If)
	}
	if rel.Permissions["contents"] != "write" {
		t.Errorf("the release job cannot create a release: %v", rel.Permissions)
	}
}

// makeDryRun is `make -n` of target in the repository root with vars.
func makeDryRun(t *testing.T, target string, vars ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-n", "-C", filepath.Join("..", ".."), target}, vars...)...)
	// Not the flags and variables of a make that runs this test (make test).
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s %v: %v\n%s", target, vars, err, b)
	}
	return string(b)
}

// TestMakefileSigns: build, install and release-archive build marina and
// marina-lima, its Lima engine, together, with the same flags. On macOS (HOST_OS=Darwin, as
// uname -s says there) they force cgo and sign marina-lima, Lima's host
// agent, with packaging/darwin/vz.entitlements, as Lima's Makefile signs
// limactl; marina, which runs no VM, is not signed with it. On Linux they
// sign nothing.
func TestMakefileSigns(t *testing.T) {
	sign := "codesign --entitlements packaging/darwin/vz.entitlements --force -s - "
	both := "./cmd/marina ./cmd/marina-lima\n"
	mac := makeDryRun(t, "build", "HOST_OS=Darwin")
	if !strings.Contains(mac, "CGO_ENABLED=1 go build -trimpath -ldflags '-s -w ") || !strings.Contains(mac, " -o bin/ "+both) ||
		!strings.Contains(mac, sign+"bin/marina-lima\n") || strings.Count(mac, "codesign --") != 1 {
		t.Errorf("make build on macOS:\n%s", mac)
	}
	if strings.Index(mac, "go build") > strings.Index(mac, "codesign") {
		t.Errorf("make build on macOS signs before it builds:\n%s", mac)
	}
	inst := makeDryRun(t, "install", "HOST_OS=Darwin", "GOBIN_DIR=/Users/me/go/bin")
	if !strings.Contains(inst, "CGO_ENABLED=1 go install -trimpath -ldflags '-s -w ") || !strings.Contains(inst, "' "+both) ||
		!strings.Contains(inst, sign+"/Users/me/go/bin/marina-lima\n") || strings.Count(inst, "codesign --") != 1 {
		t.Errorf("make install on macOS:\n%s", inst)
	}
	for _, target := range []string{"build", "install"} {
		if linux := makeDryRun(t, target, "HOST_OS=Linux"); strings.Contains(linux, "codesign") || !strings.Contains(linux, "CGO_ENABLED=0 go "+target) || !strings.Contains(linux, both) {
			t.Errorf("make %s on Linux changed:\n%s", target, linux)
		}
	}
	rel := makeDryRun(t, "release-archive", "HOST_OS=Darwin", "RELEASE_GOOS=darwin", "RELEASE_GOARCH=amd64", "VERSION=v1.2.3")
	for _, want := range []string{
		"CGO_ENABLED=1 GOOS=darwin GOARCH=amd64",
		" -o dist/build/darwin-amd64/ " + both,
		sign + "dist/build/darwin-amd64/marina-lima\n",
		"go run ./packaging/release archive -version v1.2.3 -goos darwin -goarch amd64",
		"-marina dist/build/darwin-amd64/marina -marina-lima dist/build/darwin-amd64/marina-lima ",
	} {
		if !strings.Contains(rel, want) {
			t.Errorf("make release-archive for darwin/amd64 on macOS lacks %q:\n%s", want, rel)
		}
	}
	if strings.Count(rel, "codesign --") != 1 {
		t.Errorf("make release-archive for darwin/amd64 on macOS signs more than marina-lima:\n%s", rel)
	}
	linuxRel := makeDryRun(t, "release-archive", "HOST_OS=Linux", "RELEASE_GOOS=linux", "RELEASE_GOARCH=arm64")
	if !strings.Contains(linuxRel, "CGO_ENABLED=0 GOOS=linux GOARCH=arm64") || !strings.Contains(linuxRel, " -o dist/build/linux-arm64/ "+both) ||
		!strings.Contains(linuxRel, "not signing dist/build/linux-arm64/marina-lima: codesign exists only on macOS") ||
		!strings.Contains(linuxRel, "-marina dist/build/linux-arm64/marina -marina-lima dist/build/linux-arm64/marina-lima ") {
		t.Errorf("make release-archive on Linux:\n%s", linuxRel)
	}
}
