package controller

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/pki"
)

// The edge's port and the administrator's key are drawn when a cluster first starts,
// recorded with the AWS CLI's files (owner-only), and the same when read back.
func TestAWSAccessRecordedForTheClusterLife(t *testing.T) {
	dir := t.TempDir()
	rec, err := loadAWSRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.AccessKeyID, "AKIA") || len(rec.AccessKeyID) != 20 || len(rec.SecretAccessKey) != 40 || rec.Port != 0 {
		t.Fatalf("new record %q (secret %d chars), port %d", rec.AccessKeyID, len(rec.SecretAccessKey), rec.Port)
	}
	ca, err := pki.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cloud, err := localaws.StartCloud(ctx, DefaultAccountID, ca, slog.New(slog.DiscardHandler),
		localaws.WithAdminKey(rec.AccessKeyID, rec.SecretAccessKey), localaws.WithEdge("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cloud.Wait() }()
	a, err := writeAWSFiles(dir, "demo", "us-west-2", "/state/ca.crt", cloud, rec)
	if err != nil {
		t.Fatal(err)
	}
	if a.Endpoint != cloud.EdgeURL || a.Profile != "nodejoin-demo" || a.CABundle != "/state/ca.crt" || a.Region != "us-west-2" {
		t.Errorf("access %+v", a)
	}
	for _, f := range []string{a.ConfigFile, a.CredentialsFile, filepath.Join(dir, AWSDir, awsRecordFile), filepath.Join(dir, AWSDir, awsEndpointFile)} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v", f, err, st.Mode())
		}
	}
	config, _ := os.ReadFile(a.ConfigFile)
	creds, _ := os.ReadFile(a.CredentialsFile)
	for _, want := range []string{"[profile nodejoin-demo]\n", "region = us-west-2\n", "ca_bundle = /state/ca.crt\n", "--endpoint-url " + cloud.EdgeURL} {
		if !strings.Contains(string(config), want) {
			t.Errorf("config lacks %q:\n%s", want, config)
		}
	}
	if !strings.Contains(string(creds), "[nodejoin-demo]\naws_access_key_id = "+rec.AccessKeyID+"\naws_secret_access_key = "+rec.SecretAccessKey+"\n") {
		t.Errorf("credentials:\n%s", creds)
	}
	again, err := loadAWSRecord(dir)
	if err != nil || again.AccessKeyID != rec.AccessKeyID || again.SecretAccessKey != rec.SecretAccessKey || again.Port == 0 ||
		!strings.HasSuffix(cloud.EdgeURL, ":"+strconv.Itoa(again.Port)) {
		t.Errorf("record read back %+v, %v (edge %s)", again.Access, err, cloud.EdgeURL)
	}
	if got, err := ReadAWSAccess(dir); err != nil || got != a {
		t.Errorf("ReadAWSAccess = %+v, %v", got, err)
	}
	if _, err := ReadAWSAccess(t.TempDir()); !os.IsNotExist(err) {
		t.Errorf("without a record: %v", err)
	}
}
