package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Path is the dotted key path, e.g. "registries.mirrors[2].port".
	Path string `json:"path"`
	// Message says what is wrong and, where possible, how to fix it.
	Message string `json:"message"`
	// Where says where the value came from: "config.yaml:12:5", "env MARINA_VM_CPUS",
	// "--set vm.cpus=0", or "" for a default.
	Where string `json:"where,omitempty"`
}

func (p Problem) String() string {
	if p.Where != "" {
		return fmt.Sprintf("%s: %s (%s)", p.Path, p.Message, p.Where)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Message)
}

// ValidationError reports every problem found in a configuration at once.
type ValidationError struct {
	// File is the config file involved, if any.
	File     string    `json:"file,omitempty"`
	Problems []Problem `json:"problems"`
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	if e.File != "" {
		fmt.Fprintf(&b, "invalid configuration (%s): %d %s", e.File, len(e.Problems), noun)
	} else {
		fmt.Fprintf(&b, "invalid configuration: %d %s", len(e.Problems), noun)
	}
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// ExitCode makes a configuration error a usage error (exit status 2).
func (e *ValidationError) ExitCode() int { return 2 }
