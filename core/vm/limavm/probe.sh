#!/bin/bash
# marina readiness probe: Docker answers on its socket for this user, and the
# tools provisioning installs are in place. Lima retries it until it passes.
set -eu -o pipefail
test -S /run/docker.sock
docker info >/dev/null
command -v kind >/dev/null
command -v kubectl >/dev/null
