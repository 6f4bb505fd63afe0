package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"
)

const nodeConfigDoc = `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: my-cluster
    apiServerEndpoint: https://example.com
    certificateAuthority: Y2VydGlmaWNhdGVBdXRob3JpdHk=
    cidr: 10.100.0.0/16
`

func gz(t testing.TB, data string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func b64(data []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(data)) }

func mimeDoc(parts ...string) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n")
	for _, p := range parts {
		b.WriteString("--BOUNDARY\n" + p)
	}
	b.WriteString("--BOUNDARY--\n")
	return b.String()
}

func TestSplitWrappers(t *testing.T) {
	mime := mimeDoc("Content-Type: application/node.eks.aws\n\n" + nodeConfigDoc)
	tests := []struct {
		name      string
		data      []byte
		layers    []string
		multipart bool
	}{
		{"plain", []byte(nodeConfigDoc), nil, false},
		{"gzip", gz(t, nodeConfigDoc), []string{"gzip"}, false},
		{"base64 of gzip", b64(gz(t, nodeConfigDoc)), []string{"base64", "gzip"}, false},
		{"MIME", []byte(mime), nil, true},
		{"gzip of MIME", gz(t, mime), []string{"gzip"}, true},
		{"base64 of gzip of MIME", b64(gz(t, mime)), []string{"base64", "gzip"}, true},
		{"CRLF MIME", []byte(strings.ReplaceAll(mime, "\n", "\r\n")), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Split(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(doc.Layers, ",") != strings.Join(tt.layers, ",") || doc.Multipart != tt.multipart {
				t.Errorf("layers %v multipart %v, want %v %v", doc.Layers, doc.Multipart, tt.layers, tt.multipart)
			}
			if len(doc.Parts) != 1 || doc.Parts[0].Kind != KindNodeConfig {
				t.Fatalf("parts = %+v", doc.Parts)
			}
			if got := strings.ReplaceAll(string(doc.Parts[0].Body), "\r\n", "\n"); got != nodeConfigDoc {
				t.Errorf("body = %q", got)
			}
		})
	}
}

func TestSplitPartBodies(t *testing.T) {
	data := mimeDoc(
		"Content-Type: application/node.eks.aws\n\n"+string(b64(gz(t, nodeConfigDoc)))+"\n",
		"Content-Type: application/node.eks.aws\nContent-Transfer-Encoding: base64\n\n"+string(b64([]byte(nodeConfigDoc)))+"\n",
		"Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n",
		"Content-Type: text/cloud-config\n\n#cloud-config\npackages: [jq]\n",
		"Content-Type: text/plain\n\nhello\n",
	)
	doc, err := Split([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind   Kind
		layers string
	}{{KindNodeConfig, "base64,gzip"}, {KindNodeConfig, "base64"}, {KindShell, ""}, {KindCloudConfig, ""}, {KindOther, ""}}
	if len(doc.Parts) != len(want) {
		t.Fatalf("%d parts, want %d", len(doc.Parts), len(want))
	}
	for i, w := range want {
		p := doc.Parts[i]
		if p.Kind != w.kind || strings.Join(p.Layers, ",") != w.layers || p.Index != i+1 {
			t.Errorf("part %d = kind %s layers %v, want %s %s", i+1, p.Kind, p.Layers, w.kind, w.layers)
		}
	}
	if string(doc.Parts[0].Body) != nodeConfigDoc || string(doc.Parts[1].Body) != nodeConfigDoc {
		t.Error("encoded NodeConfig bodies were not decoded")
	}
}

func TestSplitMissingBlankLine(t *testing.T) {
	accepted := mimeDoc("Content-Type: text/x-shellscript; charset=\"us-ascii\"\n#!/bin/bash\n/etc/eks/bootstrap.sh c\n")
	doc, err := Split([]byte(accepted))
	if err != nil {
		t.Fatal(err)
	}
	p := doc.Parts[0]
	if p.Kind != KindShell || !strings.HasPrefix(string(p.Body), "#!/bin/bash\n") {
		t.Errorf("part = %+v", p)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], `line 6: no blank line between the headers and the body; the body is taken to start at "#!/bin/bash"`) {
		t.Errorf("notes = %q", p.Notes)
	}

	ambiguous := mimeDoc("Content-Type: application/node.eks.aws\n" + nodeConfigDoc)
	_, err = Split([]byte(ambiguous))
	if err == nil || !strings.Contains(err.Error(), `user data part 1, line 6: "apiVersion: node.eks.aws/v1alpha1" follows the part's headers without a blank line`) {
		t.Errorf("error = %v", err)
	}
}

func TestSplitMalformed(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"wrong boundary", []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"A\"\n\n--B\nContent-Type: text/plain\n\nx\n--B--\n"), `no line "--A" starts a part`},
		{"no boundary", []byte("Content-Type: multipart/mixed\n\n--B\n\nx\n"), "has no boundary parameter"},
		{"truncated gzip", gz(t, nodeConfigDoc)[:30], "gzip data: truncated"},
		{"bad part encoding", []byte(mimeDoc("Content-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\nx\n")), `Content-Transfer-Encoding "quoted-printable" is not supported`},
		{"bad part base64", []byte(mimeDoc("Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\n!!!\n")), "the body is not"},
		{"no headers in part", []byte(mimeDoc("#!/bin/bash\n")), "expected MIME headers such as Content-Type"},
		{"endless part headers", []byte(mimeDoc("Content-Type: text/plain\n" + strings.Repeat(" x\n", 200000) + "\nbody\n")), "the MIME headers run on for more than 64 lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Split(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// Folded header lines must not grow a value without bound (in quadratic time).
func TestSplitEndlessHeadersAreCheap(t *testing.T) {
	doc, err := Split([]byte("Content-Type: multipart/mixed; boundary=B\n" + strings.Repeat(" x\n", 200000)))
	if err != nil || doc.Multipart {
		t.Errorf("Split = %+v, %v; want one non-multipart part", doc, err)
	}
}

func TestSplitTolerances(t *testing.T) {
	noClose := strings.TrimSuffix(mimeDoc("Content-Type: text/plain\n\nx\n"), "--BOUNDARY--\n")
	doc, err := Split([]byte(noClose))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Parts) != 1 || len(doc.Notes) != 1 || !strings.Contains(doc.Notes[0], `closing boundary "--BOUNDARY--" is missing`) {
		t.Errorf("parts %d, notes %q", len(doc.Parts), doc.Notes)
	}
	// A part written after the closing boundary (as in a seed article) is taken, with a warning.
	afterClose := mimeDoc("Content-Type: application/node.eks.aws\n\n"+nodeConfigDoc) + "Content-Type: text/plain\n\nsecond\n--BOUNDARY--\n"
	doc, err = Split([]byte(afterClose))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Parts) != 2 || string(doc.Parts[1].Body) != "second\n" {
		t.Fatalf("parts = %+v", doc.Parts)
	}
	if len(doc.Notes) != 1 || !strings.Contains(doc.Notes[0], `a part follows the closing boundary "--BOUNDARY--"`) {
		t.Errorf("notes = %q", doc.Notes)
	}
}

func TestClassifyWithoutMediaType(t *testing.T) {
	tests := map[string]Kind{
		nodeConfigDoc: KindNodeConfig,
		`{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig"}`: KindNodeConfig,
		"#!/bin/bash\necho\n":                                                    KindShell,
		"set -ex\n/etc/eks/bootstrap.sh c\n":                                     KindShell,
		"#cloud-config\nruncmd: []\n":                                            KindCloudConfig,
		"[settings.kubernetes]\ncluster-name = \"c\"\n":                          KindBottlerocket,
		"settings.kubernetes.cluster-name = 'c'\n":                               KindBottlerocket,
		"<powershell>\n[string]$EKSBootstrapScriptFile = \"x\"\n</powershell>\n": KindPowerShell,
		"   \n": KindEmpty,
	}
	for body, want := range tests {
		if got := classify("", []byte(body)); got != want {
			t.Errorf("classify(%q) = %s, want %s", body, got, want)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte(nodeConfigDoc))
	f.Add([]byte(mimeDoc("Content-Type: application/node.eks.aws\n\n" + nodeConfigDoc)))
	f.Add([]byte(mimeDoc("Content-Type: text/x-shellscript\n#!/bin/bash\n/etc/eks/bootstrap.sh c\n")))
	f.Add(b64(gz(f, nodeConfigDoc)))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Split(data)
		if err != nil {
			return
		}
		for _, p := range doc.Parts {
			if len(p.Body) > MaxSize {
				t.Fatalf("part body of %d bytes exceeds MaxSize", len(p.Body))
			}
		}
	})
}
