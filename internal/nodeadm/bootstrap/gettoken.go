package bootstrap

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
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
	token, exp, err := identity.MintWithProof(ctx, cfg, cluster, instanceProof(ctx))
	if err != nil {
		return err
	}
	cred := ExecCredential{APIVersion: execAPIVersion(), Kind: "ExecCredential", Spec: map[string]any{}}
	cred.Status.Token = token
	cred.Status.ExpirationTimestamp = exp.UTC().Format(time.RFC3339)
	return json.NewEncoder(w).Encode(cred)
}

// instanceProof reads the instance identity document and its signature from instance
// metadata, to prove that the token comes from this instance (identity.Proof); nil when
// the metadata service serves no signature or cannot be reached quickly: the token is
// then a plain one, which the webhook admits where no proof is required.
func instanceProof(ctx context.Context) *identity.Proof {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := imds.New(imds.Options{Endpoint: os.Getenv(EnvIMDSEndpoint), Retryer: retry.AddWithMaxAttempts(retry.NewStandard(), 2)})
	read := func(path string) []byte {
		out, err := client.GetDynamicData(ctx, &imds.GetDynamicDataInput{Path: path})
		if err != nil {
			return nil
		}
		defer func() { _ = out.Content.Close() }()
		b, err := io.ReadAll(io.LimitReader(out.Content, identity.MaxDocumentBytes+1))
		if err != nil {
			return nil
		}
		return b
	}
	doc := read("instance-identity/document")
	if len(doc) == 0 || len(doc) > identity.MaxDocumentBytes {
		return nil
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(read("instance-identity/signature"))))
	if err != nil || len(sig) == 0 || len(sig) > identity.MaxSignatureBytes {
		return nil
	}
	return &identity.Proof{Document: doc, Signature: sig}
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
