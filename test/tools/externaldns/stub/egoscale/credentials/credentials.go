// Package credentials is a stand-in for github.com/exoscale/egoscale/v3/credentials
// (see the parent package): only what ExternalDNS's exoscale provider compiles against.
package credentials

// Credentials holds an API key and secret.
type Credentials struct{ key, secret string }

// NewStaticCredentials returns credentials for an API key and secret.
func NewStaticCredentials(key, secret string) *Credentials {
	return &Credentials{key: key, secret: secret}
}
