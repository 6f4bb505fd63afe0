package ec2

// This file holds DescribeInstanceAttribute.

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// instanceAttributes are the attributes DescribeInstanceAttribute knows: each answers an
// instance's value, or is nil for an attribute of EC2's API the local EC2 does not
// keep.
var instanceAttributes = map[string]func(r *InstanceRecord, out *instanceAttributeXML){
	"userData": func(r *InstanceRecord, out *instanceAttributeXML) {
		out.UserData = &attributeValueXML{}
		if len(r.UserData) > 0 {
			v := base64.StdEncoding.EncodeToString(r.UserData)
			out.UserData.Value = &v
		}
	},
	"instanceType": func(r *InstanceRecord, out *instanceAttributeXML) {
		out.InstanceType = &attributeValueXML{Value: &r.Type}
	},
	"disableApiTermination": func(_ *InstanceRecord, out *instanceAttributeXML) {
		out.DisableAPITermination = &attributeBoolXML{Value: false}
	},
	"disableApiStop": func(_ *InstanceRecord, out *instanceAttributeXML) {
		out.DisableAPIStop = &attributeBoolXML{Value: false}
	},
	"kernel": nil, "ramdisk": nil, "instanceInitiatedShutdownBehavior": nil, "rootDeviceName": nil,
	"blockDeviceMapping": nil, "productCodes": nil, "sourceDestCheck": nil, "groupSet": nil,
	"ebsOptimized": nil, "sriovNetSupport": nil, "enaSupport": nil, "enclaveOptions": nil,
}

// attributeValueXML is EC2's AttributeValue: a string under value.
type attributeValueXML struct {
	Value *string `xml:"value,omitempty"`
}

// attributeBoolXML is EC2's AttributeBooleanValue.
type attributeBoolXML struct {
	Value bool `xml:"value"`
}

type instanceAttributeXML struct {
	XMLName               xml.Name           `xml:"DescribeInstanceAttributeResponse"`
	Xmlns                 string             `xml:"xmlns,attr"`
	RequestID             string             `xml:"requestId"`
	InstanceID            string             `xml:"instanceId"`
	DisableAPIStop        *attributeBoolXML  `xml:"disableApiStop,omitempty"`
	DisableAPITermination *attributeBoolXML  `xml:"disableApiTermination,omitempty"`
	InstanceType          *attributeValueXML `xml:"instanceType,omitempty"`
	UserData              *attributeValueXML `xml:"userData,omitempty"`
}

func (e *EC2) describeInstanceAttribute(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	id, aerr := p.Required("InstanceId")
	if aerr != nil {
		return nil, aerr
	}
	attr, aerr := p.Required("Attribute")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	answer, known := instanceAttributes[attr]
	if !known {
		return nil, protocol.InvalidParameter("Value (%s) for parameter attribute is invalid. Unknown attribute.", attr)
	}
	if answer == nil {
		return nil, protocol.InvalidParameter("Value (%s) for parameter attribute is invalid. The local EC2 does not keep the attribute %s.", attr, attr)
	}
	if !instanceIDRE.MatchString(id) {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: %q", id)
	}
	e.mu.Lock()
	rec, ok := e.instances[id]
	if ok {
		rec = rec.clone()
	}
	e.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	}
	if dry {
		return nil, errDryRun
	}
	out := instanceAttributeXML{Xmlns: xmlns, RequestID: r.ID, InstanceID: id}
	answer(rec, &out)
	return out, nil
}
