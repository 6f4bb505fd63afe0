package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

// AWSDir is the directory of a cluster's state directory that holds how to reach its
// local AWS from the host: the edge's record, an AWS CLI config and credentials file,
// and the endpoint's URL for humans.
const AWSDir = "aws"

// The files of AWSDir.
const (
	awsRecordFile   = "edge.json"
	awsConfigFile   = "config"
	awsCredsFile    = "credentials"
	awsEndpointFile = "endpoint"
)

// AWSAccess is how to reach a cluster's local AWS from the host: one HTTPS endpoint
// for every service (the edge), its CA, and an AWS CLI profile with the account
// administrator's credentials.
type AWSAccess struct {
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	CABundle        string `json:"caBundle"`
	Profile         string `json:"profile"`
	ConfigFile      string `json:"configFile"`
	CredentialsFile string `json:"credentialsFile"`
}

// awsRecord is AWSDir/edge.json: what stays the same for the cluster's life, the
// edge's port and the administrator's key, chosen when the cluster starts.
type awsRecord struct {
	Access          AWSAccess `json:"access"`
	Port            int       `json:"port"`
	AccessKeyID     string    `json:"accessKeyID"`
	SecretAccessKey string    `json:"secretAccessKey"`
}

func readAWSRecord(stateDir string) (awsRecord, error) {
	var rec awsRecord
	b, err := os.ReadFile(filepath.Join(stateDir, AWSDir, awsRecordFile))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("reading %s: %w", filepath.Join(stateDir, AWSDir, awsRecordFile), err)
	}
	return rec, nil
}

// ReadAWSAccess reads how to reach the local AWS of the cluster whose state directory
// is stateDir; an error wrapping os.ErrNotExist before the cluster has started it.
func ReadAWSAccess(stateDir string) (AWSAccess, error) {
	rec, err := readAWSRecord(stateDir)
	return rec.Access, err
}

// ReadAWSAdminKey reads the access key of the local account's administrator.
func ReadAWSAdminKey(stateDir string) (accessKeyID, secret string, err error) {
	rec, err := readAWSRecord(stateDir)
	return rec.AccessKeyID, rec.SecretAccessKey, err
}

// loadAWSRecord returns the cluster's record, or a new one with a new administrator
// key and no port yet (StartCloud picks one).
func loadAWSRecord(stateDir string) (awsRecord, error) {
	rec, err := readAWSRecord(stateDir)
	if err == nil && rec.AccessKeyID != "" {
		return rec, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rec, err
	}
	rec = awsRecord{}
	rec.AccessKeyID, rec.SecretAccessKey, err = localaws.NewAdminKey()
	return rec, err
}

// writeAWSFiles records the edge and writes the AWS CLI's files for the cluster's
// profile, all readable by the owner only (they hold the administrator's secret).
func writeAWSFiles(stateDir, cluster, region, caFile string, cloud *localaws.Cloud, rec awsRecord) (AWSAccess, error) {
	dir := filepath.Join(stateDir, AWSDir)
	u, err := url.Parse(cloud.EdgeURL)
	if err != nil {
		return AWSAccess{}, fmt.Errorf("the edge's URL %q: %w", cloud.EdgeURL, err)
	}
	if rec.Port, err = strconv.Atoi(u.Port()); err != nil {
		return AWSAccess{}, fmt.Errorf("the edge's URL %q has no port", cloud.EdgeURL)
	}
	rec.Access = AWSAccess{Endpoint: cloud.EdgeURL, Region: region, CABundle: caFile, Profile: "nodejoin-" + cluster,
		ConfigFile: filepath.Join(dir, awsConfigFile), CredentialsFile: filepath.Join(dir, awsCredsFile)}
	a := rec.Access
	config := fmt.Sprintf("# The local AWS of nodejoin cluster %s: one endpoint for every service.\n"+
		"# The AWS CLI 2.9 ignores endpoint_url; give it --endpoint-url %s,\n"+
		"# or run: eval \"$(nodejoin aws-env --name %s)\"\n"+
		"[profile %s]\nregion = %s\nca_bundle = %s\nendpoint_url = %s\n", cluster, a.Endpoint, cluster, a.Profile, region, caFile, a.Endpoint)
	creds := fmt.Sprintf("# The administrator (%s) of nodejoin cluster %s's local AWS.\n[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		cloud.Admin.ARN, cluster, a.Profile, rec.AccessKeyID, rec.SecretAccessKey)
	record, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return AWSAccess{}, err
	}
	for name, data := range map[string]string{awsRecordFile: string(record) + "\n", awsConfigFile: config, awsCredsFile: creds, awsEndpointFile: a.Endpoint + "\n"} {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return AWSAccess{}, fmt.Errorf("writing the local AWS's %s: %w", name, err)
		}
	}
	return a, nil
}
