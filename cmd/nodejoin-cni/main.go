// Command nodejoin-cni: see package github.com/nodejoin/nodejoin/internal/cmd/cniplugin.
package main

import "github.com/nodejoin/nodejoin/internal/cmd/cniplugin"

func main() { cniplugin.Main() }
