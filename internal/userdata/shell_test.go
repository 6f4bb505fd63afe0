package userdata

import (
	"slices"
	"strings"
	"testing"
)

func TestFindBootstrapCall(t *testing.T) {
	tests := []struct {
		name, script string
		want         []string
		wantLine     int
		wantErr      string
	}{
		{"plain", "#!/bin/bash\n/etc/eks/bootstrap.sh my-cluster --use-max-pods false\n", []string{"my-cluster", "--use-max-pods", "false"}, 2, ""},
		{"variables and quotes", "#!/bin/bash\nset -ex\nCA=abc\nexport EP=\"https://x\"\n/etc/eks/bootstrap.sh c --b64-cluster-ca $CA --apiserver-endpoint ${EP} --kubelet-extra-args '--node-labels=a=b --max-pods=29'\n",
			[]string{"c", "--b64-cluster-ca", "abc", "--apiserver-endpoint", "https://x", "--kubelet-extra-args", "--node-labels=a=b --max-pods=29"}, 5, ""},
		{"continuations", "/etc/eks/bootstrap.sh my-cluster \\\n  --b64-cluster-ca ca \\\n  --dns-cluster-ip 10.100.0.10\n", []string{"my-cluster", "--b64-cluster-ca", "ca", "--dns-cluster-ip", "10.100.0.10"}, 1, ""},
		{"CRLF", "#!/bin/bash\r\n/etc/eks/bootstrap.sh c\r\n", []string{"c"}, 2, ""},
		{"sudo and &&", "yum update -y && sudo /etc/eks/bootstrap.sh c --kubelet-extra-args \"--v=2\"\n", []string{"c", "--kubelet-extra-args", "--v=2"}, 1, ""},
		{"no call", "#!/bin/bash\necho hi\n", nil, 0, ""},
		{"unset", "/etc/eks/bootstrap.sh c --b64-cluster-ca $B64_CLUSTER_CA\n", nil, 0, "$B64_CLUSTER_CA is not set earlier in the script"},
		{"command", "CA=$(cat /tmp/ca)\n/etc/eks/bootstrap.sh c --b64-cluster-ca $CA\n", nil, 0, "$CA comes from line 1, whose value nodeadm cannot know"},
		{"twice", "/etc/eks/bootstrap.sh a\n/etc/eks/bootstrap.sh b\n", nil, 0, "called 2 times (lines 1 and 2)"},
		{"syntax", "if then fi (\n", nil, 0, "shell syntax error"},
		{"brace bomb", "/etc/eks/bootstrap.sh c --kubelet-extra-args {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}\n", nil, 0, "uses brace expansion"},
		{"doubling", "X=aaaaaaaaaaaaaaaa\n" + strings.Repeat("X=$X$X\n", 200) + "/etc/eks/bootstrap.sh c --dns-cluster-ip $X\n", nil, 0, "$X comes from line 201"},
		{"brace range", "/etc/eks/bootstrap.sh c --dns-cluster-ip {1..999999999}\n", nil, 0, "uses brace expansion"},
		{"process substitution", "/etc/eks/bootstrap.sh c --b64-cluster-ca <(cat /tmp/ca)\n", nil, 0, "a process substitution <(…) or >(…) has a value only running the script would give"},
		{"process substitution as the command", "<(x) c\n", nil, 0, ""},
		{"quoted braces are text", "/etc/eks/bootstrap.sh c --kubelet-extra-args '--x={a,b}'\n", []string{"c", "--kubelet-extra-args", "--x={a,b}"}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, err := findBootstrapCall([]byte(strings.ReplaceAll(tt.script, "\r\n", "\n")), "part")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if call != nil {
					t.Fatalf("found call %+v", call)
				}
				return
			}
			if call == nil || !slices.Equal(call.Args, tt.want) || call.Line != tt.wantLine {
				t.Errorf("call = %+v, want args %q on line %d", call, tt.want, tt.wantLine)
			}
		})
	}
}

func FuzzFindBootstrapCall(f *testing.F) {
	f.Add([]byte("#!/bin/bash\nX=$(date)\nY=\"a b\"\n/etc/eks/bootstrap.sh c --kubelet-extra-args \"$Y\" \\\n --dns-cluster-ip ${Z:-10.100.0.10}\n"))
	f.Add([]byte("if true; then sudo /etc/eks/bootstrap.sh c; fi\ncat <<EOF\n$X\nEOF\n"))
	f.Fuzz(func(t *testing.T, script []byte) {
		call, err := findBootstrapCall(script, "fuzz")
		if err == nil && call != nil && call.Line < 1 {
			t.Fatalf("call on line %d", call.Line)
		}
	})
}
