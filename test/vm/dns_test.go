package vm

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// dnsQuery sends one DNS query (type SOA for name) over UDP to server and
// returns the response code: any answer proves the path (route, guest
// forwarding, the DNS container) works.
func dnsQuery(server, name string) (rcode int, err error) {
	c, err := net.Dial("udp", server)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	q := []byte{0x4d, 0x52, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range splitName(name) {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0, 0, 6, 0, 1)
	if err := c.SetDeadline(deadline(5)); err != nil {
		return 0, err
	}
	if _, err := c.Write(q); err != nil {
		return 0, err
	}
	resp := make([]byte, 1500)
	n, err := c.Read(resp)
	if err != nil {
		return 0, err
	}
	if n < 12 || resp[0] != 0x4d || resp[1] != 0x52 || resp[2]&0x80 == 0 {
		return 0, fmt.Errorf("not a DNS answer to the query: % x", resp[:n])
	}
	return int(resp[3] & 0x0f), nil
}

func splitName(n string) []string { return strings.Split(strings.TrimSuffix(n, "."), ".") }

func deadline(seconds int) time.Time { return time.Now().Add(time.Duration(seconds) * time.Second) }
