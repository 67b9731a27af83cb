#!/usr/bin/env bash
# Builds a scratch consumer module outside the repository against sdk/client
# and sdk/receiver, with replace lines for the two modules that would be
# published (sdk, gen) and nothing else: a new user's `go get` of the SDK
# must not need platform or any service module ([engine-shape] item 4).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat > go.mod <<MOD
module example.com/scratch

go 1.26.8

replace github.com/hookline/hookline/sdk => $root/sdk

replace github.com/hookline/hookline/gen => $root/gen
MOD
cat > main.go <<'GO'
package main

import (
	"context"
	"fmt"
	"net/http"

	hookline "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/client"
	"github.com/hookline/hookline/sdk/receiver"
)

func main() {
	c, err := client.Dial("127.0.0.1:1", client.WithInsecure())
	if err == nil {
		_, err = c.Events.PublishEvent(context.Background(), &hookline.PublishEventRequest{EventType: "scratch.built"})
	}
	fmt.Println("publish:", err)
	r, err := receiver.New(func(context.Context, receiver.Event) error { return nil }, []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	var h http.Handler = r
	fmt.Println(h != nil, err)
}
GO
export GOWORK=off GOFLAGS=-mod=mod
go mod tidy >/dev/null 2>&1
if grep -q 'hookline/platform\|hookline/services' go.mod; then
  echo "sdk-scratch: the SDK still pulls in a non-published module:"; grep 'hookline/' go.mod; exit 1
fi
go build ./...
echo "sdk-scratch: a module outside the repo builds against sdk/client and sdk/receiver with replace lines for sdk and gen only"
