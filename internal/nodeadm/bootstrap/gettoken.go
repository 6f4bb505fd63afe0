package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/nodejoin/nodejoin/internal/identity"
)

// ExecCredential is client.authentication.k8s.io's ExecCredential, as a credential
// plugin prints it.
type ExecCredential struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       map[string]any `json:"spec"`
	Status     struct {
		ExpirationTimestamp string `json:"expirationTimestamp"`
		Token               string `json:"token"`
	} `json:"status"`
}

// GetToken writes to w an ExecCredential holding a node identity token for cluster,
// signed for region (default: the SDK's configuration, else instance metadata).
func GetToken(ctx context.Context, w io.Writer, cluster, region string) error {
	opts := []func(*config.LoadOptions) error{}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		out, err := NewIMDSClient().GetRegion(ctx, &imds.GetRegionInput{})
		if err != nil {
			return fmt.Errorf("finding the region (give --region): %w", err)
		}
		cfg.Region = out.Region
	}
	token, exp, err := identity.Mint(ctx, cfg, cluster)
	if err != nil {
		return err
	}
	cred := ExecCredential{APIVersion: execAPIVersion(), Kind: "ExecCredential", Spec: map[string]any{}}
	cred.Status.Token = token
	cred.Status.ExpirationTimestamp = exp.UTC().Format(time.RFC3339)
	return json.NewEncoder(w).Encode(cred)
}

// execAPIVersion answers in the version the client asked for in KUBERNETES_EXEC_INFO.
func execAPIVersion() string {
	var info struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info); err == nil && info.APIVersion != "" {
		return info.APIVersion
	}
	return "client.authentication.k8s.io/v1beta1"
}
