// Package userdata decodes the user data that EKS nodes receive, in every format EKS
// tools produce: base64 and gzip wrappers, MIME multipart documents, NodeConfig YAML or
// JSON, shell scripts that call /etc/eks/bootstrap.sh, eksctl cloud-config,
// Bottlerocket TOML, and Windows PowerShell calling Start-EKSBootstrap.ps1. Decode
// splits user data into parts and says what each part is; Translate turns the parts
// into NodeConfig documents.
//
// Each format has a file (mime.go, bootstrap.go and shell.go, cloudconfig.go,
// bottlerocket.go, powershell.go). It imports only the api/ types.
package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
)

// MaxSize bounds decoded user data. EC2 allows 16 KiB of (possibly gzipped) user
// data; a few MiB leaves room for local files while refusing decompression bombs.
const MaxSize = 8 << 20

// maxWrapping bounds nested base64/gzip layers.
const maxWrapping = 4

// unwrap removes base64 and gzip layers, in any order, and reports which it removed.
func unwrap(data []byte, where string) ([]byte, []string, error) {
	var layers []string
	for range maxWrapping {
		switch {
		case isGzip(data):
			out, err := gunzip(data)
			if err != nil {
				return nil, layers, fmt.Errorf("%s: gzip data: %w", where, err)
			}
			data = out
			layers = append(layers, "gzip")
		case looksBase64(data):
			out, err := decodeBase64(data)
			if err != nil {
				return data, layers, nil //nolint:nilerr // not base64 after all: the data is taken as it is
			}
			data = out
			layers = append(layers, "base64")
		default:
			return data, layers, nil
		}
	}
	return data, layers, nil
}

func isGzip(data []byte) bool { return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b }

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxSize+1))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("truncated (the compressed stream ends early)")
		}
		return nil, err
	}
	if len(out) > MaxSize {
		return nil, fmt.Errorf("decompresses to more than %d bytes", MaxSize)
	}
	return out, nil
}

// looksBase64 is true when data holds only base64 characters and white space, is long
// enough to be deliberate, and its padding is plausible. Plain text such as a NodeConfig
// or a script always contains a character outside the alphabet (':', ' ', '#', '\n' in
// the middle of words...), so this does not mistake it for base64.
func looksBase64(data []byte) bool {
	n := 0
	for _, c := range data {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
			n++
		case c == '\n' || c == '\r' || c == ' ' || c == '\t':
		default:
			return false
		}
	}
	return n >= 8 && n%4 == 0
}

func decodeBase64(data []byte) ([]byte, error) {
	compact := make([]byte, 0, len(data))
	for _, c := range data {
		if c != '\n' && c != '\r' && c != ' ' && c != '\t' {
			compact = append(compact, c)
		}
	}
	return base64.StdEncoding.DecodeString(string(compact))
}
