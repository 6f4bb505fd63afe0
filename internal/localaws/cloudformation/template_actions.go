package cloudformation

// This file holds the reads of templates and resources that need the engine:
// ValidateTemplate, GetTemplate, DescribeStackResource, ListStackResources and
// ListExports.

import (
	"slices"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/template"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

type templateParameterXML struct {
	Key         string `xml:"ParameterKey"`
	Default     string `xml:"DefaultValue,omitempty"`
	NoEcho      bool   `xml:"NoEcho"`
	Description string `xml:"Description,omitempty"`
}

type validateTemplateResult struct {
	XMLName            struct{}               `xml:"ValidateTemplateResult"`
	Parameters         []templateParameterXML `xml:"Parameters>member"`
	Description        string                 `xml:"Description,omitempty"`
	Capabilities       []string               `xml:"Capabilities>member"`
	CapabilitiesReason string                 `xml:"CapabilitiesReason,omitempty"`
}

// validateTemplate checks a template as CreateStack would, without parameters.
func (c *CloudFormation) validateTemplate(r *protocol.Request) (any, *protocol.Error) {
	body, _ := r.Params.Str("TemplateBody")
	if url, ok := r.Params.Str("TemplateURL"); ok && url != "" {
		return nil, protocol.ValidationError("TemplateURL %s: the local CloudFormation has no S3 to read it from; pass the template itself (--template-body file://template.yaml)", url)
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	if body == "" {
		return nil, protocol.ValidationError("Either Template URL or Template Body must be specified.")
	}
	t, err := template.Parse([]byte(body))
	if err != nil {
		return nil, protocol.ValidationError("%s", err.Error())
	}
	supported := func(string) bool { return true }
	if c.engine != nil {
		supported = c.engine.supported
	}
	if err := t.Validate(supported); err != nil {
		return nil, protocol.ValidationError("%s", err.Error())
	}
	sum := t.Summary()
	out := validateTemplateResult{Description: sum.Description, Capabilities: sum.Capabilities, CapabilitiesReason: sum.CapabilitiesReason}
	for _, p := range sum.Parameters {
		out.Parameters = append(out.Parameters, templateParameterXML{Key: p.Key, Default: deref(p.Default), NoEcho: p.NoEcho, Description: p.Description})
	}
	return out, nil
}

type getTemplateResult struct {
	XMLName         struct{} `xml:"GetTemplateResult"`
	TemplateBody    string   `xml:"TemplateBody"`
	StagesAvailable []string `xml:"StagesAvailable>member"`
}

func (c *CloudFormation) getTemplate(r *protocol.Request) (any, *protocol.Error) {
	name, _ := r.Params.Str("StackName")
	r.Params.Ignore("TemplateStage")
	r.Params.Ignore("ChangeSetName")
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	if c.engine == nil {
		return nil, stackNotFound(name)
	}
	run, _, aerr := c.engine.live(name)
	if aerr != nil {
		return nil, aerr
	}
	p := c.engine.planOf(run)
	return getTemplateResult{TemplateBody: string(p.tmpl.Body), StagesAvailable: []string{"Original", "Processed"}}, nil
}

type stackResourceDetailXML struct {
	StackName            string   `xml:"StackName"`
	StackID              string   `xml:"StackId"`
	LogicalResourceID    string   `xml:"LogicalResourceId"`
	PhysicalResourceID   string   `xml:"PhysicalResourceId,omitempty"`
	ResourceType         string   `xml:"ResourceType"`
	LastUpdatedTimestamp string   `xml:"LastUpdatedTimestamp"`
	ResourceStatus       string   `xml:"ResourceStatus"`
	ResourceStatusReason string   `xml:"ResourceStatusReason,omitempty"`
	Drift                driftXML `xml:"DriftInformation"`
}

type describeStackResourceResult struct {
	XMLName struct{}               `xml:"DescribeStackResourceResult"`
	Detail  stackResourceDetailXML `xml:"StackResourceDetail"`
}

func (c *CloudFormation) describeStackResource(r *protocol.Request) (any, *protocol.Error) {
	name, aerr := r.Params.Required("StackName")
	if aerr != nil {
		return nil, aerr
	}
	logical, aerr := r.Params.Required("LogicalResourceId")
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
	i := slices.IndexFunc(st.Resources, func(res Resource) bool { return res.LogicalID == logical })
	if i < 0 {
		return nil, protocol.ValidationError("Resource %s does not exist for stack %s", logical, st.Name)
	}
	res := st.Resources[i]
	return describeStackResourceResult{Detail: stackResourceDetailXML{StackName: st.Name, StackID: st.ID, LogicalResourceID: res.LogicalID,
		PhysicalResourceID: res.PhysicalID, ResourceType: res.Type, LastUpdatedTimestamp: formatTime(res.Updated),
		ResourceStatus: res.Status, ResourceStatusReason: res.StatusReason, Drift: driftXML{"NOT_CHECKED"}}}, nil
}

type resourceSummaryXML struct {
	LogicalResourceID    string   `xml:"LogicalResourceId"`
	PhysicalResourceID   string   `xml:"PhysicalResourceId,omitempty"`
	ResourceType         string   `xml:"ResourceType"`
	LastUpdatedTimestamp string   `xml:"LastUpdatedTimestamp"`
	ResourceStatus       string   `xml:"ResourceStatus"`
	ResourceStatusReason string   `xml:"ResourceStatusReason,omitempty"`
	Drift                driftXML `xml:"DriftInformation"`
}

type listStackResourcesResult struct {
	XMLName   struct{}             `xml:"ListStackResourcesResult"`
	Summaries []resourceSummaryXML `xml:"StackResourceSummaries>member"`
	NextToken string               `xml:"NextToken,omitempty"`
}

func (c *CloudFormation) listStackResources(r *protocol.Request) (any, *protocol.Error) {
	name, aerr := r.Params.Required("StackName")
	if aerr != nil {
		return nil, aerr
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
	var out []resourceSummaryXML
	for _, res := range st.Resources {
		out = append(out, resourceSummaryXML{LogicalResourceID: res.LogicalID, PhysicalResourceID: res.PhysicalID, ResourceType: res.Type,
			LastUpdatedTimestamp: formatTime(res.Updated), ResourceStatus: res.Status, ResourceStatusReason: res.StatusReason,
			Drift: driftXML{"NOT_CHECKED"}})
	}
	page, next, _ := protocol.Page(out, token, pageSize)
	return listStackResourcesResult{Summaries: page, NextToken: next}, nil
}

type exportXML struct {
	StackID string `xml:"ExportingStackId"`
	Name    string `xml:"Name"`
	Value   string `xml:"Value"`
}

type listExportsResult struct {
	XMLName   struct{}    `xml:"ListExportsResult"`
	Exports   []exportXML `xml:"Exports>member"`
	NextToken string      `xml:"NextToken,omitempty"`
}

func (c *CloudFormation) listExports(r *protocol.Request) (any, *protocol.Error) {
	token, aerr := readToken(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	var out []exportXML
	if e := c.engine; e != nil {
		e.mu.Lock()
		for name, x := range e.exports {
			out = append(out, exportXML{StackID: x.stackID, Name: name, Value: x.value})
		}
		e.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b exportXML) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	page, next, _ := protocol.Page(out, token, pageSize)
	return listExportsResult{Exports: page, NextToken: next}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
