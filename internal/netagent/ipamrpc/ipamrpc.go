// Package ipamrpc is the contract between nodejoin's CNI plugin and its IPAM daemon
// (ipamd): the messages, the gRPC service that carries them over a Unix socket, a client
// for the plugin and a server adapter for ipamd.
//
// The service is gRPC as the VPC CNI's is (CNIBackend with AddNetwork and DelNetwork, and
// the standard health service), but its messages are encoded as JSON by a codec registered
// here instead of protobuf. Both ends are built from this one package, so no schema has to
// be shared across languages, and the build needs no protoc toolchain; the content subtype
// ("application/grpc+json") says so on the wire.
package ipamrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Version is the protocol version both ends must share; ipamd refuses a request from a
// plugin of another version, so a half-upgraded node fails loudly instead of misrouting.
const Version = "nodejoin-ipam/1"

// DefaultSocket is where ipamd listens on a node unless configured otherwise.
const DefaultSocket = "/var/run/aws-node/ipamd.sock"

// HealthService is the name ipamd reports SERVING under in the gRPC health service.
const HealthService = "grpc.health.v1.aws-node"

// AddRequest asks for an address for a pod's sandbox.
type AddRequest struct {
	ClientVersion string `json:"clientVersion"`
	PodName       string `json:"podName"`
	PodNamespace  string `json:"podNamespace"`
	PodUID        string `json:"podUID,omitempty"`
	// ContainerID is the sandbox's ID (CNI_CONTAINERID); with IfName it keys the allocation.
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	NetworkName string `json:"networkName"`
	Netns       string `json:"netns"`
}

// AddReply is the address given and where it lives.
type AddReply struct {
	// IPv4Addr is the pod's address, without a prefix length (the pod gets it as a /32).
	IPv4Addr string `json:"ipv4Addr"`
	// DeviceNumber is the device index of the ENI that holds the address (0: the primary ENI).
	DeviceNumber int `json:"deviceNumber"`
	// RouteTableID is the policy-routing table of that ENI for traffic from the pod
	// (254, the main table, for the primary ENI).
	RouteTableID int `json:"routeTableID"`
	// VPCv4CIDRs are the VPC's IPv4 ranges.
	VPCv4CIDRs []string `json:"vpcV4CIDRs"`
	// MTU is the MTU to give the pod's interface.
	MTU int `json:"mtu,omitempty"`
}

// DelRequest gives an address back.
type DelRequest struct {
	ClientVersion string `json:"clientVersion"`
	PodName       string `json:"podName"`
	PodNamespace  string `json:"podNamespace"`
	PodUID        string `json:"podUID,omitempty"`
	ContainerID   string `json:"containerID"`
	IfName        string `json:"ifName"`
	NetworkName   string `json:"networkName"`
	// Reason is "PodDeleted" (CNI DEL) or "SetupNSFailed" (the plugin's rollback of a failed ADD).
	Reason string `json:"reason"`
}

// DelReply says which address was released; IPv4Addr is empty when the sandbox held none
// (DEL is idempotent).
type DelReply struct {
	IPv4Addr     string `json:"ipv4Addr,omitempty"`
	DeviceNumber int    `json:"deviceNumber"`
	RouteTableID int    `json:"routeTableID"`
}

// Backend is what ipamd implements. Errors should carry gRPC status codes: ErrPoolEmpty
// (codes.ResourceExhausted) when no address is free, codes.FailedPrecondition for a
// version mismatch, codes.InvalidArgument for a malformed request.
type Backend interface {
	AddNetwork(ctx context.Context, req *AddRequest) (*AddReply, error)
	DelNetwork(ctx context.Context, req *DelRequest) (*DelReply, error)
}

// ErrPoolEmpty is the error ipamd returns when no address is free; the plugin turns it
// into CNI's "try again later" (code 11).
var ErrPoolEmpty = status.Error(codes.ResourceExhausted, "no free IPv4 address in the warm pool")

// IsPoolEmpty reports whether err says no address was free.
func IsPoolEmpty(err error) bool { return status.Code(err) == codes.ResourceExhausted }

// CheckVersion returns a FailedPrecondition error unless v is Version.
func CheckVersion(v string) error {
	if v != Version {
		return status.Errorf(codes.FailedPrecondition, "CNI plugin speaks %q, ipamd speaks %q: install the plugin from the same nodejoin-netagent image", v, Version)
	}
	return nil
}

const serviceName = "nodejoin.ipam.v1.CNIBackend"

// jsonCodec encodes messages as JSON (see the package comment for why).
type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return "json" }

func init() { encoding.RegisterCodec(jsonCodec{}) }

//nolint:revive // context-as-argument: the signature is grpc.MethodHandler's.
func addHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	req := new(AddRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	return srv.(Backend).AddNetwork(ctx, req)
}

//nolint:revive // context-as-argument: the signature is grpc.MethodHandler's.
func delHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	req := new(DelRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	return srv.(Backend).DelNetwork(ctx, req)
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*Backend)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "AddNetwork", Handler: addHandler},
		{MethodName: "DelNetwork", Handler: delHandler},
	},
	Metadata: "internal/netagent/ipamrpc",
}

// Listen removes a stale socket at path, creates its directory and listens on it with
// mode 0660, as ipamd does.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // G301: the runtime's plugin must reach the socket, as with ipamd.
		return nil, fmt.Errorf("ipamd socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale ipamd socket %s: %w", path, err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "unix", path)
	if err != nil {
		return nil, fmt.Errorf("ipamd socket: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil { //nolint:gosec // G302: a socket the CNI plugin connects to, group-writable as ipamd's is.
		_ = l.Close()
		return nil, fmt.Errorf("ipamd socket %s: %w", path, err)
	}
	return l, nil
}

// Serve serves b on l until ctx ends, with the health service reporting SERVING under
// HealthService; it returns nil after a graceful stop.
func Serve(ctx context.Context, l net.Listener, b Backend) error {
	// The server picks the codec by content subtype: JSON for CNIBackend, protobuf for
	// the standard health service.
	s := grpc.NewServer()
	s.RegisterService(&serviceDesc, b)
	h := health.NewServer()
	h.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		h.Shutdown()
		stopped := make(chan struct{})
		go func() { s.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			s.Stop()
		}
		return nil
	}
}

// Client is the plugin's connection to ipamd.
type Client struct {
	conn *grpc.ClientConn
}

// Dial connects to ipamd's socket. The connection is lazy: a missing socket shows up as
// an Unavailable error from the first call.
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("ipamd socket %s: %w", socket, err)
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// AddNetwork asks ipamd for an address; req.ClientVersion is set to Version.
func (c *Client) AddNetwork(ctx context.Context, req *AddRequest) (*AddReply, error) {
	req.ClientVersion = Version
	out := new(AddReply)
	if err := c.conn.Invoke(ctx, "/"+serviceName+"/AddNetwork", req, out, grpc.CallContentSubtype("json")); err != nil {
		return nil, err
	}
	return out, nil
}

// DelNetwork gives an address back; req.ClientVersion is set to Version.
func (c *Client) DelNetwork(ctx context.Context, req *DelRequest) (*DelReply, error) {
	req.ClientVersion = Version
	out := new(DelReply)
	if err := c.conn.Invoke(ctx, "/"+serviceName+"/DelNetwork", req, out, grpc.CallContentSubtype("json")); err != nil {
		return nil, err
	}
	return out, nil
}

// Healthy asks ipamd's health service whether it is SERVING.
func (c *Client) Healthy(ctx context.Context) error {
	resp, err := healthpb.NewHealthClient(c.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: HealthService})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("ipamd reports %s", resp.GetStatus())
	}
	return nil
}
