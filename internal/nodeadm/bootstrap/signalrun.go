package bootstrap

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// cfn-signal modes of `nodeadm init`.
const (
	// SignalWait waits in init for the Node to be Ready, then signals: on a host whose
	// boot does not wait for init to exit before the kubelet can register.
	SignalWait = "wait"
	// SignalDetach saves the request for a `nodeadm signal` process started after init
	// (the sandbox, which waits for init to exit before it counts the node as started).
	SignalDetach = "detach"
	// SignalOff sends nothing.
	SignalOff = "off"
)

// SignalOptions say what init does when the user data calls cfn-signal.
type SignalOptions struct {
	Mode    string
	Timeout time.Duration
	// API and Ready replace the CloudFormation client and the readiness check (tests).
	API   SignalAPI
	Ready ReadyFunc
}

func (s *SignalOptions) validate() error {
	switch s.Mode {
	case SignalWait, SignalDetach, SignalOff:
	default:
		return fmt.Errorf("--cfn-signal %q: want wait, detach or off", s.Mode)
	}
	if s.Timeout <= 0 {
		return fmt.Errorf("--cfn-signal-timeout %s: want a positive duration such as 10m", s.Timeout)
	}
	return nil
}

// requestedSignal returns the first cfn-signal call of the loaded sources or, when
// they did not load, of the sources read again for that call only.
func requestedSignal(ctx context.Context, st *initState) *userdata.Signal {
	if st.loaded != nil {
		for _, r := range st.loaded.Results {
			if r.Signal != nil {
				return r.Signal
			}
		}
		return nil
	}
	sources := st.sources
	if len(sources) == 0 {
		sources = []string{DefaultSource}
	}
	env := Environment{}
	if st.cloud != nil {
		env.IMDS = st.cloud.imds
	}
	for _, src := range sources {
		blobs, err := read(ctx, src, env)
		if err != nil {
			continue
		}
		for _, b := range blobs {
			if doc, err := userdata.SplitNamed(b.data, b.name); err == nil {
				if sig := userdata.FindSignal(doc); sig != nil {
					return sig
				}
			}
		}
	}
	return nil
}

// after sends or schedules the signal once init is done: FAILURE at once when init
// failed (initErr), else SUCCESS once the Node is Ready (wait), or a saved request for
// `nodeadm signal` (detach).
func (s *SignalOptions) after(ctx context.Context, root string, st *initState, initErr error, skipRun bool, out io.Writer) error {
	if s.Mode == SignalOff {
		return nil
	}
	sig := requestedSignal(ctx, st)
	if sig == nil {
		return nil
	}
	req := &SignalRequest{Signal: *sig}
	if st.md != nil {
		req.InstanceID, req.Region, req.NodeName = st.md.InstanceID, st.md.Region, st.md.PrivateDNSName
		if st.loaded != nil && st.loaded.Merged != nil && st.loaded.Merged.Spec.Enabled(v1alpha1.FeatureInstanceIDNodeName) {
			req.NodeName = st.md.InstanceID
		}
	} else {
		// init failed before it read the metadata: the identity document is enough.
		doc, err := st.cloud.imds.Client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
		if err != nil {
			return fmt.Errorf("cfn-signal: reading the instance identity document: %w", err)
		}
		req.InstanceID, req.Region = doc.InstanceID, doc.Region
	}
	if sig.Region != "" {
		req.Region = sig.Region
	}
	sender := &Signaller{Root: root, API: s.API, Out: out}
	if initErr != nil {
		return sender.Send(ctx, req, initErr)
	}
	if skipRun {
		fmt.Fprintf(out, "cfn-signal: not sent: init skipped the run phase, so no kubelet was started to join (run init without --skip run to signal)\n")
		return nil
	}
	if s.Mode == SignalDetach {
		if err := WriteSignalRequest(root, req); err != nil {
			return fmt.Errorf("cfn-signal: saving the request: %w", err)
		}
		fmt.Fprintf(out, "cfn-signal: for resource %s of stack %s, sent by `nodeadm signal` once node %s is Ready\n", sig.Resource, sig.Stack, req.NodeName)
		return nil
	}
	ready := s.Ready
	if ready == nil {
		ready = KubeletReady(filepath.Join(root, KubeconfigPath), req.NodeName, 5*time.Second)
	}
	return sender.WaitAndSend(ctx, req, ready, s.Timeout)
}

// SignalCommand is `nodeadm signal`: it sends the signal `nodeadm init --cfn-signal
// detach` saved, once the Node is Ready.
type SignalCommand struct {
	Root    string
	Timeout time.Duration
	// API and Ready replace the CloudFormation client and the readiness check (tests).
	API   SignalAPI
	Ready ReadyFunc
}

// Run waits for the Node and signals; without a saved request it says so and succeeds.
func (c *SignalCommand) Run(ctx context.Context, out io.Writer) error {
	if c.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: want a positive duration such as 10m", c.Timeout)
	}
	req, err := ReadSignalRequest(c.Root)
	if err != nil {
		return fmt.Errorf("cfn-signal: %w", err)
	}
	if req == nil {
		fmt.Fprintf(out, "cfn-signal: nothing to send (no %s: the user data has no cfn-signal call, or init did not run with --cfn-signal detach)\n", filepath.Join(c.Root, SignalRequestPath))
		return nil
	}
	ready := c.Ready
	if ready == nil {
		ready = KubeletReady(filepath.Join(c.Root, KubeconfigPath), req.NodeName, 5*time.Second)
	}
	return (&Signaller{Root: c.Root, API: c.API, Out: out}).WaitAndSend(ctx, req, ready, c.Timeout)
}
