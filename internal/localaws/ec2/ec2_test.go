package ec2

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws/iam"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// newEC2Client serves e over HTTP and returns the real SDK client for it.
func newEC2Client(t *testing.T, e *EC2) *ec2.Client {
	t.Helper()
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return ec2.NewFromConfig(awstest.SDKConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

func ec2Instance(n int, role string) Instance {
	return Instance{
		ID: fmt.Sprintf("i-%017x", n), Type: "m5.large", AvailabilityZone: "us-west-2b",
		PrivateIPv4: fmt.Sprintf("198.18.0.%d", n), Role: role, SubnetID: "subnet-1", VPCID: "vpc-1",
	}
}

// testFleet launches three instances: 1 with every kind of address and role "nodes", 2
// with role "nodes" and 3 without a role, stopped.
func testFleet(t *testing.T) *EC2 {
	t.Helper()
	e := New(awstest.Account)
	first := ec2Instance(1, "nodes")
	first.IPv6 = []string{"2001:db8::1", "2001:db8::2"}
	if err := e.Launch(first, WithPublicIPv4("203.0.113.7"), WithSecondaryPrivateIPv4s("198.18.0.101", "198.18.0.102")); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(ec2Instance(2, "nodes")); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(ec2Instance(3, "")); err != nil {
		t.Fatal(err)
	}
	if err := e.SetState(ec2Instance(3, "").ID, "stopped"); err != nil {
		t.Fatal(err)
	}
	return e
}

// The real aws-sdk-go-v2 EC2 client parses everything the inventory reads.
func TestEC2DescribeInstancesWithTheAWSClient(t *testing.T) {
	client := newEC2Client(t, testFleet(t))
	id := ec2Instance(1, "").ID
	out, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("reservations = %+v", out.Reservations)
	}
	if got := aws.ToString(out.Reservations[0].OwnerId); got != awstest.Account {
		t.Errorf("owner = %q", got)
	}
	inst := out.Reservations[0].Instances[0]
	checks := map[string][2]string{
		"instanceId":         {aws.ToString(inst.InstanceId), id},
		"instanceType":       {string(inst.InstanceType), "m5.large"},
		"availabilityZone":   {aws.ToString(inst.Placement.AvailabilityZone), "us-west-2b"},
		"state":              {fmt.Sprintf("%d %s", aws.ToInt32(inst.State.Code), inst.State.Name), "16 running"},
		"privateDnsName":     {aws.ToString(inst.PrivateDnsName), "ip-198-18-0-1.us-west-2.compute.internal"},
		"privateIpAddress":   {aws.ToString(inst.PrivateIpAddress), "198.18.0.1"},
		"dnsName":            {aws.ToString(inst.PublicDnsName), "ec2-203-0-113-7.us-west-2.compute.amazonaws.com"},
		"ipAddress":          {aws.ToString(inst.PublicIpAddress), "203.0.113.7"},
		"iamInstanceProfile": {aws.ToString(inst.IamInstanceProfile.Arn), "arn:aws:iam::111122223333:instance-profile/nodes"},
		"vpcId":              {aws.ToString(inst.VpcId), "vpc-1"},
		"subnetId":           {aws.ToString(inst.SubnetId), "subnet-1"},
		"imageId":            {aws.ToString(inst.ImageId), "ami-00000000000000000"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if pid := aws.ToString(inst.IamInstanceProfile.Id); !strings.HasPrefix(pid, "AIPA") || len(pid) != 21 {
		t.Errorf("instance profile ID = %q", pid)
	}
	if inst.LaunchTime == nil || inst.LaunchTime.IsZero() {
		t.Errorf("launch time = %v", inst.LaunchTime)
	}
	if len(inst.NetworkInterfaces) != 1 {
		t.Fatalf("network interfaces = %+v", inst.NetworkInterfaces)
	}
	nic := inst.NetworkInterfaces[0]
	var private, v6 []string
	for _, a := range nic.PrivateIpAddresses {
		private = append(private, fmt.Sprintf("%s %t", aws.ToString(a.PrivateIpAddress), aws.ToBool(a.Primary)))
	}
	for _, a := range nic.Ipv6Addresses {
		v6 = append(v6, aws.ToString(a.Ipv6Address))
	}
	if want := []string{"198.18.0.1 true", "198.18.0.101 false", "198.18.0.102 false"}; !slices.Equal(private, want) {
		t.Errorf("private addresses = %q, want %q", private, want)
	}
	if want := []string{"2001:db8::1", "2001:db8::2"}; !slices.Equal(v6, want) {
		t.Errorf("IPv6 addresses = %q, want %q", v6, want)
	}
	if nic.Association == nil || aws.ToString(nic.Association.PublicIp) != "203.0.113.7" {
		t.Errorf("association = %+v", nic.Association)
	}
	if aws.ToString(nic.MacAddress) != "0e:00:c6:12:00:01" || aws.ToString(nic.VpcId) != "vpc-1" || aws.ToInt32(nic.Attachment.DeviceIndex) != 0 {
		t.Errorf("network interface = %+v", nic)
	}

	// Without IDs or filters: every instance, ordered by ID.
	all, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := describedIDs(all); !slices.Equal(got, []string{ec2Instance(1, "").ID, ec2Instance(2, "").ID, ec2Instance(3, "").ID}) {
		t.Errorf("all instances = %q", got)
	}
	if all.NextToken != nil {
		t.Errorf("next token = %q", *all.NextToken)
	}
}

func describedIDs(out *ec2.DescribeInstancesOutput) []string {
	var ids []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
	}
	return ids
}

func TestEC2Filters(t *testing.T) {
	client := newEC2Client(t, testFleet(t))
	id1, id2, id3 := ec2Instance(1, "").ID, ec2Instance(2, "").ID, ec2Instance(3, "").ID
	f := func(name string, values ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String(name), Values: values}
	}
	tests := []struct {
		name    string
		filters []ec2types.Filter
		ids     []string
		want    []string
	}{
		{"instance-id", []ec2types.Filter{f("instance-id", id2)}, nil, []string{id2}},
		{"private-dns-name", []ec2types.Filter{f("private-dns-name", "ip-198-18-0-2.us-west-2.compute.internal")}, nil, []string{id2}},
		{"private-dns-name of no instance", []ec2types.Filter{f("private-dns-name", "ip-198-18-0-9.us-west-2.compute.internal")}, nil, nil},
		{"private-ip-address", []ec2types.Filter{f("private-ip-address", "198.18.0.3")}, nil, []string{id3}},
		{"private-ip-address is the primary one", []ec2types.Filter{f("private-ip-address", "198.18.0.101")}, nil, nil},
		{"secondary address", []ec2types.Filter{f("network-interface.addresses.private-ip-address", "198.18.0.101")}, nil, []string{id1}},
		{"state", []ec2types.Filter{f("instance-state-name", "stopped")}, nil, []string{id3}},
		{"state code", []ec2types.Filter{f("instance-state-code", "16")}, nil, []string{id1, id2}},
		{"values are ORed", []ec2types.Filter{f("instance-id", id1, id3)}, nil, []string{id1, id3}},
		{"filters are ANDed", []ec2types.Filter{f("instance-state-name", "running"), f("ip-address", "203.0.113.7")}, nil, []string{id1}},
		{"wildcards", []ec2types.Filter{f("private-dns-name", "ip-198-18-0-?.*")}, nil, []string{id1, id2, id3}},
		{"escaped wildcard", []ec2types.Filter{f("private-dns-name", `ip-198-18-0-\?.*`)}, nil, nil},
		{"profile", []ec2types.Filter{f("iam-instance-profile.arn", "*/nodes")}, nil, []string{id1, id2}},
		{"IPv6", []ec2types.Filter{f("network-interface.ipv6-addresses.ipv6-address", "2001:db8::2")}, nil, []string{id1}},
		{"IDs and filters", []ec2types.Filter{f("instance-state-name", "running")}, []string{id1, id3}, []string{id1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{Filters: tt.filters, InstanceIds: tt.ids})
			if err != nil {
				t.Fatal(err)
			}
			if got := describedIDs(out); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEC2Errors(t *testing.T) {
	client := newEC2Client(t, testFleet(t))
	tests := []struct {
		name       string
		in         ec2.DescribeInstancesInput
		code       string
		status     int
		msgContain string
	}{
		{"unknown ID", ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000000f"}},
			"InvalidInstanceID.NotFound", 400, "The instance ID 'i-0000000000000000f' does not exist"},
		{"unknown IDs", ec2.DescribeInstancesInput{InstanceIds: []string{ec2Instance(1, "").ID, "i-0000000e", "i-0000000f"}},
			"InvalidInstanceID.NotFound", 400, "The instance IDs 'i-0000000e, i-0000000f' do not exist"},
		{"malformed ID", ec2.DescribeInstancesInput{InstanceIds: []string{"i-xyz"}}, "InvalidInstanceID.Malformed", 400, `Invalid id: "i-xyz"`},
		{"unknown filter", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"red"}}}},
			"InvalidParameterValue", 400, "The filter 'colour' is invalid"},
		{"filter without values", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id")}}},
			"InvalidParameterValue", 400, "no values"},
		{"max results too small", ec2.DescribeInstancesInput{MaxResults: aws.Int32(4)}, "InvalidParameterValue", 400, "between 5 and 1000"},
		{"max results with IDs", ec2.DescribeInstancesInput{MaxResults: aws.Int32(5), InstanceIds: []string{ec2Instance(1, "").ID}},
			"InvalidParameterCombination", 400, "instancesSet"},
		{"bad next token", ec2.DescribeInstancesInput{NextToken: aws.String("!!")}, "InvalidParameterValue", 400, "nextToken"},
		{"dry run", ec2.DescribeInstancesInput{DryRun: aws.Bool(true)}, "DryRunOperation", 412, "DryRun flag is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.DescribeInstances(t.Context(), &tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			code, status := awstest.APICode(t, err)
			if code != tt.code || status != tt.status || !strings.Contains(err.Error(), tt.msgContain) {
				t.Errorf("got %s %d (%v), want %s %d containing %q", code, status, err, tt.code, tt.status, tt.msgContain)
			}
		})
	}
}

func TestEC2Pagination(t *testing.T) {
	e := New(awstest.Account)
	var want, wantRunning []string
	for n := 1; n <= 12; n++ {
		inst := ec2Instance(n, "nodes")
		if err := e.Launch(inst); err != nil {
			t.Fatal(err)
		}
		want = append(want, inst.ID)
		if n%3 == 0 {
			if err := e.SetState(inst.ID, "pending"); err != nil {
				t.Fatal(err)
			}
		} else {
			wantRunning = append(wantRunning, inst.ID)
		}
	}
	client := newEC2Client(t, e)
	for _, tt := range []struct {
		name      string
		filters   []ec2types.Filter
		want      []string
		wantPages int
	}{
		{"all", nil, want, 3},
		// A filtered page holds up to MaxResults matches; the last one may be short.
		{"running", []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"running"}}}, wantRunning, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Calls()
			p := ec2.NewDescribeInstancesPaginator(client, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5), Filters: tt.filters})
			var got []string
			pages := 0
			for p.HasMorePages() {
				out, err := p.NextPage(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				pages++
				ids := describedIDs(out)
				if len(ids) > 5 {
					t.Errorf("page %d has %d instances", pages, len(ids))
				}
				got = append(got, ids...)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if calls := e.Calls() - before; pages > tt.wantPages || calls != pages {
				t.Errorf("%d pages in %d calls, want at most %d", pages, calls, tt.wantPages)
			}
		})
	}
}

func TestEC2TerminatedInstances(t *testing.T) {
	e := testFleet(t)
	client := newEC2Client(t, e)
	id := ec2Instance(2, "").ID
	if err := e.SetState(id, "terminated"); err != nil {
		t.Fatal(err)
	}
	out, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	inst := out.Reservations[0].Instances[0]
	if inst.State.Name != ec2types.InstanceStateNameTerminated || aws.ToInt32(inst.State.Code) != 48 {
		t.Errorf("state = %+v", inst.State)
	}
	// As on AWS, a terminated instance keeps no names, addresses or interfaces.
	if aws.ToString(inst.PrivateDnsName) != "" || inst.PrivateIpAddress != nil || len(inst.NetworkInterfaces) != 0 {
		t.Errorf("terminated instance shows %q %v %v", aws.ToString(inst.PrivateDnsName), inst.PrivateIpAddress, inst.NetworkInterfaces)
	}
	byName, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("private-dns-name"), Values: []string{"ip-198-18-0-2.us-west-2.compute.internal"}},
	}})
	if err != nil || len(byName.Reservations) != 0 {
		t.Errorf("terminated instance found by its former name: %v, %v", describedIDs(byName), err)
	}
	e.Remove(id)
	_, err = client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if code, _ := awstest.APICode(t, err); code != "InvalidInstanceID.NotFound" {
		t.Errorf("after Remove: %v", err)
	}
}

func TestEC2Launch(t *testing.T) {
	e := New(awstest.Account)
	if err := e.Launch(ec2Instance(1, "nodes")); err != nil {
		t.Fatal(err)
	}
	bad := map[string]struct {
		inst Instance
		opts []LaunchOption
	}{
		"empty ID":         {Instance{PrivateIPv4: "198.18.0.5"}, nil},
		"malformed ID":     {Instance{ID: "i-1", PrivateIPv4: "198.18.0.5"}, nil},
		"duplicate ID":     {ec2Instance(1, ""), nil},
		"no private IPv4":  {Instance{ID: "i-0000000000000000a"}, nil},
		"bad secondary":    {ec2Instance(2, ""), []LaunchOption{WithSecondaryPrivateIPv4s("2001:db8::1")}},
		"bad public IPv4":  {ec2Instance(2, ""), []LaunchOption{WithPublicIPv4("x")}},
		"bad IPv6":         {Instance{ID: "i-0000000000000000b", PrivateIPv4: "198.18.0.5", IPv6: []string{"198.18.0.6"}}, nil},
		"IPv4-mapped IPv6": {Instance{ID: "i-0000000000000000b", PrivateIPv4: "198.18.0.5", IPv6: []string{"::ffff:198.18.0.6"}}, nil},
	}
	for name, b := range bad {
		if err := e.Launch(b.inst, b.opts...); err == nil {
			t.Errorf("%s: launched", name)
		}
	}
	if err := e.SetState(ec2Instance(1, "").ID, "exploded"); err == nil {
		t.Error("set an unknown state")
	}
	if err := e.SetState("i-0000000000000000f", "running"); err == nil {
		t.Error("set the state of an unknown instance")
	}
	got := e.Instances()
	if len(got) != 1 || got[0].State != "running" || got[0].AccountID != awstest.Account || got[0].Region != "us-west-2" {
		t.Fatalf("instances = %+v", got)
	}
	got[0].IPv6 = append(got[0].IPv6, "2001:db8::9")
	got[0].State = "stopped"
	if again := e.Instances(); again[0].State != "running" || len(again[0].IPv6) != 0 {
		t.Errorf("Instances shares state with the caller: %+v", again[0])
	}
}

func TestEC2FailNextAndCalls(t *testing.T) {
	e := testFleet(t)
	client := newEC2Client(t, e)
	e.FailNext(1, http.StatusInternalServerError, "InternalError")
	_, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{})
	if code, status := awstest.APICode(t, err); code != "InternalError" || status != 500 {
		t.Errorf("injected failure: %s %d", code, status)
	}
	if _, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("after the injected failure: %v", err)
	}
	if n := e.Calls(); n != 2 {
		t.Errorf("calls = %d, want 2", n)
	}
}

// The error document is EC2's: Response/Errors/Error{Code,Message} and RequestID.
func TestEC2ErrorDocuments(t *testing.T) {
	e := testFleet(t)
	tests := []struct {
		name, form string
		signed     bool
		status     int
		code       string
	}{
		{"unsigned", "Action=DescribeInstances&Version=2016-11-15", false, 401, "AuthFailure"},
		{"unknown action", "Action=RunInstances&Version=2016-11-15", true, 400, "InvalidAction"},
		{"no action", "Version=2016-11-15", true, 400, "InvalidAction"},
		{"unknown parameter", "Action=DescribeInstances&Version=2016-11-15&Colour=red", true, 400, "UnknownParameter"},
		{"filter value without name", "Action=DescribeInstances&Version=2016-11-15&Filter.1.Value.1=x", true, 400, "InvalidParameterValue"},
		{"index zero", "Action=DescribeInstances&Version=2016-11-15&InstanceId.0=i-00000001", true, 400, "UnknownParameter"},
		{"bad encoding", "Action=DescribeInstances&%zz", true, 400, "MalformedQueryString"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := e.Calls()
			status, body := awstest.Post(t, e, tt.form, tt.signed)
			var doc struct {
				Errors []struct {
					Code    string `xml:"Code"`
					Message string `xml:"Message"`
				} `xml:"Errors>Error"`
				RequestID string `xml:"RequestID"`
			}
			if err := xml.Unmarshal([]byte(body), &doc); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if status != tt.status || len(doc.Errors) != 1 || doc.Errors[0].Code != tt.code || doc.Errors[0].Message == "" || doc.RequestID == "" {
				t.Errorf("got %d %s", status, body)
			}
			if !tt.signed && e.Calls() != calls {
				t.Error("an unsigned request was counted")
			}
		})
	}
}

// Launches, state changes and DescribeInstances may run at once (go test -race).
func TestEC2Concurrency(t *testing.T) {
	e := New(awstest.Account)
	i := iam.New(awstest.Account, e)
	var wg sync.WaitGroup
	for n := 1; n <= 8; n++ {
		wg.Go(func() {
			inst := ec2Instance(n, fmt.Sprintf("role%d", n))
			if err := e.Launch(inst); err != nil {
				t.Error(err)
				return
			}
			if err := e.SetState(inst.ID, "stopping"); err != nil {
				t.Error(err)
			}
			if status, body := awstest.Post(t, e, "Action=DescribeInstances&Version=2016-11-15", true); status != 200 {
				t.Errorf("%d %s", status, body)
			}
			if status, body := awstest.Post(t, i, "Action=GetInstanceProfile&Version=2010-05-08&InstanceProfileName="+inst.Role, true); status != 200 {
				t.Errorf("%d %s", status, body)
			}
			_ = e.Instances()
		})
	}
	wg.Wait()
	if n := len(e.Instances()); n != 8 {
		t.Errorf("%d instances", n)
	}
}

// BenchmarkDescribeInstancesBatch is nodejoin's batched lookup in a 1000-node burst:
// one DescribeInstances filtering on 100 private DNS names among 1000 instances.
func BenchmarkDescribeInstancesBatch(b *testing.B) {
	e := New(awstest.Account)
	var names []string
	for i := range 1000 {
		in := ec2Instance(i, "nodes")
		in.ID = fmt.Sprintf("i-%017x", i+1)
		in.PrivateIPv4 = fmt.Sprintf("198.18.%d.%d", 1+i/200, 10+i%200)
		if err := e.Launch(in); err != nil {
			b.Fatal(err)
		}
		if i%10 == 0 {
			names = append(names, e.instances[in.ID].PrivateDNSName)
		}
	}
	in := describeInput{filters: []protocol.Filter{protocol.NewFilter("private-dns-name", names)}}
	b.ReportAllocs()
	for b.Loop() {
		e.mu.Lock()
		page, _, aerr := e.instanceSet().page(in)
		e.mu.Unlock()
		if aerr != nil || len(page) != len(names) {
			b.Fatalf("%d instances, error %v", len(page), aerr)
		}
	}
}

// Arbitrary request bodies never panic DescribeInstances and always get one well-formed
// EC2 answer.
func FuzzEC2Request(f *testing.F) {
	for _, seed := range []string{
		"Action=DescribeInstances&Version=2016-11-15",
		"Action=DescribeInstances&Version=2016-11-15&InstanceId.1=i-00000000000000001&InstanceId.2=i-00000000000000002",
		"Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=private-dns-name&Filter.1.Value.1=ip-198-18-0-1.*&Filter.2.Name=instance-state-name&Filter.2.Value.1=running",
		"Action=DescribeInstances&Version=2016-11-15&MaxResults=5&NextToken=aS0wMDAwMDAwMDAwMDAwMDAwMQ",
		"Action=DescribeInstances&Filter.1.Name=network-interface.addresses.private-ip-address&Filter.1.Value.3=198.18.0.*&DryRun=false",
		"Action=DescribeInstances&InstanceId.1=i-%00%ff&Filter.01.Name=x",
		"Action=GetInstanceProfile",
		"%zz&&==",
	} {
		f.Add([]byte(seed))
	}
	e := New(awstest.Account)
	for n := 1; n <= 7; n++ {
		inst := ec2Instance(n, "nodes")
		inst.IPv6 = []string{fmt.Sprintf("2001:db8::%d", n)}
		if err := e.Launch(inst, WithPublicIPv4(fmt.Sprintf("203.0.113.%d", n))); err != nil {
			f.Fatal(err)
		}
	}
	if err := e.SetState(ec2Instance(7, "").ID, "terminated"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := awstest.FuzzRequest(t.Context(), e, body)
		awstest.CheckQueryAnswer(t, w, "DescribeInstancesResponse", "Response")
		// What parses is also answered the same way on a second look.
		if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") == "DescribeInstances" {
			if again := awstest.FuzzRequest(t.Context(), e, body); again.Code != w.Code {
				t.Fatalf("status %d then %d", w.Code, again.Code)
			}
		}
	})
}

// A role is held while an instance that has it runs; once the instance terminated,
// IAM may delete the role (as CloudFormation does when it deletes a node group's stack).
func TestHasRoleEndsWithTheInstance(t *testing.T) {
	e := New("111122223333")
	inst := ec2Instance(7, "stack-NodeInstanceRole-ABC")
	if err := e.Launch(inst); err != nil {
		t.Fatal(err)
	}
	if !e.HasRole("stack-NodeInstanceRole-ABC") {
		t.Fatal("a running instance's role is not held")
	}
	if err := e.SetState(inst.ID, "terminated"); err != nil {
		t.Fatal(err)
	}
	if e.HasRole("stack-NodeInstanceRole-ABC") {
		t.Error("a terminated instance still holds its role")
	}
}
