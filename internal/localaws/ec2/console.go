package ec2

// This file holds GetConsoleOutput: an instance's console (its serial output), which
// the sandbox provides through SetConsoleSource.

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// maxConsoleOutput is how much console output GetConsoleOutput returns: the last 64 KiB,
// as EC2 does.
const maxConsoleOutput = 64 << 10

// SetConsoleSource sets where instances' console output comes from: source returns an
// instance's output so far, false when it has none yet. It is called without EC2's lock
// held. nil removes it; without a source, every instance's output is empty.
func (e *EC2) SetConsoleSource(source func(instanceID string) ([]byte, bool)) {
	e.mu.Lock()
	e.console = source
	e.mu.Unlock()
}

type consoleOutputResponse struct {
	XMLName    xml.Name `xml:"GetConsoleOutputResponse"`
	Xmlns      string   `xml:"xmlns,attr"`
	RequestID  string   `xml:"requestId"`
	InstanceID string   `xml:"instanceId"`
	Timestamp  string   `xml:"timestamp"`
	Output     string   `xml:"output,omitempty"`
}

// getConsoleOutput answers an instance's console output, base64: its last 64 KiB, or
// nothing before the console has any (as EC2 answers then). Latest is accepted: the
// output here is always the latest.
func (e *EC2) getConsoleOutput(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	id, aerr := p.Required("InstanceId")
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := p.Bool("Latest"); aerr != nil {
		return nil, aerr
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	e.mu.Lock()
	_, known := e.instances[id]
	source := e.console
	e.mu.Unlock()
	if !known {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	}
	if dry {
		return nil, errDryRun
	}
	out := consoleOutputResponse{Xmlns: xmlns, RequestID: r.ID, InstanceID: id, Timestamp: e.now().UTC().Format(timeFormat)}
	if source != nil {
		if b, ok := source(id); ok {
			if len(b) > maxConsoleOutput {
				b = b[len(b)-maxConsoleOutput:]
			}
			out.Output = base64.StdEncoding.EncodeToString(b)
		}
	}
	return out, nil
}
