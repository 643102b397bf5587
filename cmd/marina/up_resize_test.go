package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/bcollard/marina/core/vm/limavm"
)

// TestRestartDecision: up restarts a running VM to apply a changed size with
// --restart or a yes on the terminal; a no, no terminal or a dry run leave
// it running and the change waiting (up then names the command).
func TestRestartDecision(t *testing.T) {
	running := limavm.Resize{CPUs: [2]int{4, 6}, Memory: [2]string{"10GiB", "12GiB"}, Disk: [2]string{"40GiB", "40GiB"}, Running: true}
	stopped := running
	stopped.Running = false
	same := limavm.Resize{CPUs: [2]int{4, 4}, Memory: [2]string{"10GiB", "10GiB"}, Disk: [2]string{"40GiB", "40GiB"}, Running: true}
	const question = "Restart the VM marina to apply cpus 4→6, memory 10GiB→12GiB? [y/N] "
	for _, tc := range []struct {
		name        string
		r           limavm.Resize
		flag, dry   bool
		answer      *string // nil: no terminal
		wantRestart bool
		wantWaiting bool
		wantAsked   bool
	}{
		{name: "yes", r: running, answer: answerOf("y\n"), wantRestart: true, wantAsked: true},
		{name: "no", r: running, answer: answerOf("n\n"), wantWaiting: true, wantAsked: true},
		{name: "empty answer", r: running, answer: answerOf("\n"), wantWaiting: true, wantAsked: true},
		{name: "no terminal", r: running, wantWaiting: true},
		{name: "--restart", r: running, flag: true, answer: answerOf("n\n"), wantRestart: true},
		{name: "dry run", r: running, dry: true, answer: answerOf("y\n"), wantWaiting: true},
		{name: "dry run --restart", r: running, dry: true, flag: true, wantRestart: true},
		{name: "stopped: applied at start, nothing asked", r: stopped, answer: answerOf("y\n")},
		{name: "same size", r: same, answer: answerOf("y\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in *bufio.Reader
			if tc.answer != nil {
				in = bufio.NewReader(strings.NewReader(*tc.answer))
			}
			var out bytes.Buffer
			restart, waiting := restartDecision(tc.r, tc.flag, tc.dry, in, &out, "marina")
			if restart != tc.wantRestart || waiting.Empty() == tc.wantWaiting {
				t.Errorf("restart %v, waiting %q; want %v, waiting %v", restart, waiting, tc.wantRestart, tc.wantWaiting)
			}
			if asked := out.String() == question; asked != tc.wantAsked {
				t.Errorf("asked %q, want asked %v", out.String(), tc.wantAsked)
			}
			if tc.wantWaiting && !strings.Contains(waiting.Note("marina"), "marina up --restart") {
				t.Errorf("the note does not name the command: %q", waiting.Note("marina"))
			}
		})
	}
}

func answerOf(s string) *string { return &s }
