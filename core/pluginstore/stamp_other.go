//go:build !linux && !darwin

package pluginstore

import "os"

// fileStamp: no ctime here, so nothing is remembered; every listing hashes.
type fileStamp struct{}

func stampOf(*os.File) (fileStamp, bool) { return fileStamp{}, false }
