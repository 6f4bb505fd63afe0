package iam

// This file holds how IAM reads its parameters and spells its errors: names, paths,
// tags and the errors every action shares.

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

const xmlns = "https://iam.amazonaws.com/doc/2010-05-08/"

// constraint is IAM's ValidationError for one parameter.
func constraint(field, value, rule string) *protocol.Error {
	return protocol.ValidationError("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: %s", value, field, rule)
}

// required reads a parameter IAM requires, refusing its absence as IAM does.
func required(p *protocol.Params, param string) (string, *protocol.Error) {
	v, ok := p.Str(param)
	if !ok {
		return "", protocol.ValidationError("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(param))
	}
	return v, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// checkName refuses a name IAM's pattern or length (max) does not allow, with IAM's
// ValidationError naming the parameter.
func checkName(field, name string, limit int) *protocol.Error {
	switch {
	case len(name) < 1:
		return constraint(field, name, "Member must have length greater than or equal to 1")
	case len(name) > limit:
		return constraint(field, name, "Member must have length less than or equal to "+itoa(limit))
	case !nameRE.MatchString(name):
		return constraint(field, name, `Member must satisfy regular expression pattern: [\w+=,.@-]+`)
	}
	return nil
}

// requiredName reads a required name parameter and checks it.
func requiredName(p *protocol.Params, param string, limit int) (string, *protocol.Error) {
	v, aerr := required(p, param)
	if aerr != nil {
		return "", aerr
	}
	return v, checkName(lowerFirst(param), v, limit)
}

// reading reads one request's parameters in a row and keeps the first refusal: IAM
// answers the first fault it finds, so once one is kept the later reads do nothing, and an
// action checks once, after all its reads.
type reading struct {
	p   *protocol.Params
	err *protocol.Error
}

// read runs one parameter reader unless a refusal is already kept.
func read[T any](rd *reading, f func(*protocol.Params) (T, *protocol.Error)) T {
	var v T
	if rd.err == nil {
		var aerr *protocol.Error
		if v, aerr = f(rd.p); aerr != nil {
			var zero T
			v, rd.err = zero, aerr
		}
	}
	return v
}

func (rd *reading) name(param string, limit int) string {
	return read(rd, func(p *protocol.Params) (string, *protocol.Error) { return requiredName(p, param, limit) })
}

func (rd *reading) required(param string) string {
	return read(rd, func(p *protocol.Params) (string, *protocol.Error) { return required(p, param) })
}

// then runs a check of what was read, unless a refusal is already kept.
func (rd *reading) then(check func() *protocol.Error) {
	if rd.err == nil && check != nil {
		rd.err = check()
	}
}

// finish refuses parameters nobody read, and answers the first refusal kept.
func (rd *reading) finish() *protocol.Error {
	rd.then(rd.p.Finish)
	return rd.err
}

// readNamed reads the name of the one entity an action is about (param, at most limit
// long), then the rest of its parameters, and finishes the request.
func readNamed(p *protocol.Params, param string, limit int, rest func() *protocol.Error) (string, *protocol.Error) {
	rd := &reading{p: p}
	name := rd.name(param, limit)
	rd.then(rest)
	return name, rd.finish()
}

// requiredInto is a rest for readNamed that reads one more required parameter into dst.
func requiredInto(p *protocol.Params, param string, dst *string) func() *protocol.Error {
	return func() (aerr *protocol.Error) {
		*dst, aerr = required(p, param)
		return aerr
	}
}

var pathRE = regexp.MustCompile(`^(/|/[\x21-\x7e]+/)$`)

// readPath reads Path: "/" when absent; a path begins and ends with a slash.
func readPath(p *protocol.Params) (string, *protocol.Error) {
	v, ok := p.Str("Path")
	if !ok {
		return "/", nil
	}
	if len(v) > 512 || !pathRE.MatchString(v) {
		return "", constraint("path", v, `Member must satisfy regular expression pattern: (\u002F)|(\u002F[\u0021-\u007E]+\u002F)`)
	}
	return v, nil
}

// tagList is an entity's tags, in the order given (IAM answers them so).
type tagList []tagXML

type tagXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// merge sets the tags of add, replacing the values of keys already there.
func (l tagList) merge(add tagList) tagList {
	out := slices.Clone(l)
	for _, t := range add {
		if k := slices.IndexFunc(out, func(o tagXML) bool { return o.Key == t.Key }); k >= 0 {
			out[k].Value = t.Value
		} else {
			out = append(out, t)
		}
	}
	return out
}

// without removes the tags of keys.
func (l tagList) without(keys []string) tagList {
	return slices.DeleteFunc(slices.Clone(l), func(t tagXML) bool { return slices.Contains(keys, t.Key) })
}

// maxTags is how many tags an IAM entity may have.
const maxTags = 50

// readTags reads Tags.member.N.{Key,Value}.
func readTags(p *protocol.Params) (tagList, *protocol.Error) {
	var out tagList
	seen := map[string]bool{}
	for _, t := range p.List("Tags") {
		k, _ := t.Str("Key")
		v, _ := t.Str("Value")
		switch {
		case k == "" || len(k) > 128:
			return nil, constraint(t.Path()+".key", k, "Member must have length between 1 and 128")
		case len(v) > 256:
			return nil, constraint(t.Path()+".value", v, "Member must have length less than or equal to 256")
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInput", "Tag key %s is reserved for AWS use: keys may not begin with aws:", k)
		case seen[k]:
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInput", "Duplicate tag keys found. Please note that Tag keys are case insensitive: %s", k)
		}
		seen[k] = true
		out = append(out, tagXML{k, v})
	}
	if len(out) > maxTags {
		return nil, limitExceeded("Cannot exceed quota for TagsPerEntity: 50 (the request has %d tags)", len(out))
	}
	return out, nil
}

// readMaxItems reads the MaxItems and Marker of a List action; every answer here fits
// one page, so they are checked and otherwise unused.
func readMaxItems(p *protocol.Params) *protocol.Error {
	n, aerr := p.Int("MaxItems")
	if aerr != nil {
		return aerr
	}
	if n != nil && (*n < 1 || *n > 1000) {
		return constraint("maxItems", itoa(int(*n)), "Member must have value between 1 and 1000")
	}
	if m, ok := p.Str("Marker"); ok && m != "" {
		return protocol.Errorf(http.StatusBadRequest, "InvalidInput", "Marker %q does not name a page of this list: every list here fits one page", m)
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

func limitExceeded(format string, args ...any) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, "LimitExceeded", format, args...)
}

func noSuchRole(name string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", name)
}

func noSuchProfile(name string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "Instance Profile %s cannot be found.", name)
}

func alreadyExists(format string, args ...any) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, "EntityAlreadyExists", format, args...)
}

func deleteConflict(format string, args ...any) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, "DeleteConflict", format, args...)
}
