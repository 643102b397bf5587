package plugintest

// Internals the external tests use.
var (
	ProcessAlive = processAlive
	StartErr     = start
	BuildErr     = build
)
