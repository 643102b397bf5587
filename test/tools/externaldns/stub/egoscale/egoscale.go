// Package v3 is a stand-in for github.com/exoscale/egoscale/v3 v3.1.50, which the
// Go module proxy does not serve. It declares only what ExternalDNS's exoscale
// provider compiles against, so marina's test build of ExternalDNS links; NewClient
// fails with ErrNotBuilt. marina's tests use the coredns provider, never exoscale.
package v3

import (
	"context"
	"errors"

	"github.com/exoscale/egoscale/v3/credentials"
)

// ErrNotBuilt is returned by every call: the real client is not in this build.
var ErrNotBuilt = errors.New("the exoscale provider is not available in marina's test build of external-dns " +
	"(github.com/exoscale/egoscale/v3 is a stub: the Go module proxy does not serve it); use another provider")

// UUID identifies an Exoscale resource.
type UUID string

// Endpoint is an API endpoint URL.
type Endpoint string

// ClientOpt configures a Client.
type ClientOpt func(*Client) error

// ClientOptWithEndpoint sets the API endpoint.
func ClientOptWithEndpoint(e Endpoint) ClientOpt { return func(*Client) error { return nil } }

// Client is an Exoscale API client.
type Client struct{}

// NewClient returns a client; in this stub it always fails with ErrNotBuilt.
func NewClient(c *credentials.Credentials, opts ...ClientOpt) (*Client, error) {
	return nil, ErrNotBuilt
}

// OperationState is the state of an asynchronous operation.
type OperationState string

// OperationStateSuccess is a finished, successful operation.
const OperationStateSuccess OperationState = "success"

// Operation is an asynchronous operation.
type Operation struct {
	// ID identifies the operation.
	ID UUID
	// State is its state.
	State OperationState
}

// Wait fails with ErrNotBuilt.
func (c *Client) Wait(ctx context.Context, op *Operation, states ...OperationState) (*Operation, error) {
	return nil, ErrNotBuilt
}

// DNSDomain is a DNS zone.
type DNSDomain struct {
	// ID identifies it.
	ID UUID
	// UnicodeName is its name.
	UnicodeName string
}

// DNSDomainRecordType is the type of a record.
type DNSDomainRecordType string

// The record types the exoscale provider uses.
const (
	DNSDomainRecordTypeA     DNSDomainRecordType = "A"
	DNSDomainRecordTypeALIAS DNSDomainRecordType = "ALIAS"
	DNSDomainRecordTypeCNAME DNSDomainRecordType = "CNAME"
	DNSDomainRecordTypeTXT   DNSDomainRecordType = "TXT"
)

// DNSDomainRecord is a record of a zone.
type DNSDomainRecord struct {
	// ID identifies it.
	ID UUID
	// Name, Content and Type are its data.
	Name, Content string
	Type          DNSDomainRecordType
	// Ttl is its time to live.
	Ttl int64 //nolint:revive // the upstream field name
}

// CreateDNSDomainRecordRequestType is the type of a record to create.
type CreateDNSDomainRecordRequestType string

// CreateDNSDomainRecordRequest describes a record to create.
type CreateDNSDomainRecordRequest struct {
	// Name, Content and Type are its data.
	Name, Content string
	Type          CreateDNSDomainRecordRequestType
	// Ttl is its time to live.
	Ttl int64 //nolint:revive // the upstream field name
}

// UpdateDNSDomainRecordRequest describes a change to a record.
type UpdateDNSDomainRecordRequest struct {
	// Name and Content are its data.
	Name, Content string
	// Ttl is its time to live.
	Ttl int64 //nolint:revive // the upstream field name
}

// ListDNSDomainsResponse lists zones.
type ListDNSDomainsResponse struct {
	// DNSDomains are the zones.
	DNSDomains []DNSDomain
}

// ListDNSDomainRecordsResponse lists records.
type ListDNSDomainRecordsResponse struct {
	// DNSDomainRecords are the records.
	DNSDomainRecords []DNSDomainRecord
}

// ListDNSDomains fails with ErrNotBuilt.
func (c *Client) ListDNSDomains(ctx context.Context) (*ListDNSDomainsResponse, error) {
	return nil, ErrNotBuilt
}

// ListDNSDomainRecords fails with ErrNotBuilt.
func (c *Client) ListDNSDomainRecords(ctx context.Context, domainID UUID) (*ListDNSDomainRecordsResponse, error) {
	return nil, ErrNotBuilt
}

// CreateDNSDomainRecord fails with ErrNotBuilt.
func (c *Client) CreateDNSDomainRecord(ctx context.Context, domainID UUID, req CreateDNSDomainRecordRequest) (*Operation, error) {
	return nil, ErrNotBuilt
}

// DeleteDNSDomainRecord fails with ErrNotBuilt.
func (c *Client) DeleteDNSDomainRecord(ctx context.Context, domainID, recordID UUID) (*Operation, error) {
	return nil, ErrNotBuilt
}

// UpdateDNSDomainRecord fails with ErrNotBuilt.
func (c *Client) UpdateDNSDomainRecord(ctx context.Context, domainID, recordID UUID, req UpdateDNSDomainRecordRequest) (*Operation, error) {
	return nil, ErrNotBuilt
}
