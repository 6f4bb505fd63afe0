package v1alpha1

import (
	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// DecodeError is a problem in a NodeConfig document, located as precisely as possible.
type DecodeError = strictyaml.Error

// ErrNotNodeConfig reports a well-formed document of another kind or API group.
var ErrNotNodeConfig = strictyaml.ErrWrongKind

// Decode parses one NodeConfig document, YAML or JSON, strictly: an unknown or
// misspelt field, a duplicate key, a value of the wrong type or a wrong apiVersion or
// kind is an error that names the field and its line. Every unknown field is reported,
// not just the first. source names the document in errors.
func Decode(data []byte, source string) (*NodeConfig, error) {
	var cfg NodeConfig
	_, err := strictyaml.Decode(data, source, &cfg, strictyaml.Options{
		APIVersion:   APIVersion,
		Kind:         Kind,
		MultiDocHint: "give each NodeConfig its own MIME part or file",
		Base64Hint:   "give the base64 of the PEM CA bundle, as `base64 -w0 ca.crt` prints it",
	})
	if err != nil {
		return nil, err
	}
	return &cfg, nil
}
