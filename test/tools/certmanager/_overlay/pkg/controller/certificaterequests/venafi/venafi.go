// Package venafi replaces cert-manager's Venafi certificaterequests controller in marina's
// test build (test/tools/certmanager/build.sh): its client, github.com/Venafi/vcert/v5,
// is not served by the Go module proxy reachable here. Only the controller's
// name stays, which cert-manager's controller configuration defaults list;
// nothing registers the controller, so the Venafi issuer is not available in
// this build (marina's issuer is a CA issuer).
package venafi

// CRControllerName is the name cert-manager gives the Venafi controller.
const CRControllerName = "certificaterequests-issuer-venafi"
