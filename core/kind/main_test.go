package kind

import (
	"os"
	"testing"
)

// TestMain serves the kind helper when KindProvider re-executes this test
// binary with HelperArg, exactly as marina's main does.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == HelperArg {
		if dir := os.Getenv(lateNodeEnv); dir != "" {
			os.Exit(serveLateNode(dir))
		}
		os.Exit(ServeHelper(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
