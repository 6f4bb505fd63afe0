package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStopEndsADaemonThatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(Spec{
		Name:    "stubborn",
		Argv:    []string{"sh", "-c", "trap '' TERM; echo started " + dir + "; while :; do sleep 0.05; done"},
		LogFile: filepath.Join(dir, "stubborn.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(p.LogTail(1), "started") })
	id := p.Identity()
	if !id.Alive() {
		t.Fatal("Alive = false for a running daemon")
	}
	p.Stop(200 * time.Millisecond)
	if !errors.Is(p.Err(), ErrExited) {
		t.Errorf("Err = %v, want ErrExited", p.Err())
	}
	if id.Alive() {
		t.Error("daemon still alive after Stop")
	}
}

func TestIdentityDetectsPIDReuse(t *testing.T) {
	self, err := IdentityOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Error("own identity not alive")
	}
	reused := Identity{PID: self.PID, Start: self.Start + 1}
	if reused.Alive() {
		t.Error("Alive accepted a PID whose start time differs")
	}
	if (Identity{}).Alive() || (Identity{PID: -1}).Alive() {
		t.Error("Alive accepted a non-positive PID")
	}
}

func TestTerminateStopsARecordedProcess(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	id, err := IdentityOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	Terminate(id, 5*time.Second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process still running after Terminate")
	}
}

func TestExitIsReportedWithLogTail(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(Spec{Name: "failing", Argv: []string{"sh", "-c", "echo boom: bad flag; exit 3"}, LogFile: filepath.Join(dir, "f.log")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(t.Context()); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Wait = %v", err)
	}
	if !strings.Contains(p.LogTail(5), "boom: bad flag") {
		t.Errorf("log tail = %q", p.LogTail(5))
	}
}

// TestChildDiesWithParent runs a helper process that starts a daemon and is then killed
// with SIGKILL: the daemon must not survive it.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv("PROCESS_TEST_HELPER") == "1" {
		p, err := Start(Spec{Name: "orphan", Argv: []string{"sleep", "300"}, LogFile: os.Getenv("PROCESS_TEST_LOG")})
		if err != nil {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stdout, p.PID())
		select {}
	}
	dir := t.TempDir()
	helper := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestChildDiesWithParent$")
	helper.Env = append(os.Environ(), "PROCESS_TEST_HELPER=1", "PROCESS_TEST_LOG="+filepath.Join(dir, "o.log"))
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("helper printed %q: %v", buf[:n], err)
	}
	id, err := IdentityOf(pid)
	if err != nil {
		t.Fatalf("daemon %d not running: %v", pid, err)
	}
	_ = helper.Process.Kill()
	_ = helper.Wait()
	waitFor(t, func() bool { return !id.Alive() })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
