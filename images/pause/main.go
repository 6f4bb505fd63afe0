// Command pause is the pause image's program (registry.k8s.io/pause:3.10.2, built by
// hack/images): it holds a pod's namespaces open. As upstream's pause.c: "-v" prints the
// version; SIGINT and SIGTERM end it with status 0; as PID 1 of a pod that shares its
// process namespace, it reaps the orphans that SIGCHLD announces; otherwise it sleeps.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set by the image build (-X main.version=...).
var version = "dev"

func main() {
	for _, a := range os.Args[1:] {
		if strings.EqualFold(a, "-v") {
			fmt.Printf("pause.go %s\n", version)
			os.Exit(0)
		}
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %s\n", sig)
		os.Exit(0)
	}
}

// reap collects every child that has ended; several may share one SIGCHLD.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
