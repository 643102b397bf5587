// Command standin-node is the init program (PID 1) of every stand-in kind
// node: it reads the node's spec (/kind/standin.json, copied in by the
// helper) and runs the node until SIGTERM (see
// test/standin/internal/node). On the control plane it runs etcd and
// kube-apiserver; no node runs a kubelet, so no pod ever runs.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/bcollard/marina/test/standin/internal/node"
	"github.com/bcollard/marina/test/standin/internal/spec"
)

func main() {
	logger := log.New(os.Stdout, "standin-node: ", log.LstdFlags)
	raw, err := os.ReadFile(spec.File)
	if err != nil {
		logger.Fatalf("read the node spec: %v (the kind stand-in's helper copies it in before the node starts)", err)
	}
	var s spec.Spec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		logger.Fatalf("decode the node spec %s: %v (helper and node image from different builds? rebuild with standin.Build)", spec.File, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := node.Run(ctx, &s, logger); err != nil {
		logger.Printf("FATAL: %v", err)
		stop()
		os.Exit(1)
	}
}
