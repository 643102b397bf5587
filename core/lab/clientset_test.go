package lab

import (
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clientsetFor is client-go's typed clientset for a cluster's admin
// kubeconfig: the tests read back and set up with it, independently of the
// dynamic client (clientFor) the package itself uses.
func clientsetFor(kubecfg []byte) (kubernetes.Interface, error) {
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubecfg)
	if err != nil {
		return nil, err
	}
	rc.Timeout = 30 * time.Second
	return kubernetes.NewForConfig(rc)
}
