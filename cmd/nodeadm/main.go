// Command nodeadm: see package github.com/nodejoin/nodejoin/internal/cmd/nodeadm.
package main

import (
	"os"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/cmd/nodeadm"
)

func main() { os.Exit(cli.Main(nodeadm.Run)) }
