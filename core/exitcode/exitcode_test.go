package exitcode

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type coded struct{}

func (coded) Error() string { return "coded" }
func (coded) ExitCode() int { return 42 }

func TestOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"plain", errors.New("boom"), Failure},
		{"usage", NewUsage(errors.New("bad flag")), Usage},
		{"wrapped usage", fmt.Errorf("config: %w", NewUsage(errors.New("x"))), Usage},
		{"canceled", fmt.Errorf("step: %w", context.Canceled), Interrupted},
		{"coder wins", fmt.Errorf("a: %w", coded{}), 42},
		{"cobra unknown command", errors.New(`unknown command "nope" for "marina"`), Usage},
		{"cobra args", errors.New("accepts 1 arg(s), received 0"), Usage},
		{"deadline is a failure", context.DeadlineExceeded, Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.err); got != tt.want {
				t.Fatalf("Of(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
	if NewUsage(nil) != nil {
		t.Fatal("NewUsage(nil) must be nil")
	}
}
