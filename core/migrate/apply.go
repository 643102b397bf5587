package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/userfile"
)

// Outcome is what Apply did for one step.
type Outcome string

// The outcomes.
const (
	OutcomeDone        Outcome = "done"
	OutcomeAlreadyDone Outcome = "already-done"
	OutcomeNothing     Outcome = "nothing-to-do"
	OutcomeKept        Outcome = "kept"
	OutcomeSkipped     Outcome = "skipped"
	OutcomeManual      Outcome = "manual"
	OutcomeFailed      Outcome = "failed"
)

// StepResult is one step of the plan and what became of it.
type StepResult struct {
	Step
	Outcome Outcome `json:"outcome"`
	// Detail says what was done, or why it failed.
	Detail string `json:"detail,omitempty"`
}

// Result is what Apply did, step by step, in the plan's order.
type Result struct {
	Steps []StepResult `json:"steps"`
}

// Failed returns the steps that failed.
func (r *Result) Failed() []StepResult { return r.with(OutcomeFailed) }

// Manual returns the steps left to the user.
func (r *Result) Manual() []StepResult { return r.with(OutcomeManual) }

func (r *Result) with(o Outcome) []StepResult {
	var out []StepResult
	for _, s := range r.Steps {
		if s.Outcome == o {
			out = append(out, s)
		}
	}
	return out
}

// Apply carries out p. It refuses, changing nothing, when marina's config
// exists and differs (see Plan.Refusal). Every step re-checks what it relies
// on before it acts, so a plan that went stale changes nothing it should
// not; a failed step leaves its source as it was and the other steps still
// run. progress (may be nil) receives each step's result as it completes.
// The returned error lists the failed steps; the Result is complete even
// then. Callers hold marina's process lock.
func Apply(ctx context.Context, p *Plan, progress func(StepResult)) (*Result, error) {
	if err := p.Refusal(); err != nil {
		return nil, err
	}
	h := paths{home: p.Home}
	res := &Result{}
	vmFailed := false
	var failed []string
	for _, st := range p.Steps {
		r := StepResult{Step: st}
		switch {
		case ctx.Err() != nil:
			r.Outcome, r.Detail = OutcomeFailed, "not started: "+ctx.Err().Error()
		case st.Action == ActionDone:
			r.Outcome = OutcomeAlreadyDone
		case st.Action == ActionNone:
			r.Outcome = OutcomeNothing
		case st.Action == ActionKeep:
			r.Outcome = OutcomeKept
		case st.Action == ActionSkip:
			r.Outcome = OutcomeSkipped
		case st.Action == ActionManual:
			r.Outcome = OutcomeManual
		case st.Kind == KindVMMount && vmFailed:
			r.Outcome, r.Detail = OutcomeSkipped, "the VM was not moved"
		default:
			outcome, detail, err := p.do(ctx, h, st)
			switch {
			case err != nil:
				r.Outcome, r.Detail = OutcomeFailed, err.Error()
				failed = append(failed, st.What()+": "+err.Error())
				if st.Kind == KindVM {
					vmFailed = true
				}
			default:
				r.Outcome, r.Detail = outcome, detail
				if st.Kind == KindVM && outcome != OutcomeDone && outcome != OutcomeAlreadyDone {
					vmFailed = true
				}
			}
		}
		res.Steps = append(res.Steps, r)
		if progress != nil {
			progress(r)
		}
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("migration interrupted; what is done stays done, run `marina migrate` again to finish: %w", err)
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("%d migration steps failed (their sources are kept; fix the cause and run `marina migrate` again):\n  - %s",
			len(failed), strings.Join(failed, "\n  - "))
	}
	return res, nil
}

// do performs one changing step after re-checking its preconditions.
func (p *Plan) do(ctx context.Context, h paths, st Step) (Outcome, string, error) {
	switch st.Kind {
	case KindConfig:
		return p.writeConfig(h)
	case KindRegistryCache:
		// klimax's mirrors write to the cache while its VM runs.
		if state, detail := runStateOf(h, p.VM.Name); state == VMRunning || state == VMUnknown {
			return OutcomeSkipped, fmt.Sprintf("the klimax VM is %s now (%s): stop it first: `klimax down`, then run `marina migrate` again", state, detail), nil
		}
		if !exists(st.From) {
			if exists(st.To) {
				return OutcomeAlreadyDone, "", nil
			}
			return OutcomeFailed, "", fmt.Errorf("%s is gone since the plan was made", st.From)
		}
		did, err := moveDir(ctx, st.From, st.To)
		if err != nil {
			return OutcomeFailed, "", err
		}
		return OutcomeDone, fmt.Sprintf("%s %s to %s", did, h.tilde(st.From), h.tilde(st.To)), nil
	case KindKubeconfig:
		src, err := os.ReadFile(st.From)
		if err != nil {
			return OutcomeFailed, "", fmt.Errorf("read %s: %w", st.From, err)
		}
		dst, err := os.ReadFile(st.To)
		switch {
		case err == nil && bytes.Equal(src, dst):
			return OutcomeAlreadyDone, "", nil
		case err == nil:
			return OutcomeSkipped, fmt.Sprintf("%s appeared since the plan was made, with other content; both are kept", h.tilde(st.To)), nil
		case !errors.Is(err, fs.ErrNotExist):
			return OutcomeFailed, "", fmt.Errorf("read %s: %w", st.To, err)
		}
		if err := copyKubeconfig(st.From, st.To); err != nil {
			return OutcomeFailed, "", err
		}
		return OutcomeDone, fmt.Sprintf("copied to %s (mode 0600); %s is kept", h.tilde(st.To), h.tilde(st.From)), nil
	case KindVM:
		if !exists(st.From) && exists(st.To) {
			return OutcomeAlreadyDone, "", nil
		}
		if state, detail := runState(st.From); state != VMStopped {
			return OutcomeSkipped, fmt.Sprintf("the VM is %s now (%s): stop it first: `klimax down`, then run `marina migrate` again", state, detail), nil
		}
		if exists(st.To) {
			return OutcomeSkipped, fmt.Sprintf("%s appeared since the plan was made; nothing was moved", h.tilde(st.To)), nil
		}
		if err := os.MkdirAll(filepath.Dir(st.To), 0o755); err != nil {
			return OutcomeFailed, "", fmt.Errorf("create marina's LIMA_HOME %s: %w", filepath.Dir(st.To), err)
		}
		if err := rename(st.From, st.To); err != nil {
			return OutcomeFailed, "", fmt.Errorf("move the VM %s to %s: %w; it is left where it was: move it yourself (`mv %s %s`) and run `marina migrate` again, or recreate it (`klimax destroy`, then `marina up`)",
				st.From, st.To, err, st.From, st.To)
		}
		return OutcomeDone, fmt.Sprintf("moved %s to %s", h.tilde(st.From), h.tilde(st.To)), nil
	case KindVMMount:
		path := filepath.Join(p.VM.Target, limaYAML)
		out, changed, err := rewriteCacheMount(path, h)
		if err != nil {
			return OutcomeFailed, "", fmt.Errorf("edit %s: %w", path, err)
		}
		if !changed {
			return OutcomeAlreadyDone, "", nil
		}
		if err := atomicfile.WriteFile(path, out, 0o644); err != nil {
			return OutcomeFailed, "", err
		}
		return OutcomeDone, fmt.Sprintf("%s now shares %s with the VM instead of %s", h.tilde(path), h.tilde(h.marinaCache()), h.tilde(h.klimaxCache())), nil
	}
	return OutcomeFailed, "", fmt.Errorf("no way to %s a %s step", st.Action, st.Kind)
}

// runStateOf probes klimax's VM directory, if it is still there.
func runStateOf(h paths, name string) (VMState, string) {
	dir := h.klimaxVM(name)
	if !exists(dir) {
		return VMAbsent, ""
	}
	return runState(dir)
}

// writeConfig writes marina's config (0600), keeping a replaced file as
// <path>.bak.
func (p *Plan) writeConfig(h paths) (Outcome, string, error) {
	old, err := userfile.ReadFile(p.ConfigPath, userfile.MaxSize)
	exists := err == nil
	switch {
	case exists && bytes.Equal(old, p.configYAML):
		return OutcomeAlreadyDone, "", nil
	case exists && !p.force:
		return OutcomeSkipped, fmt.Sprintf("%s appeared since the plan was made; it is kept (--force replaces it)", h.tilde(p.ConfigPath)), nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return OutcomeFailed, "", fmt.Errorf("read %s: %w", p.ConfigPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(p.ConfigPath), 0o700); err != nil {
		return OutcomeFailed, "", fmt.Errorf("create %s: %w", filepath.Dir(p.ConfigPath), err)
	}
	detail := fmt.Sprintf("wrote %s (mode 0600)", h.tilde(p.ConfigPath))
	if exists {
		bak := p.ConfigPath + ".bak"
		if err := atomicfile.WriteFile(bak, old, 0o600); err != nil {
			return OutcomeFailed, "", fmt.Errorf("keep the old config as %s: %w; nothing was replaced", bak, err)
		}
		detail += "; the old file is kept as " + h.tilde(bak)
	}
	if err := atomicfile.WriteFile(p.ConfigPath, p.configYAML, 0o600); err != nil {
		return OutcomeFailed, "", err
	}
	if err := narrowMode(p.ConfigPath); err != nil {
		return OutcomeFailed, "", err
	}
	return OutcomeDone, detail, nil
}
