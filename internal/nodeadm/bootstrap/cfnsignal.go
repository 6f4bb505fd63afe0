package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

// Why nodeadm sends cfn-signal itself: AWS's node-group templates run
// `cfn-signal --exit-code $?` after bootstrap.sh, or in a script part of its own, where
// `$?` is the status of an unrelated line (always 0 in its own part), and they signal
// as soon as the daemons start, before the node joined. nodeadm signals SUCCESS only
// once its Node is Ready, and FAILURE with the reason when the join fails, so that a
// CreationPolicy really gates on nodes that joined.

// Paths of the cfn-signal state, under the node's root.
const (
	// SignalRequestPath holds the pending signal that `nodeadm signal` sends (init
	// --cfn-signal detach writes it).
	SignalRequestPath = "/var/lib/nodeadm/cfn-signal.json"
	// SignalSentPath marks that this boot's signal was sent: /run is emptied at boot,
	// so a node signals once per boot.
	SignalSentPath = "/run/nodeadm/cfn-signal.sent"
)

// FailurePrefix starts the line nodeadm writes on its output before a FAILURE signal;
// the stack engine reads it back from the instance's console output to give the node's
// own reason in the stack's events.
const FailurePrefix = "cfn-signal: FAILURE: "

// maxReason bounds the FAILURE line's reason (SignalResource carries no reason: the
// console line is where the stack engine finds it).
const maxReason = 500

// DefaultSignalTimeout is how long nodeadm waits for its Node to be Ready.
const DefaultSignalTimeout = 10 * time.Minute

// SignalRequest is a signal to send: the user data's call and what the node knows
// about itself.
type SignalRequest struct {
	Signal     userdata.Signal `json:"signal"`
	InstanceID string          `json:"instanceId"`
	Region     string          `json:"region"`
	NodeName   string          `json:"nodeName"`
}

// SignalAPI is the CloudFormation call nodeadm makes.
type SignalAPI interface {
	SignalResource(ctx context.Context, in *cloudformation.SignalResourceInput, opts ...func(*cloudformation.Options)) (*cloudformation.SignalResourceOutput, error)
}

// Signaller sends a node's one signal of the boot.
type Signaller struct {
	// Root is the node's file system root (the sent marker is under it).
	Root string
	// API sends the signal; nil makes a client from the default credential chain.
	API SignalAPI
	// Out gets progress and the FAILURE line.
	Out io.Writer
}

// NewSignalAPI returns a CloudFormation client with the default credential chain (the
// instance role, from IMDS), the request's region, and the endpoint from --url or the
// SDK's AWS_ENDPOINT_URL(_CLOUDFORMATION). Throttling and 5xx answers are retried with
// exponential backoff for about a minute.
func NewSignalAPI(ctx context.Context, req *SignalRequest) (SignalAPI, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(req.Region), config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 8
			o.MaxBackoff = 20 * time.Second
		})
	}))
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) {
		if req.Signal.URL != "" {
			o.BaseEndpoint = aws.String(req.Signal.URL)
		}
	}), nil
}

// Send sends SUCCESS (cause nil) or FAILURE (the cause's one-line reason, written first
// to Out as "cfn-signal: FAILURE: <reason>"), once per boot: a second call finds the
// sent marker and sends nothing.
func (s *Signaller) Send(ctx context.Context, req *SignalRequest, cause error) error {
	status := cfntypes.ResourceSignalStatusSuccess
	if cause != nil {
		status = cfntypes.ResourceSignalStatusFailure
		fmt.Fprintf(s.Out, "%s%s\n", FailurePrefix, OneLineReason(cause.Error()))
	}
	marker := filepath.Join(s.Root, SignalSentPath)
	if err := os.MkdirAll(filepath.Dir(marker), 0o750); err != nil {
		return fmt.Errorf("cfn-signal: %w", err)
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		fmt.Fprintf(s.Out, "cfn-signal: already sent this boot (%s exists); not sent again\n", marker)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cfn-signal: %w", err)
	}
	_, _ = fmt.Fprintf(f, "%s %s\n", status, time.Now().UTC().Format(time.RFC3339))
	_ = f.Close()
	api := s.API
	if api == nil {
		if api, err = NewSignalAPI(ctx, req); err != nil {
			return err
		}
	}
	id := req.InstanceID
	if req.Signal.UniqueID != "" {
		id = req.Signal.UniqueID
	}
	_, err = api.SignalResource(ctx, &cloudformation.SignalResourceInput{
		StackName: aws.String(req.Signal.Stack), LogicalResourceId: aws.String(req.Signal.Resource),
		UniqueId: aws.String(id), Status: status,
	})
	if err != nil {
		return fmt.Errorf("cfn-signal %s for resource %s of stack %s: %w", status, req.Signal.Resource, req.Signal.Stack, err)
	}
	fmt.Fprintf(s.Out, "✓ cfn-signal %s sent for resource %s of stack %s (unique ID %s)\n", status, req.Signal.Resource, req.Signal.Stack, id)
	return nil
}

// sent reports whether this boot's signal was sent.
func (s *Signaller) sent() bool {
	_, err := os.Lstat(filepath.Join(s.Root, SignalSentPath))
	return err == nil
}

// OneLineReason makes a reason fit the console line: one line, at most 500 characters.
func OneLineReason(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		s = "the join failed"
	}
	if len(s) > maxReason {
		cut := maxReason - len("…")
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// ReadyFunc waits until the node is Ready, or returns why it is not.
type ReadyFunc func(ctx context.Context) error

// WaitAndSend waits up to timeout for ready, then sends SUCCESS, or FAILURE with the
// reason it was not Ready in time.
func (s *Signaller) WaitAndSend(ctx context.Context, req *SignalRequest, ready ReadyFunc, timeout time.Duration) error {
	if s.sent() {
		fmt.Fprintf(s.Out, "cfn-signal: already sent this boot (%s exists); not sent again\n", filepath.Join(s.Root, SignalSentPath))
		return nil
	}
	fmt.Fprintf(s.Out, "cfn-signal: waiting up to %s for node %s to be Ready\n", timeout, req.NodeName)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err := ready(wctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // stopped, not failed: the next boot signals
	}
	if err != nil {
		err = fmt.Errorf("node %s not Ready within %s: %w", req.NodeName, timeout, err)
	}
	return s.Send(ctx, req, err)
}

// KubeletReady returns a ReadyFunc that polls the node's own Node through the
// kubelet's kubeconfig (which the node authorizer lets read it) every interval. The
// kubeconfig may not exist yet (a bootstrap-token kubelet writes it after its TLS
// bootstrap): it is read again on each poll.
func KubeletReady(kubeconfig, nodeName string, interval time.Duration) ReadyFunc {
	return func(ctx context.Context) error {
		var client kubernetes.Interface
		last := "the kubelet has not registered the Node"
		for {
			if client == nil {
				if cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil {
					cfg.Timeout = 30 * time.Second
					client, _ = kubernetes.NewForConfig(cfg)
				} else {
					last = "no kubelet kubeconfig yet at " + kubeconfig
				}
			}
			if client != nil {
				done, why := NodeReady(ctx, client, nodeName)
				if done {
					return nil
				}
				last = why
			}
			select {
			case <-ctx.Done():
				return errors.New(last)
			case <-time.After(interval):
			}
		}
	}
}

// NodeReady reports whether the Node is Ready, and if not, why.
func NodeReady(ctx context.Context, client kubernetes.Interface, name string) (bool, string) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Sprintf("reading Node %s: %s", name, strings.TrimSpace(err.Error()))
	}
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return true, ""
		}
		return false, fmt.Sprintf("Node %s Ready=%s: %s %s", name, c.Status, c.Reason, c.Message)
	}
	return false, "Node " + name + " has no Ready condition yet"
}

// WriteSignalRequest saves req under root for `nodeadm signal`.
func WriteSignalRequest(root string, req *SignalRequest) error {
	data, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(root, SignalRequestPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	return os.WriteFile(p, append(data, '\n'), 0o600)
}

// ReadSignalRequest reads the request init saved under root; nil when there is none.
func ReadSignalRequest(root string) (*SignalRequest, error) {
	data, err := os.ReadFile(filepath.Join(root, SignalRequestPath))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	req := &SignalRequest{}
	if err := json.Unmarshal(data, req); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(root, SignalRequestPath), err)
	}
	if req.Signal.Stack == "" || req.Signal.Resource == "" || req.InstanceID == "" {
		return nil, fmt.Errorf("%s: no stack, resource or instance ID", filepath.Join(root, SignalRequestPath))
	}
	return req, nil
}
