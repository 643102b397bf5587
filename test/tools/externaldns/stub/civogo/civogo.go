// Package civogo is a stand-in for github.com/civo/civogo v0.7.3, which the Go
// module proxy does not serve. It declares only what ExternalDNS's civo provider
// compiles against, so marina's test build of ExternalDNS links; every call fails
// with ErrNotBuilt. marina's tests use the coredns provider, never civo.
package civogo

import "errors"

// ErrNotBuilt is returned by every call: the real client is not in this build.
var ErrNotBuilt = errors.New("the civo provider is not available in marina's test build of external-dns " +
	"(github.com/civo/civogo is a stub: the Go module proxy does not serve it); use another provider")

// Component identifies the calling program in the User-Agent header.
type Component struct {
	// ID, Name and Version describe the component.
	ID, Name, Version string
}

// Client is a Civo API client.
type Client struct{}

// NewClient returns a client; in this stub it always fails with ErrNotBuilt.
func NewClient(apiKey, region string) (*Client, error) { return nil, ErrNotBuilt }

// SetUserAgent records the calling component.
func (c *Client) SetUserAgent(component *Component) {}

// DNSRecordType is the type of a DNS record.
type DNSRecordType string

// The record types the civo provider maps.
const (
	DNSRecordTypeA     DNSRecordType = "A"
	DNSRecordTypeCName DNSRecordType = "CNAME"
	DNSRecordTypeMX    DNSRecordType = "MX"
	DNSRecordTypeSRV   DNSRecordType = "SRV"
	DNSRecordTypeTXT   DNSRecordType = "TXT"
)

// DNSDomain is a DNS zone.
type DNSDomain struct {
	// ID, Name and AccountID identify the zone.
	ID, Name, AccountID string
}

// DNSRecord is a record of a zone.
type DNSRecord struct {
	// ID, AccountID and DNSDomainID identify the record.
	ID, AccountID, DNSDomainID string
	// Name, Value and Type are the record's data.
	Name, Value string
	Type        DNSRecordType
	// Priority and TTL are the record's priority and time to live.
	Priority, TTL int
}

// DNSRecordConfig describes a record to create or update.
type DNSRecordConfig struct {
	// Type, Name and Value are the record's data.
	Type        DNSRecordType
	Name, Value string
	// Priority and TTL are the record's priority and time to live.
	Priority, TTL int
}

// SimpleResponse is the result of a delete.
type SimpleResponse struct {
	// ID and Result describe the outcome.
	ID, Result string
}

// ListDNSDomains fails with ErrNotBuilt.
func (c *Client) ListDNSDomains() ([]DNSDomain, error) { return nil, ErrNotBuilt }

// ListDNSRecords fails with ErrNotBuilt.
func (c *Client) ListDNSRecords(dnsDomainID string) ([]DNSRecord, error) { return nil, ErrNotBuilt }

// CreateDNSRecord fails with ErrNotBuilt.
func (c *Client) CreateDNSRecord(domainID string, r *DNSRecordConfig) (*DNSRecord, error) {
	return nil, ErrNotBuilt
}

// UpdateDNSRecord fails with ErrNotBuilt.
func (c *Client) UpdateDNSRecord(r *DNSRecord, rc *DNSRecordConfig) (*DNSRecord, error) {
	return nil, ErrNotBuilt
}

// DeleteDNSRecord fails with ErrNotBuilt.
func (c *Client) DeleteDNSRecord(r *DNSRecord) (*SimpleResponse, error) { return nil, ErrNotBuilt }
