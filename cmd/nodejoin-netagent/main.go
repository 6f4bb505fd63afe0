// Command nodejoin-netagent: see package github.com/nodejoin/nodejoin/internal/cmd/netagent.
package main

import (
	"os"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/cmd/netagent"
)

func main() { os.Exit(cli.Main(netagent.Run)) }
