package kubeconfig

import (
	"fmt"

	"github.com/bcollard/marina/core/atomicfile"
)

// resolvePath is atomicfile.Resolve, its error naming the kubeconfig.
func resolvePath(path string) (string, error) {
	p, err := atomicfile.Resolve(path)
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return p, nil
}
