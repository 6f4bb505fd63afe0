package nodejoin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

func serveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Serve an emulated cloud endpoint",
		Example: "  nodejoin serve imds --user-data ./userdata.yaml",
	}
	cmd.AddCommand(serveIMDSCommand())
	return cmd
}

func serveIMDSCommand() *cobra.Command {
	var (
		listen, userDataFile string
		inst                 localaws.Instance
		vpcCIDRs             []string
	)
	cmd := &cobra.Command{
		Use:   "imds",
		Short: "Serve one instance's metadata and user data over IMDSv2 until interrupted",
		Long: "serve answers IMDSv2 requests (token PUT, then GETs with the token header) for one\n" +
			"instance, so that nodeadm can run against it: point nodeadm at it with\n" +
			"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://ADDR.",
		Example: "  nodejoin serve imds --user-data ./userdata.yaml --listen 127.0.0.1:1338 &\n" +
			"  AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1338 nodeadm init --skip run",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if userDataFile != "" {
				data, err := os.ReadFile(userDataFile)
				if err != nil {
					return fmt.Errorf("reading user data: %w", err)
				}
				inst.UserData = data
			}
			inst.VPCIPv4CIDRs = vpcCIDRs
			if err := localaws.InstanceDefaults(&inst); err != nil {
				return err
			}
			return serveIMDS(cmd.Context(), cmd, listen, inst)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:1338", "address to listen on")
	f.StringVar(&userDataFile, "user-data", "", "file whose content is served as user data")
	f.StringVar(&inst.Type, "instance-type", "m5.large", "instance type")
	f.StringVar(&inst.ID, "instance-id", "", "instance ID (default: a random i-...)")
	f.StringVar(&inst.PrivateIPv4, "local-ipv4", "198.18.0.11", "private IPv4 address")
	f.StringVar(&inst.MAC, "mac", "", "MAC of the primary interface (default: derived from the address)")
	f.StringVar(&inst.AvailabilityZone, "az", "us-west-2a", "availability zone; the region is derived from it")
	f.StringVar(&inst.PrivateDNSName, "private-dns-name", "", "private DNS name (default: EC2's name for the address)")
	f.StringSliceVar(&vpcCIDRs, "vpc-cidr", []string{"198.18.0.0/16"}, "IPv4 CIDR blocks of the VPC")
	f.StringVar(&inst.Role, "role", "", "instance profile role name (credentials need the local STS)")
	return cmd
}

func serveIMDS(ctx context.Context, cmd *cobra.Command, listen string, inst localaws.Instance) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: localaws.NewIMDS(inst, nil), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.OutOrStdout(), "Serving instance metadata of %s (%s, %s) on http://%s\n", inst.ID, inst.Type, inst.PrivateIPv4, l.Addr())
	fmt.Fprintf(cmd.OutOrStdout(), "Use it: AWS_EC2_METADATA_SERVICE_ENDPOINT=http://%s nodeadm ...\n", l.Addr())
	return httpserver.Serve(ctx, srv, l)
}
