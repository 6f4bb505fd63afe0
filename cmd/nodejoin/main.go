// Command nodejoin: see package github.com/nodejoin/nodejoin/internal/cmd/nodejoin.
package main

import (
	"os"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/cmd/nodejoin"
)

func main() { os.Exit(cli.Main(nodejoin.Run)) }
