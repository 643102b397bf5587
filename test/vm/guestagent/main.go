// Command guestagent builds Lima's guest agent for the VM test (test/vm)
// the way marina's lima driver builds it when it finds none
// (lima.BuildGuestAgent: the pinned Lima module, the local Go toolchain).
//
//	go run ./test/vm/guestagent -out DIR/lima-guestagent.Linux-x86_64
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/bcollard/marina/core/vm/lima"
)

func main() {
	out := flag.String("out", "", "where to write the guest agent")
	goarch := flag.String("goarch", "amd64", "the VM's architecture (amd64 or arm64)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "guestagent: -out is required")
		os.Exit(2)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "guestagent:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	progress := func(s string) { fmt.Fprintln(os.Stderr, "guestagent:", s) }
	if err := lima.BuildGuestAgent(ctx, goBin, *goarch, *out, progress); err != nil {
		fmt.Fprintln(os.Stderr, "guestagent:", err)
		os.Exit(1)
	}
}
