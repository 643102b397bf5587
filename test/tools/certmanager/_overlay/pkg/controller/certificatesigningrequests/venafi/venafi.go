// Package venafi replaces cert-manager's Venafi certificatesigningrequests controller in marina's
// test build (test/tools/certmanager/build.sh): its client, github.com/Venafi/vcert/v5,
// is not served by the Go module proxy reachable here. Only the controller's
// name stays, which cert-manager's controller configuration defaults list;
// nothing registers the controller, so the Venafi issuer is not available in
// this build (marina's issuer is a CA issuer).
package venafi

// CSRControllerName is the name cert-manager gives the Venafi controller.
const CSRControllerName = "certificatesigningrequests-issuer-venafi"
