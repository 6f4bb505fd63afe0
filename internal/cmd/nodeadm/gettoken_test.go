package nodeadm

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

// On an emulated instance, get-token takes the role credentials that IMDS serves (issued
// by the local STS) and prints a token that the STS verifies as that instance's role.
func TestGetTokenWithInstanceRoleCredentials(t *testing.T) {
	sts := localaws.NewSTS("111122223333")
	stsSrv := httptest.NewTLSServer(sts)
	defer stsSrv.Close()
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: stsSrv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	inst := localaws.Instance{ID: "i-0123456789abcdef0", Type: "m5.large", PrivateIPv4: "198.18.0.11", Role: "nodes", AccountID: "111122223333"}
	if err := localaws.InstanceDefaults(&inst); err != nil {
		t.Fatal(err)
	}
	signer, err := localaws.LoadOrCreateIdentitySigner(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	imdsSrv := httptest.NewServer(localaws.NewIMDS(inst, sts).WithSigner(signer))
	defer imdsSrv.Close()
	for k, v := range map[string]string{
		bootstrap.EnvIMDSEndpoint: imdsSrv.URL, "AWS_ENDPOINT_URL_STS": stsSrv.URL, "AWS_CA_BUNDLE": bundle,
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
		"KUBERNETES_EXEC_INFO": `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}`,
	} {
		t.Setenv(k, v)
	}
	out, err := run(t, "get-token", "--cluster-name", "demo")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var cred bootstrap.ExecCredential
	if err := json.Unmarshal([]byte(out), &cred); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if cred.APIVersion != "client.authentication.k8s.io/v1" || cred.Kind != "ExecCredential" || cred.Status.ExpirationTimestamp == "" {
		t.Errorf("credential = %+v", cred)
	}
	req, err := identity.Parse(cred.Status.Token, []string{strings.TrimPrefix(stsSrv.URL, "https://")}, time.Now(), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, req.URL.String(), nil)
	hr.Header.Set(identity.ClusterHeader, "demo")
	hr.Header.Set(identity.ProofHeader, req.Proof)
	resp, err := stsSrv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "assumed-role/nodes/i-0123456789abcdef0") {
		t.Errorf("STS = %d %s", resp.StatusCode, body)
	}
	// The token proves the instance: it carries the instance's signed identity document,
	// which the webhook checks against the local cloud's certificate.
	certs, err := authn.ParseCertificates(signer.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a token with its instance proof: %d bytes (proof %d)", len(cred.Status.Token), len(req.Proof))
	caller := &authn.Caller{Account: "111122223333", SessionName: inst.ID}
	if err := (&authn.InstanceProofs{Certs: certs, Regions: []string{"us-west-2"}}).Check(caller, nil, req.Proof); err != nil {
		t.Errorf("the token's instance proof: %v", err)
	}

	if _, err := run(t, "get-token"); err == nil || !strings.Contains(err.Error(), "--cluster-name is required") {
		t.Errorf("without a cluster: %v", err)
	}
}
