package cloudformation

// This file holds the read actions over the stack store: ListStacks, DescribeStacks,
// DescribeStackResources and DescribeStackEvents, as eksctl calls them (a stack that
// does not exist is a ValidationError it takes for "not eksctl's").

import (
	"slices"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// pageSize is the size of the pages of the actions that page without a size parameter.
const pageSize = 100

// timeFormat is how CloudFormation writes times.
const timeFormat = "2006-01-02T15:04:05.000Z"

// stackStatuses are the values StackStatusFilter takes.
var stackStatuses = []string{
	"CREATE_IN_PROGRESS", "CREATE_FAILED", "CREATE_COMPLETE", "ROLLBACK_IN_PROGRESS", "ROLLBACK_FAILED", "ROLLBACK_COMPLETE",
	"DELETE_IN_PROGRESS", "DELETE_FAILED", "DELETE_COMPLETE", "UPDATE_IN_PROGRESS", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
	"UPDATE_COMPLETE", "UPDATE_FAILED", "UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_FAILED",
	"UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS", "IMPORT_IN_PROGRESS",
	"IMPORT_COMPLETE", "IMPORT_ROLLBACK_IN_PROGRESS", "IMPORT_ROLLBACK_FAILED", "IMPORT_ROLLBACK_COMPLETE",
}

func stackNotFound(name string) *protocol.Error {
	return protocol.ValidationError("Stack with id %s does not exist", name)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// readToken reads NextToken, refusing one this pager did not make.
func readToken(p *protocol.Params) (string, *protocol.Error) {
	token, _ := p.Str("NextToken")
	if !protocol.ValidPageToken(token) {
		return "", protocol.ValidationError("Invalid NextToken: %s", token)
	}
	return token, nil
}

type stackSummaryXML struct {
	StackID             string `xml:"StackId"`
	StackName           string `xml:"StackName"`
	TemplateDescription string `xml:"TemplateDescription,omitempty"`
	CreationTime        string `xml:"CreationTime"`
	LastUpdatedTime     string `xml:"LastUpdatedTime,omitempty"`
	DeletionTime        string `xml:"DeletionTime,omitempty"`
	StackStatus         string `xml:"StackStatus"`
	StackStatusReason   string `xml:"StackStatusReason,omitempty"`
}

type listStacksResult struct {
	XMLName   struct{}          `xml:"ListStacksResult"`
	Summaries []stackSummaryXML `xml:"StackSummaries>member"`
	NextToken string            `xml:"NextToken,omitempty"`
}

func (c *CloudFormation) listStacks(r *protocol.Request) (any, *protocol.Error) {
	statuses := r.Params.StrList("StackStatusFilter")
	for _, s := range statuses {
		if !slices.Contains(stackStatuses, s) {
			return nil, protocol.ValidationError("1 validation error detected: Value '[%s]' at 'stackStatusFilter' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: %v]", s, stackStatuses)
		}
	}
	token, aerr := readToken(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	var out []stackSummaryXML
	for _, st := range c.stacks.List(true) {
		if len(statuses) > 0 && !slices.Contains(statuses, st.Status) {
			continue
		}
		out = append(out, stackSummaryXML{StackID: st.ID, StackName: st.Name, TemplateDescription: st.Description,
			CreationTime: formatTime(st.Created), LastUpdatedTime: formatTime(st.Updated), DeletionTime: formatTime(st.Deleted),
			StackStatus: st.Status, StackStatusReason: st.StatusReason})
	}
	page, next, _ := protocol.Page(out, token, pageSize)
	return listStacksResult{Summaries: page, NextToken: next}, nil
}

type keyValueXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type parameterXML struct {
	Key   string `xml:"ParameterKey"`
	Value string `xml:"ParameterValue"`
}

type outputXML struct {
	Key         string `xml:"OutputKey"`
	Value       string `xml:"OutputValue"`
	Description string `xml:"Description,omitempty"`
	ExportName  string `xml:"ExportName,omitempty"`
}

type driftXML struct {
	Status string `xml:"StackDriftStatus"`
}

type stackXML struct {
	StackID           string         `xml:"StackId"`
	StackName         string         `xml:"StackName"`
	Description       string         `xml:"Description,omitempty"`
	Parameters        []parameterXML `xml:"Parameters>member"`
	CreationTime      string         `xml:"CreationTime"`
	LastUpdatedTime   string         `xml:"LastUpdatedTime,omitempty"`
	DeletionTime      string         `xml:"DeletionTime,omitempty"`
	StackStatus       string         `xml:"StackStatus"`
	StackStatusReason string         `xml:"StackStatusReason,omitempty"`
	DisableRollback   bool           `xml:"DisableRollback"`
	Outputs           []outputXML    `xml:"Outputs>member"`
	Tags              []keyValueXML  `xml:"Tags>member"`
	Protection        bool           `xml:"EnableTerminationProtection"`
	Drift             driftXML       `xml:"DriftInformation"`
}

type describeStacksResult struct {
	XMLName   struct{}   `xml:"DescribeStacksResult"`
	Stacks    []stackXML `xml:"Stacks>member"`
	NextToken string     `xml:"NextToken,omitempty"`
}

func stackOf(st Stack) stackXML {
	x := stackXML{StackID: st.ID, StackName: st.Name, Description: st.Description, CreationTime: formatTime(st.Created),
		LastUpdatedTime: formatTime(st.Updated), DeletionTime: formatTime(st.Deleted), StackStatus: st.Status,
		StackStatusReason: st.StatusReason, Drift: driftXML{"NOT_CHECKED"}}
	for _, k := range sortedKeys(st.Parameters) {
		x.Parameters = append(x.Parameters, parameterXML{k, st.Parameters[k]})
	}
	for _, k := range sortedKeys(st.Tags) {
		x.Tags = append(x.Tags, keyValueXML{k, st.Tags[k]})
	}
	for _, o := range st.Outputs {
		x.Outputs = append(x.Outputs, outputXML(o))
	}
	return x
}

func (c *CloudFormation) describeStacks(r *protocol.Request) (any, *protocol.Error) {
	name, _ := r.Params.Str("StackName")
	token, aerr := readToken(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	var stacks []Stack
	if name != "" {
		st, ok := c.stacks.Get(name)
		if !ok {
			return nil, stackNotFound(name)
		}
		stacks = []Stack{st}
	} else {
		stacks = c.stacks.List(false)
	}
	var out []stackXML
	for _, st := range stacks {
		out = append(out, stackOf(st))
	}
	page, next, _ := protocol.Page(out, token, pageSize)
	return describeStacksResult{Stacks: page, NextToken: next}, nil
}

type stackResourceXML struct {
	StackName            string   `xml:"StackName"`
	StackID              string   `xml:"StackId"`
	LogicalResourceID    string   `xml:"LogicalResourceId"`
	PhysicalResourceID   string   `xml:"PhysicalResourceId,omitempty"`
	ResourceType         string   `xml:"ResourceType"`
	Timestamp            string   `xml:"Timestamp"`
	ResourceStatus       string   `xml:"ResourceStatus"`
	ResourceStatusReason string   `xml:"ResourceStatusReason,omitempty"`
	Drift                driftXML `xml:"DriftInformation"`
}

type describeStackResourcesResult struct {
	XMLName   struct{}           `xml:"DescribeStackResourcesResult"`
	Resources []stackResourceXML `xml:"StackResources>member"`
}

// describeStackResources lists a stack's resources: the stack StackName names, or the
// one holding PhysicalResourceId; LogicalResourceId narrows them to one.
func (c *CloudFormation) describeStackResources(r *protocol.Request) (any, *protocol.Error) {
	name, _ := r.Params.Str("StackName")
	physical, _ := r.Params.Str("PhysicalResourceId")
	logical, _ := r.Params.Str("LogicalResourceId")
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	var st Stack
	switch {
	case name != "":
		var ok bool
		if st, ok = c.stacks.Get(name); !ok {
			return nil, stackNotFound(name)
		}
	case physical != "":
		found := false
		for _, s := range c.stacks.List(false) {
			if slices.ContainsFunc(s.Resources, func(res Resource) bool { return res.PhysicalID == physical }) {
				st, found = s, true
				break
			}
		}
		if !found {
			return nil, protocol.ValidationError("Stack for %s does not exist", physical)
		}
	default:
		return nil, protocol.ValidationError("Either StackName or PhysicalResourceId must be specified.")
	}
	var out []stackResourceXML
	for _, res := range st.Resources {
		if logical != "" && res.LogicalID != logical {
			continue
		}
		out = append(out, stackResourceXML{StackName: st.Name, StackID: st.ID, LogicalResourceID: res.LogicalID,
			PhysicalResourceID: res.PhysicalID, ResourceType: res.Type, Timestamp: formatTime(res.Updated),
			ResourceStatus: res.Status, ResourceStatusReason: res.StatusReason, Drift: driftXML{"NOT_CHECKED"}})
	}
	return describeStackResourcesResult{Resources: out}, nil
}

type stackEventXML struct {
	StackID              string `xml:"StackId"`
	EventID              string `xml:"EventId"`
	StackName            string `xml:"StackName"`
	LogicalResourceID    string `xml:"LogicalResourceId"`
	PhysicalResourceID   string `xml:"PhysicalResourceId,omitempty"`
	ResourceType         string `xml:"ResourceType"`
	Timestamp            string `xml:"Timestamp"`
	ResourceStatus       string `xml:"ResourceStatus"`
	ResourceStatusReason string `xml:"ResourceStatusReason,omitempty"`
}

type describeStackEventsResult struct {
	XMLName   struct{}        `xml:"DescribeStackEventsResult"`
	Events    []stackEventXML `xml:"StackEvents>member"`
	NextToken string          `xml:"NextToken,omitempty"`
}

// describeStackEvents lists a stack's events, the newest first, as CloudFormation does.
func (c *CloudFormation) describeStackEvents(r *protocol.Request) (any, *protocol.Error) {
	name, _ := r.Params.Str("StackName")
	if name == "" {
		return nil, protocol.ValidationError("1 validation error detected: Value null at 'stackName' failed to satisfy constraint: Member must not be null")
	}
	token, aerr := readToken(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	st, ok := c.stacks.Get(name)
	if !ok {
		return nil, stackNotFound(name)
	}
	var out []stackEventXML
	for _, e := range slices.Backward(st.Events) {
		out = append(out, stackEventXML{StackID: st.ID, EventID: e.ID, StackName: st.Name, LogicalResourceID: e.LogicalID,
			PhysicalResourceID: e.PhysicalID, ResourceType: e.Type, Timestamp: formatTime(e.Time), ResourceStatus: e.Status,
			ResourceStatusReason: e.StatusReason})
	}
	page, next, _ := protocol.Page(out, token, pageSize)
	return describeStackEventsResult{Events: page, NextToken: next}, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
