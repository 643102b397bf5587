//go:build tools

// Package tools pins the Kubernetes commands that build.sh compiles for marina's
// tier-3 tests (a real kube-apiserver on 127.0.0.1, see sdk/kubetest), so that
// `go mod tidy` keeps k8s.io/kubernetes and everything they need in go.mod.
//
// This module is separate from marina's own go.mod on purpose: k8s.io/kubernetes
// needs replace directives for its staging modules, and those would break
// `go install` of marina. Nothing in marina imports this package.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
