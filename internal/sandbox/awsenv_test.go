package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
)

// fakeRunning makes this process the owner of a ready cluster name, with a local AWS
// recorded as the controller records it.
func fakeRunning(t *testing.T, name string) string {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := StateDir(name)
	if err != nil {
		t.Fatal(err)
	}
	self, err := process.IdentityOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := json.Marshal(controlplane.State{Name: name, Owner: self, Ready: true})
	aws := filepath.Join(dir, controller.AWSDir)
	rec, _ := json.Marshal(map[string]any{
		"access": controller.AWSAccess{Endpoint: "https://127.0.0.1:4566", Region: "us-west-2", CABundle: dir + "/pki/ca.crt", Profile: "nodejoin-" + name,
			ConfigFile: aws + "/config", CredentialsFile: aws + "/credentials"},
		"port": 4566, "accessKeyID": "AKIAEXAMPLE000000000", "secretAccessKey": "it's-secret"})
	for f, data := range map[string][]byte{filepath.Join(dir, controlplane.StateFile): st, filepath.Join(aws, "edge.json"): rec} {
		if err := atomicfile.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestAWSEnvironment(t *testing.T) {
	fakeRunning(t, "demo")
	env, err := AWSEnvironment("demo")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range env {
		got[v.Name] = v.Value
	}
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_AUTO_SCALING", "AWS_ENDPOINT_URL_SSM", "AWS_EKS_ENDPOINT", "AWS_STS_ENDPOINT"} {
		if got[k] != "https://127.0.0.1:4566" {
			t.Errorf("%s = %q", k, got[k])
		}
	}
	if got["AWS_ACCESS_KEY_ID"] != "AKIAEXAMPLE000000000" || got["AWS_PROFILE"] != "nodejoin-demo" || got["AWS_DEFAULT_REGION"] != "us-west-2" ||
		!strings.HasSuffix(got["AWS_CA_BUNDLE"], "/pki/ca.crt") || !strings.HasSuffix(got["AWS_SHARED_CREDENTIALS_FILE"], "/aws/credentials") {
		t.Errorf("env %v", got)
	}
	if q := ShellQuote(got["AWS_SECRET_ACCESS_KEY"]); q != `'it'\''s-secret'` {
		t.Errorf("quoted %s", q)
	}
	c, err := Get("demo")
	if err != nil || c.AWS == nil || c.AWS.Endpoint != "https://127.0.0.1:4566" {
		t.Fatalf("Get: %+v, %v", c.AWS, err)
	}
	b, _ := json.Marshal(c)
	if !strings.Contains(string(b), `"aws":{"endpoint":"https://127.0.0.1:4566","region":"us-west-2","caBundle":`) || strings.Contains(string(b), "secret") {
		t.Errorf("get clusters -o json: %s", b)
	}
	var summary bytes.Buffer
	c.WriteSummary(&summary, true)
	if !strings.Contains(summary.String(), "local AWS:   https://127.0.0.1:4566") || !strings.Contains(summary.String(), "nodejoin aws-env --name demo") {
		t.Errorf("summary:\n%s", summary.String())
	}
}

func TestAWSEnvironmentOfNoCluster(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	_, err := AWSEnvironment("gone")
	if err == nil || !strings.Contains(err.Error(), "cluster gone") || !strings.Contains(err.Error(), "nodejoin up --name gone") {
		t.Errorf("error %v", err)
	}
}
