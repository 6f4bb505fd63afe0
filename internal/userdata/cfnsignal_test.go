package userdata

import (
	"context"
	"strings"
	"testing"
)

const al2Head = "#!/bin/bash\nset -o xtrace\n/etc/eks/bootstrap.sh c1 --apiserver-endpoint https://api.example --b64-cluster-ca Zm9v --dns-cluster-ip 10.100.0.10\n"

// tv16 is the AL2023-era CloudFormation template's user data after Fn::Sub (TV16).
const tv16 = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: c1
    apiServerEndpoint: https://api.example
    certificateAuthority: Zm9v
    cidr: 10.100.0.0/16

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
/opt/aws/bin/cfn-signal --exit-code $? --stack ng-stack --resource NodeGroup --region us-west-2

--BOUNDARY--
`

func TestSignalRecognised(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    Signal
		finding string // a finding that must be there
	}{
		{"AL2 legacy template line", al2Head + "/opt/aws/bin/cfn-signal --exit-code $? --stack ng-stack --resource NodeGroup --region us-west-2\n",
			Signal{Part: "user data", Line: 4, Stack: "ng-stack", Resource: "NodeGroup", Region: "us-west-2", ExitCode: "$?"}, "ignored on purpose"},
		{"TV16 MIME script part", tv16,
			Signal{Part: "user data part 2", Line: 2, Stack: "ng-stack", Resource: "NodeGroup", Region: "us-west-2", ExitCode: "$?"}, "reads its cfn-signal call only"},
		{"short and = forms, on PATH", "#!/bin/bash\nS=st\ncfn-signal -e0 -s true -i=node-1 -r 'all good' --stack=$S --resource NodeGroup --url https://cfn.local -d x\n",
			Signal{Part: "user data", Line: 3, Stack: "st", Resource: "NodeGroup", UniqueID: "node-1", URL: "https://cfn.local", Reason: "all good", Data: "x", ExitCode: "0", Success: "true"}, "unique ID node-1"},
		{"behind sudo, with role and proxy", "#!/bin/sh\nsudo /opt/aws/bin/cfn-signal --role r1 --https-proxy http://p:3128 --stack arn:aws:cloudformation:us-west-2:000000000000:stack/s/1 --resource NG\n",
			Signal{Part: "user data", Line: 2, Stack: "arn:aws:cloudformation:us-west-2:000000000000:stack/s/1", Resource: "NG", Role: "r1", HTTPSProxy: "http://p:3128"}, "line 2: cfn-signal for resource NG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Decode(context.Background(), []byte(tt.data), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Signal == nil {
				t.Fatalf("no signal; findings %v", res.Findings)
			}
			if *res.Signal != tt.want {
				t.Errorf("signal %+v, want %+v", *res.Signal, tt.want)
			}
			if !hasSignalFinding(res.Findings, tt.finding) {
				t.Errorf("no finding with %q in %v", tt.finding, res.Findings)
			}
		})
	}
}

func TestSignalRefused(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"unsubstituted placeholder", "/opt/aws/bin/cfn-signal --exit-code $? --stack ${AWS::StackName} --resource NodeGroup", `line 2: cfn-signal: "${AWS::StackName}" is a CloudFormation placeholder`},
		{"wait condition handle URL", "cfn-signal -e 0 'https://cloudformation-waitcondition.s3.amazonaws.com/h'", "WaitConditionHandle URL form is not supported"},
		{"no resource", "cfn-signal --stack s", "--stack s without --resource"},
		{"no stack", "cfn-signal --resource NodeGroup", "--resource NodeGroup without --stack"},
		{"unknown option", "cfn-signal --stack s --resource r --bogus 1", `unknown option "--bogus"`},
		{"credentials", "cfn-signal --stack s --resource r --secret-key=abc", "option --secret-key carries credentials"},
		{"missing value", "cfn-signal --resource r --stack", "--stack needs a value"},
		{"unset variable", "cfn-signal --stack $STACK --resource r", "$STACK is not set earlier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Decode(context.Background(), []byte("#!/bin/bash\n"+tt.script+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Signal != nil {
				t.Fatalf("signal %+v, want none", res.Signal)
			}
			if !hasSignalFinding(res.Findings, tt.want) {
				t.Errorf("no finding with %q in %v", tt.want, res.Findings)
			}
			for _, f := range res.Findings {
				if strings.Contains(f.Msg, "abc") {
					t.Errorf("a credential leaks: %s", f)
				}
			}
		})
	}
}

func TestSignalOncePerBoot(t *testing.T) {
	data := "#!/bin/bash\ncfn-signal --stack a --resource r\ncfn-signal --stack b --resource r\n"
	res, err := Decode(context.Background(), []byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal == nil || res.Signal.Stack != "a" {
		t.Fatalf("signal %+v, want stack a", res.Signal)
	}
	if !hasSignalFinding(res.Findings, "line 3: another cfn-signal call, ignored") {
		t.Errorf("findings %v", res.Findings)
	}
}

func hasSignalFinding(fs []Finding, sub string) bool {
	for _, f := range fs {
		if strings.Contains(f.Msg, sub) {
			return true
		}
	}
	return false
}

// FuzzSignal checks that any script decoded with a Signal names a stack and a resource.
func FuzzSignal(f *testing.F) {
	f.Add([]byte(tv16))
	f.Add([]byte(al2Head + "/opt/aws/bin/cfn-signal -e $? --stack s --resource NodeGroup --region us-west-2\n"))
	f.Add([]byte("#!/bin/bash\nS=\ncfn-signal --stack=$S --resource= -i x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Decode(context.Background(), data, nil)
		if err != nil || res.Signal == nil {
			return
		}
		if res.Signal.Stack == "" || res.Signal.Resource == "" {
			t.Fatalf("signal without a stack or resource: %+v", res.Signal)
		}
	})
}

func TestFindSignalDespiteBrokenBootstrap(t *testing.T) {
	for _, script := range []string{
		"#!/bin/bash\n/etc/eks/bootstrap.sh $UNSET\ncfn-signal --stack s --resource NodeGroup\n",
		"#!/bin/bash\n/etc/eks/bootstrap.sh c1\n/etc/eks/bootstrap.sh c2\ncfn-signal --stack s --resource NodeGroup\n",
	} {
		doc, err := Split([]byte(script))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Translate(context.Background(), doc, nil); err == nil {
			t.Fatalf("%q translated; want a failure", script)
		}
		if sig := FindSignal(doc); sig == nil || sig.Stack != "s" || sig.Resource != "NodeGroup" {
			t.Errorf("FindSignal(%q) = %+v", script, sig)
		}
	}
}
