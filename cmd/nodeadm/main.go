// Command nodeadm: see package github.com/nodejoin/nodejoin/internal/cmd/nodeadm.
package main

import (
	"os"

	"github.com/nodejoin/nodejoin/internal/cmd/nodeadm"
	"github.com/nodejoin/nodejoin/internal/cmd/cli"
)

func main() { os.Exit(cli.Main(nodeadm.Run)) }
