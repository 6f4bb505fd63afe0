// Command nodejoin-controller: see package github.com/nodejoin/nodejoin/internal/cmd/controller.
package main

import (
	"os"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/cmd/controller"
)

func main() { os.Exit(cli.Main(controller.Run)) }
